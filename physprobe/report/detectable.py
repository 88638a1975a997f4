"""What one run can detect: the minimum difference from another run that a figure's questions would show with 80%
power at 5% (two-sided), from the run's own spread with its units counted.

A figure's standard error comes from resampling the run's units whole (``Evaluation.unit``; the same draws as a
comparison's, ``paired.draws``), the figure recomputed by its metric wiring (averaged in numpy where it is a plain
mean of its questions' values). Against a second run of the same spread, answering independently, the difference's
standard error is sqrt(2) times that; the detectable difference is 2.80 times the difference's
(``paired.detectable``). A paired comparison of correlated runs detects less (``compare.Difference.detectable``).

>>> round(paired.detectable(2 ** 0.5 * 0.1), 3)  # a run whose figure has a standard error of 0.1
0.396
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from physprobe.data import registry
from physprobe.errors import ComparisonError, ProtocolError
from physprobe.report import compare, paired
from physprobe.report.runs import Run, load_run

RESAMPLES = 200  # enough for a standard error to about 5% (the interval of a comparison takes paired.RESAMPLES)


@dataclass(frozen=True)
class Alone:
    """A run's figure alone: its ``value``, ``questions`` in ``units`` units (``unit``), the figure's standard
    error over resampled units and the difference ``detectable`` against an independent run of the same spread.
    Where every unit scores alike (a figure of 0 or 1: no spread), the standard error is a share's at Agresti and
    Coull's adjusted share (x + 2) / (n + 4) over its n units (``adjusted``); None where even that cannot be said."""

    value: float
    questions: int
    units: int
    unit: str
    standard_error: float
    detectable: float | None
    adjusted: bool = False  # every unit scored alike: the standard error of Agresti and Coull's adjusted share


def alone(run: Run, key: str, resamples: int = RESAMPLES, seed: int = paired.SEED) -> Alone | None:
    """``run``'s figure ``key`` (config, then a dot path) alone (``Alone``); None where the run holds no value of
    it or its predictions cannot be read back."""
    return _alone(run.folder, key, resamples, seed)


@functools.lru_cache(maxsize=64)
def _alone(folder: Path, key: str, resamples: int, seed: int) -> Alone | None:
    import numpy as np

    run = load_run(folder)
    evaluation = registry.evaluation(run.record.benchmark)
    config, path = key.split(".", 1)
    try:
        options = evaluation.protocol(run.record.protocol).metric_options
        found = compare.answers(run)
    except (ComparisonError, ProtocolError, OSError):
        return None
    members = evaluation.pooled.get(config, (config,))
    if not all(m in found for m in members):
        return None
    kept = [x for m in members for _, x in sorted(found[m].items()) if x.status != "excluded"]
    side = compare.Side(evaluation, config, [x.data for x in kept], kept, options)
    try:
        whole = side.figures(range(len(kept)))
    except KeyError:  # a row stored without a column its metric reads (a published run's redacted row): not read back
        return None
    value = compare.value_at(whole, path)
    if value is None:
        return None
    of, units = compare.units_of(evaluation, config, side.rows)
    draws = paired.draws(units, resamples, seed)
    values = side.values([path])
    if compare.is_mean(side, values, [path], whole, draws, of):
        drawn = paired.weighted_means(values, draws[:, of])[0]
    else:
        drawn = np.array([compare.value_at(side.figures(np.repeat(np.arange(len(of)), c[of])), path) or math.nan for c in draws])
    drawn = drawn[~np.isnan(drawn)]
    error = float(np.std(drawn, ddof=1)) if len(drawn) > 1 else 0.0
    name = evaluation.unit.name if evaluation.unit is not None else "question"
    counted = int(np.sum(~np.isnan(values[0])))
    held = len(set(of[~np.isnan(values[0])].tolist()))
    adjusted = error == 0 and 0 <= value <= 1 and held > 0
    if adjusted:  # every unit scored alike: a share's variance at Agresti and Coull's adjusted share over its units
        share = (value * held + 2) / (held + 4)
        error = math.sqrt(share * (1 - share) / held)
    return Alone(value, counted, held, name, error, paired.detectable(math.sqrt(2) * error) if error > 0 else None, adjusted)


def phrase(found: Alone, percent: bool) -> str:
    """What a run's figure can detect, as the card's footnote and the score summary say it.

    >>> print(phrase(Alone(0.2, 20, 18, "object set", 0.09, 0.3566), True))
    with 20 questions (18 object sets), differences under ~36 points from another run cannot be told from noise (80% power, 5%; this run's spread, the other run independent)
    """
    if found.detectable is None:
        return (f"with {found.questions} questions ({found.units} {found.unit}s), every unit scoring alike: no spread to "
                "tell what a comparison could detect")  # fmt: skip
    size = f"~{100 * found.detectable:.0f} points" if percent else f"~{found.detectable:.2f}"
    spread = "every unit alike: Agresti-Coull's adjusted share" if found.adjusted else "this run's spread"
    return (f"with {found.questions} questions ({found.units} {found.unit}s), differences under {size} from another run "
            f"cannot be told from noise (80% power, 5%; {spread}, the other run independent)")  # fmt: skip


def summary_lines(folder: Path | str) -> list[str]:
    """For ``physprobe score --limit N``'s summary: per card figure of the run in ``folder``, what it can detect
    (none for a run without ``--limit``: every question counted, nothing to plan)."""
    run = load_run(Path(folder))
    if run.record.limit is None:
        return []
    lines = []
    for figure in compare.card_figures(run):
        found = alone(run, figure.key)
        if found is not None:
            lines.append(f"  {figure.name}: {phrase(found, figure.percent)}")
    return lines
