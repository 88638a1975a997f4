"""metrics.json's figures, typed: each number a ``Figure`` of the kind its benchmark declares (``Evaluation.figures``,
``physprobe.protocols.figures.Kind``) and the ``n`` it rests on, in its kind's range; and the JSON Schema of the file,
made from the same kinds.

``read`` refuses, in one ``RunRecordError`` line naming the file and the figure, a value no scorer writes: not a
number, not finite, out of its kind's range, a count of questions above ``n``, or a number under a key the benchmark
declares no kind for.

>>> from physprobe.protocols import Kind, RUN_FIGURES
>>> kinds = {**RUN_FIGURES, "accuracy": Kind.FRACTION}
>>> read({"mass": {"accuracy": 0.5, "n": 10}}, kinds, "metrics.json")["mass.accuracy"]
Figure(value=0.5, kind=<Kind.FRACTION: 'fraction'>, n=10)
>>> read({"mass": {"accuracy": 7.5}}, kinds, "metrics.json")
Traceback (most recent call last):
physprobe.errors.RunRecordError: metrics.json: mass.accuracy is 7.5, outside 0-1 for a fraction; score the run again
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import ConfigDict, Field, TypeAdapter, model_validator
from pydantic.dataclasses import dataclass

from physprobe.errors import RunRecordError
from physprobe.protocols.figures import Kind

PARTS_OF_N = ("undecided", "unparsed")  # counts of scored questions, so at most ``n``


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class Figure:
    """One figure of metrics.json: its ``value``, its ``kind`` and ``n``, the questions it rests on (its group's, else
    its config's; None where none is written)."""

    value: float
    kind: Kind
    n: int | None = None

    @model_validator(mode="after")
    def _in_range(self) -> Figure:
        fault = self.kind.fault(self.value)
        if fault:
            raise ValueError(fault)
        return self


def _finite(value) -> bool:
    """Whether a JSON value is a finite number (an integer of 400 digits is not; a flag is no number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def read(metrics, kinds: dict[str, Kind], where: str, path: str = "") -> dict[str, Figure]:
    """The figures of a metrics tree by their dot paths (under ``path``), each of the kind ``kinds`` gives its key (the
    last part of a dotted key: a baseline's ``pairwise.accuracy``), else the kind of the key above it."""
    found: dict[str, Figure] = {}

    def walk(tree, path: str, inherited: Kind | None, n: int | None) -> None:
        if not isinstance(tree, dict):
            raise RunRecordError(
                f"{where}: {path or 'the file'} is {type(tree).__name__}, expected an object; score the run again"
            )
        total = tree.get("n")
        n = total if _finite(total) and isinstance(total, int) else n
        for key, value in tree.items():
            field = f"{path}.{key}" if path else str(key)
            kind = kinds.get(str(key).rsplit(".", 1)[-1], inherited)
            if isinstance(value, dict):
                walk(value, field, kind, n)
            elif value is not None:
                found[field] = _figure(f"{where}: {field}", value, kind, n)
        for part in PARTS_OF_N:  # questions among the n scored
            value = tree.get(part)
            if _finite(total) and _finite(value) and value > total:
                raise RunRecordError(f"{where}: {f'{path}.{part}' if path else part} is {value}, more than the {total} "
                                     "questions scored (n); score the run again")  # fmt: skip

    walk(metrics, path, None, None)
    return found


def _figure(at: str, value, kind: Kind | None, n: int | None) -> Figure:
    """The figure of ``value`` and ``kind`` found ``at`` (the file and the field); one ``RunRecordError`` line where it
    cannot be one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RunRecordError(f"{at} is {value!r}, not a number; score the run again")
    if not _finite(value):
        raise RunRecordError(f"{at} is {value}, not a finite number; score the run again")
    if kind is None:
        raise RunRecordError(f"{at} is {value!r}, a figure of no kind the benchmark declares "
                             "(Evaluation.figures); score the run again")  # fmt: skip
    fault = kind.fault(value)
    if fault:
        raise RunRecordError(f"{at} is {value}, {fault}; score the run again")
    return Figure(value, kind, n)


def _number_of(kind: Kind) -> dict:
    """The JSON Schema of one figure of ``kind`` (pydantic's reading of its constrained type)."""
    low, high = kind.bounds
    typed = int if kind is Kind.COUNT else float
    return TypeAdapter(Annotated[typed, Field(ge=low, le=high, allow_inf_nan=False)]).json_schema()


def metrics_schema(kinds: dict[str, Kind]) -> dict:
    """The JSON Schema of metrics.json for figures of ``kinds``: per config an object of figures, each key of ``kinds``
    a number of its kind (or an object of them, or null), any other key an object of figures or null.

    >>> schema = metrics_schema({"n": Kind.COUNT})
    >>> schema["$defs"]["count"]
    {'maximum': 1000000000000.0, 'minimum': 0, 'type': 'integer'}
    """
    defs = {}
    for kind in sorted(set(kinds.values()), key=lambda k: k.value):
        defs[kind.value] = _number_of(kind)
        defs[f"{kind.value}s"] = {"anyOf": [{"$ref": f"#/$defs/{kind.value}"}, {"type": "null"}, {
            "type": "object", "additionalProperties": {"$ref": f"#/$defs/{kind.value}s"}}]}  # fmt: skip
    defs["figures"] = {
        "type": "object",
        "properties": {key: {"$ref": f"#/$defs/{kind.value}s"} for key, kind in sorted(kinds.items())},
        "additionalProperties": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/figures"}]},
    }
    return {"title": "metrics.json", "type": "object", "additionalProperties": {"$ref": "#/$defs/figures"}, "$defs": defs}
