"""Build the benchmarks and metrics into Hub-ready repo folders, validate them, and publish them.

    python upload.py --out build/hub                                  # dry run: build and validate, no network
    python upload.py --out build/hub --push [--org physprobe] [--only prost,newton] [--tag v0.1.0]
    python upload.py --runs runs/* --runs-repo my-runs --push --org ME  # score runs, as one dataset repo

Datasets become dataset repos (Parquet per config and split + card), metrics become Spaces (the files of
``metrics/<name>/`` as committed at git's HEAD: the evaluate module, its card, ``app.py``, ``requirements.txt``;
nothing untracked such as a stray ``.env``, no uncommitted edit, no symlink). Repo ids, ``--org``, the network
mode and the token are checked before any work, and every output folder before any is written. Every folder is validated before anything touches the network: each
dataset config must load with ``datasets.load_dataset`` with the features and row counts its card declares,
a dataset whose card license is ``unknown`` is refused unless ``--allow-unknown-license``, and each metric
must load with ``evaluate.load`` and pass its docstring examples.

``--runs FOLDER ...`` publishes score runs instead: the finished runs among the folders become one dataset
repository (``physprobe.runs_repo``: each run's ``run.json``, ``metrics.json`` and predictions as a dataset
config, the report as its card), validated by loading every config and reading every run back. The repository
holds exactly the runs given (give them all each time).

Publishing uses huggingface_hub's own ``upload_folder`` (``delete_patterns="*"``: stale remote files are
deleted, unchanged files skipped, no empty commits). It reports each repository as it goes, retries
transient errors (5xx, 429, timeouts, dropped connections) with backoff, and creates the ``--tag`` on every
repository only after all of them were published, so re-running the same command completes exactly what is
missing. The last line says what state the release is in. The token comes from ``HF_TOKEN`` or the
huggingface_hub login and is never printed.
"""

from __future__ import annotations

import argparse
import doctest
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import datasets
import evaluate
import httpx2  # the HTTP client of huggingface_hub 2.x: its transport errors are the network failures
from huggingface_hub import DatasetCard, HfApi, constants, get_token
from huggingface_hub.errors import HfHubHTTPError, HFValidationError
from huggingface_hub.utils import validate_repo_id

import physprobe
from physprobe import metric_modules, run_record, runs_repo
from physprobe.dataset_scripts import BENCHMARKS
from physprobe.errors import PhysprobeError, PublishError
from physprobe.dataset_folder import build, owner
from physprobe.paths import MARKER, Owner, check_disjoint, check_target, staged
from physprobe.retries import TRANSIENT_STATUS, retried
from physprobe.sources import resolve_source_dir

ROOT = Path(__file__).resolve().parent
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


def committed_files(folder: Path) -> dict[str, bytes]:
    """The files of ``folder`` as committed at git's ``HEAD`` (path relative to ``folder`` -> content):
    working-tree edits and untracked files are never published, and a tracked symlink or submodule is a
    ``PublishError`` (its target may lie outside the repository), as is a folder outside a git checkout."""
    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=folder, capture_output=True, check=True).stdout

    try:
        listed = git("ls-tree", "-r", "-z", "HEAD", "--", ".")
    except (OSError, subprocess.CalledProcessError) as error:
        raise PublishError(f"{folder}: cannot list its committed files ({error}); publish from a git checkout with a commit") from None
    files = {}
    for entry in filter(None, listed.decode().split("\0")):
        meta, name = entry.split("\t", 1)
        mode, kind, blob = meta.split()
        if mode not in ("100644", "100755"):
            what = "a symlink" if mode == "120000" else f"not a regular file (git mode {mode})"
            raise PublishError(f"{folder / name} is {what} in git; a Space publishes regular files only: commit the file itself")
        files[name] = git("cat-file", "blob", blob)
    return dict(sorted(files.items()))


def check_repo_ids(org: str, names: list[str]) -> None:
    """``PublishError`` for an ``--org`` or repo name the Hub refuses, before any work is done.

    >>> check_repo_ids("physprobe", ["prost"])
    >>> check_repo_ids("my org", ["prost"])
    Traceback (most recent call last):
    upload.PublishError: --org 'my org': my org/prost is not a valid Hub repo id (Repo id must use alphanumeric chars, '-', '_' or '.'...)
    """
    for name in names:
        try:
            validate_repo_id(f"{org}/{name}")
        except HFValidationError as error:
            reason = str(error).split(". ")[0]
            raise PublishError(f"--org {org!r}: {org}/{name} is not a valid Hub repo id ({reason}...)") from None


def export(out: Path, source_dir: str | None, only: set[str] | None = None) -> list[RepoFolder]:
    """Build the selected datasets and write the selected metric folders' committed files under ``out``
    (every target folder checked before any is changed)."""
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
        files = committed_files(ROOT / "metrics" / name)
        with staged(target, Owner("space", {"metric": name})) as staging:
            for relative, content in files.items():
                copy = staging / relative
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_bytes(content)
            staging.chmod(0o755)
        repos.append(RepoFolder(name, "space", target, f"metrics/{name}"))
    return repos


