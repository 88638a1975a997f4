"""Progress of long steps (scoring a config, loading a model, writing a build): tqdm's bar on a terminal; in a log,
one line at most every 30 seconds; nothing under pytest.

When stderr is not a terminal (a job's log file, ``nohup``, a pipe), tqdm's bars are off (``disable=None``) and a
long run would be silent for minutes. There, a daemon thread writes the line of the step in progress every
``INTERVAL`` seconds while one is open: the step, items done of the total, the time elapsed and, once an item is
done, the estimated time left::

    physprobe: prost/mass: 512/1,440 questions, 1m02s elapsed, ~1m53s left

A task made of steps (a card run's benchmarks) opens an ``overall`` counter: every step opened inside it adds its
items to it, and in a log its line leads the step's::

    physprobe: benchmark 2 of 4 (newton): 130/460 questions, 2m00s elapsed, ~5m05s left | newton/track1: 30/80 questions, 40s elapsed, ~1m07s left

Runs under pytest (``PYTEST_CURRENT_TEST``, which pytest sets and subprocesses inherit) write neither.

>>> import io
>>> step = Step("newton/track1", 400, "questions", Reporter(io.StringIO(), INTERVAL), clock=iter([0.0, 75.0]).__next__)
>>> step.update(100)
>>> step.line()
'physprobe: newton/track1: 100/400 questions, 1m15s elapsed, ~3m45s left'
>>> step.close()
"""

from __future__ import annotations

import contextlib
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

    def line(self) -> str | None:
        """The line of the newest open step, after the line of each ``overall`` step open around it (None: none open)."""
        with self._lock:
            leading = [step for step in self._open if step.leads]
            newest = [step for step in self._open if not step.leads][-1:]
        lines = [step.line() for step in leading + newest]
        return " | ".join([lines[0], *(line.removeprefix("physprobe: ") for line in lines[1:])]) if lines else None

    def _run(self) -> None:
        while not self._stopped.wait(self.interval):
            line = self.line()
            if line is not None:
                self.stream.write(line + "\n")
                self.stream.flush()


class Step:
    """One step's count: ``update(n)`` as tqdm's, a context manager that closes it."""

    leads = False  # an ``overall`` step: its line leads the lines of the steps opened inside it

    def __init__(self, desc: str, total: int | None, unit: str, reporter: Reporter, clock=time.monotonic):
        self.desc, self.total, self.unit, self.n = desc, total, unit, 0
        self.reporter, self.clock = reporter, clock
        self.started = clock()
        reporter.open(self)

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_description(self, desc: str) -> None:
        """Rename the step (as tqdm's ``set_description``)."""
        self.desc = desc

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
_OVERALL: list = []  # the ``overall`` counters open, innermost last


class Adding:
    """A step's counter that also adds each count to the ``overall`` counter it was opened in."""

    def __init__(self, counter, overall):
        self.counter, self.overall = counter, overall

    def update(self, n: float = 1) -> None:
        self.counter.update(n)
        self.overall.update(n)

    def close(self) -> None:
        self.counter.close()

    def __enter__(self) -> Adding:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def bar(desc: str, total: int | None = None, unit: str = "items"):
    """A progress counter for one step (``update(n)``, ``close()``, a context manager): tqdm's bar when stderr is a
    terminal, log lines (``Step``) when it is not, a silent tqdm under pytest. ``total=None``: a step counted in
    time alone (the bar shows the time elapsed). Inside ``overall``, a counted step adds its items to it too."""
    counter = _counter(desc, total, unit, nested=bool(_OVERALL))
    return Adding(counter, _OVERALL[-1]) if _OVERALL and total is not None else counter


@contextlib.contextmanager
def overall(desc: str, total: int, unit: str = "items"):
    """A counter of a task made of steps (``set_description`` names the step it is at): each step opened inside the
    block with ``bar`` adds its items to it; in a log, its line leads the step's; on a terminal, its bar stays above
    the step's.

    In a log, two minutes into a card, 40 seconds into its step:

    >>> import io
    >>> reporter = Reporter(io.StringIO(), INTERVAL)
    >>> card = Step("benchmark 2 of 4 (newton)", 460, "questions", reporter, clock=iter([0.0, 120.0]).__next__)
    >>> card.leads, card.n = True, 100
    >>> step = Adding(Step("newton/track1", 80, "questions", reporter, clock=iter([80.0, 120.0]).__next__), card)
    >>> step.update(30)
    >>> reporter.line()
    'physprobe: benchmark 2 of 4 (newton): 130/460 questions, 2m00s elapsed, ~5m05s left | newton/track1: 30/80 questions, 40s elapsed, ~1m07s left'
    """
    counter = _counter(desc, total, unit, nested=False)
    if isinstance(counter, Step):
        counter.leads = True
    _OVERALL.append(counter)
    try:
        with counter:
            yield counter
    finally:
        _OVERALL.remove(counter)


def _counter(desc: str, total: int | None, unit: str, nested: bool):
    from tqdm.auto import tqdm

    if "PYTEST_CURRENT_TEST" in os.environ:
        return tqdm(total=total, disable=True)
    if sys.stderr.isatty():
        if total is None:
            return tqdm(desc=desc, bar_format="{desc}: {elapsed}", leave=not nested)
        return tqdm(total=total, desc=desc, unit=f" {unit}", leave=not nested)
    global _REPORTER
    if _REPORTER is None:
        _REPORTER = Reporter(sys.stderr, INTERVAL)
    return Step(desc, total, unit, _REPORTER)
