"""The report's "Differences" section: per benchmark with two runs or more, each run against the reference run (the
first given, or the one ``--reference`` names) on the same questions (``physprobe.report.compare``), as a table on
the card's scale, a line of the figures not tested, a figure (each tested difference with its 95% interval, a zero
line) and differences.json; p-values Holm-adjusted over every tested difference of the report.

One verdict (``Difference.differs``: tested, Holm-adjusted p below 0.05) is read by the table's *, the figure's
filled marker and the card's footnote.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from physprobe.errors import ComparisonError, ReportError
from physprobe.report import compare, detectable, difference_figure, paired
from physprobe.report.blocks import Heading, Image, Notes, Paragraph, TableBlock
from physprobe.report.runs import Run

JSON = "differences.json"
HEADER = ["Figure", "A (reference)", "B", "B − A", "95% interval", "Detectable", "p", "p (Holm)", "Test", "Questions (units)"]
EXPLAINED = (
    "Each run (B) against the reference run (A) on the questions both answered, matched by config, row and the row's "
    "content hash, on the card's scale (points where the card prints a figure in %, else 0–1). The questions of a benchmark share "
    "units (its objects, object pairs or sentences, named per benchmark): the paired bootstrap draws whole units, the "
    "same draws for both runs, and recomputes each figure by its metric wiring (a macro figure's interval is the "
    "macro's); the 95% interval is printed to the decimals its units resolve. A figure is tested only where at least "
    f"{paired.MIN_DIFFERING} units differ between the two runs (with fewer, no split of them can reach p < 0.05): "
    "McNemar's exact test where each unit is one question and the figure an accuracy, else approximate randomisation "
    "(the runs' answers swapped on random halves of the units). p (Holm) is adjusted over every tested difference of "
    f"the report; * and a filled marker mean p (Holm) < {paired.ALPHA}, the one verdict of this report. Detectable: the "
    "smallest difference these units would show with 80% power at 5% (2.80 times the difference's standard error). "
    "See docs/comparing.md."
)


@dataclasses.dataclass(frozen=True)
class Section:
    """A benchmark's comparisons against its ``reference`` run, and the runs not compared, each with why;
    ``explained``: the section that holds the report's one explanatory paragraph (the first)."""

    benchmark: str
    reference: str
    comparisons: tuple[compare.Comparison, ...]
    refused: tuple[str, ...]
    explained: bool = False
    tested: int = 0  # the tested differences of the report, over which p (Holm) is adjusted


def names(reference: str, run: Run) -> bool:
    """Whether ``reference`` names ``run``: its name in the report, or its folder however it is spelled (relative or
    absolute: both resolved)."""
    return reference == run.id or Path(reference).resolve() == Path(run.folder).resolve()


def reference_of(runs: list[Run], name: str | None) -> Run:
    """The reference among one benchmark's ``runs``: the one ``name`` names (``names``), else the first."""
    named = [r for r in runs if name is not None and names(name, r)]
    return named[0] if named else runs[0]


def sections(runs: list[Run], reference: str | None, resamples: int, across: bool) -> list[Section]:
    """Per benchmark with two runs or more, each run against the reference (``reference_of``), Holm-adjusted over
    every tested difference of the report; each run's ``differences`` set (by metrics.json key) for the card. A
    ``--resamples`` out of ``paired``'s bounds, or a ``reference`` that names no run of a compared benchmark, is a
    one-line ``ReportError``."""
    if not paired.MIN_RESAMPLES <= resamples <= paired.MAX_RESAMPLES:
        raise ReportError(f"--resamples {resamples}: the Differences sections take {paired.MIN_RESAMPLES} to "
                          f"{paired.MAX_RESAMPLES} paired bootstrap resamples (their 95% interval is the 2.5th and 97.5th "
                          f"percentiles of them); give one in that range (default {paired.RESAMPLES})")  # fmt: skip
    by_benchmark: dict[str, list[Run]] = {}
    for run in runs:
        by_benchmark.setdefault(run.record.benchmark, []).append(run)
    if reference is not None:
        _check_reference(reference, runs, sorted(b for b, group in by_benchmark.items() if len(group) > 1))
    found = []
    for benchmark in sorted(b for b, group in by_benchmark.items() if len(group) > 1):
        group = by_benchmark[benchmark]
        base = reference_of(group, reference)
        done, refused = [], []
        for run in (r for r in group if r is not base):
            try:
                done.append(compare.compare(base, run, resamples, paired.SEED, across))
            except ComparisonError as error:
                refused.append(str(error))
        found.append(Section(benchmark, base.id, tuple(done), tuple(refused), explained=not found))
    return _holm(found, runs)


