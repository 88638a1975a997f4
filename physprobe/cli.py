"""The ``physprobe`` command line.

physprobe build prost --out data --source-dir ../shared/data/upstream
physprobe build all --out data
physprobe generate cccons --n 1000 --seed 0 --out generated
physprobe generate newton --spec my_spec.yaml --out generated
physprobe score --model roberta-large --benchmark prost --out runs/roberta-prost
physprobe score --model gpt2 --benchmark prost --protocol sentence-sum
physprobe score --model HuggingFaceTB/SmolLM2-135M-Instruct --benchmark all --limit 20
physprobe report runs/SmolLM2-135M-Instruct
physprobe protocols
physprobe score --model gpt2 --benchmark newton --model-args revision=main,dtype=bfloat16 --batch-size auto
physprobe report runs/roberta-prost runs/gpt2-prost --out report
physprobe export lm-eval --out lm_eval_tasks [--data data]
physprobe export every-eval-ever runs/SmolLM2-135M-Instruct.Q4_1 --papers --out every_eval_ever
physprobe publish --runs runs/my-model --runs-repo my-runs --org ME --push
physprobe cache list
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import physprobe
from physprobe.commands import cache, export, protocols
from physprobe.exit_status import handled
from physprobe.protocols import METHODS
from physprobe.util import collector, progress, terminal
from physprobe.util.streams import guarded

if TYPE_CHECKING:
    from physprobe.data.dataset_folder import BuildResult

# Start-up: ``physprobe --help`` and argument errors must not import datasets, torch or transformers
# (about a second), so the parser reads the registered names (``physprobe.dataset_scripts.NAMES``, its
# builders not imported) and every command imports what it needs when it runs.


def _benchmarks() -> list[str]:
    """The registered benchmarks' names (``registry.names()``)."""
    from physprobe.data import registry

    return registry.names()


def _generating() -> list[str]:
    """The benchmarks with a ``new_examples.py`` (``physprobe generate``), found without importing it."""
    return [name for name in _benchmarks() if importlib.util.find_spec(f"physprobe.dataset_scripts.{name}.new_examples")]


def summary(results: list[BuildResult]) -> str:
    """A plain-text table of every built config and its row count."""
    lines = [f"{'benchmark':<18} {'config':<24} {'rows':>8}"]
    for result in results:
        for config, rows in result.rows.items():
            lines.append(f"{result.benchmark:<18} {config:<24} {rows:>8,}")
        lines.append(f"{'':<18} -> {result.path}")
    return "\n".join(lines)


