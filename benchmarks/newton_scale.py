"""Generate N custom NEWTON questions into Parquet with flat memory (target: peak RSS < 500 MB whatever N).

    python benchmarks/newton_scale.py [--n 1000000] [--source-dir ../shared/data/upstream]

Prints the wall time, questions per second and the process's peak RSS. Measured on the shared 2-core
machine (other jobs running): 1M 176 MB / 34.5 s, 5M 177 MB / 484 s, 20M 196 MB / 2,536 s.
"""

import argparse
import resource
import tempfile
import time
from pathlib import Path

from physprobe.data.dataset_folder import stream
from physprobe.dataset_scripts.newton import newton
from physprobe.generators.newton import Condition, Spec, challenge_set


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--source-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "upstream"))
    args = parser.parse_args()
    repository = newton.repository(newton.NEWTON.sources(args.source_dir))
    spec = Spec(
        "soft_things", "I need something to lean against.",
        "Which of {object1}, {object2}, {object3}, {object4} is the most comfortable?",
        (Condition("Softness", "high", 3),), max_questions=args.n,
    )  # fmt: skip
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        result = stream(spec.name, newton.CHALLENGE_FEATURES, challenge_set(repository, spec, 0), out, "benchmark")
        size = sum(p.stat().st_size for p in result.path.rglob("*.parquet"))
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"questions written: {result.rows['default']:,} ({size / 1e6:.1f} MB of Parquet)")
    print(f"wall time:         {elapsed:.1f} s ({result.rows['default'] / elapsed:,.0f} questions/s)")
    print(f"peak RSS:          {peak:.0f} MB   target < 500 MB")


if __name__ == "__main__":
    main()
