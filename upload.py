"""Build the four benchmarks and three metrics into Hub-ready repo folders, validate them, and push them.

    python upload.py --out build/hub                                  # dry run: build and validate, no network
    python upload.py --out build/hub --push [--org physprobe] [--only prost,newton] [--tag v0.1.0]

Datasets become dataset repos (Parquet per config and split + card), metrics become Spaces (the evaluate
module, its card, ``app.py`` and ``requirements.txt``). Every folder is validated before anything is pushed:
each dataset config must load with ``datasets.load_dataset`` with the features and row counts its card
declares, and each metric must load with ``evaluate.load`` and pass its docstring examples. Pushing makes
one commit per repo with exactly the files that changed (stale files of earlier layouts are deleted), none
when nothing changed, and optionally a tag so users can pin ``revision="v0.1.0"``. The token comes from
``HF_TOKEN`` or the huggingface_hub login and is never printed.
"""

from __future__ import annotations

import argparse
import doctest
import hashlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import datasets
import evaluate
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, DatasetCard, HfApi, get_token

import physprobe
from physprobe.dataset_scripts import BENCHMARKS
from physprobe.errors import PhysprobeError
from physprobe.export import build

ROOT = Path(__file__).resolve().parent
METRICS = ("agreement_accuracy", "affordance_rank", "probe_accuracy")
KEEP_REMOTE = {".gitattributes"}  # files the Hub creates; never deleted


class PublishError(PhysprobeError):
    """A repo folder failed validation, or the Hub refused an operation."""


@dataclass(frozen=True)
class RepoFolder:
    """One Hub repo to publish: its name, type and local folder."""

    name: str
    repo_type: str  # "dataset" or "space"
    folder: Path
    source: str  # for the commit message: where its content comes from

    def repo_id(self, org: str) -> str:
        return f"{org}/{self.name}"


def export(out: Path, source_dir: str | None, only: set[str] | None = None) -> list[RepoFolder]:
    """Build the selected datasets and copy the selected metric folders under ``out``."""
    repos = []
    for name, benchmark in BENCHMARKS.items():
        if only and name not in only:
            continue
        result = build(benchmark, out / "datasets", source_dir)
        source = f"{benchmark.upstream.repository}@{benchmark.upstream.commit[:12]}" if benchmark.upstream else "paper sample"
        repos.append(RepoFolder(name, "dataset", result.path, source))
    for name in METRICS:
        if only and name not in only:
            continue
        target = out / "spaces" / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(ROOT / "metrics" / name, target, ignore=shutil.ignore_patterns("__pycache__"))
        repos.append(RepoFolder(name, "space", target, f"metrics/{name}"))
    return repos


def validate(repo: RepoFolder, cache_dir: Path) -> None:
    """Raise ``PublishError`` naming the folder and what is wrong, if it is not publishable."""
    if repo.repo_type == "dataset":
        _validate_dataset(repo.folder, cache_dir)
    else:
        _validate_metric(repo.folder)


def _validate_dataset(folder: Path, cache_dir: Path) -> None:
    card = DatasetCard.load(folder / "README.md").data.to_dict()
    infos = {info["config_name"]: info for info in card.get("dataset_info", [])}
    for config in card.get("configs", []):
        name = config["config_name"]
        declared = datasets.DatasetInfo._from_yaml_dict(infos[name])
        for split, info in declared.splits.items():
            try:
                loaded = datasets.load_dataset(str(folder), name, split=split, cache_dir=str(cache_dir))
            except Exception as error:
                raise PublishError(f"{folder}: config {name!r} does not load: {type(error).__name__}: {error}") from None
            if loaded.features != declared.features:
                raise PublishError(f"{folder}: config {name!r} has features {loaded.features}, card declares {declared.features}")
            if loaded.num_rows != info.num_examples:
                raise PublishError(f"{folder}: config {name!r} has {loaded.num_rows} rows, card declares {info.num_examples}")


