"""``physprobe export``: the benchmarks as lm-evaluation-harness tasks, runs and the papers' tables as Every Eval
Ever records.

>>> import argparse; command = argparse.ArgumentParser(prog="physprobe export"); add_arguments(command)
>>> command.parse_args(["lm-eval", "--out", "tasks"]).decoding
'greedy'
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from physprobe.errors import PhysprobeError


def _export(args: argparse.Namespace) -> int:
    from physprobe.publish.lm_eval_export import export

    names = export(Path(args.out), Path(args.data) if args.data else None, decoding=args.decoding, model=args.model or "")
    print(f"{len(names)} lm-eval tasks -> {args.out} (lm_eval --include_path {args.out} --tasks physprobe_<benchmark> ...)")
    return 0


def add_arguments(export_cmd: argparse.ArgumentParser) -> None:
    """``physprobe export lm-eval`` (the benchmarks as lm-evaluation-harness tasks) and ``physprobe export
    every-eval-ever`` (runs and the papers' tables as Every Eval Ever records)."""
    tools = export_cmd.add_subparsers(dest="tool", required=True, metavar="TOOL")
    lm_eval_cmd = tools.add_parser("lm-eval", help="an EleutherAI lm-evaluation-harness 0.4 task folder")
    lm_eval_cmd.add_argument("--out", required=True, help="task folder to write (pass it to lm_eval --include_path)")
    lm_eval_cmd.add_argument(
        "--data",
        help="a local build (physprobe build) whose Parquet files the tasks read (default: physprobe/<benchmark> on the Hub)",
    )
    lm_eval_cmd.add_argument(
        "--decoding",
        choices=["greedy", "released"],
        default="greedy",
        help="generating tasks decode greedily (the default) or as the protocol's released script did (--model: the model "
        "whose settings they carry, where the released scripts decode by model)",
    )
    lm_eval_cmd.add_argument("--model", help="with --decoding released: the model whose released decoding the tasks carry")
    lm_eval_cmd.set_defaults(run=_export)
    _every_eval_ever_arguments(
        tools.add_parser("every-eval-ever", help="score runs and the papers' tables as Every Eval Ever records (schema 0.3.0)")
    )


def _every_eval_ever_arguments(command: argparse.ArgumentParser) -> None:
    """The options of ``physprobe export every-eval-ever``."""
    command.add_argument("runs", nargs="*", metavar="RUNS", help="run folders written by physprobe score, or a card run's folder")
    command.add_argument("--papers", action="store_true", help="the papers' published tables too (every paper_tables.yaml row)")
    command.add_argument("--out", required=True, help="folder to write, laid out as the datastore's data/ folder")
    command.add_argument("--organization", default="unknown", help="who ran the runs (the records' source organisation)")
    command.add_argument(
        "--model-id",
        metavar="ID",
        help="the id a local model's records name it by, e.g. ORG/NAME "
        "(default: its folder's name and content digest, never its path)",
    )
    command.set_defaults(run=_export_every_eval_ever)


def _export_every_eval_ever(args: argparse.Namespace) -> int:
    from physprobe.publish import every_eval_ever

    if not args.runs and not args.papers:
        raise PhysprobeError("physprobe export every-eval-ever: give run folders (RUNS), --papers, or both")
    if args.model_id is not None and (not args.runs or not args.model_id.strip() or args.model_id.strip() != args.model_id
                                      or not args.model_id.isprintable()):  # fmt: skip
        raise PhysprobeError(
            f"--model-id {args.model_id!r}: give a local model's id on one printable line, e.g. ORG/NAME, with RUNS"
        )
    written = every_eval_ever.export(Path(args.out), [Path(r) for r in args.runs], args.papers, args.organization, args.model_id)
    for folder, why in written.skipped:
        print(f"physprobe: skipped {folder}: {why}", file=sys.stderr)
    print(f"{written.records} records, {written.lines} instance lines -> {args.out}")
    return 0
