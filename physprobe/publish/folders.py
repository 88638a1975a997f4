"""The repo folders ``physprobe publish`` writes and validates before anything touches the network: each benchmark
as a dataset repo (Parquet per config and split + card), each metric as a Space, or the score runs as one dataset
repo (``physprobe.publish.runs``).

A Space holds its metric folder's files as physprobe shipped them: in a git checkout, as committed at ``HEAD``
(``committed_files``); in an installed wheel, the files its ``RECORD`` lists, each checked against the hash recorded
there (``installed_files``). Nothing else in the folder (a stray ``.env``, an edit, a symlink) is published.

>>> RepoFolder("my-runs", "runs", Path("hub/runs/my-runs"), "2 runs").hub_type
'dataset'
"""

from __future__ import annotations

import base64
import doctest
import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from physprobe.errors import PhysprobeError, PublishError
from physprobe.protocols import metric_modules
from physprobe.util.paths import Owner, check_target, staged

METRICS = metric_modules.NAMES


@dataclass(frozen=True)
class RepoFolder:
    """One Hub repo to publish: its name, type and local folder."""

    name: str
    repo_type: str  # "dataset", "space" or "runs" (a dataset repo of score runs)
    folder: Path
    source: str  # for the commit message: where its content comes from

    def repo_id(self, org: str) -> str:
        return f"{org}/{self.name}"

    @property
    def hub_type(self) -> str:
        """The Hub's repo type: a runs repository is a dataset repository."""
        return "dataset" if self.repo_type == "runs" else self.repo_type


def metric_folder(name: str) -> Path:
    """The folder of metric ``name``: its evaluate module, card, ``app.py`` and ``requirements.txt``."""
    return metric_modules.folder(name)


def committed_files(folder: Path) -> dict[str, bytes]:
    """The files of ``folder`` as committed at git's ``HEAD`` (path relative to ``folder`` -> content):
    working-tree edits and untracked files are never published, and a tracked symlink or submodule is a
    ``PublishError`` (its target may lie outside the repository), as is a folder outside a git checkout."""

    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=folder, capture_output=True, check=True).stdout

    try:
        listed = git("ls-tree", "-r", "-z", "HEAD", "--", ".")
    except (OSError, subprocess.CalledProcessError) as error:
        raise PublishError(
            f"{folder}: cannot list its committed files ({error}); publish from a git checkout with a commit"
        ) from None
    files = {}
    for entry in filter(None, listed.decode().split("\0")):
        meta, name = entry.split("\t", 1)
        mode, kind, blob = meta.split()
        if mode not in ("100644", "100755"):
            what = "a symlink" if mode == "120000" else f"not a regular file (git mode {mode})"
            raise PublishError(f"{folder / name} is {what} in git; a Space publishes regular files only: commit the file itself")
        files[name] = git("cat-file", "blob", blob)
    return dict(sorted(files.items()))


def installed_files(folder: Path, distribution: importlib.metadata.Distribution | None = None) -> dict[str, bytes]:
    """The files of ``folder`` that the installed physprobe distribution's ``RECORD`` lists (``__pycache__`` aside),
    each read once and checked against its recorded sha256: a file changed since it was installed, or a symlink, is
    a ``PublishError``, and a file the ``RECORD`` does not list is not published."""
    distribution = distribution or importlib.metadata.distribution("physprobe")
    root = Path(os.path.abspath(folder))
    files = {}
    for entry in distribution.files or ():
        path = Path(os.path.abspath(distribution.locate_file(entry)))
        if root not in path.parents or "__pycache__" in path.parts:
            continue
        if path.is_symlink() or not path.is_file():
            raise PublishError(
                f"{path} is not a regular file; a Space publishes the files physprobe installed: reinstall physprobe"
            )
        content = path.read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
        if entry.hash is None or entry.hash.mode != "sha256" or entry.hash.value != digest:
            raise PublishError(f"{path} changed since physprobe was installed (its sha256 is not the one its RECORD lists); "
                               "reinstall physprobe, or publish from a git checkout")  # fmt: skip
        files[path.relative_to(root).as_posix()] = content
    if not files:
        raise PublishError(f"{folder}: neither committed in a git checkout nor listed by the installed physprobe's RECORD; "
                           "publish from a git checkout or from physprobe installed from its wheel")  # fmt: skip
    return dict(sorted(files.items()))


