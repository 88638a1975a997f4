"""A log's lines of progress (``physprobe.util.progress`` opens them where stderr is not a terminal): a ``Step``'s
line of items done, recent rate, time elapsed and left; a ``Tally``'s time left of a task of parts; the ``Reporter``
thread that writes the line of the step in progress every ``INTERVAL`` seconds. ``physprobe.util.progress`` says
what the lines tell and when.

>>> count(1440), duration(62)
('1,440', '1m02s')
"""

from __future__ import annotations

import collections
import statistics
import threading
import time
from typing import TextIO

INTERVAL = 30.0  # seconds between two lines in a log
WINDOW = 3  # lines (in a log, 90 s) over which a step's rate and time left are measured


def count(n: float) -> str:
    """A count as the lines write it: whole counts with thousands separators, shares of items with one decimal.

    >>> count(1440), count(3.4), count(2.9999999999), count(51.96)
    ('1,440', '3.4', '3', '52')
    """
    shown = f"{round(n, 1):,.1f}"
    return shown.removesuffix(".0")


def rate(n: float, seconds: float, unit: str) -> str:
    """Items per second, or seconds per item where that reads better (under one item a second).

    >>> rate(500, 60, "options"), rate(3.4, 60, "generations")
    ('8.3 options/s', '17.6 s/generation')
    """
    if n >= seconds:
        return f"{n / seconds:,.1f} {unit}/s"
    return f"{seconds / n:,.1f} s/{unit[:-1] if unit.endswith('s') else unit}"


def duration(seconds: float) -> str:
    """Seconds as the lines write them (never below zero).

    >>> duration(42.4), duration(62), duration(3725), duration(-3)
    ('42s', '1m02s', '1h02m05s', '0s')
    """
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{seconds:02d}s"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


class Tally:
    """The time left of a task made of parts (a card: benchmarks) whose items cost more or less each (a generation
    of up to 128 tokens, one of up to 20 after a longer prompt, a scored option: ``requests.cost_of``): the open
    part's work left at its own pace, the later parts' at the pace of all the work done so far, and the time between
    parts (a benchmark's figures and folder written) as the mean of those seen, once for each part left.

    A pace is the seconds of the work truly done: a generation that ends before its budget spares the rest
    (``spare``), which leaves the task's cost and its part's, so a pace is that of the prompts read and the tokens
    generated, which differs less from one benchmark to the next than a budget's step (an instruct model's CConS
    answers may end at their first token of 20), though still with the batch (a part of a few rows a call leaves its
    decoding batch part empty and pays more a step).
    The open part's work left is expected to be spared in the share its work spared so far, counted with a tenth of
    it spared in none; a later part's at its full cost, since no answer's length is known before it is read. A part's
    own pace counts a tenth of what it has to do, and at least ``OWN_SECONDS`` of work, at the ended parts' pace, so
    the estimate moves to the part's pace as it goes, not in a jump. A pace is the cost done in the time spent on it,
    an average (smooth, where a recent window swings): from a step's opening (``begin``) or its previous count to each
    count (``add``), the time of the count in progress included, so the pace falls while nothing moves (but not once
    its part is counted to its end: that wait is time between parts); work found done (cached, ``timed=False``)
    counts as done, in no time; time spent waiting (``pause``: a model loading) counts for none.

    A card of two parts and 1,000 units of cost: its first part of 400 done in 100 s (0.25 s a unit); 5 s later
    the second, of 600, begins and 30 s in, 60 of its units are counted done, of which 20 spared (its answers ended
    early). The 40 spent took 30 s, counted with 58 units (a tenth of the 580 it now has to do) at 0.25 s: 0.454 s a
    unit. Of its 540 left, 20 / (20 + 40 + 58) is expected spared, so 448 at 0.454 s take 3m24s, and the time
    between parts 5 s more:

    >>> clock = iter([0.0, 100, 105, 105, 135, 135, 135]).__next__
    >>> tally = Tally(1000, parts=2, clock=clock)
    >>> tally.part(400); tally.begin(); tally.add(400)
    >>> tally.part(600); tally.begin(); tally.add(60); tally.spare(20)
    >>> duration(tally.left())
    '3m29s'
    """

    OWN = 0.1  # the share of what it has to do that a part's own pace weighs as much as the ended parts' pace
    OWN_SECONDS = 10.0  # and the least work, in seconds at the earlier parts' pace, it weighs as much as

    def __init__(self, total: float, parts: int = 1, clock=None):
        self.total, self.parts, self.clock = total, parts, clock or time.monotonic
        self.done = self.timed = self.seconds = 0.0  # all done; done in this run (not found done), in these seconds
        self.since: float | None = None  # where the time not yet counted began (None: a pause)
        self.counted: float | None = None  # when the last count in time was made
        self.open = {"total": 0.0, "done": 0.0, "timed": 0.0, "seconds": 0.0, "spared": 0.0}  # the open part
        self.between: list[float] = []  # seconds from each ended part's last count (one that did work) to the next
        self.begun = 0  # parts begun

    def part(self, total: float) -> None:
        """A part of the task begins, of cost ``total`` (the part before it ends, its pace kept if it did work)."""
        if self.open["timed"] > 0:
            self.between.append(self.clock() - self.counted)
        self.open = {"total": total, "done": 0.0, "timed": 0.0, "seconds": 0.0, "spared": 0.0}
        self.begun += 1

    def begin(self) -> None:
        """A step begins, or a pause ends: the time from now counts."""
        self.since = self.clock()

    def pause(self) -> None:
        """Time from now counts for nothing (until ``begin``)."""
        self.since = None

    def add(self, cost: float, timed: bool = True) -> None:
        self.done += cost
        self.open["done"] += cost
        if not timed:
            return
        now = self.clock()
        spent = now - self.since if self.since is not None else 0.0
        self.since = self.counted = now
        self.timed += cost
        self.seconds += spent
        self.open["timed"] += cost
        self.open["seconds"] += spent

    def spare(self, cost: float) -> None:
        """``cost`` of the work counted done in time was never spent (answers that ended before their budget): the
        task and its open part cost that much less."""
        self.total -= cost
        self.done -= cost
        self.timed -= cost
        for field in ("total", "done", "timed"):
            self.open[field] -= cost
        self.open["spared"] += cost

    def left(self) -> float | None:
        """Seconds left (None: nothing done in time yet to tell a pace by)."""
        now, part = self.clock(), self.open
        waiting = max(0.0, now - self.since) if self.since is not None else 0.0  # the count in progress
        # A part counted to its end is being finished (its figures, its folder): that wait is time between parts
        finishing = part["timed"] > 0 and part["total"] - part["done"] <= 1e-9 * part["total"]
        if finishing:
            waiting = 0.0
        seconds = self.seconds + waiting
        if self.timed <= 0 or seconds <= 0:
            return None
        # Seconds a unit of cost: the pace of the ended parts' work together (of the work so far in the first part)
        ended = self.timed - part["timed"]
        before = (self.seconds - part["seconds"]) / ended if self.between and ended > 0 else seconds / self.timed
        rest = max(0.0, self.total - self.done)
        mine = min(rest, max(0.0, part["total"] - part["done"]))
        to_time = part["total"] - (part["done"] - part["timed"])  # the part's work not found done
        # The open part's pace: its own, with a tenth of what it has to do (at least OWN_SECONDS of work) counted at
        # the ended parts' pace before any of it is done, so the estimate moves to the part's own pace as it goes,
        # never in a jump; the wait for its first count (its first batch: prompts read, a first token generated for
        # each) is not yet a pace, and counts from that count on.
        prior = max(self.OWN * to_time, self.OWN_SECONDS / before if before > 0 else 0.0)
        waited = waiting if part["timed"] > 0 else 0.0
        own = (part["seconds"] + waited + prior * before) / (part["timed"] + prior) if part["timed"] + prior > 0 else before
        later = (self.seconds + waited) / self.timed if self.between else own  # the pace of all the work done in time
        spent = 1.0 - part["spared"] / (part["spared"] + part["timed"] + prior)  # the share of its work left spent
        between = 0.0
        if self.between:  # each part left its mean, the one being finished less the time it has taken so far
            between = statistics.fmean(self.between) * max(1, self.parts - len(self.between))
            between = max(0.0, between - (now - self.counted)) if finishing else between
        return mine * spent * own + (rest - mine) * later + between


