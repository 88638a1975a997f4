"""Throughput of metrics/affordance_rank on one million random sentence-object pairs of 15 classes.

    python benchmarks/metric_speed.py [--pairs 1000000]

Prints the time of the metric's own computation (numpy arrays straight into ``_compute``) for both
modes, and of the full ``evaluate`` ``compute()`` call, which also writes the inputs to Arrow and reads
them back.
"""

import argparse
import resource
import time
from pathlib import Path

import evaluate
import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    args = parser.parse_args()
    metric = evaluate.load(str(Path(__file__).resolve().parents[1] / "metrics" / "affordance_rank"))
    rng = np.random.default_rng(0)
    scores = rng.random((args.pairs, 15))
    labels = (rng.random((args.pairs, 15)) < 0.25).astype(np.int64)
    for mode in ("strict", "pairwise"):
        start = time.perf_counter()
        result = metric._compute(scores, labels, mode=mode)
        print(f"{mode:<8} core: {args.pairs:,} pairs in {time.perf_counter() - start:.2f} s  -> {result}")
    start = time.perf_counter()
    metric.compute(predictions=scores.tolist(), references=labels.tolist())
    print(f"evaluate compute() incl. Arrow round trip: {time.perf_counter() - start:.2f} s")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
