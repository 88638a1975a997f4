"""``physprobe publish`` (and ``upload.py``, its entry in the checkout): build the benchmarks and metrics into
Hub-ready repo folders, validate them, and publish them; or publish score runs as one dataset repository.

    physprobe publish --out hub                                        # dry run: build and validate, no network
    physprobe publish --out hub --push [--org physprobe] [--only prost,newton] [--tag v0.1.0]
    physprobe publish --runs runs/* --runs-repo my-runs --push --org ME  # score runs, as one dataset repo

Datasets become dataset repos (Parquet per config and split + card), metrics become Spaces (the files of
``metrics/<name>/`` as committed at git's HEAD: the evaluate module, its card, ``app.py``, ``requirements.txt``;
nothing untracked such as a stray ``.env``, no uncommitted edit, no symlink). Repo ids, ``--org``, the network
mode and the token are checked before any work, and every output folder before any is written. Every folder is
validated before anything touches the network: each dataset config must load with ``datasets.load_dataset`` with
the features and row counts its card declares, a dataset whose card license is ``unknown`` is refused unless
``--allow-unknown-license``, and each metric must load with ``evaluate.load`` and pass its docstring examples.

``--runs FOLDER ...`` publishes score runs instead: the finished runs among the folders become one dataset
repository (``physprobe.publish.runs``: each run's ``run.json``, ``metrics.json`` and predictions as a dataset
config, the report as its card), validated by loading every config and reading every run back. The repository
holds exactly the runs given (give them all each time).

Publishing uses huggingface_hub's own ``upload_folder`` (``delete_patterns="*"``: stale remote files are
deleted, unchanged files skipped, no empty commits). It reports each repository as it goes, retries
transient errors (5xx, 429, timeouts, dropped connections) with backoff, and creates the ``--tag`` on every
repository only after all of them were published, so re-running the same command completes exactly what is
missing. The last line says what state the release is in. The token comes from ``HF_TOKEN`` or the
huggingface_hub login and is never printed.

This subpackage also holds ``lm_eval_export`` (``physprobe export lm-eval``: the benchmarks as
lm-evaluation-harness tasks) and ``every_eval_ever`` (``physprobe export every-eval-ever``: runs and the papers'
tables as Every Eval Ever records, through the same verification and redaction). May import every stage below it (``report``, ``run``, ``record``, ``data``,
``protocols``, ``util``) and ``exit_status``; imported only by ``cli`` and ``upload.py``.

>>> parser = argparse.ArgumentParser(prog="physprobe publish")
>>> add_arguments(parser)
>>> args = parser.parse_args(["--runs", "runs/gpt2-prost", "--only", "prost"])
>>> conflict(args)
'--runs publishes only the runs repository: leave out --only and --tag'
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from physprobe.errors import PublishError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``physprobe publish`` (and ``upload.py``)."""
    parser.add_argument("--out", default="hub", help="where the repo folders are written (default: ./hub)")
    parser.add_argument("--source-dir", help="local mirror of the upstream files (default: $PHYSPROBE_SOURCE_DIR, else download)")
    parser.add_argument("--push", action="store_true", help="upload to the Hub (without it nothing touches the network)")
    parser.add_argument("--org", default="physprobe")
    parser.add_argument(
        "--only", help="comma-separated repo names: a benchmark (physprobe protocols lists them) or a metric module"
    )
    parser.add_argument("--tag", help="tag every repo once all are published, e.g. v0.1.0")
    parser.add_argument("--allow-unknown-license", action="store_true", help="publish datasets whose card license is unknown")
    parser.add_argument(
        "--runs",
        nargs="+",
        metavar="FOLDER",
        help="publish these score run folders (or the run folders "
        "inside a parent such as runs/MODEL/) as one dataset repo instead",
    )
    parser.add_argument("--runs-repo", default="physprobe-runs", help="the runs repository's name (default: physprobe-runs)")
    parser.add_argument(
        "--model-id",
        metavar="ID",
        help="with --runs: the name a local model's runs publish it under "
        "(default: its folder's name and content digest, never its path)",
    )


def known() -> set[str]:
    """The repo names ``--only`` may give: the benchmarks and the metrics."""
    from physprobe.data import registry
    from physprobe.protocols import metric_modules

    return set(registry.names()) | set(metric_modules.NAMES)


