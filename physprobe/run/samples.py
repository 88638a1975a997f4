"""One scored row as one value: a ``Sample`` binds a row to the request made for it, the backend's typed result,
what the protocol read in it (scores, prediction, generated text) and the texts the model read.

A sample's ``status`` says what its prediction is: ``decided`` (an option), ``undecided`` (no option won: a missing
score), ``unparsed`` (a generated answer that names no option, counted wrong) or ``excluded`` (a row the protocol
leaves out, ``Protocol.skip``: no request, in no figure). predictions.parquet holds one line per sample
(``Sample.line``), with distinct codes for the three kinds of non-answer.

>>> from physprobe.protocols import Protocol, Outcome
>>> from physprobe.protocols.requests import Choice
>>> from physprobe.protocols.results import Scores
>>> request, result = Choice("Ice is", (" cold", " hot")), Scores((-1.0, -4.0))
>>> sample = Sample.scored("default", 7, {"label": 0}, (0,), request, result, Outcome([-1.0, -4.0], 0, 2))
>>> sample.status, sample.prediction, sample.line()["prediction"]
('decided', 0, 0)
>>> Sample.left_out("default", 8, {"label": 1}, (1,)).line()["prediction"]
-3
>>> sample.line()["row_json"], sample.line()["row_sha256"][:12]
('{"label":0}', '4e28556b9c92')
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

from physprobe.protocols import UNDECIDED, UNPARSED, Outcome
from physprobe.protocols.requests import Request
from physprobe.protocols.results import Result

EXCLUDED = -3  # predictions.parquet's code for a row the protocol leaves out (UNDECIDED -1, UNPARSED -2)


@dataclass(frozen=True)
class Sample:
    """One row of a scored config: ``row`` its index in the config, ``data`` the row as read, ``reference`` its gold
    answer (option or class indices); the ``request``, the backend's ``result`` and the protocol's outcome of it; the
    ``prompts`` the model read (as it read them: through a chat template where one applied) and their token counts
    where the backend has the tokenizer."""

    config: str
    row: int
    data: dict
    reference: tuple[int, ...]
    status: str
    prediction: int | None = None  # the option decided (None unless ``status`` is ``decided``)
    scores: tuple[float | None, ...] = ()
    options: int = 0  # answers the question offered
    fell_back: bool = False  # decided by the protocol's fallback rule
    request: Request | None = None
    result: Result | None = None
    generated: str | tuple[str, ...] | None = None
    generated_tokens: int | tuple[int | None, ...] | None = None
    prompts: tuple[str, ...] = ()
    prompt_tokens: tuple[int, ...] | None = None
    draws: tuple[Sample, ...] = ()  # with --samples K > 1: the row's K sampled samples, this one first

    @classmethod
    def scored(cls, config: str, row: int, data: dict, reference: tuple[int, ...], request: Request, result: Result,
               outcome: Outcome, prompts: tuple[str, ...] = (), prompt_tokens: tuple[int, ...] | None = None) -> Sample:  # fmt: skip
        """The sample of a row the model answered, from the protocol's ``outcome`` of its result."""
        prediction = outcome.prediction
        status = "undecided" if prediction is None else "unparsed" if prediction == UNPARSED else "decided"
        generated, tokens = outcome.generated, outcome.generated_tokens
        return cls(config, row, data, reference, status, prediction if status == "decided" else None, tuple(outcome.scores),
                   outcome.options, outcome.fell_back, request, result, tuple(generated) if isinstance(generated, list) else generated,
                   tuple(tokens) if isinstance(tokens, list) else tokens, tuple(prompts),
                   None if prompt_tokens is None else tuple(prompt_tokens))  # fmt: skip

    @classmethod
    def left_out(cls, config: str, row: int, data: dict, reference: tuple[int, ...]) -> Sample:
        """The sample of a row the protocol leaves out (``Protocol.skip``)."""
        return cls(config, row, data, reference, "excluded")

    @property
    def answered(self) -> bool:
        """Whether the row is in the figures (not excluded)."""
        return self.status != "excluded"

    @property
    def metric_prediction(self) -> int | None:
        """The prediction as the benchmark's metric wiring takes it: the option, None (undecided) or ``UNPARSED``."""
        return UNPARSED if self.status == "unparsed" else self.prediction

    def line(self) -> dict:
        """The sample's line of predictions.parquet: ``prediction`` the option, or ``UNDECIDED`` (-1), ``UNPARSED``
        (-2), ``EXCLUDED`` (-3) as ``status`` says; ``scores`` NaN where the model gave none; ``row_json`` the row as
        read (canonical JSON) and ``row_sha256`` its sha256, the question's identity when runs are compared. A row of
        K > 1 samples (``draws``) adds each sample's text and prediction (``draws_generated``, ``draws_prediction``) and
        ``agreement``, the share of samples that decided as the commonest decision."""
        code = {"decided": self.prediction, "undecided": UNDECIDED, "unparsed": UNPARSED, "excluded": EXCLUDED}[self.status]
        content = json.dumps(self.data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return {"config": self.config, "row": self.row, "status": self.status, "prediction": code,
                "scores": [math.nan if v is None else v for v in self.scores], "reference": list(self.reference),
                "generated": list(self.generated) if isinstance(self.generated, tuple) else self.generated,
                "generated_tokens": list(self.generated_tokens) if isinstance(self.generated_tokens, tuple) else self.generated_tokens,
                "prompts": list(self.prompts), "prompt_tokens": None if self.prompt_tokens is None else list(self.prompt_tokens),
                "row_json": content, "row_sha256": hashlib.sha256(content.encode()).hexdigest(),
                **(self._draws() if self.draws else {})}  # fmt: skip

    @property
    def decision(self) -> str:
        """What the sample decided, as one comparable value: its status, prediction and scores (a YES/NO protocol's
        answers), so that two samples of a row agree where these are equal."""
        return json.dumps([self.status, self.prediction, list(self.scores)])

    def _draws(self) -> dict:
        decided, lines = [d.decision for d in self.draws], [d.line() for d in self.draws]  # each draw's line once
        return {"draws_generated": [line["generated"] for line in lines],
                "draws_prediction": [line["prediction"] for line in lines],
                "agreement": max(map(decided.count, decided)) / len(decided) if self.answered else None}  # fmt: skip


def answered(samples) -> list[Sample]:
    """The samples in the figures (every status but ``excluded``), in order."""
    return [s for s in samples if s.answered]
