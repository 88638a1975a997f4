"""Metric speed: physprobe's path (``metric_modules.load``: input checks + numpy core) against evaluate's
``compute()`` (the same checks, then the inputs written to Arrow and read back before the same core).

    python benchmarks/metric_speed.py [--pairs 1000000] [--runs 3]

``affordance_rank`` on random sentence-object pairs of 15 classes, and ``probe_accuracy`` with groups on as
many questions, given as Python lists (what the scorer holds). Each path runs in its own fresh process, the
paths interleaved run by run; printed per path: min / median / max seconds of the call, and peak resident
memory of the process above what it held with the inputs built (MiB), and whether the numbers are identical.
"""

import argparse
import json
import multiprocessing
import resource
import statistics
import time

import numpy as np

PATHS = ("physprobe (numpy core)", "evaluate compute()")


def _inputs(metric: str, n: int) -> dict:
    rng = np.random.default_rng(0)
    if metric == "affordance_rank":
        return {"predictions": rng.random((n, 15)).tolist(), "references": (rng.random((n, 15)) < 0.25).astype(int).tolist()}
    return {"predictions": rng.integers(0, 4, n).tolist(), "references": rng.integers(0, 4, n).tolist(),
            "groups": rng.choice(["mass", "height", "stacking"], n).tolist()}  # fmt: skip


def _one(metric: str, path: str, n: int, queue) -> None:
    from physprobe.protocols import metric_modules

    module = metric_modules.load(metric) if path == PATHS[0] else metric_modules.module(metric)
    kwargs = _inputs(metric, n)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    result = module.compute(**kwargs)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put((seconds, (peak - before) / 1024, json.dumps(result, sort_keys=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    print(f"{args.pairs:,} rows, {args.runs} runs, fresh process per call")
    print(f"{'metric':<17} {'path':<24} {'seconds min/median/max':>24} {'peak MiB over inputs':>22}  identical")
    for metric in ("affordance_rank", "probe_accuracy"):
        seen = {path: [] for path in PATHS}
        for _ in range(args.runs):
            for path in PATHS:
                queue = context.Queue()
                process = context.Process(target=_one, args=(metric, path, args.pairs, queue))
                process.start()
                seen[path].append(queue.get())
                process.join()
        results = {r[2] for path in PATHS for r in seen[path]}
        for path in PATHS:
            seconds = [r[0] for r in seen[path]]
            memory = [r[1] for r in seen[path]]
            print(f"{metric:<17} {path:<24} {min(seconds):7.2f} {statistics.median(seconds):7.2f} {max(seconds):7.2f} "
                  f"{statistics.median(memory):22,.0f}  {'yes' if len(results) == 1 else 'NO'}")  # fmt: skip


if __name__ == "__main__":
    main()
