"""The report's "Differences" section: per benchmark with two runs or more, each run against the reference run (the
first given, or the one ``--reference`` names) on the same questions (``physprobe.report.compare``), as a table, a
figure (each difference with its 95% interval, a zero line) and differences.json; p-values Holm-adjusted over every
difference of the report.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from physprobe.errors import ComparisonError, ReportError
from physprobe.report import compare, paired
from physprobe.report.blocks import Heading, Image, Notes, Paragraph, TableBlock
from physprobe.report.figures import OKABE_ITO, _plt, _save
from physprobe.report.runs import Run

JSON = "differences.json"
HEADER = ["Run", "Figure", "Reference", "Run's value", "B − A", "95% interval", "p", "p (Holm)", "Test", "Questions"]


@dataclasses.dataclass(frozen=True)
class Section:
    """A benchmark's comparisons against its ``reference`` run, and the runs not compared, each with why."""

    benchmark: str
    reference: str
    comparisons: tuple[compare.Comparison, ...]
    refused: tuple[str, ...]


def reference_of(runs: list[Run], name: str | None) -> Run:
    """The reference among one benchmark's ``runs``: the one ``name`` names (its name in the report or its folder),
    else the first."""
    named = [r for r in runs if name is not None and name in (r.id, str(r.folder))]
    return named[0] if named else runs[0]


def sections(runs: list[Run], reference: str | None, resamples: int, across: bool) -> list[Section]:
    """Per benchmark with two runs or more, each run against the reference (``reference_of``), Holm-adjusted over
    every difference of the report; each run's ``differences`` set (by metrics.json key) for the card's marks. A
    ``reference`` that names no run is a one-line ``ReportError``."""
    if resamples < 1:
        raise ReportError(f"--resamples must be at least 1, got {resamples}")
    if reference is not None and not any(reference in (r.id, str(r.folder)) for r in runs):
        raise ReportError(f"--reference {reference!r} names no run of the report; give a run's name as the report "
                          "shows it (its --label or model name) or its folder")  # fmt: skip
    by_benchmark: dict[str, list[Run]] = {}
    for run in runs:
        by_benchmark.setdefault(run.record.benchmark, []).append(run)
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
        found.append(Section(benchmark, base.id, tuple(done), tuple(refused)))
    return _holm(found, runs)


def _holm(found: list[Section], runs: list[Run]) -> list[Section]:
    every = [d for s in found for c in s.comparisons for d in c.differences]
    adjusted = iter(paired.holm([d.p for d in every]))
    out = []
    for section in found:
        comparisons = []
        for comparison in section.comparisons:
            differences = tuple(dataclasses.replace(d, holm=next(adjusted)) for d in comparison.differences)
            comparisons.append(dataclasses.replace(comparison, differences=differences))
            other = next(r for r in runs if r.record.benchmark == section.benchmark and r.id == comparison.other)
            other.differences = {d.figure.key: (comparison.reference, d) for d in differences}
        out.append(dataclasses.replace(section, comparisons=tuple(comparisons)))
    return out


def card_note(run: Run, key: str) -> str | None:
    """The card's footnote on ``run``'s figure ``key`` where its difference from the reference run excludes zero."""
    reference, found = run.differences.get(key, (None, None))
    if found is None or not found.excludes_zero:
        return None
    return (f"run {run.id}: differs from {reference} on the same {found.questions} questions: B − A = {_signed(found.delta)} "
            f"(95% paired interval {_signed(found.low)} to {_signed(found.high)}; p (Holm) {_p(found.holm)}; see Differences)")  # fmt: skip


def _p(value: float) -> str:
    """A p-value as printed.

    >>> _p(1.0), _p(0.0123), _p(1.86e-09)
    ('1', '0.012', '1.9e-09')
    """
    return "1" if value >= 1 else f"{value:.2g}" if value >= 0.001 else f"{value:.1e}"


def _signed(value: float) -> str:
    return f"{value:+.3f}"