def _build(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from physprobe.data.dataset_folder import build, owner
    from physprobe.data.sources import resolve_source_dir
    from physprobe.dataset_scripts import BENCHMARKS as benchmarks
    from physprobe.util.paths import check_disjoint, check_outside, check_target

    names = list(benchmarks) if args.benchmark == "all" else [args.benchmark]
    check_disjoint(args.out, resolve_source_dir(args.source_dir))
    for name in names:  # every target checked before any is changed
        check_outside(Path(args.out) / name, ("build", "challenge"))
        check_target(Path(args.out) / name, owner(name))
    results = [
        build(benchmarks[name], args.out, args.source_dir)
        for name in tqdm(names, desc="Building benchmarks", unit="benchmark", disable=None)
    ]
    print(summary(results))
    return 0


def _generate(args: argparse.Namespace) -> int:
    from physprobe.data import registry
    from physprobe.data.sources import resolve_source_dir
    from physprobe.util.paths import check_disjoint

    check_disjoint(args.out, resolve_source_dir(args.source_dir))
    make = registry.new_examples(args.benchmark)
    print(summary([make(n=args.n, spec=args.spec, seed=args.seed, out=args.out, source_dir=args.source_dir)]))
    return 0


def score_options(args: argparse.Namespace):
    """``physprobe score``'s options as one value (``ScoreOptions.from_namespace``), with the command line as run.json
    keeps it (no credential of a URL it gives).

    >>> options = score_options(parser().parse_args(["score", "--model", "m", "--benchmark", "prost", "--config", "mass"]))
    >>> options.configs, options.chat.mode
    (('mass',), 'off')
    """
    from physprobe.record.options import ScoreOptions
    from physprobe.util.redact import without_url_credentials

    return ScoreOptions.from_namespace(args, ("physprobe", *map(without_url_credentials, getattr(args, "argv", ()))))


def _score(args: argparse.Namespace) -> int:
    options = score_options(args)
    return _score_card(options) if options.card else _score_benchmark(options)


def _score_benchmark(options) -> int:
    """``physprobe score --benchmark NAME``: one run folder, in one process or ``--num-processes``."""
    from physprobe.record import spec as run_spec
    from physprobe.report import detectable
    from physprobe.run import parallel, runner

    spec = run_spec.of(options)
    record = runner.run(spec) if spec.processes == 1 else parallel.score_in_processes(spec)
    print("\n".join(summary_lines(record) + detectable.summary_lines(spec.out)))
    print(f"-> {spec.out}")
    return 0


def _score_card(options) -> int:
    """``physprobe score --benchmark all`` (or a list): the card run, then its card (each benchmark's figures per
    config: ``physprobe report``)."""
    from physprobe.report import card
    from physprobe.run import card_run

    result = card_run.score_card(card_run.of(options))
    print(card.card_text([result.out / name for name in result.records]))
    print(f"-> {result.out} (physprobe report {result.out} writes the card with its figure)")
    return 0


def summary_lines(record) -> list[str]:
    """Per scored config (and pooled figure) of a ``RunRecord``: the headline figure first, then the other
    overall figures and the counts; below it, the baselines of the same rows, and a flag where its figures say
    little (``physprobe.run.baselines``)."""
    from physprobe.protocols import COUNTS
    from physprobe.report.cells import lookup
    from physprobe.run import baselines
    from physprobe.util import provenance

    flags = {}
    for flag in baselines.flags(record):
        flags.setdefault(flag.config, []).append(flag.kind)
    lines = []
    for config, values in record.metrics.items():
        headline = record.headline.get(config)
        figures = {
            **dict([headline] if headline else []),
            **provenance.overall_figures({k: v for k, v in values.items() if k != "samples"}),
        }
        figures.update({k: v for k, v in values.items() if k in COUNTS})
        lines.append(f"{record.benchmark}/{config}: " + ", ".join(f"{k}={v:.4g}" for k, v in figures.items()))
        spread = values.get("samples")
        if isinstance(spread, dict) and headline:  # --samples K > 1: the headline's mean and sd over the K samples
            lines.append(f"  over {spread['drawn']} samples (seed {record.spec.seed}): {headline[0]} {lookup(spread['mean'], headline[0]):.4g} "
                         f"± {lookup(spread['sd'], headline[0]):.4g} (sd), agreement {spread['agreement']:.3g}")  # fmt: skip
        if config in record.baselines:
            lines.append(f"  baselines, {baselines.summary(record.benchmark, record.baselines[config])}")
        if config in flags:
            lines.append(f"  ⚠ {' and '.join(flags[config])} answers: see the warning above; the report marks this run")
    return lines


def _report(args: argparse.Namespace) -> int:
    from physprobe.report import render

    print(f"-> {render([Path(r) for r in args.runs], Path(args.out), args.reference, args.resamples, args.compare_across)}")
    return 0


def _publish(args: argparse.Namespace) -> int:
    from physprobe import publish

    return publish.export_and_push(args)


def parser() -> argparse.ArgumentParser:
    """The argument parser of the ``physprobe`` command."""
    top = argparse.ArgumentParser(
        prog="physprobe",
        description=physprobe.__doc__,
        epilog="examples:\n" + "\n".join(f"  {line}" for line in __doc__.splitlines()[2:] if line),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"physprobe {physprobe.__version__}")
    commands = top.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="build benchmarks into Hub-ready folders (Parquet + card)")
    build_cmd.add_argument("benchmark", choices=[*_benchmarks(), "all"])
    build_cmd.add_argument("--out", default="data", help="output folder (default: ./data)")
    build_cmd.add_argument(
        "--source-dir", help="local mirror of the upstream files (default: $PHYSPROBE_SOURCE_DIR, else download)"
    )
    build_cmd.set_defaults(run=_build)
    generate_cmd = commands.add_parser("generate", help="generate new examples beyond a release")
    generate_cmd.add_argument("benchmark", choices=_generating())
    generate_cmd.add_argument("--n", type=int, help="number of new rows (benchmarks that generate by count)")
    generate_cmd.add_argument("--spec", help="challenge-set spec, YAML (benchmarks that generate from a spec)")
    generate_cmd.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
    generate_cmd.add_argument("--out", default="generated", help="output folder (default: ./generated)")
    generate_cmd.add_argument("--source-dir", help="local mirror of the upstream files")
    generate_cmd.set_defaults(run=_generate)
    _score_arguments(
        commands.add_parser("score", help="score a Hugging Face model on a benchmark (from the Hub, or a local build)")
    )
    protocols.add_arguments(
        commands.add_parser("protocols", help="list each benchmark's protocols and the families they are the default for"),
        _benchmarks(),
    )
    _report_arguments(commands.add_parser("report", help="paper-style tables and plots across score runs"))
    export.add_arguments(
        commands.add_parser("export", help="write physprobe's benchmarks, runs or the papers' tables in another tool's format")
    )
    cache.add_arguments(commands.add_parser("cache", help="list or clear what physprobe keeps in its cache folder"))
    from physprobe import publish  # its options only: nothing heavy is imported before it runs

    publish_cmd = commands.add_parser("publish", help="publish the benchmarks, metric Spaces or score runs to the Hub")
    publish.add_arguments(publish_cmd)
    publish_cmd.set_defaults(run=_publish)
    return top


