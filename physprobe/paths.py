"""Safe file-system steps shared by every writer: plain output names, folders that never overlap their
inputs, atomic folder replaces, atomic file writes and a lock on a run folder.

>>> check_folder_name("prost", "--out")
'prost'
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import glob
import os
import secrets
import shutil
import socket
import tempfile
import time
from pathlib import Path

from physprobe.errors import DataError, FolderInUse

STAGING = ".staging-"  # folders this module creates beside a target: .<name>.staging-<pid>-<random>
RETIRED = ".retired-"  # the old version, renamed aside while the new one moves in
_MAX_NAME = 100


def check_folder_name(name: object, where: str) -> str:
    """``name`` if it is a plain folder name, else ``DataError`` naming ``where`` (a file and key, an argument).

    Refused: non-strings, empty, ``.``/``..``, path separators, a leading ``~`` or ``.``, control
    characters, more than 100 characters. An output name never becomes a path outside its folder.

    >>> check_folder_name("soft_things", "spec.yaml: name")
    'soft_things'
    >>> check_folder_name("../victim", "spec.yaml: name")
    Traceback (most recent call last):
    physprobe.errors.DataError: spec.yaml: name must be a plain folder name (letters, digits, '-', '_', ' ', '.', not starting with '.' or '~', at most 100 characters), got '../victim'
    """
    ok = (
        isinstance(name, str)
        and 0 < len(name) <= _MAX_NAME
        and name.strip() == name
        and not name.startswith((".", "~"))
        and not any(c in name for c in "/\\:")
        and all(c.isprintable() for c in name)
    )
    if not ok:
        raise DataError(
            f"{where} must be a plain folder name (letters, digits, '-', '_', ' ', '.', not starting with '.' or '~', "
            f"at most {_MAX_NAME} characters), got {name!r}"
        )
    return name


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(out_dir: Path, name: str) -> None:
    """Remove what killed runs left for ``name``: staging folders of dead processes; a retired old
    version is put back when the kill came between the two renames (the target is missing), else removed."""
    target = out_dir / name
    for path in sorted(out_dir.glob(f".{glob.escape(name)}.*")):
        kind, _, rest = path.name[len(name) + 1 :].partition("-")
        pid = rest.split("-", 1)[0]
        if f"{kind}-" not in (STAGING, RETIRED) or not pid.isdigit() or _alive(int(pid)):
            continue
        if f"{kind}-" == RETIRED and not target.exists() and not target.is_symlink():
            path.rename(target)
        else:
            shutil.rmtree(path, ignore_errors=True)


def _exchange(new: Path, target: Path) -> bool:
    """Swap two paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported.

    Written by hand: neither ``os`` nor ``shutil`` exposes the exchange, and it is what makes the replace
    atomic (the target is never missing, not even between two renames)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(new), at_fdcwd, os.fsencode(target), rename_exchange) == 0:
        return True
    if ctypes.get_errno() in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(target))


def replace_folder(staging: Path, target: Path) -> None:
    """Make ``staging`` the folder ``target``: at every instant ``target`` is the complete old or the
    complete new version. The old version is removed afterwards."""
    if not target.exists() and not target.is_symlink():
        staging.rename(target)
        return
    if target.is_symlink() or not target.is_dir():
        raise DataError(f"{target} exists and is not a folder; move it away or choose another --out")
    if _exchange(staging, target):
        shutil.rmtree(staging)  # now holds the old version
        return
    retired = target.parent / f".{target.name}{RETIRED}{os.getpid()}-{secrets.token_hex(4)}"
    target.rename(retired)  # a kill here is repaired by the next run (clean_stale puts it back)
    staging.rename(target)
    shutil.rmtree(retired)


def check_out_dir(out_dir: str | os.PathLike) -> Path:
    """``out_dir`` as a folder that exists (created if needed); ``DataError`` naming it if it is a file,
    a symlink, or cannot be created."""
    out_dir = Path(out_dir)
    if out_dir.is_symlink():
        raise DataError(f"--out {out_dir} is a symlink (to {os.readlink(out_dir)}); pass the real folder instead")
    if out_dir.exists() and not out_dir.is_dir():
        raise DataError(f"--out {out_dir} is a file, not a folder; choose a folder path")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DataError(f"--out {out_dir}: cannot create the folder ({error.strerror}); choose another path") from None
    return out_dir


def check_disjoint(out_dir: str | os.PathLike, source_dir: str | os.PathLike | None) -> None:
    """``DataError`` if the output folder is, is inside, or contains the input folder.

    >>> check_disjoint("build", "../shared/data/upstream")
    >>> check_disjoint("mirror/build", "mirror")
    Traceback (most recent call last):
    physprobe.errors.DataError: --out mirror/build overlaps --source-dir mirror (one is inside the other); write the build to a separate folder
    """
    if source_dir is None:
        return
    out, source = Path(out_dir).resolve(), Path(source_dir).resolve()
    if out == source or source in out.parents or out in source.parents:
        raise DataError(
            f"--out {out_dir} overlaps --source-dir {source_dir} (one is inside the other); write the build to a separate folder"
        )


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike):
    """A unique temporary path beside ``path`` that replaces ``path`` atomically when the block ends
    (two writers never share a temporary name; a failure removes it and leaves ``path`` as it was).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with atomic_file(Path(folder) / "a.json") as temporary:
    ...         _ = temporary.write_text("{}")
    ...     sorted(p.name for p in Path(folder).iterdir())
    ['a.json']
    """
    path = Path(path)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        umask = os.umask(0)
        os.umask(umask)
        temporary.chmod(0o666 & ~umask)  # mkstemp makes it 0600
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


class FolderLock:
    """An exclusive lock on a folder (``fcntl.flock`` on ``<folder>/<name>``), held in a ``with`` block: a
    second holder fails at once naming the first; the lock is released when the block ends, however it ends
    (an exception inside it included), or when its process dies, so a killed run never leaves it stuck.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with FolderLock(Path(folder)):
    ...         FolderLock(Path(folder)).acquire()
    Traceback (most recent call last):
    physprobe.errors.FolderInUse: ... is in use by process ...; wait for it to finish or choose another --out
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with FolderLock(Path(folder)):
    ...         pass
    ...     with FolderLock(Path(folder)) as again:  # released: the same process takes it again
    ...         again.handle is not None
    True
    """

    def __init__(self, folder: Path, name: str = "run.lock"):
        self.path = Path(folder) / name
        self.handle = None

    def acquire(self) -> FolderLock:
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise FolderInUse(f"{self.path.parent} is in use by process {holder}; wait for it to finish or choose another --out") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        handle.flush()
        self.handle = handle
        return self

    def release(self) -> None:
        if self.handle is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()
