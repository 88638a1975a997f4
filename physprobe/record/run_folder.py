"""A ``physprobe score`` run folder's life: where it is, who owns it, its caches and locks, and ``claimed``, the one
owner of its life for a run in one process or many.

A run folder belongs to one model (its name, or a local folder's absolute path) on one benchmark (``owner``): a
second model whose default folder has the same name (``--model A/gpt2`` then ``B/gpt2``: ``runs/gpt2-prost``) is
refused with a one-line error suggesting ``--out``. Besides the results ``physprobe.record.run_record`` writes, it holds
``cache.sqlite`` (the resume cache; ``cache.rank<r>.sqlite`` for data-parallel rank r) and ``run.lock`` (a rank's
``run.rank<r>.lock``) while a run scores.

``claimed(folder, owner)`` is how a run takes its folder, whether it scores in this process (``physprobe.run.runner``)
or launches ranks that do (``physprobe.run.parallel``): the folder (and its missing parents) is created and marked, and
a run that fails before any score reached a cache leaves nothing it created.

>>> default_folder("HuggingFaceTB/SmolLM2-135M", "prost").as_posix()
'runs/SmolLM2-135M-prost'
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from physprobe.errors import OutputFolderError
from physprobe.util.folder_lock import FolderLock
from physprobe.util.paths import MARKER, Owner, check_folder_name, claim


@contextlib.contextmanager
def claimed(out: str | os.PathLike, run_owner: Owner) -> Iterator[Path]:
    """The run folder ``out`` claimed for a run (``open_folder``) and held (its ``run.lock``) from then until the block
    ends: one owner from the first write to the last, whether the run scores in this process or launches ranks that do
    (the launcher holds it for them). A folder another process holds is refused (``FolderInUse``) and left as it is;
    when the block fails before any score reached a cache, the folder and the parents this claim created are removed
    (``discard_unscored``) before the lock is let go, so no clean-up removes a folder another run writes."""
    created = new_folders(Path(out))
    folder = open_folder(Path(out), run_owner)
    try:
        lock = FolderLock(folder, lock_name(0)).acquire()
    except FileNotFoundError:  # removed between its making and its lock (a run that failed before scoring, cleaning up)
        raise OutputFolderError(f"--out {out}: the folder was removed as this run started; run again") from None
    try:
        yield folder
    except BaseException:
        discard_unscored(created)
        raise
    finally:
        lock.release()


def default_folder(model: str, benchmark: str) -> Path:
    """The run folder ``physprobe score`` writes without ``--out``."""
    return Path("runs") / f"{Path(model).name}-{benchmark}"


def cache_file(folder: Path, rank: int = 0) -> Path:
    """The resume cache of data-parallel ``rank`` (rank 0, a single process's, is ``cache.sqlite``)."""
    return folder / ("cache.sqlite" if rank == 0 else f"cache.rank{rank}.sqlite")


def lock_name(rank: int = 0) -> str:
    """The lock file ``rank`` holds in the run folder while it scores."""
    return "run.lock" if rank == 0 else f"run.rank{rank}.lock"


def owner(model: str, benchmark: str, local: bool) -> Owner:
    """The owner of a run folder: the model (a local folder by its absolute path) and the benchmark.

    >>> owner("A/gpt2", "prost", local=False).describe()
    'a run of benchmark prost, model A/gpt2'
    """
    return Owner("run", {"model": os.path.abspath(model) if local else model, "benchmark": benchmark})


def open_folder(out: Path, run_owner: Owner) -> Path:
    """Claim the run folder ``out`` (``paths.claim``): created and marked if new; a folder of another model,
    benchmark or program is a one-line error naming it."""
    check_folder_name(Path(os.path.abspath(out)).name, "--out")
    return claim(out, run_owner)


def new_folders(out: Path) -> list[Path]:
    """``out`` and its parents that do not exist yet (what ``open_folder`` would create), innermost first."""
    out = Path(os.path.abspath(out))
    return [p for p in (out, *out.parents) if not os.path.lexists(p)]


def discard_unscored(created: list[Path]) -> bool:
    """Remove the run folder ``created[0]`` and the parents ``created`` lists (``new_folders``, taken before
    ``open_folder``) when the run folder holds only its marker, locks and caches and no cache holds a score:
    a run refused before scoring (a bad argument found late) leaves nothing it created. Returns whether it did."""
    import shutil
    import sqlite3

    if not created or not created[0].is_dir():
        return False
    for path in created[0].iterdir():
        if path.name == MARKER or (path.name.startswith("run") and path.name.endswith(".lock")):
            continue
        if not (path.name.startswith("cache") and path.suffix == ".sqlite") or path.is_symlink():
            return False
        try:
            with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
                tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if "scores" in tables and db.execute("SELECT count(*) FROM scores").fetchone()[0]:
                    return False
        except sqlite3.Error:
            return False
    shutil.rmtree(created[0])
    for parent in created[1:]:
        with contextlib.suppress(OSError):  # only while empty
            parent.rmdir()
    return True
