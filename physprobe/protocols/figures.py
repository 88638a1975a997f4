"""The kinds of figure a benchmark's metrics.json holds, and the range each kind lies in.

A benchmark declares the kind of every figure its metric wiring writes (``Evaluation.figures``: a figure's key, the
last part of its path, to its ``Kind``); the counts every run writes beside them are declared once (``RUN_FIGURES``).
A key holding an object of figures (PROST's ``inverse_gap_by_group``) gives its kind to every number below it. The
record reads metrics.json through these declarations (``physprobe.record.figures``), so a figure's range comes from
its kind, never from the words of its key.

>>> Kind.FRACTION.fault(0.5), Kind.FRACTION.fault(7.5), Kind.DIFFERENCE.fault(-0.25)
(None, 'outside 0-1 for a fraction', None)
>>> Kind.COUNT.fault(3), Kind.COUNT.fault(2.5), Kind.PERCENT.fault(42.0)
(None, 'not a count (a whole number from 0 to 1e12)', None)
"""

from __future__ import annotations

import enum

MAX_COUNT = 1e12  # a count above this is no count of questions


class Kind(enum.Enum):
    """A figure's kind: what its number means and the range it lies in."""

    FRACTION = "fraction"  # a share of questions (accuracy, mAP): 0-1
    PERCENT = "percent"  # a share in points: 0-100
    DIFFERENCE = "difference"  # a signed difference of two fractions (an inverse gap): -1..1
    COUNT = "count"  # questions counted: a whole number from 0

    @property
    def bounds(self) -> tuple[float, float]:
        """The lowest and highest value of the kind."""
        return {"fraction": (0, 1), "percent": (0, 100), "difference": (-1, 1), "count": (0, MAX_COUNT)}[self.value]

    def fault(self, value: float) -> str | None:
        """What is wrong with a finite ``value`` as a figure of this kind, or None."""
        low, high = self.bounds
        if self is Kind.COUNT:
            return None if low <= value <= high and value == int(value) else "not a count (a whole number from 0 to 1e12)"
        if low <= value <= high:
            return None
        return f"outside {low:g}{'..' if low < 0 else '-'}{high:g} for a {self.value}"