def _check_reference(reference: str, runs: list[Run], compared: list[str]) -> None:
    """A one-line ``ReportError`` where ``--reference`` names no run of the report, or only runs of benchmarks with
    no Differences section (one run each): it would be ignored."""
    named = [r for r in runs if names(reference, r)]
    if not named:
        raise ReportError(f"--reference {reference!r} names no run of the report; give a run's name as the report "
                          "shows it (its --label or model name) or its folder")  # fmt: skip
    if not any(r.record.benchmark in compared for r in named):
        sections_of = f"those of {', '.join(compared)}" if compared else "none: no benchmark has two runs"
        raise ReportError(f"--reference {reference!r} names run {named[0].id} of {named[0].record.benchmark}, which has no "
                          f"other run to compare it with; the Differences sections are {sections_of}: give one of their runs "
                          "or leave out --reference")  # fmt: skip


def _holm(found: list[Section], runs: list[Run]) -> list[Section]:
    """Holm's correction over the tested differences only: one that cannot decide does not weaken those that can."""
    tested = [d for s in found for c in s.comparisons for d in c.differences if d.tested]
    adjusted = dict(zip(map(id, tested), paired.holm([d.p for d in tested]), strict=True))
    out = []
    for section in found:
        comparisons = []
        for comparison in section.comparisons:
            differences = tuple(dataclasses.replace(d, holm=adjusted.get(id(d))) for d in comparison.differences)
            comparisons.append(dataclasses.replace(comparison, differences=differences))
            other = next(r for r in runs if r.record.benchmark == section.benchmark and r.id == comparison.other)
            other.differences = {d.figure.key: (comparison.reference, d) for d in differences}
        out.append(dataclasses.replace(section, comparisons=tuple(comparisons), tested=len(tested)))
    return out


def card_note(run: Run, key: str) -> str | None:
    """The card's footnote on ``run``'s figure ``key``: compared with the reference run, the difference, its verdict
    (``Difference.differs``) and what its units can detect; else what the run alone can detect
    (``detectable.alone``); None where neither can be said."""
    reference, d = run.differences.get(key, (None, None))
    if d is None:
        found = detectable.alone(run, key)
        figure = next((f for f in compare.figures(run) if f.key == key), None)  # its scale
        return None if found is None else f"run {run.id}: {detectable.phrase(found, figure is not None and figure.percent)}"
    compared = (f"run {run.id} against {reference} on the same {d.questions} questions ({d.units} {d.unit}s): "
                f"B − A = {signed(d.delta, d.figure)}")  # fmt: skip
    if not d.tested:  # the paired spread of fewer than MIN_DIFFERING differing units says nothing: the run's own does
        if d.differing == 0:
            return f"{compared}; not tested (identical answers)"
        found = detectable.alone(run, key)
        alone = "" if found is None else f"; alone, {detectable.phrase(found, d.figure.percent)}"
        few = f"only {d.differing} {d.unit} differs" if d.differing == 1 else f"only {d.differing} {d.unit}s differ"
        return f"{compared}; not tested ({few}){alone}"
    verdict = "differs" if d.differs else "not told apart"
    detect = f"; detectable at 80% power: {_bound(d.detectable, d)}" if d.detectable else ""
    return (f"{compared}, 95% paired interval "
            f"{interval(d)}; {verdict} (p (Holm) {p_text(d.holm)}){detect}; see Differences")  # fmt: skip


def p_text(value: float) -> str:
    """A p-value as printed.

    >>> p_text(1.0), p_text(0.0123), p_text(1.86e-09)
    ('1', '0.012', '1.9e-09')
    """
    return "1" if value >= 1 else f"{value:.2g}" if value >= 0.001 else f"{value:.1e}"


def signed(value: float, figure: compare.Figure, digits: int | None = None) -> str:
    """A difference on the card's scale (points for a % figure), signed.

    >>> signed(0.0833, compare.Figure("default.macro_accuracy", "Table 5", True, 1))
    '+8.3'
    """
    shown = 100 * value if figure.percent else value
    return f"{shown:+.{figure.digits if digits is None else digits}f}"


def resolved(d: compare.Difference) -> int:
    """The decimals an interval of ``d``'s units resolves: no finer than one unit's share of the figure's scale,
    nor than its table prints (20 units in %: 5 points a unit, whole points).

    >>> resolved(compare.Difference(compare.Figure("c.a", "a", True, 1), 0, 0, 0, 0, 0, 1, "", 20, 10, units=20))
    0
    """
    step = (100 if d.figure.percent else 1) / max(d.units, 1)
    return min(d.figure.digits, max(0, math.ceil(-math.log10(step))))