def conflict(args: argparse.Namespace) -> str | None:
    """What is wrong with the options together (an unknown ``--only`` name, ``--runs`` with ``--only``), or None."""
    only = set(args.only.split(",")) if args.only else set()
    if only - known():
        return f"--only names unknown repo(s) {sorted(only - known())}; known: {sorted(known())}"
    if args.runs and (only or args.tag):
        return "--runs publishes only the runs repository: leave out --only and --tag"
    if args.model_id is not None and not args.runs:
        return "--model-id names the model of published runs: give it with --runs"
    if args.model_id is not None and (
        not args.model_id.strip() or args.model_id.strip() != args.model_id or not args.model_id.isprintable()
    ):
        return f"--model-id {args.model_id!r}: give the model's name on one printable line, e.g. ORG/NAME"
    return None


def export_and_push(args: argparse.Namespace, api=None) -> int:
    """Export, validate and (with ``--push``) publish what ``args`` ask; the exit status (1: a repository failed)."""
    if conflict(args):  # before anything heavy is imported
        raise PublishError(conflict(args))
    import datasets
    from huggingface_hub import constants

    from physprobe.data.sources import resolve_source_dir
    from physprobe.publish import folders, hub
    from physprobe.util.paths import check_disjoint

    only = set(args.only.split(",")) if args.only else None
    if args.runs:
        hub.check_repo_ids(args.org, [args.runs_repo], "--runs-repo")
    else:
        hub.check_repo_ids(args.org, sorted(only or known()))
    check_disjoint(args.out, resolve_source_dir(args.source_dir))
    if args.push and constants.HF_HUB_OFFLINE:
        raise PublishError("--push needs the network, but HF_HUB_OFFLINE is set; unset it, or leave out --push for a dry run")
    token = hub.resolve_token() if args.push else None
    out = Path(args.out)
    repos = (
        folders.export_runs(out, args.runs, args.runs_repo, args.model_id)
        if args.runs
        else folders.export(out, args.source_dir, only)
    )
    datasets.disable_progress_bars()  # one line per validated repo instead
    with tempfile.TemporaryDirectory() as cache:
        for repo in repos:
            folders.validate(repo, Path(cache))
            print(f"validated {repo.repo_type:<8} {repo.name:<20} {repo.folder}")
    problems = [problem for problem in map(folders.unknown_license, repos) if problem]
    refused = bool(problems) and not args.allow_unknown_license
    if args.push and refused:
        raise PublishError(problems[0])
    for problem in problems if not refused else []:
        print(f"note: {problem}")
    if not args.push:
        return _dry_run(repos, args.org, out, problems if refused else [])
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    hub.check_write_access(api, token)
    states = hub.push(repos, api, args.org, token, args.tag, log=lambda line: print(line, flush=True))
    print(hub.release_line(states, args.tag))
    return 0 if not any(state.startswith("failed") for state in states.values()) else 1


def _dry_run(repos: list, org: str, out: Path, refusals: list[str]) -> int:
    """Say what ``--push`` would do (``dry_run.plan``) and what it would refuse; the exit status it would have (a
    refusal: ``PublishError``, status 2)."""
    from physprobe.publish import dry_run

    print("\n".join(dry_run.plan(repos, org)))
    for refusal in refusals:
        print(f"--push would refuse: {refusal}")
    if refusals:
        more = f" (and {len(refusals) - 1} more above)" if len(refusals) > 1 else ""
        raise PublishError(f"dry run: --push would refuse {refusals[0]}{more}")
    print(f"dry run: {len(repos)} {'repository' if len(repos) == 1 else 'repositories'} from {out}; nothing pushed (use --push)")
    return 0


def main(argv: list[str] | None = None, api=None, prog: str = "upload.py") -> int:
    """``upload.py``'s command line: the options of ``physprobe publish``, its errors as ``prog: error: ...``."""
    from physprobe.exit_status import handled
    from physprobe.util.streams import guarded

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    add_arguments(parser)
    with guarded():  # a closed or full stdout or stderr stops no command (physprobe.util.streams)
        args = parser.parse_args(argv)
        if conflict(args):
            parser.error(conflict(args))
        return handled(lambda: export_and_push(args, api), "publish", prog)
