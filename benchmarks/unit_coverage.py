"""Coverage of the Differences section's 95% interval when a model's answers depend on the unit its questions share.

    python benchmarks/unit_coverage.py --data data --replications 200 --units 100 --resamples 200

For each benchmark's declared unit (``Evaluation.unit``: NEWTON's object set, PROST's concept's object set, CConS's
object pair, Text2Afford's sentence), on the built data: each replication draws ``--units`` units of a config and
every question they hold; two simulated runs answer every question of a unit alike (A right on a unit with
probability 0.55; B with 0.88 where A is, 0.70 where A is not), so the true difference of their accuracies is
0.249 and a unit's questions are perfectly correlated. The paired bootstrap interval
(``compare._differences``, the plain accuracy) is taken twice: resampling single questions (no unit declared) and
resampling whole units (the benchmark's). Printed per unit: the questions per unit, the design effect of the
replications' units (the mean of m_u^2 over the mean of m_u) and how often each interval covered 0.249. Where every
unit is one question the two intervals coincide; where units hold many questions the question-resampled one covers
far less than 95%.
"""

from __future__ import annotations

import argparse
import glob
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from physprobe.data import registry
from physprobe.protocols import Evaluation
from physprobe.report import compare

CASES = [("newton", "track1"), ("newton", "track2_boolean"), ("prost", "default"), ("cccons", "ordinary"),
         ("text2afford", "default")]  # fmt: skip
# A right on a unit with probability 0.55; B right with 0.88 where A is, 0.70 where A is not: correlated runs whose
# accuracies differ by 0.55 x 0.88 + 0.45 x 0.70 - 0.55 = 0.249 in expectation.
P_A, P_B_GIVEN_A, P_B_GIVEN_NOT_A = 0.55, 0.88, 0.70
TRUTH = P_A * P_B_GIVEN_A + (1 - P_A) * P_B_GIVEN_NOT_A - P_A


def _accuracy(config, rows, predictions, scores):
    return {"accuracy": sum(p == 0 for p in predictions) / len(predictions)}


def _replication(rows, keys, units: int, rng, resamples: int, evaluations) -> list[bool]:
    """One replication: ``units`` units drawn, both runs answering each unit's questions alike; whether each
    evaluation's interval (questions, then units resampled) covers the true difference."""
    chosen = rng.choice(len(keys), size=min(units, len(keys)), replace=False)
    a_unit = rng.random(len(chosen)) < P_A
    b_unit = rng.random(len(chosen)) < np.where(a_unit, P_B_GIVEN_A, P_B_GIVEN_NOT_A)
    of = np.concatenate([[u] * len(keys[k]) for u, k in enumerate(chosen)])
    picked = [i for k in chosen for i in keys[k]]
    pairs = [(compare._Answer("", rows[i], "decided", 0 if a_unit[u] else 1, []),
              compare._Answer("", rows[i], "decided", 0 if b_unit[u] else 1, [])) for i, u in zip(picked, of)]  # fmt: skip
    figure = compare.Figure("c.accuracy", "accuracy")
    covered = []
    for evaluation in evaluations:
        (d,) = compare._differences(evaluation, "c", [figure], pairs, [{}, {}], resamples, int(rng.integers(1 << 30)))
        covered.append(d.low <= TRUTH <= d.high)
    return covered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data"))
    parser.add_argument("--replications", type=int, default=200)
    parser.add_argument("--units", type=int, default=100)
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    print(f"true difference of the simulated runs' accuracies: {TRUTH:.3f}; {args.replications} replications, "
          f"{args.units} units each, {args.resamples} resamples")  # fmt: skip
    print(f"{'benchmark/config':28} {'unit':24} {'questions/unit':>14} {'design effect':>13} {'covered (questions)':>20} "
          f"{'covered (units)':>16}")  # fmt: skip
    for benchmark, config in CASES:
        unit = registry.evaluation(benchmark).unit
        rows = [
            r for f in sorted(glob.glob(str(args.data / benchmark / config / "*.parquet"))) for r in pq.read_table(f).to_pylist()
        ]
        grouped: dict = {}
        for i, row in enumerate(rows):
            grouped.setdefault(unit.key(row, config), []).append(i)
        keys = list(grouped.values())
        evaluations = [
            Evaluation("demo", ("c",), (), metrics=_accuracy),
            Evaluation("demo", ("c",), (), metrics=_accuracy, unit=unit),
        ]
        rng = np.random.default_rng(args.seed)
        hits = np.array(
            [_replication(rows, keys, args.units, rng, args.resamples, evaluations) for _ in range(args.replications)]
        )
        sizes = np.array([len(k) for k in keys], dtype=float)
        effect = float(np.mean(sizes**2) / np.mean(sizes))
        print(f"{benchmark + '/' + config:28} {unit.name:24} {np.mean(sizes):14.2f} {effect:13.2f} "
              f"{100 * hits[:, 0].mean():19.1f}% {100 * hits[:, 1].mean():15.1f}%")  # fmt: skip


if __name__ == "__main__":
    main()