def interval(d: compare.Difference) -> str:
    if d.low is None:
        return "—"
    return f"{signed(d.low, d.figure, resolved(d))} to {signed(d.high, d.figure, resolved(d))}"


def _bound(value: float | None, d: compare.Difference) -> str:
    if not value:
        return "—"
    return f"±{signed(value, d.figure, resolved(d))[1:]}" + (" points" if d.figure.percent else "")


def _untested_line(comparison: compare.Comparison, unit: str) -> str | None:
    """The figures not tested, in one line: how many had identical answers, how many too few differing units."""
    same = sum(not d.tested and d.differing == 0 for d in comparison.differences)
    few = sum(not d.tested and d.differing > 0 for d in comparison.differences)
    if not same and not few:
        return None
    parts = [f"{same} figure{'s' * (same != 1)} with identical answers"] * bool(same)
    parts += [f"{few} on fewer than {paired.MIN_DIFFERING} {unit}s that differ"] * bool(few)
    return f"not tested: {', '.join(parts)} (no test of so few could reach p < {paired.ALPHA})"


def _table(comparison: compare.Comparison) -> TableBlock:
    rows = []
    for d in (d for d in comparison.differences if d.tested):
        a, b = (signed(v, d.figure)[1:] if v >= 0 else signed(v, d.figure) for v in (d.a, d.b))
        rows.append([d.figure.name, a, b, signed(d.delta, d.figure) + " *" * d.differs, interval(d), _bound(d.detectable, d),
                     p_text(d.p), p_text(d.holm), d.test, f"{d.questions} ({d.units})"])  # fmt: skip
    return TableBlock(HEADER, rows, ["detail"] * len(rows))


def blocks(section: Section, figures_dir: Path, total: int | None = None) -> list:
    """The section of one benchmark: the report's explanatory paragraph (in its first section), then per run
    compared its name once, its unit and unit count, the table of tested figures, the line of those not tested, the
    rows dropped and runs refused, and the figure. ``total`` (every difference of the report) is stated beside the
    tested ones."""
    out: list = [Heading(3, "Differences")] + [Paragraph(EXPLAINED)] * section.explained
    notes = []
    for comparison in section.comparisons:
        unit = next((d.unit for d in comparison.differences), "question")
        units: dict[str, int] = {}
        for d in comparison.differences:  # a config's units: those of its widest figure (a group's hold fewer)
            units[d.figure.config] = max(units.get(d.figure.config, 0), d.units)
        held = ", ".join(f"{config} {count}" for config, count in units.items())
        out.append(Paragraph(f"{comparison.other} (B) against {section.reference} (A, the reference); unit: the {unit} "
                             f"({held} {unit}s); {comparison.resamples} resamples, seed {comparison.seed}; {_adjusted(section.tested, total)}."))  # fmt: skip
        if any(d.tested for d in comparison.differences):
            out.append(_table(comparison))
        told = [line for line in [_untested_line(comparison, unit)] if line]
        for config, reasons in comparison.dropped.items():
            dropped = "; ".join(f"{count} {compare.DROPPED[reason]}" for reason, count in reasons.items())
            told.append(f"{config}: {dropped}" + (f"; compared on the {comparison.matched[config]} questions both answered"
                                                  if config in comparison.matched else ""))  # fmt: skip
        notes += [f"{comparison.other}: {text}" for text in told + list(comparison.notes)]
    notes += [f"Not compared: {why}" for why in section.refused]
    if notes:
        out.append(Notes(notes))
    path = figures_dir / f"{section.benchmark}-differences.png"
    if difference_figure.draw(section, path):
        out.append(Image(path, f"figures/{path.name}", f"Differences from {section.reference}, 95% paired intervals"))
    return out


def _adjusted(tested: int, total: int | None) -> str:
    """What p (Holm) is adjusted over: the report's ``tested`` differences (of ``total``), or that none is tested.

    >>> _adjusted(3, 8), _adjusted(1, None), _adjusted(0, 4)
    ("p (Holm) over the report's 3 tested differences of 8", "p (Holm) over the report's 1 tested difference", 'no difference of the report is tested (too few units differ), so no p (Holm)')
    """
    if not tested:
        return "no difference of the report is tested (too few units differ), so no p (Holm)"
    return f"p (Holm) over the report's {tested} tested difference{'s' if tested > 1 else ''}" + (f" of {total}" if total else "")


def to_json(found: list[Section]) -> str:
    """differences.json: every section's comparisons, with the seed and resamples, for scripts."""
    data = [{"benchmark": s.benchmark, "reference": s.reference, "refused": list(s.refused),
             "comparisons": [dataclasses.asdict(c) for c in s.comparisons]} for s in found]  # fmt: skip
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"