def space_files(folder: Path) -> dict[str, bytes]:
    """The files a metric's Space publishes: ``committed_files`` where ``folder`` is tracked by git, else
    ``installed_files``."""
    try:
        tracked = subprocess.run(
            ["git", "ls-tree", "--name-only", "HEAD", "--", "."], cwd=folder, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        tracked = b""
    return committed_files(folder) if tracked.strip() else installed_files(folder)


def export(out: Path, source_dir: str | None, only: set[str] | None = None) -> list[RepoFolder]:
    """Build the selected datasets and write the selected metric folders' committed files under ``out``
    (every target folder checked before any is changed)."""
    from physprobe.data.dataset_folder import build, owner
    from physprobe.dataset_scripts import BENCHMARKS

    selected = [name for name in (*BENCHMARKS, *METRICS) if not only or name in only]
    for name in selected:
        if name in BENCHMARKS:
            check_target(out / "datasets" / name, owner(name))
        else:
            check_target(out / "spaces" / name, Owner("space", {"metric": name}))
    repos = []
    for name, benchmark in BENCHMARKS.items():
        if only and name not in only:
            continue
        result = build(benchmark, out / "datasets", source_dir)
        source = f"{benchmark.upstream.repository}@{benchmark.upstream.commit[:12]}"
        repos.append(RepoFolder(name, "dataset", result.path, source))
    for name in METRICS:
        if only and name not in only:
            continue
        target = out / "spaces" / name
        files = space_files(metric_folder(name))
        with staged(target, Owner("space", {"metric": name})) as staging:
            for relative, content in files.items():
                copy = staging / relative
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_bytes(content)
            staging.chmod(0o755)
        repos.append(RepoFolder(name, "space", target, f"metrics/{name}"))
    return repos


def export_runs(out: Path, folders: list[str], name: str, model_id: str | None = None) -> list[RepoFolder]:
    """Write the runs repository ``name`` of the finished runs among ``folders`` under ``out/runs`` (a local model
    published as ``model_id`` where given)."""
    from physprobe.publish import runs

    path = runs.write([Path(f) for f in folders], out / "runs", name, model_id)
    return [RepoFolder(name, "runs", path, f"{len(list((path / 'runs').iterdir()))} physprobe score runs")]


def validate(repo: RepoFolder, cache_dir: Path) -> None:
    """Raise ``PublishError`` naming the folder and what is wrong, if it is not publishable."""
    if repo.repo_type == "runs":
        _validate_runs(repo.folder, cache_dir)
    elif repo.repo_type == "dataset":
        _validate_dataset(repo.folder, cache_dir)
    else:
        _validate_metric(repo.folder)


def unknown_license(repo: RepoFolder) -> str | None:
    """Why a dataset may not be pushed without ``--allow-unknown-license`` (its card states no license), or None."""
    from huggingface_hub import DatasetCard

    if repo.repo_type != "dataset":
        return None
    license_ = DatasetCard.load(repo.folder / "README.md").data.to_dict().get("license")
    if license_ in (None, "unknown"):
        return f"{repo.folder}: the card's license is {license_ or 'missing'!r}; state it, or pass --allow-unknown-license to publish it anyway"
    return None


def _validate_dataset(folder: Path, cache_dir: Path) -> None:
    import datasets
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(folder / "README.md").data.to_dict()
    infos = {info["config_name"]: info for info in card.get("dataset_info", [])}
    for config in card.get("configs", []):
        name = config["config_name"]
        declared = datasets.DatasetInfo._from_yaml_dict(infos[name])
        for split, info in declared.splits.items():
            try:
                loaded = datasets.load_dataset(str(folder), name, split=split, cache_dir=str(cache_dir))
            except Exception as error:  # noqa: BLE001 - any failure of datasets to load the folder is the check's finding
                raise PublishError(f"{folder}: config {name!r} does not load: {type(error).__name__}: {error}") from None
            if loaded.features != declared.features:
                raise PublishError(f"{folder}: config {name!r} has features {loaded.features}, card declares {declared.features}")
            if loaded.num_rows != info.num_examples:
                raise PublishError(f"{folder}: config {name!r} has {loaded.num_rows} rows, card declares {info.num_examples}")


def _validate_runs(folder: Path, cache_dir: Path) -> None:
    """Every run reads back as ``physprobe report`` reads it, and every config loads with its predictions' rows."""
    import datasets
    import pyarrow.parquet as pq
    from huggingface_hub import DatasetCard

    from physprobe.record import run_record

    for config in DatasetCard.load(folder / "README.md").data.configs:
        name = config["config_name"]
        run = folder / "runs" / name
        try:
            run_record.load(run)
            rows = datasets.load_dataset(str(folder), name, split="test", cache_dir=str(cache_dir)).num_rows
        except (PhysprobeError, ValueError, OSError) as error:
            raise PublishError(f"{run}: {error}") from None
        if rows != pq.read_metadata(run / run_record.PREDICTIONS).num_rows:
            raise PublishError(f"{folder}: config {name} loads {rows} rows, its predictions hold another count; write it again")


def _validate_metric(folder: Path) -> None:
    import evaluate

    try:
        metric = evaluate.load(str(folder))
    except Exception as error:  # noqa: BLE001 - any failure of evaluate to load the module is the check's finding
        raise PublishError(f"{folder}: evaluate.load fails: {type(error).__name__}: {error}") from None
    module = sys.modules[type(metric).__module__]
    test = doctest.DocTestParser().get_doctest(module._KWARGS_DESCRIPTION, {}, folder.name, str(folder), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:  # the examples load "metrics/<name>": here, the folder published
        (Path(scratch) / "metrics").symlink_to(Path(os.path.abspath(folder)).parent, target_is_directory=True)
        os.chdir(scratch)
        try:
            runner.run(test, out=lambda text: None)
        finally:
            os.chdir(cwd)
    outcome = runner.summarize(verbose=False)
    if outcome.attempted == 0 or outcome.failed:
        raise PublishError(f"{folder}: {outcome.failed} of {outcome.attempted} docstring examples fail")