def _report_arguments(report_cmd: argparse.ArgumentParser) -> None:
    """The options of ``physprobe report``: the run folders, the report folder, the Differences' reference and resamples."""
    report_cmd.add_argument(
        "runs",
        nargs="+",
        help="run folders written by physprobe score (any benchmarks), or the folders "
        "of --benchmark all runs (runs/<model>: one column of the card each; runs/: all of them)",
    )
    report_cmd.add_argument(
        "--out",
        default="report",
        help="report folder to create: report.md, report.html, figures/ (default: ./report); "
        "an existing one must be empty or a report written before, which is replaced",
    )
    report_cmd.add_argument(
        "--reference",
        help="the run the Differences sections compare the others with: its name in the report or its folder "
        "(default: each benchmark's first run given)",
    )
    report_cmd.add_argument(
        "--resamples",
        type=int,
        default=1000,
        help="paired bootstrap resamples of the Differences sections (100 to 100000; default: 1000)",
    )
    report_cmd.add_argument(
        "--compare-across",
        action="store_true",
        help="compare runs of different protocols or data revisions too, on the questions they share (refused by default)",
    )
    report_cmd.set_defaults(run=_report)


def _comma_list(text: str) -> list[str]:
    """A comma-separated argument's entries, as given (``ScoreOptions`` checks them)."""
    return text.split(",")


def _score_arguments(score_cmd: argparse.ArgumentParser) -> None:
    """The options of ``physprobe score``, in the order ``--help`` lists them."""
    _scored_arguments(score_cmd)
    _rows_and_output_arguments(score_cmd)
    _running_arguments(score_cmd)
    score_cmd.set_defaults(run=_score)


def _scored_arguments(score_cmd: argparse.ArgumentParser) -> None:
    """What ``physprobe score`` scores: the model, the benchmarks and their configs, the method or protocol."""
    score_cmd.add_argument("--model", required=True, help="Hub id or local folder")
    score_cmd.add_argument(
        "--benchmark",
        required=True,
        metavar="BENCHMARK",
        help=f"{', '.join(_benchmarks())}; or several, comma-separated, or all: the model loaded once, each "
        "benchmark scored with its default protocol into --out/<benchmark> (default --out: runs/<model>)",
    )
    score_cmd.add_argument(
        "--config", dest="configs", type=_comma_list, help="comma-separated configs (default: those of the paper's tables)"
    )
    score_cmd.add_argument("--method", choices=METHODS, help="default: the protocol's (see: physprobe protocols)")
    score_cmd.add_argument("--protocol", help="a protocol of the benchmark (default: the paper's for the model's family)")


def _rows_and_output_arguments(score_cmd: argparse.ArgumentParser) -> None:
    """Where ``physprobe score`` reads the rows (a local build or a Hub dataset; ``--limit`` of them) and where the
    run goes."""
    score_cmd.add_argument("--data", help="a local folder of built benchmarks (default: read physprobe/<benchmark> from the Hub)")
    score_cmd.add_argument("--revision", help="Hub dataset revision to read (branch, tag or commit; default: main)")
    score_cmd.add_argument("--dataset-repo", help="Hub dataset to read instead of physprobe/<benchmark>, e.g. a fork ORG/NAME")
    score_cmd.add_argument(
        "--out", help="run folder (default: runs/<model>-<benchmark>; several benchmarks: their parent, runs/<model>)"
    )
    score_cmd.add_argument(
        "--label",
        help="the run's name in a report (default: the model's name, and what tells it "
        "apart from the report's other runs of that model)",
    )
    score_cmd.add_argument(
        "--limit",
        type=int,
        help="score N rows of each config: one of each group of the paper's breakdowns "
        "(concepts, attributes, classes: the groups the benchmark declares) first, the rest evenly spread",
    )


