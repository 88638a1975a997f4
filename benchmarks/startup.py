"""Start-up time of the ``physprobe`` command: ``--help``, a sub-command's ``--help``, an argument error the
parser catches and one that needs the benchmark's config names.

    python benchmarks/startup.py [--runs 5]

Each is run as a fresh process (the installed console script next to this Python); printed: min / median /
max wall time over the runs. Target: under 0.3 s.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {"physprobe --help": ["--help"], "physprobe score --help": ["score", "--help"],
            "argument error": ["score", "--model", "x", "--benchmark", "nope"],
            "unknown config": ["score", "--benchmark", "prost", "--config", "nope", "--model", "x"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    script = Path(sys.executable).with_name("physprobe")
    times = {name: [] for name in COMMANDS}
    codes = {}
    for _ in range(args.runs):  # interleaved, so that load on a shared machine hits all alike
        for name, argv in COMMANDS.items():
            start = time.perf_counter()
            codes[name] = subprocess.run([str(script), *argv], capture_output=True).returncode
            times[name].append(time.perf_counter() - start)
    print(f"{'command':<26} {'min':>7} {'median':>7} {'max':>7} {'exit':>5}  (s, {args.runs} runs)")
    for name, values in times.items():
        print(f"{name:<26} {min(values):7.3f} {statistics.median(values):7.3f} {max(values):7.3f} {codes[name]:>5}")


if __name__ == "__main__":
    main()
