"""The report folder: checked before anything is written, built in a staging folder beside it and moved into
place with ``paths.replace_folder``, with a manifest marking it as physprobe's."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from physprobe import paths
from physprobe.errors import ReportError
from physprobe.report.document import document
from physprobe.report.runs import load_run
from physprobe.report.tables import paper_tables
from physprobe.report.writers import to_html, to_markdown

MANIFEST = "physprobe-report.json"  # marks a folder as a report physprobe wrote, listing its files


def _check_out(out: Path) -> None:
    """``--out`` must be a new folder, an empty one, or a report physprobe wrote (nothing else inside)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ReportError(f"--out {out} exists and is not a folder; give a new folder for the report")
    if not out.exists() or not any(out.iterdir()):
        return
    manifest = out / MANIFEST
    try:
        ours = set(json.loads(manifest.read_text())["files"]) | {MANIFEST}
    except (OSError, ValueError, KeyError, TypeError):
        raise ReportError(f"--out {out} is a folder that physprobe report did not write; "
                          "give a new folder (nothing there is touched)") from None  # fmt: skip
    found = {p.relative_to(out).as_posix() for p in out.rglob("*") if not p.is_dir()}
    if found - ours:
        raise ReportError(f"--out {out} holds files physprobe report did not write ({sorted(found - ours)[0]}, ...); "
                          "give a new folder (nothing there is touched)")  # fmt: skip


def render(runs: list[Path], out: Path) -> Path:
    """Write the report folder ``out``: report.md, report.html, figures/*.png; return ``out``.

    ``out`` must not exist, be empty, or be a report folder this command wrote before (replaced as a whole).
    Everything is written to a temporary folder beside ``out`` and renamed into place, so a failure leaves
    nothing behind. Runs of several benchmarks give one section per benchmark.
    """
    if not runs:
        raise ReportError("give at least one run folder written by `physprobe score`")
    loaded = [load_run(Path(r)) for r in runs]
    seen = {}
    for run in loaded:
        if run.id in seen:
            raise ReportError(f"{run.folder} and {seen[run.id]} are the same run (same run.json and metrics.json); give it once")
        seen[run.id] = run.folder
    for run in loaded:
        paper_tables(run.info["benchmark"])  # unknown benchmarks fail before anything is written
    out = Path(out)
    _check_out(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as error:
        raise ReportError(f"cannot write the report folder {out}: {error.strerror}") from None
    try:
        (staging / "figures").mkdir()
        blocks = document(loaded, staging / "figures")
        (staging / "report.md").write_text(to_markdown(blocks), encoding="utf-8")
        (staging / "report.html").write_text(to_html(blocks), encoding="utf-8")
        files = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
        (staging / MANIFEST).write_text(json.dumps({"files": files}, indent=1) + "\n")
        staging.chmod(0o755)
        paths.replace_folder(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out