def blocks(section: Section, figures_dir: Path, total: int) -> list:
    """The section of one benchmark: what it is, the table (a difference whose interval excludes zero marked *),
    the rows dropped and runs refused, and the figure."""
    out = [Heading(3, "Differences"),
           Paragraph(f"Each run against {section.reference} (the reference) on the questions both answered, matched by "
                     "config, row and the row's content hash: B − A with its paired bootstrap 95% interval (questions "
                     "resampled together for both runs, each figure recomputed by its metric wiring, so a macro "
                     "figure's interval is the macro's), and its p-value: McNemar's exact test for an accuracy, the "
                     f"p of approximate randomisation (the runs' answers swapped on random halves of the questions) for other "
                     f"figures. p (Holm) is adjusted over all {total} differences of this "
                     "report (Holm's step-down correction); * marks an interval that excludes zero. The questions of a "
                     "benchmark share objects and templates, so they are not wholly independent: see docs/comparing.md.")]  # fmt: skip
    rows, notes = [], []
    for comparison in section.comparisons:
        for d in comparison.differences:
            star = " *" if d.excludes_zero else ""
            rows.append([comparison.other, d.figure.name, f"{d.a:.3f}", f"{d.b:.3f}", _signed(d.delta) + star,
                         "—" if d.low is None else f"{_signed(d.low)} to {_signed(d.high)}", _p(d.p), _p(d.holm), d.test,
                         str(d.questions)])  # fmt: skip
        for config, reasons in comparison.dropped.items():
            told = "; ".join(f"{count} {compare.DROPPED[reason]}" for reason, count in reasons.items())
            notes.append(f"{comparison.other}, {config}: {told}; compared on the {comparison.matched.get(config, 0)} "
                         "questions both answered" if config in comparison.matched else f"{comparison.other}, {config}: {told}")  # fmt: skip
        notes += [f"{comparison.other}: {note}" for note in comparison.notes]
        notes.append(f"{comparison.other}: {comparison.resamples} resamples, seed {comparison.seed}")
    if rows:
        out.append(TableBlock(HEADER, rows, ["detail"] * len(rows)))
    notes += [f"Not compared: {why}" for why in section.refused]
    if notes:
        out.append(Notes(notes))
    path = figures_dir / f"{section.benchmark}-differences.png"
    if rows and figure(section, path):
        out.append(Image(path, f"figures/{path.name}", f"Differences from {section.reference}, 95% paired intervals"))
    return out


def figure(section: Section, path: Path) -> bool:
    """One row per figure and run: B − A with its 95% interval, a line at zero; False where there is none."""
    shown = [(c, d) for c in section.comparisons for d in c.differences if d.low is not None]
    if not shown:
        return False
    plt = _plt()
    fig, axis = plt.subplots(figsize=(8.5, 0.28 * len(shown) + 1.4))
    colours = {c.other: OKABE_ITO[i % len(OKABE_ITO)] for i, c in enumerate(section.comparisons)}
    for place, (comparison, d) in enumerate(reversed(shown)):
        axis.errorbar(d.delta, place, xerr=[[d.delta - d.low], [d.high - d.delta]], fmt="o", capsize=3,
                      color=colours[comparison.other], markerfacecolor=colours[comparison.other] if d.excludes_zero else "white")  # fmt: skip
    axis.axvline(0, color="#444444", linewidth=1)
    axis.set_yticks(range(len(shown)))
    axis.set_yticklabels([f"{c.other}: {d.figure.name}" for c, d in reversed(shown)], fontsize=8)
    axis.set_xlabel(f"difference from {section.reference} (B − A), 95% paired bootstrap interval; filled: excludes 0")
    axis.set_title(f"{section.benchmark}: differences on the same questions", fontsize=10)
    fig.tight_layout()
    _save(fig, plt, path)
    return True


def to_json(found: list[Section]) -> str:
    """differences.json: every section's comparisons, with the seed and resamples, for scripts."""
    data = [{"benchmark": s.benchmark, "reference": s.reference, "refused": list(s.refused),
             "comparisons": [dataclasses.asdict(c) for c in s.comparisons]} for s in found]  # fmt: skip
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"
