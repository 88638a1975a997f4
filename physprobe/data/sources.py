"""Upstream files of each benchmark: pinned URLs and sha256 sums, fetched or read from a local mirror.

A mirror is a folder laid out like ``../shared/data/upstream``: one sub-folder per benchmark
(``prost/mass.yml``, ``prost/globals/lexicons.yml``, ...). It is chosen by the ``source_dir``
argument (``--source-dir`` on the command line) or the ``PHYSPROBE_SOURCE_DIR`` environment
variable; without either, files are downloaded from their pinned URLs and cached by
``datasets.DownloadManager``. Every file is checked against its sha256 either way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from physprobe.errors import SourceError
from physprobe.util.paths import file_sha256

SOURCE_DIR_ENV = "PHYSPROBE_SOURCE_DIR"
CHECKOUT_MIRROR = "../shared/data/upstream"  # where the project's checkouts keep the mirror, beside the clone


def build_command(benchmark: str, out: str | os.PathLike) -> str:
    """The ``physprobe build`` line a hint names, one that works offline: it reads ``$PHYSPROBE_SOURCE_DIR`` where that
    is set, else names ``--source-dir`` (the checkout's mirror where it is there, else the placeholder ``MIRROR``).

    >>> before = os.environ.get(SOURCE_DIR_ENV); os.environ[SOURCE_DIR_ENV] = "/mirror"
    >>> build_command("prost", "data")
    'physprobe build prost --out data'
    >>> _ = os.environ.pop(SOURCE_DIR_ENV) if before is None else os.environ.update({SOURCE_DIR_ENV: before})
    """
    if os.environ.get(SOURCE_DIR_ENV):
        return f"physprobe build {benchmark} --out {out}"
    if Path(CHECKOUT_MIRROR).is_dir():
        return f"physprobe build {benchmark} --out {out} --source-dir {CHECKOUT_MIRROR}"
    return f"physprobe build {benchmark} --out {out} --source-dir MIRROR"


def build_hint(benchmark: str, out: str | os.PathLike) -> str:
    """``build_command`` quoted for an error line, with what ``MIRROR`` stands for where it is a placeholder.

    >>> os.environ[SOURCE_DIR_ENV] = "/mirror"; build_hint("prost", "data")
    '`physprobe build prost --out data`'
    >>> _ = os.environ.pop(SOURCE_DIR_ENV)
    """
    command = build_command(benchmark, out)
    return f"`{command}`" + (" (MIRROR: a local copy of the pinned upstream files)" if command.endswith(" MIRROR") else "")


@dataclass(frozen=True)
class UpstreamFile:
    """One upstream file: its path inside the benchmark's mirror folder, pinned URL and sha256."""

    path: str
    url: str
    sha256: str


@dataclass(frozen=True)
class Upstream:
    """The pinned upstream release of one benchmark."""

    benchmark: str
    repository: str
    commit: str
    files: tuple[UpstreamFile, ...]


def github_release(benchmark: str, repository: str, commit: str, remote_dir: str, sha256: dict[str, str]) -> Upstream:
    """Describe files of a GitHub repository at a commit, as raw URLs.

    >>> up = github_release("prost", "nala-cub/prost", "32af8d8", "data/prost", {"mass.yml": "e862"})
    >>> up.files[0].url
    'https://raw.githubusercontent.com/nala-cub/prost/32af8d8/data/prost/mass.yml'
    """
    files = tuple(
        UpstreamFile(path, f"https://raw.githubusercontent.com/{repository}/{commit}/{remote_dir}/{path}", digest)
        for path, digest in sha256.items()
    )
    return Upstream(benchmark, repository, commit, files)


def resolve_source_dir(source_dir: str | os.PathLike | None) -> Path | None:
    """The mirror folder to read from: the argument, else ``$PHYSPROBE_SOURCE_DIR`` (unset or empty: None, download).

    >>> resolve_source_dir("")
    Traceback (most recent call last):
    physprobe.errors.SourceError: --source-dir is empty; give the mirror's folder, or leave it out to download the pinned upstream files
    """
    if source_dir is not None and not str(source_dir).strip():  # ``--source-dir ''``: never a silent download
        raise SourceError(
            "--source-dir is empty; give the mirror's folder, or leave it out to download the pinned upstream files"
        )
    chosen = source_dir if source_dir is not None else os.environ.get(SOURCE_DIR_ENV)
    return Path(chosen) if chosen else None


def fetch(upstream: Upstream, source_dir: str | os.PathLike | None = None) -> dict[str, Path]:
    """Local, checksum-verified paths of every file of ``upstream``, keyed by ``UpstreamFile.path``.

    Raises ``SourceError`` naming the file when it is missing, cannot be downloaded, or does
    not match its pinned sha256.
    """
    mirror = resolve_source_dir(source_dir)
    if mirror is not None:
        paths = {}
        for item in upstream.files:
            path = mirror / upstream.benchmark / item.path
            if not path.is_file():
                raise SourceError(f"{upstream.benchmark}: upstream file {item.path} not found at {path}")
            paths[item.path] = path
    else:
        paths = _download(upstream)
    for item in upstream.files:
        actual = file_sha256(paths[item.path])
        if actual != item.sha256:
            raise SourceError(
                f"{upstream.benchmark}: checksum mismatch for {paths[item.path]}: expected sha256 {item.sha256}, got {actual}"
            )
    return paths


def _download(upstream: Upstream) -> dict[str, Path]:
    import datasets

    manager = datasets.DownloadManager(dataset_name=f"physprobe-{upstream.benchmark}")
    paths = {}
    for item in upstream.files:
        try:
            paths[item.path] = Path(manager.download(item.url))
        except Exception as error:  # network, HTTP and file-system errors all surface here
            raise SourceError(
                f"{upstream.benchmark}: could not download upstream file {item.path} from {item.url} "
                f"({type(error).__name__}: {error}); pass --source-dir or set {SOURCE_DIR_ENV} to a local mirror"
            ) from error
    return paths
