"""Progress of long steps (scoring a config, loading a model, writing a build): tqdm's bar on a terminal; in a log,
one line every 30 seconds; nothing under pytest.

When stderr is not a terminal (a job's log file, ``nohup``, a pipe), tqdm's bars are off (``disable=None``) and a
long run would be silent for minutes. There, a daemon thread writes the line of the step in progress every
``INTERVAL`` seconds: the step, items done of the total, the recent rate, the time elapsed and,
while something moves, the estimated time left at that rate (between steps, once, the finished line of the last one)::

    physprobe: prost/mass: 512/1,440 questions, 8.3 questions/s, 1m02s elapsed, ~1m53s left

Items may be done in shares: a generating engine advances each question by the share of its token budget answered,
so the count moves token by token (``3.4/20 questions``) long before a whole batch of answers ends. The libraries'
own bars (transformers converting or loading weights, datasets, huggingface_hub downloads) would print their
carriage returns into such a log: ``quiet_library_bars`` turns them off there.

A task made of steps (a card run's benchmarks) opens an ``overall`` counter: every step opened inside it adds its
items to it, and in a log its line leads the step's::

    physprobe: benchmark 2 of 4 (newton): 130/460 questions, 1.1 questions/s, 2m00s elapsed, ~5m25s left | newton/track1: 30/80 questions, 1.3 s/question, 40s elapsed, ~1m07s left

Runs under pytest (``PYTEST_CURRENT_TEST``, which pytest sets and subprocesses inherit) write neither.

>>> import io
>>> step = Step("newton/track1", 400, "questions", Reporter(io.StringIO(), INTERVAL), clock=iter([0.0, 75.0, 300.0]).__next__)
>>> step.update(100)
>>> step.line()
'physprobe: newton/track1: 100/400 questions, 1.3 questions/s, 1m15s elapsed, ~3m45s left'
>>> step.update(300); step.close(); step.line()
'physprobe: newton/track1: 400/400 questions done in 5m00s'

"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import sys
import threading
import time
from typing import TextIO

INTERVAL = 30.0  # seconds between two lines in a log
WINDOW = 3  # lines (in a log, 90 s) over which a line's rate and time left are measured


def count(n: float) -> str:
    """A count as the lines write it: whole counts with thousands separators, shares of items with one decimal.

    >>> count(1440), count(3.4), count(2.9999999999), count(51.96)
    ('1,440', '3.4', '3', '52')
    """
    shown = f"{round(n, 1):,.1f}"
    return shown.removesuffix(".0")


def rate(n: float, seconds: float, unit: str) -> str:
    """Items per second, or seconds per item where that reads better (under one item a second).

    >>> rate(500, 60, "questions"), rate(3.4, 60, "questions")
    ('8.3 questions/s', '17.6 s/question')
    """
    if n >= seconds:
        return f"{n / seconds:,.1f} {unit}/s"
    return f"{seconds / n:,.1f} s/{unit[:-1] if unit.endswith('s') else unit}"


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
    """Writes a line once ``interval`` seconds have passed since the previous one (from a daemon thread started with
    the first step, which looks every second): the line of the most recently opened step still open, else, once, the
    finished line of the step closed last; the line of each ``overall`` step open leads it (``line``). So a log hears
    from a run every ``interval`` seconds, a step that opens after a pause is reported at once, and nothing repeats
    while no step is open."""

    def __init__(self, stream: TextIO, interval: float):
        self.stream, self.interval = stream, interval
        self._open: list[Step] = []
        self._closed: Step | None = None
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
                self._closed = step

    def stop(self) -> None:
        """End the thread (the process's reporter runs until the process ends)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()

    def line(self) -> str | None:
        """The line of the newest open step, after the line of each ``overall`` step open around it; with no step open
        inside them, once, the finished line of the step closed last (None: nothing to say)."""
        with self._lock:
            leading = [step for step in self._open if step.leads]
            newest = [step for step in self._open if not step.leads][-1:]
            if not newest and self._closed is not None:
                newest = [self._closed]
            self._closed = None
            inner = [step.line() for step in newest]  # first: a leading step's time left adds the newest's own
            lines = [step.line(newest[0] if newest else None) for step in leading] + inner
        return " | ".join([lines[0], *(line.removeprefix("physprobe: ") for line in lines[1:])]) if lines else None

    def _run(self) -> None:
        written = time.monotonic()
        while not self._stopped.wait(min(1.0, self.interval / 5)):
            if time.monotonic() - written < self.interval:
                continue
            line = self.line()
            if line is not None:
                try:
                    self.stream.write(line + "\n")
                    self.stream.flush()
                except (AttributeError, OSError, ValueError):  # no stderr, or one that cannot be written: quiet
                    return
                written = time.monotonic()


class Step:
    """One step's count: ``update(n)`` as tqdm's (``n`` may be a share of an item), a context manager that closes it."""

    leads = False  # an ``overall`` step: its line leads the lines of the steps opened inside it

    def __init__(self, desc: str, total: int | None, unit: str, reporter: Reporter, clock=time.monotonic):
        self.desc, self.total, self.unit, self.n = desc, total, unit, 0
        self.reporter, self.clock = reporter, clock
        self.started = clock()
        self.ended: float | None = None
        self.left: float | None = None  # seconds left at the rate of the latest line (None: none to tell)
        # (time, count) at the previous line, and where the latest window in which the count moved began
        self._lines: collections.deque = collections.deque(maxlen=WINDOW)  # (time, count) at the latest lines
        self._lower = (self.started, 0)  # (time, count) at the latest line whose count was below the current one
        reporter.open(self)

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_description(self, desc: str) -> None:
        """Rename the step (as tqdm's ``set_description``)."""
        self.desc = desc

    def close(self) -> None:
        if self.ended is None:
            self.ended = self.clock()
        self.reporter.close(self)

    def __enter__(self) -> Step:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def line(self, inner: Step | None = None) -> str:
        """The step's line now: items done (of the total), the rate over the last ``WINDOW`` lines (in a log, the last
        90 s; while nothing moves, the last move spread up to now), time elapsed, and the time left at that rate: a
        recent rate, not the average, because a generating batch slows as its short answers end and its long ones go
        on, one token a step. An ``overall`` step's time left is that of the step open ``inner`` to it, at the inner
        step's own rate (its line written just before; once it has done a whole item, as its first shares of one say
        little), and its other items at the overall rate: a card's slow last benchmark does not read as fast as the
        ones before it.

        >>> import io
        >>> with Step("loading smollm2", None, "", Reporter(io.StringIO(), INTERVAL), clock=iter([0.0, 31.0, 40.0]).__next__) as step:
        ...     step.line()
        'physprobe: loading smollm2: 31s elapsed'
        >>> step.line()
        'physprobe: loading smollm2: done in 40s'
        >>> clock = iter([0, 30, 60, 90, 120, 150, 150]).__next__  # a line every 30 s
        >>> step = Step("newton/track3", 20, "questions", Reporter(io.StringIO(), INTERVAL), clock=clock)
        >>> for moved in (10, 8, 0.2, 0.2, 0.2):
        ...     step.update(moved); print(step.line())
        physprobe: newton/track3: 10/20 questions, 3.0 s/question, 30s elapsed, ~30s left
        physprobe: newton/track3: 18/20 questions, 3.3 s/question, 1m00s elapsed, ~7s left
        physprobe: newton/track3: 18.2/20 questions, 4.9 s/question, 1m30s elapsed, ~9s left
        physprobe: newton/track3: 18.4/20 questions, 10.7 s/question, 2m00s elapsed, ~17s left
        physprobe: newton/track3: 18.6/20 questions, 150.0 s/question, 2m30s elapsed, ~3m30s left
        >>> step.close()
        """
        self.left = None
        if self.ended is not None:
            done = f"{count(self.n)}/{count(self.total)} {self.unit} " if self.total is not None else ""
            return f"physprobe: {self.desc}: {done}done in {duration(self.ended - self.started)}"
        now = self.clock()
        elapsed = now - self.started
        previous = self._lines[-1] if self._lines else (self.started, 0)
        if self.n != previous[1]:
            self._lower = previous
        since, before = self._lines[0] if len(self._lines) == WINDOW else (self.started, 0)
        if self.n == before:  # nothing moved in the window: the last move, spread up to now (the rate falls)
            since, before = self._lower
        self._lines.append((now, self.n))
        moved, span = self.n - before, now - since
        parts = []
        if self.total is not None:
            parts.append(f"{count(self.n)}/{count(self.total)} {self.unit}")
        elif self.n:
            parts.append(f"{count(self.n)} {self.unit}")
        if moved > 0 and span > 0:
            parts.append(rate(moved, span, self.unit))
        parts.append(f"{duration(elapsed)} elapsed")
        if self.total is not None and 0 < self.n < self.total and moved > 0 and span > 0:
            self.left = span / moved * (self.total - self.n)
            # the inner step at its own rate, once it has done a whole item; the rest at this one's
            if inner is not None and inner.left is not None and inner.n >= 1:
                self.left = overall_left(inner.left, inner.total - inner.n, self.total - self.n, moved / span)
            parts.append(f"~{duration(self.left)} left")
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


# What tells transformers, huggingface_hub, datasets and any other tqdm user (transformers' GGUF conversion calls tqdm
# itself) that their bars are off: each library reads its variable when imported.
QUIET = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}


