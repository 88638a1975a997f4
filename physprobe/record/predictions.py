"""``PredictionLine``: one line of a run's predictions.parquet (``physprobe.run.samples.Sample.line`` writes it), typed
with its rules, and ``check``, which holds a file's lines to them in one ``RunRecordError`` line naming the file and row.

A line is one scored row: its ``config`` and ``row``; ``status`` and the ``prediction`` code that goes with it (the
option for ``decided``, -1 ``undecided``, -2 ``unparsed``, -3 ``excluded``); the ``scores`` (NaN where the model gave
none); the ``reference``; the generated text and its token count; the texts the model read (``prompts``) and their
token counts; the row as read and its sha256 (``row_json``, ``row_sha256``: absent from folders written before them);
and, for a run of several sampled answers per question, each draw's text and prediction and their ``agreement``.

>>> line = {"config": "default", "row": 0, "status": "undecided", "prediction": -1, "scores": [], "reference": [1],
...         "generated": None, "generated_tokens": None, "prompts": ["Ice is"], "prompt_tokens": [2]}
>>> check([line], "predictions.parquet")
>>> check([{**line, "prediction": 2}], "predictions.parquet")
Traceback (most recent call last):
physprobe.errors.RunRecordError: predictions.parquet: row 0 of default: status 'undecided' is written with prediction -1, not 2; score the run again
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic.dataclasses import dataclass

from physprobe.errors import RunRecordError
from physprobe.record.fields import Count, Sha256, fault

CODES = {"undecided": -1, "unparsed": -2, "excluded": -3}  # the prediction written for a row of each status


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))  # scores are NaN where the model gave none
class PredictionLine:
    """One line of predictions.parquet (see the module's text)."""

    config: str
    row: Count
    status: Literal["decided", "undecided", "unparsed", "excluded"]
    prediction: Annotated[int, Field(ge=-3)]
    scores: list[float | None]
    reference: list[int]
    generated: str | list[str | None] | None
    generated_tokens: int | list[int | None] | None
    prompts: list[str]
    prompt_tokens: list[int | None] | None
    row_json: str | None = None
    row_sha256: Sha256 | None = None
    draws_generated: list[str | list[str | None] | None] | None = None
    draws_prediction: list[int] | None = None
    agreement: Annotated[float, Field(ge=0, le=1)] | None = None

    @model_validator(mode="after")
    def _code_of_status(self) -> PredictionLine:
        expected = CODES.get(self.status)
        if (self.prediction < 0) if expected is None else (self.prediction != expected):
            written = "an option (0 or more)" if expected is None else str(expected)
            raise ValueError(f"status {self.status!r} is written with prediction {written}, not {self.prediction}")
        return self


LINES = TypeAdapter(list[PredictionLine])


def check(lines: list[dict], where: str) -> None:
    """``RunRecordError`` (one line naming ``where``, the row and its config) for a line that is not a
    ``PredictionLine``."""
    try:
        LINES.validate_python(lines, strict=False)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        index, *inside = first["loc"]
        line = lines[index]
        said = fault({**first, "loc": inside}) if inside else first["msg"].removeprefix("Value error, ")
        raise RunRecordError(f"{where}: row {line.get('row')} of {line.get('config')}: {said}; score the run again") from None
