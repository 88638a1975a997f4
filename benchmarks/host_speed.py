"""The host's share of a run, against an earlier commit: whole PROST scored by ``physprobe score`` (its default config,
the default protocol for a causal model, ``released-gpt``) with a tiny causal model, by this checkout and by commit
``--old`` (default 4673c87, before issue 47) run from a git worktree of it (``earlier.py``), side by side.

    python benchmarks/host_speed.py --data data --work /tmp/host-speed [--limit N] [--runs 3]

The model is ``tests/tiny_models.causal_lm`` with one layer 16 wide (4 heads; a 600-token byte-level BPE trained on
the benchmarks' text), saved under ``--work`` as ``tiny-causal-1x16``: a name that does not start with ``gpt``, so
``released-gpt`` encodes each option's text whole with the pad standing for the option (PROST's released
``input_pipeline.py:92-110``), the path that called the tokenizer eight times a question. Its forward pass is nearly
free, so what is timed is the host's work: start-up, tokenizing, planning, padding, reading results back, the
figures and the run folder. Both sides run the same command on the same rows and model (``--device cpu
--bootstrap-iters 0``; ``OMP_NUM_THREADS`` as this process has it), runs interleaved. Printed: wall seconds of each
side (min/median/max), run.json's scoring seconds, the ratio old / new, and whether predictions.parquet is the
same (every column both sides write: predictions, scores, prompts and their token counts; the columns only the new
side writes are named); the exit status is 1 if not.

"Nearly free" is not free: importing transformers, loading the model and its forward passes take seconds of their
own. So each run also times the floor (``forward_floor.py``: this checkout's batches, recorded once, replayed by a
process that only imports, loads and runs the passes), and prints each side's host seconds (its wall less the
floor: all the run's work that is not the model's) and their ratio, and old / floor: the most any host work could
make the new side faster than the old.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import earlier  # a sibling script
import pyarrow.parquet as pq

OLD = "4673c87"
HERE = Path(__file__).resolve().parent


def tiny_model(work: Path, data: Path) -> Path:
    """The tiny causal model under ``work`` (made once): one layer 16 wide, its forward nearly free (at 64 wide, a
    whole PROST's forward passes took 10 s of the run on the 2-core machine)."""
    folder = work / "tiny-causal-1x16"  # not same_predictions.py's tiny-causal, 64 wide, if both share --work
    if not (folder / "config.json").is_file():
        sys.path.insert(0, str(earlier.REPO))
        from tests import tiny_models

        tiny_models.causal_lm(folder, tiny_models.benchmark_texts(data), layers=1, width=16)
    return folder


def score(tree: Path | None, model: Path, data: Path, out: Path, limit: int | None, cwd: Path) -> float:
    """Wall seconds of one ``physprobe score`` of PROST by ``tree``'s code (None: this checkout's) into ``out``."""
    shutil.rmtree(out, ignore_errors=True)
    argv = [sys.executable, "-m", "physprobe", "score", "--model", str(model), "--benchmark", "prost", "--config", "default",
            "--data", str(data), "--device", "cpu", "--bootstrap-iters", "0", "--out", str(out),
            *(["--limit", str(limit)] if limit else [])]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, env=earlier.environment(tree), cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode:
        sys.exit(f"host_speed: {'old' if tree else 'new'} side failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return wall


def floor(batches: Path, model: Path, cwd: Path) -> dict:
    """The floor's parts (``forward_floor.py replay``), in a process of their own."""
    argv = [sys.executable, str(HERE / "forward_floor.py"), "replay", str(batches), str(model)]
    done = subprocess.run(argv, env=earlier.environment(None), cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"host_speed: the floor's replay failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def record_batches(model: Path, data: Path, runs: Path, limit: int | None) -> Path:
    """This checkout's batches of the same command, recorded once (an untimed run) for the floor's replay."""
    batches = runs / "batches.pt"
    argv = [sys.executable, str(HERE / "forward_floor.py"), "record", str(batches), "score", "--model", str(model),
            "--benchmark", "prost", "--config", "default", "--data", str(data), "--device", "cpu", "--bootstrap-iters", "0",
            "--out", str(runs / "recorded"), *(["--limit", str(limit)] if limit else [])]  # fmt: skip
    shutil.rmtree(runs / "recorded", ignore_errors=True)
    done = subprocess.run(argv, env=earlier.environment(None), cwd=runs, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"host_speed: recording the batches failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return batches


def differing_columns(old: Path, new: Path) -> tuple[list[str], list[str]]:
    """The columns of predictions.parquet that both runs write and that differ (none: the same predictions), and the
    columns only the new run writes."""
    a, b = pq.read_table(old / "predictions.parquet"), pq.read_table(new / "predictions.parquet")
    added = [name for name in b.column_names if name not in a.column_names]
    if a.num_rows != b.num_rows or not set(a.column_names) <= set(b.column_names):
        return ["(rows or columns)"], added
    # Compared as Python values' reprs: every float bit for bit, and NaN (a score the model gave none) equal to NaN.
    return [name for name in a.column_names if repr(a.column(name).to_pylist()) != repr(b.column(name).to_pylist())], added


def spread_of(values: list[float]) -> str:
    return f"{min(values):.1f}/{statistics.median(values):.1f}/{max(values):.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("data"), help="the built benchmarks (physprobe build all)")
    parser.add_argument("--work", type=Path, required=True, help="folder for the old worktree, the model and the runs")
    parser.add_argument("--old", default=OLD, help=f"the commit to compare with (default {OLD})")
    parser.add_argument("--limit", type=int, help="score N questions (default: all 18,736)")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    data, work = args.data.resolve(), args.work.resolve()
    if not (data / "prost" / "default").is_dir():
        parser.error(f"--data {data}: no built prost; run `physprobe build all --out {data}` first")
    tree = earlier.worktree(args.old, work)
    model = tiny_model(work, data)
    runs = work / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    sides = {"old": tree, "new": None}
    for name, side in sides.items():
        print(f"{name}: {earlier.physprobe_file(side, runs)}")
    batches = record_batches(model, data, runs, args.limit)
    walls: dict[str, list[float]] = {name: [] for name in sides}
    scoring: dict[str, list[float]] = {name: [] for name in sides}
    floors: list[dict] = []
    for index in range(args.runs):
        for name, side in sides.items():  # interleaved, so that load on a shared machine hits both alike
            walls[name].append(score(side, model, data, runs / name, args.limit, runs))
            scoring[name].append(sum(json.loads((runs / name / "run.json").read_text())["timings"]["configs_s"].values()))
            print(f"  run {index + 1} {name}: {walls[name][-1]:.1f} s", flush=True)
        floors.append(floor(batches, model, runs))
        print(f"  run {index + 1} floor: {floors[-1]['floor_s']:.1f} s", flush=True)
    rows = pq.read_metadata(runs / "new" / "predictions.parquet").num_rows
    print(
        f"\nPROST default, {rows:,} questions, {model.name} (1 layer, 16 wide), released-gpt, {args.runs} run(s), min/median/max"
    )
    print(f"{'side':<5} {'wall s':>18} {'scoring s':>18}")
    for name in sides:
        print(f"{name:<5} {spread_of(walls[name]):>18} {spread_of(scoring[name]):>18}")
    floor_s = [f["floor_s"] for f in floors]
    print(f"{'floor':<5} {spread_of(floor_s):>18}    import {spread_of([f['import_s'] for f in floors])}, load "
          f"{spread_of([f['load_s'] for f in floors])}, {floors[0]['passes']} forward passes {spread_of([f['forward_s'] for f in floors])}")  # fmt: skip
    ratios = [o / n for o, n in zip(walls["old"], walls["new"])]
    print(f"old / new wall: {spread_of(ratios)} (per run: {', '.join(f'{r:.2f}' for r in ratios)})")
    print(f"old / new scoring: {statistics.median(scoring['old']) / statistics.median(scoring['new']):.2f} (medians)")
    bound = [o / f for o, f in zip(walls["old"], floor_s)]
    print(f"old / floor: {spread_of(bound)} (the most any host work could make new faster than old)")
    host = {name: [w - f for w, f in zip(walls[name], floor_s)] for name in sides}
    host_ratios = [o / n for o, n in zip(host["old"], host["new"]) if n > 0]
    print(f"host s (wall - floor): old {spread_of(host['old'])}, new {spread_of(host['new'])}; old / new "
          f"{spread_of(host_ratios) if host_ratios else '-'}"
          f"{f' ({len(host_ratios)} of {args.runs} runs: in the others new took no longer than the floor)' if len(host_ratios) < args.runs else ''}")  # fmt: skip
    differ, added = differing_columns(runs / "old", runs / "new")
    print(
        "predictions.parquet: identical in every column both write"
        if not differ
        else f"predictions.parquet differs in {', '.join(differ)}"
    )
    if added:
        print(f"  columns only the new side writes: {', '.join(added)}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