def _validate_metric(folder: Path) -> None:
    try:
        metric = evaluate.load(str(folder))
    except Exception as error:
        raise PublishError(f"{folder}: evaluate.load fails: {type(error).__name__}: {error}") from None
    module = sys.modules[type(metric).__module__]
    test = doctest.DocTestParser().get_doctest(module._KWARGS_DESCRIPTION, {}, folder.name, str(folder), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    cwd = os.getcwd()
    os.chdir(ROOT)  # the examples load "metrics/<name>" by relative path
    try:
        runner.run(test, out=lambda text: None)
    finally:
        os.chdir(cwd)
    outcome = runner.summarize(verbose=False)
    if outcome.attempted == 0 or outcome.failed:
        raise PublishError(f"{folder}: {outcome.failed} of {outcome.attempted} docstring examples fail")


# --- push -----------------------------------------------------------------------------------
def git_blob_id(data: bytes) -> str:
    """The git object id of a file's bytes, as the Hub reports ``blob_id`` for non-LFS files.

    >>> git_blob_id(b"hello\\n")
    'ce013625030ba8dba906f756967f9e9ca394464a'
    """
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def plan(folder: Path, remote_files: list) -> list:
    """The commit operations that make the remote repo hold exactly ``folder``'s files.

    ``remote_files`` are ``RepoFile``-like objects (``path``, ``blob_id``, ``lfs`` with ``sha256``).
    Unchanged files are skipped; remote files absent locally are deleted, except ``.gitattributes``.
    """
    local = {path.relative_to(folder).as_posix(): path for path in sorted(folder.rglob("*")) if path.is_file()}
    remote = {item.path: item for item in remote_files}
    operations = []
    for path_in_repo, path in local.items():
        item = remote.get(path_in_repo)
        data = path.read_bytes()
        if item is not None:
            lfs = getattr(item, "lfs", None)
            if lfs is not None and lfs["sha256"] == hashlib.sha256(data).hexdigest():
                continue
            if lfs is None and item.blob_id == git_blob_id(data):
                continue
        operations.append(CommitOperationAdd(path_in_repo=path_in_repo, path_or_fileobj=str(path)))
    operations += [
        CommitOperationDelete(path_in_repo=path) for path in sorted(remote) if path not in local and path not in KEEP_REMOTE
    ]
    return operations


def resolve_token() -> str:
    """The Hub token from ``HF_TOKEN`` or the huggingface_hub login; an error (without the token) if none."""
    token = os.environ.get("HF_TOKEN") or get_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN or run `hf auth login` with a write token")
    return token


def check_write_access(api, token: str) -> None:
    """Fail clearly when the token is invalid or read-only (the token itself is never shown)."""
    try:
        identity = api.whoami(token=token)
    except Exception as error:
        raise PublishError(f"the Hugging Face token was rejected ({type(error).__name__})") from None
    role = identity.get("auth", {}).get("accessToken", {}).get("role")
    if role == "read":
        raise PublishError(f"the Hugging Face token of {identity.get('name', '?')} is read-only; a write token is needed")


def push(repos: list[RepoFolder], api, org: str, token: str, tag: str | None = None) -> dict[str, str]:
    """Create, update and tag every repo; returns what happened to each (``committed``/``unchanged``)."""
    outcome = {}
    for repo in repos:
        repo_id = repo.repo_id(org)
        extra = {"space_sdk": "gradio"} if repo.repo_type == "space" else {}
        api.create_repo(repo_id, repo_type=repo.repo_type, exist_ok=True, token=token, **extra)
        remote = [item for item in api.list_repo_tree(repo_id, recursive=True, repo_type=repo.repo_type, token=token)
                  if hasattr(item, "blob_id")]  # fmt: skip
        operations = plan(repo.folder, remote)
        if operations:
            message = f"physprobe {physprobe.__version__}: {repo.name} from {repo.source}"
            api.create_commit(repo_id, operations, commit_message=message, repo_type=repo.repo_type, token=token)
            outcome[repo_id] = "committed"
        else:
            outcome[repo_id] = "unchanged"
        if tag:
            tags = {ref.name for ref in api.list_repo_refs(repo_id, repo_type=repo.repo_type, token=token).tags}
            if tag not in tags:
                api.create_tag(repo_id, tag=tag, repo_type=repo.repo_type, token=token)
    return outcome


def main(argv: list[str] | None = None, api=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/hub", help="where the repo folders are written (default: build/hub)")
    parser.add_argument("--source-dir", help="local mirror of the upstream files (default: $PHYSPROBE_SOURCE_DIR, else download)")
    parser.add_argument("--push", action="store_true", help="upload to the Hub (without it nothing touches the network)")
    parser.add_argument("--org", default="physprobe")
    parser.add_argument("--only", help="comma-separated repo names, e.g. prost,newton,probe_accuracy")
    parser.add_argument("--tag", help="tag every pushed repo, e.g. v0.1.0")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    known = set(BENCHMARKS) | set(METRICS)
    if only and only - known:
        parser.error(f"--only names unknown repo(s) {sorted(only - known)}; known: {sorted(known)}")
    try:
        token = resolve_token() if args.push else None
        out = Path(args.out)
        repos = export(out, args.source_dir, only)
        datasets.disable_progress_bars()  # one line per validated repo instead
        with tempfile.TemporaryDirectory() as cache:
            for repo in repos:
                validate(repo, Path(cache))
                print(f"validated {repo.repo_type:<8} {repo.name:<20} {repo.folder}")
        if args.push:
            api = api or HfApi()
            check_write_access(api, token)
            for repo_id, what in push(repos, api, args.org, token, args.tag).items():
                print(f"{what:<10} {repo_id}")
        else:
            print(f"dry run: {len(repos)} repo folders in {out}; nothing pushed (use --push)")
    except PhysprobeError as error:
        print(f"upload.py: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