def _running_arguments(score_cmd: argparse.ArgumentParser) -> None:
    """How ``physprobe score`` runs: the model's device, weights, batches and backend, the prompts' chat template,
    the bootstrap resamples, the processes."""
    score_cmd.add_argument("--device", help="cpu, cuda, cuda:1, mps (default: cuda if available)")
    score_cmd.add_argument(
        "--dtype",
        choices=["auto", "float32", "bfloat16", "float16"],
        help="weights' dtype (default: bfloat16 on CUDA, float32 otherwise)",
    )
    score_cmd.add_argument(
        "--model-args",
        help="from_pretrained options KEY=VALUE,... (revision, trust_remote_code, "
        "attn_implementation, gguf_file, device_map, max_memory=0:20GiB;cpu:60GiB, load_in_8bit, ...)",
    )
    score_cmd.add_argument(
        "--batch-size", default="auto", help="sequences per batch, or auto: a token budget halved on out-of-memory"
    )
    score_cmd.add_argument("--gguf-file", help="a GGUF file inside --model's folder")
    score_cmd.add_argument("--truncate", action="store_true", help="keep the last tokens of over-long inputs instead of failing")
    score_cmd.add_argument("--bootstrap-iters", type=int, default=200, help="bootstrap resamples for standard errors (0: none)")
    score_cmd.add_argument(
        "--decoding",
        choices=["greedy", "released"],
        default="greedy",
        help="how generated answers are decoded: greedy (the default), or as the protocol's released script did "
        "(its sampling or beam search, docs/scoring.md)",
    )
    score_cmd.add_argument(
        "--samples", type=int, default=1, help="answers drawn per prompt with a sampling --decoding (1 to 1000; default 1)"
    )
    score_cmd.add_argument("--seed", type=int, default=0, help="seed of the sampled answers (default 0)")
    score_cmd.add_argument(
        "--backend",
        help="how the model is reached: hf (transformers in this process; the default) or a "
        "server backend (a base_url in --model-args implies openai); see docs/adding_a_backend.md",
    )
    score_cmd.add_argument(
        "--apply-chat-template",
        nargs="?",
        const="",
        metavar="NAME",
        help="read prompts through the model's chat template (or its template NAME; a server: its chat "
        "endpoint); default: raw prompts, as the papers' released scripts read them",
    )
    score_cmd.add_argument(
        "--system-instruction",
        metavar="TEXT",
        help="a system message before each prompt (without a template: the text and a blank line)",
    )
    score_cmd.add_argument(
        "--num-processes",
        dest="processes",
        type=int,
        default=1,
        help="score in N processes (accelerate launch; data parallel): "
        "requests split by token count, rank 0 writes the run folder",
    )


def main(argv: list[str] | None = None) -> int:
    """Run the command line; bad input exits with status 2 and a one-line error, a failed write (full
    disk, no permission) with status 1, Ctrl-C with status 130 — each one line, partial outputs removed."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # A closed or full stdout or stderr stops no command (physprobe.util.streams); on a terminal, every line written to
    # stderr goes above physprobe's bars (physprobe.util.terminal).
    with guarded(), terminal.writing():
        args = parser().parse_args(argv)
        args.argv = argv
        progress.quiet_library_bars()  # before transformers or datasets is imported: physprobe's bars tell their steps
        try:
            return handled(lambda: args.run(args), args.command)
        finally:
            collector.leaving()  # in a process of its own (``command``): the collection at exit walks nothing it made


def command() -> int:
    """The console command ``physprobe`` and ``python -m physprobe``: ``main`` in a process of its own, whose garbage
    collector is kept off what the command loads (``physprobe.util.collector``); a caller running commands in its own
    process (a test, a notebook) calls ``main``."""
    collector.own_process()
    return main()


if __name__ == "__main__":
    sys.exit(command())