def quiet_library_bars(environ=os.environ, stream: TextIO | None = None) -> bool:
    """Turn the libraries' own progress bars off when ``stream`` (stderr) is not a terminal, where they would write
    carriage returns into a log and physprobe's lines report progress instead; the variables reach worker processes
    too. Call it before transformers, datasets or tqdm is imported. A variable the user set is kept; nothing changes
    under pytest. Returns whether the bars were turned off.

    >>> import io
    >>> environ = {"TQDM_DISABLE": "0"}
    >>> quiet_library_bars(environ, io.StringIO()), environ["HF_HUB_DISABLE_PROGRESS_BARS"], environ["TQDM_DISABLE"]
    (True, '1', '0')
    """
    if _terminal(sys.stderr if stream is None else stream) or "PYTEST_CURRENT_TEST" in environ:
        return False
    for name, value in QUIET.items():
        environ.setdefault(name, value)
    return True


def _terminal(stream: TextIO | None) -> bool:
    """Whether ``stream`` is a terminal: not when it is closed (None: Python's ``2>&-``) or cannot say."""
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False


def overall_left(inner_left: float, inner_items: float, items: float, rate: float) -> float:
    """The seconds left of an ``overall`` count with ``items`` to go at ``rate`` items a second: those of the step
    open inside it (``inner_left``, for its ``inner_items``), at the step's own rate, and the other items at
    ``rate``. A card's slow last benchmark does not read as fast as the ones before it.

    >>> overall_left(67.0, 50, 330, 1.0)  # the step's 1m07s, then 280 questions at one a second
    347.0
    """
    return inner_left + max(0.0, items - inner_items) / rate


