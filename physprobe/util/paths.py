"""Safe file-system steps shared by every writer: plain output names, folders that never overlap their
inputs, the one output primitive (``staged``: an owned folder, written beside its target and swapped in
whole, under ``folder_lock``'s lock) and atomic file writes.

Every folder physprobe writes carries a marker, ``.physprobe-output.json``, naming the kind of output and
its owner (``Owner``): a build of benchmark X, a challenge set, a run of a model on a benchmark, a report,
an lm-eval task folder, a metric's Space; an output written whole (all but a run folder, which grows in place
and keeps what it did not write) also lists its files with their sha256. A folder is written only if it is
absent, empty, or carries the marker of the same owner and holds no file the marker does not vouch for (one
added, or changed since); anything else is a one-line error suggesting another ``--out``, and nothing is
changed. One process writes a given output at a time (a lock beside it, ``.<name>.lock``). Staging folders
and temporary files carry their process id, so the next command writing beside them removes those of
killed processes (``sweep``).

>>> check_folder_name("prost", "--out")
'prost'
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from physprobe.errors import OutputFolderError
from physprobe.util.folder_lock import FolderLock

STAGING = ".staging-"  # folders this module creates beside a target: .<name>.staging-<pid>-<random>
RETIRED = ".retired-"  # the old version, renamed aside while the new one moves in
TEMPORARY = ".tmp-"  # files ``atomic_file`` writes beside their target: .<name>.tmp-<pid>-<random>
MARKER = ".physprobe-output.json"  # the owner of a folder physprobe wrote
_MAX_NAME = 100


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_folder_name(name: object, where: str) -> str:
    """``name`` if it is a plain folder name, else ``OutputFolderError`` naming ``where`` (a file and key, an argument).

    Refused: non-strings, empty, ``.``/``..``, path separators, a leading ``~`` or ``.``, control
    characters, more than 100 characters. An output name never becomes a path outside its folder.

    >>> check_folder_name("soft_things", "spec.yaml: name")
    'soft_things'
    >>> check_folder_name("../victim", "spec.yaml: name")
    Traceback (most recent call last):
    physprobe.errors.OutputFolderError: spec.yaml: name must be a plain folder name (letters, digits, '-', '_', ' ', '.', not starting with '.' or '~', at most 100 characters), got '../victim'
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
        raise OutputFolderError(
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


def sweep(folder: str | os.PathLike) -> None:
    """Remove what killed processes left in ``folder``: staging folders and temporary files of dead
    processes; a retired old version is put back when the kill came between the two renames (its target
    is missing), else removed. Those of live processes are left alone.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     dead = Path(folder) / f".a.json{TEMPORARY}999999999-x"
    ...     _ = dead.write_text("{")
    ...     sweep(folder)
    ...     sorted(p.name for p in Path(folder).iterdir())
    []
    """
    folder = Path(folder)
    if not folder.is_dir() or folder.is_symlink():
        return
    for path in sorted(folder.glob(".*")):
        for kind in (STAGING, RETIRED, TEMPORARY):
            name, found, rest = path.name[1:].rpartition(kind)
            pid = rest.split("-", 1)[0]
            if found and name and pid.isdigit():
                break
        else:
            continue
        if _alive(int(pid)):
            continue
        target = folder / name
        if kind == RETIRED and not target.exists() and not target.is_symlink():
            path.rename(target)
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


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
        raise OutputFolderError(f"{target} exists and is not a folder; move it away or choose another --out")
    if _exchange(staging, target):
        shutil.rmtree(staging)  # now holds the old version
        return
    retired = target.parent / f".{target.name}{RETIRED}{os.getpid()}-{secrets.token_hex(4)}"
    target.rename(retired)  # a kill here is repaired by the next run (sweep puts it back)
    staging.rename(target)
    shutil.rmtree(retired)


@dataclass(frozen=True)
class Owner:
    """Who may replace a folder: a kind of output (``build``, ``challenge``, ``run``, ``report``, ``lm-eval``,
    ``space``) and what it is of (a benchmark, a model and benchmark, ...), as JSON-able values.

    >>> Owner("build", {"benchmark": "prost"}).describe()
    'a build of benchmark prost'
    """

    kind: str
    of: dict

    def describe(self) -> str:
        """The owner in words, for error messages."""
        article = "an" if self.kind[0] in "aeiou" else "a"
        return f"{article} {self.kind}" + (" of " + ", ".join(f"{k} {v}" for k, v in sorted(self.of.items())) if self.of else "")

    def record(self) -> dict:
        """The marker's content."""
        return {"kind": self.kind, "of": self.of}


def _marker(folder: Path) -> dict | None:
    marker = folder / MARKER
    if marker.is_symlink() or not marker.is_file():
        return None
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _marked(folder: Path) -> Owner | None:
    """The owner recorded in ``folder``'s marker; None without a readable one."""
    data = _marker(folder)
    try:
        return Owner(str(data["kind"]), dict(data["of"]))
    except (KeyError, TypeError, ValueError):
        return None


def file_hashes(folder: Path) -> dict[str, str]:
    """Every regular file under ``folder`` (the marker aside) and its sha256, by relative path."""
    return {p.relative_to(folder).as_posix(): file_sha256(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink() and p != folder / MARKER}  # fmt: skip


def _check_vouched(target: Path) -> None:
    """``OutputFolderError`` naming the first entry of ``target`` its marker does not vouch for: a file it does not
    list, or whose sha256 differs (changed since), or anything but files and folders."""
    listed = (_marker(target) or {}).get("files")
    listed = listed if isinstance(listed, dict) else {}
    for path in sorted(target.rglob("*")):
        name = path.relative_to(target).as_posix()
        if path == target / MARKER or (path.is_dir() and not path.is_symlink()):
            continue
        if path.is_symlink() or not path.is_file() or listed.get(name) != file_sha256(path):
            raise OutputFolderError(f"{target} holds {name}, which physprobe did not write there (or which changed since); "
                                    "nothing was changed: move it away or choose another --out")  # fmt: skip


def check_target(target: str | os.PathLike, owner: Owner, carry: bool = False) -> None:
    """``OutputFolderError`` (one line, suggesting another ``--out``) unless ``owner`` may write the folder ``target``:
    it is absent, empty, or carries the marker of the same owner and holds only the files that marker vouches for
    (``carry``: an output that keeps the files it does not write, a run folder, may hold others). Changes nothing, so
    a command writing several folders checks them all first.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = (Path(folder) / "notes.txt").write_text("mine")
    ...     check_target(folder, Owner("report", {}))
    Traceback (most recent call last):
    physprobe.errors.OutputFolderError: ... exists and is not a physprobe output (it holds notes.txt); nothing was changed: move it away or choose another --out
    """
    target = Path(target)
    if target.is_symlink():
        raise OutputFolderError(
            f"{target} is a symlink (to {os.readlink(target)}); physprobe writes no folder through a link: choose another --out"
        )
    if not target.exists():
        return
    if not target.is_dir():
        raise OutputFolderError(f"{target} exists and is not a folder; nothing was changed: move it away or choose another --out")
    found = _marked(target)
    if found == owner:
        if not carry:
            _check_vouched(target)
        return
    if found is not None:
        raise OutputFolderError(f"{target} holds {found.describe()}, not {owner.describe()}; nothing was changed: "
                        "choose another --out (or remove that folder)")  # fmt: skip
    entries = sorted(p.name for p in target.iterdir())
    if entries:
        raise OutputFolderError(f"{target} exists and is not a physprobe output (it holds {entries[0]}); nothing was changed: "
                        "move it away or choose another --out")  # fmt: skip


def check_outside(target: str | os.PathLike, kinds: tuple[str, ...]) -> None:
    """``OutputFolderError`` (one line) where a folder above ``target`` is an output of one of ``kinds``: a build
    replaces its folder whole, so an output inside it would be lost (tests/test_cli_edges.py builds one there)."""
    target = Path(os.path.abspath(target))
    for parent in (p for p in target.parents if (found := _marked(p)) is not None and found.kind in kinds):
        raise OutputFolderError(f"{target} is inside {parent}, {_marked(parent).describe()}; choose an --out outside it")


def _expanded(path: str | os.PathLike) -> Path:
    """``path`` unless it starts with a ``~`` no shell expanded (``--out '~'``): a folder named ``~`` is never
    what was meant, so it is a ``OutputFolderError``.

    >>> _expanded("~/runs")
    Traceback (most recent call last):
    physprobe.errors.OutputFolderError: --out ~/runs starts with '~', which no shell expanded; give the folder's path itself (e.g. $HOME/...)
    """
    if str(path).startswith("~"):
        raise OutputFolderError(
            f"--out {path} starts with '~', which no shell expanded; give the folder's path itself (e.g. $HOME/...)"
        )
    return Path(path)


def mark(folder: Path, owner: Owner, files: dict[str, str] | None = None) -> None:
    """Write ``owner``'s marker into ``folder`` (atomically), listing ``files`` (relative path: sha256) if given."""
    record = owner.record() if files is None else {**owner.record(), "files": files}
    with atomic_file(folder / MARKER) as temporary:
        temporary.write_text(json.dumps(record, sort_keys=True) + "\n", encoding="utf-8")


def claim(folder: str | os.PathLike, owner: Owner) -> Path:
    """Make ``folder`` ``owner``'s, for outputs that grow in place (a run folder's cache): checked by
    ``check_target``, created if absent, marked; its parent swept of what killed runs left."""
    folder = _expanded(folder)
    check_target(folder, owner, carry=True)
    check_out_dir(folder.parent)
    sweep(folder.parent)
    folder.mkdir(exist_ok=True)
    sweep(folder)
    if _marked(folder) != owner:
        mark(folder, owner)
    return folder


@contextlib.contextmanager
def staged(target: str | os.PathLike, owner: Owner, carry: bool = False):
    """The one way physprobe writes an output folder: a fresh folder beside ``target`` (yielded) that
    replaces ``target`` whole when the block ends, marked as ``owner``'s (the marker lists the files written and
    their sha256); on any failure it vanishes and ``target`` is untouched. ``target`` must pass ``check_target``
    (checked before the block runs); what killed runs left beside it is removed first; an ``OSError`` raised in the
    block names the file of ``target`` it was writing (``written``), never the staging folder. ``carry``: whatever the old
    ``target`` holds that the new version does not write is kept (``_carried``: a run folder's cache and lock stay
    the same files, a user's notes, folders and links stay as they are).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with staged(Path(folder) / "tasks", Owner("lm-eval", {})) as staging:
    ...         _ = (staging / "README.md").write_text("hi")
    ...     sorted(p.name for p in (Path(folder) / "tasks").iterdir())
    ['.physprobe-output.json', 'README.md']
    """
    target = Path(os.path.abspath(_expanded(target)))  # a relative name such as ``s3:x`` is a local folder, never a URI
    check_folder_name(target.name, "--out")
    check_target(target, owner, carry)
    parent = check_out_dir(target.parent)
    with FolderLock(parent, f".{target.name}.lock", target, transient=True):  # one writer of ``target`` at a time
        check_target(target, owner, carry)  # as it is now that no other writer can change it
        sweep(parent)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}{STAGING}{os.getpid()}-", dir=parent))
        try:
            umask = os.umask(0)
            os.umask(umask)
            staging.chmod(0o777 & ~umask)  # mkdtemp makes it 0700; an output gets normal permissions
            yield staging
            mark(staging, owner, file_hashes(staging))
            if carry and target.is_dir() and not target.is_symlink():
                for path in sorted(target.iterdir()):
                    if not os.path.lexists(staging / path.name):
                        _carried(path, staging / path.name)
            replace_folder(staging, target)
        except OSError as error:  # a full disk: named by the file of ``target`` it was writing, never the staging path
            shutil.rmtree(staging, ignore_errors=True)
            named = Path(error.filename) if error.filename else None
            named = target / named.relative_to(staging) if named and named.is_relative_to(staging) else named
            raise OSError(error.errno, error.strerror or str(error), str(named or target)) from None
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise


def written(path: Path, data: str | bytes) -> None:
    """``path`` written with ``data`` (text as UTF-8); an ``OSError`` (a full disk: a failed write names no file) names
    ``path``."""
    try:
        path.write_text(data, encoding="utf-8") if isinstance(data, str) else path.write_bytes(data)
    except OSError as error:
        raise OSError(error.errno, error.strerror or str(error), str(path)) from None


def _carried(path: Path, copy: Path) -> None:
    """``path`` (an entry of an output folder that keeps what it does not write) at ``copy`` in its next version, the
    same data without a byte copied: a file (of any kind) as a hard link, a symlink as a symlink to the same target,
    a folder as a copy of its tree made of hard links and symlinks. The old version stays whole until the swap, so a
    kill at any point leaves one complete version holding it.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     notes = Path(folder, "old", "notes"); notes.mkdir(parents=True); _ = (notes / "a.txt").write_text("mine")
    ...     _carried(notes, Path(folder, "notes-kept"))
    ...     (Path(folder, "notes-kept", "a.txt").read_text(), (notes / "a.txt").stat().st_nlink)
    ('mine', 2)
    """
    if path.is_symlink():
        os.symlink(os.readlink(path), copy)
    elif path.is_dir():
        shutil.copytree(path, copy, symlinks=True, copy_function=os.link)
    else:
        os.link(path, copy)


def vouched(folder: str | os.PathLike) -> tuple[Owner | None, dict[str, str]]:
    """The owner ``folder``'s marker names (None without a readable marker) and the files it lists as written there,
    each with its sha256 (empty where it lists none).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     mark(Path(folder), Owner("report", {}), {"report.md": "ab12"})
    ...     vouched(folder)
    (Owner(kind='report', of={}), {'report.md': 'ab12'})
    """
    listed = (_marker(Path(folder)) or {}).get("files")
    files = {k: v for k, v in listed.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(listed, dict) else {}
    return _marked(Path(folder)), files


def check_out_dir(out_dir: str | os.PathLike) -> Path:
    """``out_dir`` as a folder that exists (created if needed); ``OutputFolderError`` naming it if it is a file,
    a symlink, or cannot be created."""
    out_dir = Path(out_dir)
    if out_dir.is_symlink():
        raise OutputFolderError(f"--out {out_dir} is a symlink (to {os.readlink(out_dir)}); pass the real folder instead")
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputFolderError(f"--out {out_dir} is a file, not a folder; choose a folder path")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputFolderError(f"--out {out_dir}: cannot create the folder ({error.strerror}); choose another path") from None
    return out_dir


def check_disjoint(out_dir: str | os.PathLike, source_dir: str | os.PathLike | None) -> None:
    """``OutputFolderError`` if the output folder is, is inside, or contains the input folder.

    >>> check_disjoint("build", "../shared/data/upstream")
    >>> check_disjoint("mirror/build", "mirror")
    Traceback (most recent call last):
    physprobe.errors.OutputFolderError: --out mirror/build overlaps --source-dir mirror (one is inside the other); write the build to a separate folder
    """
    if source_dir is None:
        return
    out, source = Path(out_dir).resolve(), Path(source_dir).resolve()
    if out == source or source in out.parents or out in source.parents:
        raise OutputFolderError(
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
    handle, name = tempfile.mkstemp(prefix=f".{path.name}{TEMPORARY}{os.getpid()}-", dir=path.parent)
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