def export_runs(out: Path, folders: list[str], name: str) -> list[RepoFolder]:
    """Write the runs repository ``name`` of the finished runs among ``folders`` under ``out/runs``."""
    path = runs_repo.write([Path(f) for f in folders], out / "runs", name)
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
    if repo.repo_type != "dataset":
        return None
    license_ = DatasetCard.load(repo.folder / "README.md").data.to_dict().get("license")
    if license_ in (None, "unknown"):
        return f"{repo.folder}: the card's license is {license_ or 'missing'!r}; state it, or pass --allow-unknown-license to publish it anyway"
    return None


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


def _validate_runs(folder: Path, cache_dir: Path) -> None:
    """Every run reads back as ``physprobe report`` reads it, and every config loads with its predictions' rows."""
    import pyarrow.parquet as pq

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
RETRY_DELAYS = (2.0, 8.0, 30.0)  # seconds before each retry of a transient error


def is_transient(error: BaseException) -> bool:
    """True for errors worth retrying: server errors, rate limits, timeouts, dropped connections."""
    if isinstance(error, HfHubHTTPError) and error.response is not None:
        return error.response.status_code in TRANSIENT_STATUS
    return isinstance(error, httpx2.TransportError)


def describe(error: BaseException, endpoint: str | None = None) -> str:
    """One line for a failed Hub call: the HTTP status or the network failure, never a traceback."""
    if isinstance(error, HfHubHTTPError) and error.response is not None:
        return f"HTTP {error.response.status_code} from the Hub ({str(error).splitlines()[0]})"
    if isinstance(error, httpx2.TransportError):
        return f"cannot reach the Hub at {endpoint or constants.ENDPOINT} ({type(error).__name__}: {error}); check the network or HF_ENDPOINT"
    return f"{type(error).__name__}: {error}"


def with_retries(call, what: str, log=print):
    """``call()``, retried after ``RETRY_DELAYS`` while it fails with a transient error (``physprobe.retries``)."""

    def note(attempt: int, delay: float, error: BaseException) -> None:
        log(f"retrying  {what} in {delay:g} s (attempt {attempt} failed: {describe(error)})")

    return retried(call, is_transient, RETRY_DELAYS, note)


def publish(repo: RepoFolder, api, org: str, token: str, log=print) -> str:
    """Create ``repo`` if needed and make it hold exactly its folder's files; ``committed`` or ``unchanged``."""
    repo_id, kind = repo.repo_id(org), repo.hub_type
    extra = {"space_sdk": "gradio"} if kind == "space" else {}
    with_retries(lambda: api.create_repo(repo_id, repo_type=kind, exist_ok=True, token=token, **extra), repo_id, log)
    before = with_retries(lambda: api.repo_info(repo_id, repo_type=kind, token=token).sha, repo_id, log)
    info = with_retries(
        lambda: api.upload_folder(
            repo_id=repo_id, folder_path=repo.folder, repo_type=kind, token=token, delete_patterns="*",
            ignore_patterns=[MARKER],  # physprobe's local ownership marker is not part of the repo
            commit_message=f"physprobe {physprobe.__version__}: {repo.name} from {repo.source}",
        ),
        repo_id, log,
    )  # fmt: skip
    return "unchanged" if info.oid == before else "committed"


def tag_all(repos: list[RepoFolder], api, org: str, token: str, tag: str, log=print) -> None:
    """Tag the head of every repository (those already tagged there are left); refuses a tag that names
    another commit, so a release never mixes versions."""
    heads, already = {}, set()
    for repo in repos:
        repo_id = repo.repo_id(org)
        heads[repo_id] = with_retries(lambda: api.repo_info(repo_id, repo_type=repo.hub_type, token=token).sha, repo_id, log)
        refs = with_retries(lambda: api.list_repo_refs(repo_id, repo_type=repo.hub_type, token=token), repo_id, log)
        existing = {ref.name: ref.target_commit for ref in refs.tags}
        if tag in existing and existing[tag] != heads[repo_id]:
            raise PublishError(f"tag {tag} of {repo_id} names commit {existing[tag][:12]}, not the published {heads[repo_id][:12]}; choose a new --tag")
        if tag in existing:
            already.add(repo_id)
    for repo in repos:
        repo_id = repo.repo_id(org)
        if repo_id in already:
            log(f"tagged     {repo_id} (already {tag})")
            continue
        with_retries(lambda: api.create_tag(repo_id, tag=tag, revision=heads[repo_id], repo_type=repo.hub_type, token=token), repo_id, log)
        log(f"tagged     {repo_id} {tag}")


