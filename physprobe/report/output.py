"""The report folder, written through the one output primitive (``paths.staged``: checked before anything is
written, one writer at a time, built beside its target and swapped in whole; its marker lists its files and their
sha256, so a later report replaces only a folder holding exactly what this one wrote)."""

from __future__ import annotations

import sys
from pathlib import Path

from physprobe.report import differences, explorer, explorer_page, paired
from physprobe.report.document import document
from physprobe.report.runs import collect
from physprobe.report.tables import paper_tables
from physprobe.report.writers import to_html, to_markdown
from physprobe.util import paths
from physprobe.util.redact import escaped

__all__ = ["collect", "render"]


def render(runs: list[Path], out: Path, reference: str | None = None, resamples: int = paired.RESAMPLES,
           across: bool = False) -> Path:  # fmt: skip
    """Write the report folder ``out``: report.md, report.html, figures/*.png and the question explorer of each
    benchmark whose runs hold predictions (explore/<benchmark>.html, ``explorer_page``); return ``out``.

    Two runs or more of a benchmark add its Differences section (``differences.sections``): each against
    ``reference`` (a run's name or folder; default: the benchmark's first run) over ``resamples`` paired bootstrap
    resamples, runs of different protocols or data revisions only with ``across``; its numbers in differences.json.

    A folder that is not a finished run (``run_record.load`` refuses it: run.json missing, a failed or
    unfinished run, another schema), a run of an unknown benchmark or a second copy of a run is skipped: one
    line each on stderr once the report is written, and listed in it (a glob such as ``runs/*`` reports the
    finished runs among the folders); none finished is a one-line error. ``out`` must not exist, be empty, or be
    a report folder this command wrote before (replaced as a whole); anything else is a one-line error and is
    left untouched. Everything is written to a staging folder beside ``out`` and swapped into place, so a failure
    leaves nothing behind (a full disk: one line naming the file of ``out`` it could not write). Runs of several benchmarks give one section per benchmark.
    """
    loaded, skipped = collect(runs)
    compared = differences.sections(loaded, reference, resamples, across)
    explorers = explorer.explorers(loaded)
    with paths.staged(out, paths.Owner("report", {})) as staging:
        (staging / "figures").mkdir()
        blocks = document(loaded, staging / "figures", skipped, compared, explorers)
        if explorers:
            (staging / explorer.FOLDER).mkdir()
        for benchmark, found in explorers.items():
            page = explorer_page.page(found, paper_tables(benchmark).title)
            paths.written(staging / explorer.link(benchmark), page)
        paths.written(staging / "report.md", to_markdown(blocks))
        paths.written(staging / "report.html", to_html(blocks))
        if compared:
            paths.written(staging / differences.JSON, differences.to_json(compared))
    for _, why in skipped:
        print(f"physprobe: skipped: {escaped(why)}", file=sys.stderr)
    return out
