"""Wall time and peak memory of building PROST (target on a 2-core machine: under 2 s, under 300 MB).

    python benchmarks/build_speed.py --source-dir ../shared/data/upstream

Prints import time, the build's wall time (median of --repeat runs) and the process's peak RSS.
"""

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

started = time.perf_counter()
from physprobe.data.dataset_folder import build  # noqa: E402
from physprobe.dataset_scripts.prost.prost import PROST  # noqa: E402

imported = time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "upstream"))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    times = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            result = build(PROST, out, args.source_dir)
            times.append(time.perf_counter() - start)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"PROST rows built:            {result.rows['default']:,} ({len(result.rows)} configs)")
    print(f"import physprobe + datasets: {imported:.2f} s")
    print(f"build (median of {args.repeat}):        {statistics.median(times):.2f} s  (min {min(times):.2f} s)")
    print(f"import + build:              {imported + statistics.median(times):.2f} s   target < 2 s")
    print(f"peak RSS of the process:     {peak_mb:.0f} MB   target < 300 MB")


if __name__ == "__main__":
    main()
