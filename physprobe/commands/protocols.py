"""``physprobe protocols``: per benchmark and model family, the default protocol and the alternatives.

>>> print(protocol_table(["prost"]).splitlines()[0])
prost
"""

from __future__ import annotations

import argparse


def add_arguments(command: argparse.ArgumentParser, benchmarks: list[str]) -> None:
    """The options of ``physprobe protocols``: one benchmark of ``benchmarks``, or none (all of them)."""
    command.add_argument("benchmark", nargs="?", choices=benchmarks)
    command.set_defaults(run=_protocols)


def protocol_table(benchmarks: list[str]) -> str:
    """Per benchmark and model family, the default protocol and the alternatives; then each protocol's source."""
    from physprobe.data import registry
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
    from physprobe.data import registry

    print(protocol_table([args.benchmark] if args.benchmark else registry.names()))
    return 0
