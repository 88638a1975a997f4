"""What a backend returns for a request: one typed value per request, its type named by the request type
(``Request.result``): ``Scores`` (a number per option, prompt or pair), ``Answer`` (one generated text) or
``Answers`` (a generated text per prompt).

Each result is also what the resume cache stores (``to_json``) and reads back (``from_json``, None for a value of
another shape, which the cache sets aside). The runner and the protocols read results by their fields, never by
position.

>>> Scores((-1.5, None)).to_json(), Scores.from_json([-1.5, None])
([-1.5, None], Scores(values=(-1.5, None)))
>>> Answer.from_json({"text": " (b) a ball", "tokens": 4})
Answer(text=' (b) a ball', tokens=4, choices=())
>>> Answer.from_json(["an old cache's list"]) is None
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


MEASURE_TOLERANCE = 0.05  # nats: another model's weights (a fine-tune, a requantisation) differ by more on some token


@dataclass(frozen=True)
class Scores:
    """A number per option (a log-probability, P(entailment), P(YES), ...), in the request's order; None where the
    model gave none (a masked-LM candidate outside the vocabulary)."""

    values: tuple[float | None, ...]

    def to_json(self) -> list:
        return list(self.values)

    @classmethod
    def from_json(cls, value) -> Scores | None:
        """The cached form (a non-empty list of finite numbers and nulls) as ``Scores``; None for any other value."""
        if not isinstance(value, list) or not value:
            return None
        if not all(v is None or (_number(v) and math.isfinite(v)) for v in value):
            return None
        return cls(tuple(value))

    def not_finite(self) -> float | None:
        """The first value that is NaN or infinite (never an option's score), or None."""
        return next((v for v in self.values if v is not None and not math.isfinite(v)), None)


@dataclass(frozen=True)
class Answer:
    """A greedy answer: its ``text`` (cut before the request's first stop string), ``tokens`` the model generated
    for it (None where the backend cannot count them: a server that reports no usage), and the ``choices`` the
    backend resolved where the request left them to its tokenizer (``Generate.first_token_choices``; else empty)."""

    text: str
    tokens: int | None = None
    choices: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"text": self.text, "tokens": self.tokens, **({"choices": list(self.choices)} if self.choices else {})}

    @classmethod
    def from_json(cls, value) -> Answer | None:
        """The cached form (``{"text", "tokens"[, "choices"]}``) as an ``Answer``; None for any other value."""
        if not isinstance(value, dict) or set(value) - {"text", "tokens", "choices"} or not isinstance(value.get("text"), str):
            return None
        tokens, choices = value.get("tokens"), value.get("choices", [])
        if not (tokens is None or (_number(tokens) and tokens == int(tokens) and tokens >= 0)):
            return None
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            return None
        return cls(value["text"], None if tokens is None else int(tokens), tuple(choices))

    def not_finite(self) -> None:
        return None


@dataclass(frozen=True)
class Answers:
    """A greedy answer to each of a request's prompts, in order."""

    answers: tuple[Answer, ...]

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(a.text for a in self.answers)

    def to_json(self) -> list:
        return [a.to_json() for a in self.answers]

    @classmethod
    def from_json(cls, value) -> Answers | None:
        """The cached form (a non-empty list of answers) as ``Answers``; None for any other value."""
        if not isinstance(value, list) or not value:
            return None
        answers = [Answer.from_json(item) for item in value]
        return None if any(a is None for a in answers) else cls(tuple(answers))

    def not_finite(self) -> None:
        return None


Result = Scores | Answer | Answers


def readable(value) -> bool:
    """Whether a cached value is the cached form of some result.

    >>> readable([0.5, None]), readable({"text": "a", "tokens": None}), readable([{"text": "a", "tokens": 1}]), readable([])
    (True, True, True, False)
    """
    return any(kind.from_json(value) is not None for kind in (Scores, Answer, Answers))