def push(repos: list[RepoFolder], api, org: str, token: str, tag: str | None = None, log=print) -> dict[str, str]:
    """Publish every repo, reporting each as it is done, then tag them all (only if every one succeeded).

    Returns each repository's state (``committed``/``unchanged``/``failed: ...``); a failure does not stop
    the others, so a re-run has only the failed ones left to do.
    """
    states = {}
    for repo in repos:
        repo_id = repo.repo_id(org)
        try:
            states[repo_id] = publish(repo, api, org, token, log)
        except (HfHubHTTPError, httpx2.HTTPError) as error:
            states[repo_id] = f"failed: {describe(error, api.endpoint)}"
        log(f"{states[repo_id].split(':')[0]:<10} {repo_id}" + (f": {states[repo_id][8:]}" if states[repo_id].startswith("failed") else ""))
    if tag and not any(state.startswith("failed") for state in states.values()):
        try:
            tag_all(repos, api, org, token, tag, log)
        except (HfHubHTTPError, httpx2.HTTPError) as error:
            states["tag"] = f"failed: {describe(error, api.endpoint)}"
    return states


def release_line(states: dict[str, str], tag: str | None) -> str:
    """The last line of a push: what state the release is in and what to do next."""
    failed = sorted(repo for repo, state in states.items() if state.startswith("failed"))
    published = len([repo for repo in states if repo != "tag" and repo not in failed])
    total = len([repo for repo in states if repo != "tag"])
    if failed:
        untagged = f"; tag {tag} not created" if tag else ""
        return (f"release INCOMPLETE: {published} of {total} repositories published{untagged}; failed: {', '.join(failed)}. "
                "Re-run the same command to finish")  # fmt: skip
    return f"release complete: {total} of {total} repositories published" + (f" and tagged {tag}" if tag else "")


def resolve_token() -> str:
    """The Hub token from ``HF_TOKEN`` or the huggingface_hub login; an error (without the token) if none."""
    token = os.environ.get("HF_TOKEN") or get_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN or run `hf auth login` with a write token")
    return token


def check_write_access(api, token: str) -> None:
    """Fail clearly when the Hub cannot be reached, or the token is invalid or read-only (never shown)."""
    try:
        identity = with_retries(lambda: api.whoami(token=token), "whoami")
    except HfHubHTTPError as error:
        if error.response is not None and error.response.status_code in (401, 403):
            raise PublishError(f"the Hugging Face token was rejected (HTTP {error.response.status_code}); use a valid write token") from None
        raise PublishError(f"cannot check the token: {describe(error, api.endpoint)}") from None
    except httpx2.HTTPError as error:
        raise PublishError(describe(error, api.endpoint)) from None
    role = identity.get("auth", {}).get("accessToken", {}).get("role")
    if role == "read":
        raise PublishError(f"the Hugging Face token of {identity.get('name', '?')} is read-only; a write token is needed")


def main(argv: list[str] | None = None, api=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/hub", help="where the repo folders are written (default: build/hub)")
    parser.add_argument("--source-dir", help="local mirror of the upstream files (default: $PHYSPROBE_SOURCE_DIR, else download)")
    parser.add_argument("--push", action="store_true", help="upload to the Hub (without it nothing touches the network)")
    parser.add_argument("--org", default="physprobe")
    parser.add_argument("--only", help="comma-separated repo names, e.g. prost,newton,probe_accuracy")
    parser.add_argument("--tag", help="tag every repo once all are published, e.g. v0.1.0")
    parser.add_argument("--allow-unknown-license", action="store_true", help="publish datasets whose card license is unknown")
    parser.add_argument("--runs", nargs="+", metavar="FOLDER", help="publish these score run folders as one dataset repo instead")
    parser.add_argument("--runs-repo", default="physprobe-runs", help="the runs repository's name (default: physprobe-runs)")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    known = set(BENCHMARKS) | set(METRICS)
    if only and only - known:
        parser.error(f"--only names unknown repo(s) {sorted(only - known)}; known: {sorted(known)}")
    if args.runs and (only or args.tag):
        parser.error("--runs publishes only the runs repository: leave out --only and --tag")
    try:
        check_repo_ids(args.org, [args.runs_repo] if args.runs else sorted(only or known))
        check_disjoint(args.out, resolve_source_dir(args.source_dir))
        if args.push and constants.HF_HUB_OFFLINE:
            raise PublishError("--push needs the network, but HF_HUB_OFFLINE is set; unset it, or leave out --push for a dry run")
        token = resolve_token() if args.push else None
        out = Path(args.out)
        repos = export_runs(out, args.runs, args.runs_repo) if args.runs else export(out, args.source_dir, only)
        datasets.disable_progress_bars()  # one line per validated repo instead
        with tempfile.TemporaryDirectory() as cache:
            for repo in repos:
                validate(repo, Path(cache))
                print(f"validated {repo.repo_type:<8} {repo.name:<20} {repo.folder}")
        for problem in filter(None, map(unknown_license, repos)):
            if args.push and not args.allow_unknown_license:
                raise PublishError(problem)
            print(f"note: {problem}")
        if not args.push:
            print(f"dry run: {len(repos)} repo folders in {out}; nothing pushed (use --push)")
            return 0
        api = api or HfApi()
        check_write_access(api, token)
        states = push(repos, api, args.org, token, args.tag, log=lambda line: print(line, flush=True))
    except PhysprobeError as error:
        print(f"upload.py: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("upload.py: interrupted; no output folder was half-written and earlier ones are intact", file=sys.stderr)
        return 130
    print(release_line(states, args.tag))
    return 0 if not any(state.startswith("failed") for state in states.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
