"""The unit a benchmark's questions share: what a comparison of two runs resamples and swaps whole.

A benchmark's questions are not independent draws: NEWTON's Track 1 asks about one object eight attributes, PROST
asks each set of four objects under several templates, CConS reuses an object pair across contexts. Where a model's
answer depends on the object rather than the question, questions of one unit are correlated, and resampling single
questions gives an interval too narrow and a p-value too small. ``Evaluation.unit`` declares, beside a benchmark's
protocols, the key of a row's unit; ``physprobe.report.compare`` draws and swaps units whole.

>>> pair = Unit("object pair", lambda row, config: frozenset((row["obj1"], row["obj2"])), "the two objects compared")
>>> pair.key({"obj1": "cat", "obj2": "bus"}, "ordinary") == pair.key({"obj1": "bus", "obj2": "cat"}, "ordinary")
True
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    """The unit of a benchmark's questions: its ``name`` as the report prints it (singular), ``key(row, config)``
    (rows with equal keys are one unit) and ``why`` its questions share it."""

    name: str
    key: Callable[[dict, str], Hashable]
    why: str
