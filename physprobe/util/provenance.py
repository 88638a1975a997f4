"""What a score depends on and how sure it is: revisions, versions, bootstrap errors.

``run.json`` records, like lm-evaluation-harness's results file, the versions of the libraries that computed a
score, the model's and the dataset's revisions, the protocol, the command line and timings; and every overall
figure of a config gets a seeded bootstrap standard error and 95% interval.

>>> overall_figures({"n": 4, "accuracy": 0.5, "by_group": {"a": {"accuracy": 1.0}}, "strict": {"map": 0.25}})
{'accuracy': 0.5, 'strict.map': 0.25}
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from collections.abc import Callable
from pathlib import Path

from physprobe.errors import PhysprobeError
from physprobe.util.cache_folder import DIGESTS, cache_root

BOOTSTRAP_SEED = 1234
LIBRARIES = ("physprobe", "datasets", "evaluate", "huggingface_hub")  # besides the backends' (``backends.libraries``)


def versions(backend_libraries: tuple[str, ...] = ()) -> dict[str, str | None]:
    """Installed versions of the libraries that shape a score: physprobe's own and ``backend_libraries`` (the
    registered backends', ``physprobe.backends.libraries()``); None where one is not installed."""
    return installed((*LIBRARIES, *backend_libraries))


def installed(names) -> dict[str, str | None]:
    """The installed version of each distribution in ``names`` (None where one is not installed)."""
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def folder_hash(folder: str | os.PathLike) -> str:
    """A content hash of every file in a folder (names and bytes), so a changed local model is a new model.

    Each file's sha256 is read once: the digests are cached by path, size, inode, modification and change time in the
    user's cache folder (``file_digests``), so a second run over a 15 GB model folder reads no weights.

    >>> import tempfile; d = tempfile.mkdtemp(); _ = Path(d, "config.json").write_text("{}")
    >>> before = folder_hash(d); _ = Path(d, "config.json").write_text('{"n_layer": 2}')
    >>> before.startswith("sha256:"), before == folder_hash(d)
    (True, False)
    """
    digest = hashlib.sha256()
    root = Path(folder)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    for path, file_digest in zip(files, file_digests(files), strict=True):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(file_digest)
    return "sha256:" + digest.hexdigest()


def digest_cache() -> Path:
    """Where file digests are cached: ``file_digests.json`` in physprobe's cache folder (``physprobe.util.cache_folder``)."""
    return cache_root() / DIGESTS


def file_digests(paths: list[Path]) -> list[bytes]:
    """The sha256 of each file, read from the digest cache where the file's path, size, inode, modification and change
    times (``st_ctime_ns`` moves on every write, and no program sets it back) are those cached, else hashed and
    cached. A cache that cannot be read or written is only slower: every file is hashed."""
    cache = digest_cache()
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    found, changed = [], False
    for path in paths:
        stat = path.stat()
        key, stamp = str(path.resolve()), [stat.st_size, stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns]
        entry = known.get(key)
        if not (isinstance(entry, dict) and entry.get("stamp") == stamp and len(str(entry.get("sha256"))) == 64):
            with path.open("rb") as handle:
                entry = {"stamp": stamp, "sha256": hashlib.file_digest(handle, "sha256").hexdigest()}
            known[key], changed = entry, True
        found.append(bytes.fromhex(entry["sha256"]))
    if changed:
        from physprobe.util.paths import atomic_file

        known = {key: entry for key, entry in known.items() if Path(key).is_file()}  # files gone since are forgotten
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(cache) as temporary:
                temporary.write_text(json.dumps(known))
        except OSError:
            pass  # a read-only cache folder: the next run hashes again
    return found


def model_revision(name: str, local: bool, revision: str | None, gguf_file: str | None, subfolder: str | None = None) -> str:
    """A local folder's content hash, or (offline) the commit of the Hub model's cached snapshot folder."""
    if local:
        return folder_hash(Path(name).expanduser())
    from huggingface_hub import hf_hub_download

    filename = gguf_file or "config.json"
    path = Path(hf_hub_download(name, filename, revision=revision, subfolder=subfolder))
    for parent in path.parents:
        if parent.parent.name == "snapshots":
            return parent.name
    raise PhysprobeError(f"cannot tell the commit of model {name!r} from its cached file {path}")


def overall_figures(metrics: dict, prefix: str = "") -> dict[str, float]:
    """The overall figures of one config's metrics: floats, one level into modes, no ``by_*`` breakdowns or counts."""
    found = {}
    for key, value in metrics.items():
        if "by_" in key:
            continue
        if isinstance(value, float):
            found[prefix + key] = value
        elif isinstance(value, dict) and not prefix:
            found.update(overall_figures(value, f"{key}."))
    return found


def bootstrap(compute: Callable[[list[int]], dict], n: int, iterations: int, seed: int = BOOTSTRAP_SEED) -> dict[str, dict]:
    """Bootstrap standard error and 95% percentile interval of each overall figure of ``compute``.

    ``compute(indices)`` returns the metrics of the rows at ``indices`` (with repeats); rows are resampled
    ``iterations`` times with a seeded generator, so the same run gives the same intervals.

    The standard error of a mean of 0/1 values is close to sqrt(p (1 - p) / n) = 0.171 for p = 5/8, n = 8:

    >>> values = [1, 0, 1, 1, 0, 1, 0, 1]
    >>> out = bootstrap(lambda idx: {"accuracy": sum(values[i] for i in idx) / len(idx)}, 8, 400, seed=0)
    >>> sorted(out["accuracy"]), abs(out["accuracy"]["stderr"] - 0.171) < 0.02
    (['ci95', 'stderr'], True)
    """
    import numpy as np  # here, not at the top: argument errors stay fast (see tests/test_startup.py)

    rng = np.random.default_rng(seed)
    samples: dict[str, list[float]] = {}
    for _ in range(iterations):
        indices = rng.integers(0, n, size=n).tolist()
        for key, value in overall_figures(compute(indices)).items():
            samples.setdefault(key, []).append(value)
    return {
        key: {
            "stderr": float(np.std(values, ddof=1)),
            "ci95": [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))],
        }
        for key, values in samples.items()
        if len(values) > 1
    }
