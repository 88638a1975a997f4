"""The report folder, written through the one output primitive (``paths.staged``: checked before anything is
written, one writer at a time, built beside its target and swapped in whole; its marker lists its files and their
sha256, so a later report replaces only a folder holding exactly what this one wrote)."""

from __future__ import annotations

from pathlib import Path

from physprobe import paths
from physprobe.errors import ReportError
from physprobe.report.document import document
from physprobe.report.runs import load_run
from physprobe.report.tables import paper_tables
from physprobe.report.writers import to_html, to_markdown

def render(runs: list[Path], out: Path) -> Path:
    """Write the report folder ``out``: report.md, report.html, figures/*.png; return ``out``.

    ``out`` must not exist, be empty, or be a report folder this command wrote before (replaced as a whole);
    anything else is a one-line error and is left untouched. Everything is written to a staging folder beside
    ``out`` and swapped into place, so a failure leaves nothing behind. Runs of several benchmarks give one section per benchmark.
    """
    if not runs:
        raise ReportError("give at least one run folder written by `physprobe score`")
    loaded = [load_run(Path(r)) for r in runs]
    seen = {}
    for run in loaded:
        if run.id in seen:
            raise ReportError(f"{run.folder} and {seen[run.id]} are the same run (the same figures of the same protocol "
                              "on the same rows); give it once")  # fmt: skip
        seen[run.id] = run.folder
    for run in loaded:
        paper_tables(run.record.benchmark)  # unknown benchmarks fail before anything is written
    with paths.staged(out, paths.Owner("report", {})) as staging:
        (staging / "figures").mkdir()
        blocks = document(loaded, staging / "figures")
        (staging / "report.md").write_text(to_markdown(blocks), encoding="utf-8")
        (staging / "report.html").write_text(to_html(blocks), encoding="utf-8")
    return out
