"""The validating parsers of an OpenAI-compatible server's answers, one per endpoint: a 200 answer's body
(``parse_body``), echoed prompt tokens with their log-probabilities (``parse_echo``, ``prompt_tokens``), a completion
or chat reply with its token count (``parse_completion``, ``parse_chat``), the model list (``parse_models``). An
answer physprobe cannot use is ``Malformed``, and says whether another attempt may get a good one.

>>> parse_completion({"choices": [{"text": " a ball"}]})
Reply(text=' a ball', tokens=None)
"""

from __future__ import annotations

import json
import math
from typing import NamedTuple

from physprobe.util.redact import printable


def _ascii(text: str) -> str:
    return text.encode("ascii", "ignore").decode()


class Malformed(Exception):
    """An answer the parsers cannot use: ``what`` was wrong, and whether another attempt may get a good one
    (``transient``: a body cut short or not JSON, an error object in place of the answer)."""

    def __init__(self, what: str, transient: bool = False):
        super().__init__(what)
        self.transient = transient


def parse_body(content: bytes) -> dict:
    """A 200 answer's JSON object; a body that is not UTF-8 JSON (cut short, an HTML page) or that holds an error
    object instead of the answer is ``Malformed`` and worth another attempt.

    >>> parse_body(b'{"error": {"message": "overloaded"}}')
    Traceback (most recent call last):
    physprobe.backends.openai.parsing.Malformed: an error object in place of the answer: overloaded
    """
    try:
        body = json.loads(content.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise Malformed(f"a body that is not UTF-8 (byte {error.start})", transient=True) from None
    except json.JSONDecodeError as error:
        raise Malformed(
            f"a body that is not JSON ({error.msg} at character {error.pos} of {len(content)})", transient=True
        ) from None
    except RecursionError:  # e.g. 200,000 nested [: no answer of the API is nested more than a few levels
        raise Malformed(f"a body nested too deeply to be an answer ({len(content)} bytes)") from None
    if not isinstance(body, dict):
        raise Malformed(f"a JSON {type(body).__name__} where an object was expected")
    if "error" in body and "choices" not in body and "data" not in body:
        error = body["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise Malformed(f"an error object in place of the answer: {printable(str(message), 200)}", transient=True)
    return body


def _choice(body: dict) -> dict:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise Malformed(f"no choices (choices: {printable(json.dumps(choices), 60)})")
    if not isinstance(choices[0], dict):
        raise Malformed(f"choices[0] is {printable(json.dumps(choices[0]), 60)}, not an object")
    return choices[0]


def _text(value, field: str, allow_null: bool = False) -> str:
    if value is None and allow_null:
        return ""
    if not isinstance(value, str):
        raise Malformed(f"{field} is {printable(json.dumps(value), 60)}, not text")
    return value


def parse_echo(body: dict) -> list[tuple[str, float | None]]:
    """The echoed ``(token, log-probability)`` pairs of a ``/v1/completions`` answer with ``echo`` and ``logprobs``:
    a token list and a log-probability per token (only the first may be null), each a finite number at most 0,
    text offsets (where given) one per token and never decreasing.

    >>> parse_echo({"choices": [{"logprobs": {"tokens": ["A", " b"], "token_logprobs": [None, -0.5]}}]})
    [('A', None), (' b', -0.5)]
    >>> parse_echo({"choices": [{"logprobs": {"tokens": ["A", " b"], "token_logprobs": [None, 48.2]}}]})
    Traceback (most recent call last):
    physprobe.backends.openai.parsing.Malformed: token_logprobs[1] is 48.2, above 0 (a log-probability is at most 0)
    """
    logprobs = _choice(body).get("logprobs")
    if not isinstance(logprobs, dict):
        raise Malformed(
            f"choices[0].logprobs is {printable(json.dumps(logprobs), 60)}, not an object of tokens and log-probabilities"
        )
    tokens, values, offsets = logprobs.get("tokens"), logprobs.get("token_logprobs"), logprobs.get("text_offset")
    if not isinstance(tokens, list) or not tokens or not isinstance(values, list):
        raise Malformed("logprobs without a list of tokens and a list of token_logprobs")
    if len(values) != len(tokens):
        raise Malformed(f"{len(tokens)} tokens but {len(values)} token_logprobs (one per token)")
    for i, (token, value) in enumerate(zip(tokens, values, strict=True)):
        _text(token, f"tokens[{i}]")
        if value is None and i == 0:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Malformed(f"token_logprobs[{i}] is {printable(json.dumps(value), 40)}, not a number")
        if not math.isfinite(value):
            raise Malformed(f"token_logprobs[{i}] is {value}, not a finite number")
        if value > 0:
            raise Malformed(f"token_logprobs[{i}] is {value}, above 0 (a log-probability is at most 0)")
    if offsets is not None:
        if not isinstance(offsets, list) or len(offsets) != len(tokens):
            raise Malformed(f"text_offset is not a list of one offset per token ({len(tokens)} tokens)")
        for i, offset in enumerate(offsets):
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0 or (i and offset < offsets[i - 1]):
                raise Malformed(
                    f"text_offset[{i}] is {printable(json.dumps(offset), 40)}, not a whole number at least the one before"
                )
    return list(zip(tokens, values, strict=True))


class Reply(NamedTuple):
    """A generated answer as the server sent it: its text and the tokens it counted (``usage.completion_tokens``;
    None where it reports no usage)."""

    text: str
    tokens: int | None


def _usage(body: dict) -> int | None:
    """The answer's ``usage.completion_tokens`` where it is a whole number from 0 (a count, shown only); else None."""
    usage = body.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else None


def parse_completion(body: dict) -> Reply:
    """The generated text of a ``/v1/completions`` answer, and its token count where the server gives one.

    >>> parse_completion({"choices": [{"text": " a ball"}], "usage": {"completion_tokens": 2}})
    Reply(text=' a ball', tokens=2)
    """
    return Reply(_text(_choice(body).get("text"), "choices[0].text"), _usage(body))


def parse_chat(body: dict) -> Reply:
    """The reply of a ``/v1/chat/completions`` answer (a null ``content`` is an empty reply).

    >>> parse_chat({"choices": [{"message": {"role": "assistant"}}]})
    Traceback (most recent call last):
    physprobe.backends.openai.parsing.Malformed: choices[0].message has no content
    """
    message = _choice(body).get("message")
    if not isinstance(message, dict):
        raise Malformed(f"choices[0].message is {printable(json.dumps(message), 60)}, not an object")
    if "content" not in message:
        raise Malformed("choices[0].message has no content")
    return Reply(_text(message["content"], "choices[0].message.content", allow_null=True), _usage(body))


def parse_models(body: dict) -> dict[str, dict]:
    """The models a ``/v1/models`` answer lists: each id and its entry.

    >>> parse_models({"object": "list", "data": [{"id": "smollm2", "owned_by": "me"}]})
    {'smollm2': {'id': 'smollm2', 'owned_by': 'me'}}
    """
    data = body.get("data")
    if not isinstance(data, list) or not all(isinstance(e, dict) and isinstance(e.get("id"), str) for e in data):
        raise Malformed('no list of models with ids (data: [{"id": ...}, ...])')
    return {entry["id"]: entry for entry in data}


def prompt_tokens(tokens: list[tuple[str, float | None]], prompt: str) -> list[tuple[str, float | None]] | None:
    """The echoed tokens that hold ``prompt``: the shortest run from the first whose text ends with it, both read in
    ASCII (a BOS token the server echoes comes first; the one generated token comes after); None where none does.

    >>> prompt_tokens([("<s>", None), ("A", -1.0), (" b", -2.0), ("!", -3.0)], "A b")
    [('<s>', None), ('A', -1.0), (' b', -2.0)]
    """
    # Compared in ASCII: a server that decodes each token on its own drops the bytes of a character split over tokens.
    wanted, text = _ascii(prompt), ""
    for count, (token, _) in enumerate(tokens, 1):
        text += _ascii(token)
        if len(text) >= len(wanted) and text.endswith(wanted):
            return tokens[:count]
    return None
