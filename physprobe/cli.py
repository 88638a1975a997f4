"""The ``physprobe`` command line.

    physprobe build prost --out build --source-dir ../shared/data/upstream
    physprobe build all --out build
    physprobe generate cccons --n 1000 --seed 0 --out generated
    physprobe generate newton --spec my_spec.yaml --out generated
    physprobe score --model roberta-large --benchmark prost --out runs/roberta-prost
    physprobe report runs/roberta-prost runs/gpt2-prost --out report
"""

from __future__ import annotations

import argparse
import sys

from tqdm.auto import tqdm

from physprobe.errors import PhysprobeError
from physprobe.export import BuildResult, build, stream, write


def _benchmarks():
    from physprobe.dataset_scripts import BENCHMARKS

    return BENCHMARKS


def summary(results: list[BuildResult]) -> str:
    """A plain-text table of every built config and its row count."""
    lines = [f"{'benchmark':<18} {'config':<24} {'rows':>8}"]
    for result in results:
        for config, rows in result.rows.items():
            lines.append(f"{result.benchmark:<18} {config:<24} {rows:>8,}")
        lines.append(f"{'':<18} -> {result.path}")
    return "\n".join(lines)


def _build(args: argparse.Namespace) -> int:
    benchmarks = _benchmarks()
    names = list(benchmarks) if args.benchmark == "all" else [args.benchmark]
    results = [
        build(benchmarks[name], args.out, args.source_dir)
        for name in tqdm(names, desc="Building benchmarks", unit="benchmark", disable=None)
    ]
    print(summary(results))
    return 0


def _generate(args: argparse.Namespace) -> int:
    if args.benchmark == "cccons":
        from physprobe.dataset_scripts.cccons import cccons

        if args.n is None or args.n < 1:
            raise PhysprobeError(f"generate cccons needs --n at least 1, got {args.n}")
        paths = cccons.CCCONS.sources(args.source_dir)
        result = write(cccons.GENERATED, cccons.generate_new(paths, args.n, args.seed), args.out)
    else:
        from physprobe.dataset_scripts.newton import newton
        from physprobe.generators.newton import challenge_set

        if args.spec is None:
            raise PhysprobeError("generate newton needs --spec FILE.yaml")
        spec = newton.read_spec(args.spec)
        repository = newton.repository(newton.NEWTON.sources(args.source_dir))
        rows = tqdm(challenge_set(repository, spec, args.seed), desc=spec.name, unit=" questions", disable=None)
        result = stream(spec.name, newton.CHALLENGE_FEATURES, rows, args.out, newton.challenge_card(spec, args.seed))
    print(summary([result]))
    return 0


def _score(args: argparse.Namespace) -> int:
    from pathlib import Path

    from physprobe.runner import run

    out = Path(args.out or f"runs/{Path(args.model).name}-{args.benchmark}")
    configs = args.config.split(",") if args.config else None
    metrics = run(args.model, args.benchmark, out, Path(args.data), configs, args.method, args.limit, args.device,
                  args.gguf_file, args.truncate)  # fmt: skip
    for config, values in metrics.items():
        headline = {k: v for k, v in values.items() if isinstance(v, (int, float))}
        headline.update({f"{k}.{n}": v for k, inner in values.items() if isinstance(inner, dict)
                         for n, v in inner.items() if n in ("accuracy", "map")})  # fmt: skip
        print(f"{args.benchmark}/{config}: " + ", ".join(f"{k}={v:.4g}" for k, v in headline.items()))
    print(f"-> {out}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from physprobe.report import render

    print(f"-> {render([Path(r) for r in args.runs], Path(args.out))}")
    return 0


def parser() -> argparse.ArgumentParser:
    """The argument parser of the ``physprobe`` command."""
    top = argparse.ArgumentParser(prog="physprobe", description=__doc__.splitlines()[0])
    commands = top.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="build benchmarks into Hub-ready folders (Parquet + card)")
    build_cmd.add_argument("benchmark", choices=[*_benchmarks(), "all"])
    build_cmd.add_argument("--out", default="build", help="output folder (default: ./build)")
    build_cmd.add_argument(
        "--source-dir", help="local mirror of the upstream files (default: $PHYSPROBE_SOURCE_DIR, else download)"
    )
    build_cmd.set_defaults(run=_build)
    generate_cmd = commands.add_parser("generate", help="generate new examples beyond a release")
    generate_cmd.add_argument("benchmark", choices=["cccons", "newton"])
    generate_cmd.add_argument("--n", type=int, help="cccons: number of new rows")
    generate_cmd.add_argument("--spec", help="newton: challenge-set spec (YAML: context, question, conditions)")
    generate_cmd.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
    generate_cmd.add_argument("--out", default="generated", help="output folder (default: ./generated)")
    generate_cmd.add_argument("--source-dir", help="local mirror of the upstream files")
    generate_cmd.set_defaults(run=_generate)
    score_cmd = commands.add_parser("score", help="score a Hugging Face model on a built benchmark")
    score_cmd.add_argument("--model", required=True, help="Hub id or local folder")
    score_cmd.add_argument("--benchmark", required=True, choices=["prost", "cccons", "newton", "text2afford"])
    score_cmd.add_argument("--config", help="comma-separated configs (default: those of the paper's tables)")
    score_cmd.add_argument("--method", choices=["causal", "mlm", "seq2seq", "nli", "yes_no"], help="default: from the model's config")
    score_cmd.add_argument("--data", default="build", help="folder with built benchmarks (default: ./build)")
    score_cmd.add_argument("--out", help="run folder (default: runs/<model>-<benchmark>)")
    score_cmd.add_argument("--limit", type=int, help="score N rows of each config, evenly spread over it")
    score_cmd.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    score_cmd.add_argument("--gguf-file", help="a GGUF file inside --model's folder")
    score_cmd.add_argument("--truncate", action="store_true", help="keep the last tokens of over-long inputs instead of failing")
    score_cmd.set_defaults(run=_score)
    report_cmd = commands.add_parser("report", help="paper-style tables and plots across score runs")
    report_cmd.add_argument("runs", nargs="+", help="run folders written by physprobe score (any benchmarks)")
    report_cmd.add_argument("--out", default="report",
                            help="report folder to create: report.md, report.html, figures/ (default: ./report); "
                                 "an existing one must be empty or a report written before, which is replaced")
    report_cmd.set_defaults(run=_report)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run the command line; bad input exits with status 2 and a one-line error."""
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except PhysprobeError as error:
        print(f"physprobe: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
