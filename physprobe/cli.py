"""The ``physprobe`` command line.

    physprobe build prost --out build --source-dir ../shared/data/upstream
    physprobe build all --out build
    physprobe generate cccons --n 1000 --seed 0 --out generated
    physprobe generate newton --spec my_spec.yaml --out generated
    physprobe score --model roberta-large --benchmark prost --out runs/roberta-prost
    physprobe score --model gpt2 --benchmark prost --protocol sentence-sum
    physprobe protocols
    physprobe report runs/roberta-prost runs/gpt2-prost --out report.md
"""

from __future__ import annotations

import argparse
import sys

from tqdm.auto import tqdm

from physprobe.errors import PhysprobeError
from physprobe.export import BuildResult, build
from physprobe.protocols import METHODS


def _benchmarks():
    from physprobe.dataset_scripts import BENCHMARKS

    return BENCHMARKS


def _generating() -> list[str]:
    from physprobe import registry

    return [name for name in registry.names() if registry.new_examples(name)]


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
    from physprobe import registry

    make = registry.new_examples(args.benchmark)
    print(summary([make(n=args.n, spec=args.spec, seed=args.seed, out=args.out, source_dir=args.source_dir)]))
    return 0


def _score(args: argparse.Namespace) -> int:
    from pathlib import Path

    from physprobe.runner import run

    out = Path(args.out or f"runs/{Path(args.model).name}-{args.benchmark}")
    configs = args.config.split(",") if args.config else None
    metrics = run(args.model, args.benchmark, out, Path(args.data), configs, args.method, args.limit, args.device,
                  args.gguf_file, args.truncate, protocol=args.protocol)  # fmt: skip
    for config, values in metrics.items():
        headline = {k: v for k, v in values.items() if isinstance(v, (int, float))}
        headline.update({f"{k}.{n}": v for k, inner in values.items() if isinstance(inner, dict)
                         for n, v in inner.items() if n in ("accuracy", "map")})  # fmt: skip
        print(f"{args.benchmark}/{config}: " + ", ".join(f"{k}={v:.4g}" for k, v in headline.items()))
    print(f"-> {out}")
    return 0


def protocol_table(benchmarks: list[str]) -> str:
    """Per benchmark and model family, the default protocol and the alternatives; then each protocol's source."""
    from physprobe import registry
    from physprobe.protocols import FAMILIES

    lines = []
    for name in benchmarks:
        evaluation = registry.evaluation(name)
        lines.append(f"{name}")
        for family in FAMILIES:
            usable = [p for p in evaluation.protocols if family in p.families]
            if not usable:
                continue
            default = evaluation.default(family).name if any(family in p.default_for for p in usable) else "-"
            others = [p.name + "".join(f" (default for names matching /{m}/)" for m in p.default_for_models)
                      for p in usable if p.name != default]  # fmt: skip
            lines.append(f"  {family:<8} default {default:<22} alternatives: {', '.join(others) or '-'}")
        for p in evaluation.protocols:
            lines.append(f"  - {p.name} [{p.method}; {', '.join(p.families)}]: {p.summary}")
            lines.append(f"      source: {p.source}")
            if p.skip_reason:
                lines.append(f"      excludes: {p.skip_reason}")
    return "\n".join(lines)


def _protocols(args: argparse.Namespace) -> int:
    from physprobe import registry

    print(protocol_table([args.benchmark] if args.benchmark else registry.names()))
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
    generate_cmd.add_argument("benchmark", choices=_generating())
    generate_cmd.add_argument("--n", type=int, help="number of new rows (benchmarks that generate by count)")
    generate_cmd.add_argument("--spec", help="challenge-set spec, YAML (benchmarks that generate from a spec)")
    generate_cmd.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
    generate_cmd.add_argument("--out", default="generated", help="output folder (default: ./generated)")
    generate_cmd.add_argument("--source-dir", help="local mirror of the upstream files")
    generate_cmd.set_defaults(run=_generate)
    score_cmd = commands.add_parser("score", help="score a Hugging Face model on a built benchmark")
    score_cmd.add_argument("--model", required=True, help="Hub id or local folder")
    score_cmd.add_argument("--benchmark", required=True, choices=list(_benchmarks()))
    score_cmd.add_argument("--config", help="comma-separated configs (default: those of the paper's tables)")
    score_cmd.add_argument("--method", choices=METHODS, help="default: the protocol's (see `physprobe protocols`)")
    score_cmd.add_argument("--protocol", help="a protocol of the benchmark (default: the paper's for the model's family)")
    score_cmd.add_argument("--data", default="build", help="folder with built benchmarks (default: ./build)")
    score_cmd.add_argument("--out", help="run folder (default: runs/<model>-<benchmark>)")
    score_cmd.add_argument("--limit", type=int, help="score N rows of each config, evenly spread over it")
    score_cmd.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    score_cmd.add_argument("--gguf-file", help="a GGUF file inside --model's folder")
    score_cmd.add_argument("--truncate", action="store_true", help="keep the last tokens of over-long inputs instead of failing")
    score_cmd.set_defaults(run=_score)
    protocols_cmd = commands.add_parser("protocols", help="list each benchmark's protocols and the families they are the default for")
    protocols_cmd.add_argument("benchmark", nargs="?", choices=list(_benchmarks()))
    protocols_cmd.set_defaults(run=_protocols)
    report_cmd = commands.add_parser("report", help="paper-style tables and plots across score runs")
    report_cmd.add_argument("runs", nargs="+", help="run folders written by physprobe score")
    report_cmd.add_argument("--out", default="report.md")
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