def _rate(shown: dict) -> float | None:
    """A tqdm bar's rate in items a second, from its ``format_dict``, as tqdm reads it (None: none yet)."""
    n, elapsed = shown["n"], shown["elapsed"]
    return shown["rate"] or ((n - shown["initial"]) / elapsed if elapsed else None)


@functools.cache
def _bar_class():
    """tqdm's bar, its counts written as ``count`` writes them (``3.4/20``: a count may move in shares of an item);
    an ``overall`` bar's time left reads the bar of the step open inside it (``inner``), as ``overall_left`` says.
    Made at first use, not at import: tqdm reads its ``TQDM_*`` variables when imported, after ``quiet_library_bars``."""
    from tqdm.auto import tqdm

    class Bar(tqdm):
        inner = None  # an ``overall`` bar: the bar of the step open inside it (``bar``)

        @property
        def format_dict(self):
            shown = super().format_dict
            rate, inner, left = _rate(shown), self.inner, None
            if rate and self.total:  # tqdm's own estimate
                left = (self.total - self.n) / rate
            if left and inner is not None and not inner.disable and inner.n >= 1 and (inner_rate := _rate(inner.format_dict)):
                left = overall_left((inner.total - inner.n) / inner_rate, inner.total - inner.n, self.total - self.n, rate)
            return {**shown, "count": count(self.n), "left": "?" if left is None else tqdm.format_interval(left)}

    return Bar


def _terminal_bar(desc: str, total: int, unit: str, leave: bool = True):
    return _bar_class()(
        total=total,
        desc=desc,
        unit=f" {unit}",
        leave=leave,
        bar_format="{l_bar}{bar}| {count}/{total_fmt}{unit} [{elapsed}<{left}, {rate_fmt}{postfix}]",
    )


def bar(desc: str, total: int | None = None, unit: str = "items"):
    """A progress counter for one step (``update(n)``, ``close()``, a context manager): tqdm's bar when stderr is a
    terminal, log lines (``Step``) when it is not, a silent tqdm under pytest. ``total=None``: a step counted in
    time alone (the bar shows the time elapsed). Inside ``overall``, a counted step adds its items to it too."""
    counter = _counter(desc, total, unit, nested=bool(_OVERALL))
    if not _OVERALL or total is None:
        return counter
    if isinstance(_OVERALL[-1], _bar_class()):  # a log's ``Reporter`` finds the step open inside by itself
        _OVERALL[-1].inner = counter
    return Adding(counter, _OVERALL[-1])


@contextlib.contextmanager
def overall(desc: str, total: int, unit: str = "items"):
    """A counter of a task made of steps (``set_description`` names the step it is at): each step opened inside the
    block with ``bar`` adds its items to it; in a log, its line leads the step's; on a terminal, its bar stays above
    the step's.

    In a log, two minutes into a card, 40 seconds into its step; the card's time left is the step's, at the step's
    own rate, and its 280 later questions at the card's:

    >>> import io
    >>> reporter = Reporter(io.StringIO(), INTERVAL)
    >>> card = Step("benchmark 2 of 4 (newton)", 460, "questions", reporter, clock=iter([0.0, 120.0]).__next__)
    >>> card.leads, card.n = True, 100
    >>> step = Adding(Step("newton/track1", 80, "questions", reporter, clock=iter([80.0, 120.0]).__next__), card)
    >>> step.update(30)
    >>> reporter.line()
    'physprobe: benchmark 2 of 4 (newton): 130/460 questions, 1.1 questions/s, 2m00s elapsed, ~5m25s left | newton/track1: 30/80 questions, 1.3 s/question, 40s elapsed, ~1m07s left'
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
    if _terminal(sys.stderr):
        if total is None:
            return tqdm(desc=desc, bar_format="{desc}: {elapsed}", leave=not nested)
        return _terminal_bar(desc, total, unit, leave=not nested)
    global _REPORTER
    if _REPORTER is None:
        _REPORTER = Reporter(sys.stderr, INTERVAL)
    return Step(desc, total, unit, _REPORTER)
