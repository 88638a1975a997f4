"""Progress of long steps (scoring a config, loading a model, writing a build): tqdm's bar on a terminal; in a log,
one line at most every 30 seconds; nothing under pytest.

When stderr is not a terminal (a job's log file, ``nohup``, a pipe), tqdm's bars are off (``disable=None``) and a
long run would be silent for minutes. There, a daemon thread writes the line of the step in progress every
``INTERVAL`` seconds while one is open: the step, items done of the total, the time elapsed and, once an item is
done, the estimated time left::

    physprobe: prost/mass: 512/1,440 questions, 1m02s elapsed, ~1m53s left

Runs under pytest (``PYTEST_CURRENT_TEST``, which pytest sets and subprocesses inherit) write neither.

>>> import io
>>> step = Step("newton/track1", 400, "questions", Reporter(io.StringIO(), INTERVAL), clock=iter([0.0, 75.0]).__next__)
>>> step.update(100)
>>> step.line()
'physprobe: newton/track1: 100/400 questions, 1m15s elapsed, ~3m45s left'
>>> step.close()
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

INTERVAL = 30.0  # seconds between two lines in a log


def duration(seconds: float) -> str:
    """Seconds as the lines write them.

    >>> duration(42.4), duration(62), duration(3725)
    ('42s', '1m02s', '1h02m05s')
    """
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{seconds:02d}s"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


class Reporter:
    """Writes the line of the most recently opened step every ``interval`` seconds, from a daemon thread started
    with the first step; nothing while no step is open."""

    def __init__(self, stream: TextIO, interval: float):
        self.stream, self.interval = stream, interval
        self._open: list[Step] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self, step: Step) -> None:
        with self._lock:
            self._open.append(step)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="physprobe-progress", daemon=True)
                self._thread.start()

    def close(self, step: Step) -> None:
        with self._lock:
            if step in self._open:
                self._open.remove(step)

    def stop(self) -> None:
        """End the thread (the process's reporter runs until the process ends)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(self.interval):
            with self._lock:
                line = self._open[-1].line() if self._open else None
            if line is not None:
                self.stream.write(line + "\n")
                self.stream.flush()


class Step:
    """One step's count: ``update(n)`` as tqdm's, a context manager that closes it."""

    def __init__(self, desc: str, total: int | None, unit: str, reporter: Reporter, clock=time.monotonic):
        self.desc, self.total, self.unit, self.n = desc, total, unit, 0
        self.reporter, self.clock = reporter, clock
        self.started = clock()
        reporter.open(self)

    def update(self, n: int = 1) -> None:
        self.n += n

    def close(self) -> None:
        self.reporter.close(self)

    def __enter__(self) -> Step:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def line(self) -> str:
        """The step's line now: items done (of the total), time elapsed, estimated time left.

        >>> import io
        >>> with Step("loading smollm2", None, "", Reporter(io.StringIO(), INTERVAL), clock=iter([0.0, 31.0]).__next__) as step:
        ...     step.line()
        'physprobe: loading smollm2: 31s elapsed'
        """
        elapsed = self.clock() - self.started
        parts = []
        if self.total is not None:
            parts.append(f"{self.n:,}/{self.total:,} {self.unit}")
        elif self.n:
            parts.append(f"{self.n:,} {self.unit}")
        parts.append(f"{duration(elapsed)} elapsed")
        if self.total is not None and 0 < self.n < self.total:
            parts.append(f"~{duration(elapsed / self.n * (self.total - self.n))} left")
        return f"physprobe: {self.desc}: {', '.join(parts)}"


_REPORTER: Reporter | None = None


def bar(desc: str, total: int | None = None, unit: str = "items"):
    """A progress counter for one step (``update(n)``, ``close()``, a context manager): tqdm's bar when stderr is a
    terminal, log lines (``Step``) when it is not, a silent tqdm under pytest. ``total=None``: a step counted in
    time alone (the bar shows the time elapsed)."""
    from tqdm.auto import tqdm

    if "PYTEST_CURRENT_TEST" in os.environ:
        return tqdm(disable=True)
    if sys.stderr.isatty():
        if total is None:
            return tqdm(desc=desc, bar_format="{desc}: {elapsed}")
        return tqdm(total=total, desc=desc, unit=f" {unit}")
    global _REPORTER
    if _REPORTER is None:
        _REPORTER = Reporter(sys.stderr, INTERVAL)
    return Step(desc, total, unit, _REPORTER)