class Reporter:
    """Writes a line once ``interval`` seconds have passed since the previous one (from a daemon thread started with
    the first step, which looks every second): the line of the most recently opened step still open, else, once, the
    finished line of the step closed last, else that the command is still at work; the line of each ``overall`` step
    open leads it (``line``). So a log hears from a run every ``interval`` seconds for as long as it runs, a step
    that opens after a pause is reported at once, and a failure to make a line (which a test's fake clock may
    raise) skips that line, never the ones after it."""

    def __init__(self, stream: TextIO, interval: float):
        self.stream, self.interval, self.clock = stream, interval, time.monotonic
        self._open: list[Step] = []
        self._closed: Step | None = None
        self._last: Step | None = None  # the step closed last (an idle line names it)
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
                self._closed = self._last = step

    def stop(self) -> None:
        """End the thread (the process's reporter runs until the process ends)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()

    def line(self) -> str:
        """The line of the newest open step, after the line of each ``overall`` step open around it; with no step open
        inside them, once, the finished line of the step closed last; with nothing to say of a step, that the
        command is still at work."""
        with self._lock:
            leading = [step for step in self._open if step.leads]
            newest = [step for step in self._open if not step.leads][-1:]
            if not newest and self._closed is not None:
                newest = [self._closed]
            self._closed = None
            lines = [step.line() for step in leading + newest]
            last = self._last
        if not lines:
            since = (
                f" (the last step, {last.desc}, ended {duration(self.clock() - last.ended)} ago)" if last and last.ended else ""
            )
            return f"physprobe: still working{since}"
        return " | ".join([lines[0], *(line.removeprefix("physprobe: ") for line in lines[1:])])

    def _run(self) -> None:
        written = time.monotonic()
        while not self._stopped.wait(min(1.0, self.interval / 5)):
            if time.monotonic() - written < self.interval:
                continue
            written = time.monotonic()
            try:
                line = self.line()
            except Exception:  # noqa: BLE001 - progress must never end the lines after it, whatever one line hit
                continue
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (AttributeError, OSError, ValueError):  # no stderr, or one that cannot be written: quiet
                return


class Step:
    """One step's count: ``update(n)`` as tqdm's (``n`` may be a share of an item; the count stays within 0 and the
    total), a context manager that closes it; ``done``: the items found done when it opens (taking no time)."""

    leads = False  # an ``overall`` step: its line leads the lines of the steps opened inside it
    tally: Tally | None = None  # an ``overall`` step's time left

    def __init__(self, desc: str, total: float | None, unit: str, reporter: Reporter, clock=None, done: float = 0):
        self.desc, self.total, self.unit, self.n = desc, total, unit, done
        self.reporter, self.clock = reporter, clock or time.monotonic
        self.started = self.clock()
        self.ended: float | None = None
        self._lines: collections.deque = collections.deque(maxlen=WINDOW)  # (time, count) at the latest lines
        self._lower = (self.started, done)  # (time, count) at the latest line whose count was below the current one
        self._start = (self.started, done)  # the items found done took no time
        reporter.open(self)

    def update(self, n: float = 1) -> None:
        self.n = max(0.0, self.n + n) if self.total is None else min(max(0.0, self.n + n), self.total)

    def set_description(self, desc: str) -> None:
        """Rename the step (as tqdm's ``set_description``)."""
        self.desc = desc

    def spare(self, n: float) -> None:
        """A step counts items, not their cost: work spared leaves its count as it is (``progress.Adding`` takes it
        back from the ``overall`` step's ``Tally``)."""

    def close(self) -> None:
        if self.ended is None:
            self.ended = self.clock()
        self.reporter.close(self)

    def __enter__(self) -> Step:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def line(self) -> str:
        """The step's line now: items done (of the total), the rate over the last ``WINDOW`` lines (in a log, the last
        90 s; while nothing moves, the last move spread up to now), time elapsed, and the time left at that rate: a
        recent rate, not the average, because a generating batch slows as its short answers end and its long ones go
        on, one token a step. An ``overall`` step's line tells its count, its time and its ``Tally``'s time left (its
        items are of several kinds: no one rate).

        >>> import io
        >>> with Step("loading smollm2", None, "", Reporter(io.StringIO(), INTERVAL), clock=iter([0.0, 31.0, 40.0]).__next__) as step:
        ...     step.line()
        'physprobe: loading smollm2: 31s elapsed'
        >>> step.line()
        'physprobe: loading smollm2: done in 40s'
        >>> clock = iter([0, 30, 60, 90, 120, 150, 150]).__next__  # a line every 30 s
        >>> step = Step("newton/track3", 20, "generations", Reporter(io.StringIO(), INTERVAL), clock=clock)
        >>> for moved in (10, 8, 0.2, 0.2, 0.2):
        ...     step.update(moved); print(step.line())
        physprobe: newton/track3: 10/20 generations, 3.0 s/generation, 30s elapsed, ~30s left
        physprobe: newton/track3: 18/20 generations, 3.3 s/generation, 1m00s elapsed, ~7s left
        physprobe: newton/track3: 18.2/20 generations, 4.9 s/generation, 1m30s elapsed, ~9s left
        physprobe: newton/track3: 18.4/20 generations, 10.7 s/generation, 2m00s elapsed, ~17s left
        physprobe: newton/track3: 18.6/20 generations, 150.0 s/generation, 2m30s elapsed, ~3m30s left
        >>> step.close()
        """
        if self.ended is not None:
            done = f"{count(self.n)}/{count(self.total)} {self.unit} " if self.total is not None else ""
            return f"physprobe: {self.desc}: {done}done in {duration(self.ended - self.started)}"
        now = self.clock()
        elapsed = now - self.started
        parts = []
        if self.total is not None:
            parts.append(f"{count(self.n)}/{count(self.total)} {self.unit}")
        elif self.n:
            parts.append(f"{count(self.n)} {self.unit}")
        if self.tally is not None:
            left = self.tally.left() if self.n < (self.total or 0) else None
            parts.append(f"{duration(elapsed)} elapsed")
            if left is not None:
                parts.append(f"~{duration(left)} left")
            return f"physprobe: {self.desc}: {', '.join(parts)}"
        previous = self._lines[-1] if self._lines else self._start
        if self.n != previous[1]:
            self._lower = previous
        since, before = self._lines[0] if len(self._lines) == WINDOW else self._start
        if self.n == before:  # nothing moved in the window: the last move, spread up to now (the rate falls)
            since, before = self._lower
        self._lines.append((now, self.n))
        moved, span = self.n - before, now - since
        if moved > 0 and span > 0:
            parts.append(rate(moved, span, self.unit))
        parts.append(f"{duration(elapsed)} elapsed")
        if self.total is not None and self.n < self.total and moved > 0 and span > 0:
            parts.append(f"~{duration(span / moved * (self.total - self.n))} left")
        return f"physprobe: {self.desc}: {', '.join(parts)}"
