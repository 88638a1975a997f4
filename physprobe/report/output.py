"""The report folder, written through the one output primitive (``paths.staged``: checked before anything is
written, one writer at a time, built beside its target and swapped in whole; its marker lists its files and their
sha256, so a later report replaces only a folder holding exactly what this one wrote)."""

from __future__ import annotations

import sys
from pathlib import Path

from physprobe import paths
from physprobe.errors import ReportError, RunRecordError
from physprobe.redact import escaped
from physprobe.report.document import document
from physprobe.report.runs import Run, load_run, name_runs
from physprobe.report.tables import paper_tables
from physprobe.report.writers import to_html, to_markdown

def render(runs: list[Path], out: Path) -> Path:
    """Write the report folder ``out``: report.md, report.html, figures/*.png; return ``out``.

    A folder that is not a finished run (``run_record.load`` refuses it: run.json missing, a failed or
    unfinished run, another schema), a run of an unknown benchmark or a second copy of a run is skipped: one
    line each on stderr once the report is written, and listed in it (a glob such as ``runs/*`` reports the
    finished runs among the folders); none finished is a one-line error. ``out`` must not exist, be empty, or be
    a report folder this command wrote before (replaced as a whole); anything else is a one-line error and is
    left untouched. Everything is written to a staging folder beside ``out`` and swapped into place, so a failure
    leaves nothing behind. Runs of several benchmarks give one section per benchmark.
    """
    loaded, skipped = collect(runs)
    with paths.staged(out, paths.Owner("report", {})) as staging:
        (staging / "figures").mkdir()
        blocks = document(loaded, staging / "figures", skipped)
        (staging / "report.md").write_text(to_markdown(blocks), encoding="utf-8")
        (staging / "report.html").write_text(to_html(blocks), encoding="utf-8")
    for _, why in skipped:
        print(f"physprobe: skipped: {escaped(why)}", file=sys.stderr)
    return out


def collect(runs: list[Path]) -> tuple[list[Run], list[tuple[Path, str]]]:
    """The finished runs among the folders ``runs``, named as a report names them (``name_runs``), and the folders
    skipped, each with why: not a finished run, a benchmark without paper tables, a second copy of a run. None
    finished is a one-line ``ReportError``."""
    if not runs:
        raise ReportError("give at least one run folder written by `physprobe score`")
    loaded, skipped, seen = [], [], {}
    for folder in runs:
        try:
            run = load_run(Path(folder))
            paper_tables(run.record.benchmark)  # an unknown benchmark is skipped before anything is written
        except (RunRecordError, ReportError) as error:
            skipped.append((Path(folder), str(error)))
            continue
        if run.content_key in seen:
            skipped.append((run.folder, f"{run.folder} is the same run as {seen[run.content_key]} (the same figures of the same "
                                        "protocol on the same rows); reported once"))  # fmt: skip
            continue
        seen[run.content_key] = run.folder
        loaded.append(run)
    if not loaded:
        raise ReportError(f"none of the {len(runs)} folder{'s' if len(runs) > 1 else ''} given is a finished physprobe run "
                          f"({skipped[0][1]}{'; ...' if len(skipped) > 1 else ''})")  # fmt: skip
    name_runs(loaded)
    return loaded, skipped
