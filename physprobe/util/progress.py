"""Progress of long steps (scoring a config, loading a model, writing a build): tqdm's bar on a terminal; in a log,
one line every 30 seconds; nothing under pytest.

When stderr is not a terminal (a job's log file, ``nohup``, a pipe), tqdm's bars are off (``disable=None``) and a
long run would be silent for minutes. There, a daemon thread writes the line of the step in progress every
``INTERVAL`` seconds: the step, items done of the total, the recent rate, the time elapsed and,
while something moves, the estimated time left at that rate (between steps, once, the finished line of the last one,
then that the command is still at work, so that a log hears from a run every ``INTERVAL`` seconds for as long as it
runs)::

    physprobe: prost/mass: 512/1,440 options, 8.3 options/s, 1m02s elapsed, ~1m53s left

A step counts what the engine does (generations, scored options, prompts: ``Request.unit``), not questions, and
counts the items already done when it opens (read from a cache) as done at once (``done``), in no time: its rate
and time left read only the items done since. Items may be done in shares: a generating engine advances each
generation by the share of its token budget answered, so the count moves token by token (``3.4/20 generations``)
long before a whole batch of answers ends. The libraries' own bars (transformers converting or loading weights,
datasets, huggingface_hub downloads) would print their carriage returns into such a log, and on a terminal be drawn
over by physprobe's: ``quiet_library_bars`` turns them off. On a terminal, every line written to stderr goes above
the bars (``physprobe.util.terminal``), a bar that ends shows the time it took (a step counted in time alone leaves
that line above the bars still open), and the bars are redrawn every second.

A task made of steps (a card run's benchmarks) opens an ``overall`` counter in a unit of its own (a card's answers,
one a question and sample): every step opened inside it adds its items to it as the share of its units they make up
(``per``), and in a log its line leads the step's::

    physprobe: benchmark 2 of 4 (newton): 50/180 answers, 2m00s elapsed, ~5m25s left | newton/track1: 30/80 generations, 1.3 s/generation, 40s elapsed, ~1m07s left

Its time left is each kind's items left at that kind's own rate so far (``Tally``), so a card whose last benchmark
asks 15 generations a question reads it at the generations' rate, not at the questions' rate of the benchmarks
before it, and the figure moves smoothly (an average over all the time spent on that kind, not a recent window).

Runs under pytest (``PYTEST_CURRENT_TEST``, which pytest sets and subprocesses inherit) write neither.

>>> import io
>>> step = Step("newton/track1", 400, "generations", Reporter(io.StringIO(), INTERVAL), clock=iter([0.0, 75.0, 300.0]).__next__)
>>> step.update(100)
>>> step.line()
'physprobe: newton/track1: 100/400 generations, 1.3 generations/s, 1m15s elapsed, ~3m45s left'
>>> step.update(300); step.close(); step.line()
'physprobe: newton/track1: 400/400 generations done in 5m00s'

"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from typing import TextIO

from physprobe.util import terminal
from physprobe.util.progress_lines import INTERVAL as INTERVAL
from physprobe.util.progress_lines import Reporter as Reporter
from physprobe.util.progress_lines import Step as Step
from physprobe.util.progress_lines import Tally as Tally
from physprobe.util.progress_lines import count as count
from physprobe.util.progress_lines import duration as duration
from physprobe.util.progress_lines import rate as rate

_REPORTER: Reporter | None = None
_OVERALL: list = []  # the ``overall`` counters open, innermost last


class Adding:
    """A step's counter that also adds each count to the ``overall`` counter it was opened in, in the overall
    counter's unit (``per``: its units an item of the step's; a card counts answers, a step generations or scored
    options), and its cost (``weight`` an item) to the overall counter's ``Tally``."""

    def __init__(self, counter, overall, weight: float = 1.0, per: float = 1.0):
        self.counter, self.overall, self.weight, self.per = counter, overall, weight, per
        overall.tally.begin()

    def update(self, n: float = 1) -> None:
        self.counter.update(n)
        self.overall.update(n * self.per)
        self.overall.tally.add(n * self.weight)

    def spare(self, n: float) -> None:
        """``n`` items' worth of the count was never spent (answers that ended before their budget): the overall
        counter's ``Tally`` takes their cost back."""
        self.overall.tally.spare(n * self.weight)

    def close(self) -> None:
        self.counter.close()

    def __enter__(self) -> Adding:
        return self

    def __exit__(self, *exc) -> None:
        self.counter.__exit__(*exc)


class Waiting:
    """A step counted in time alone opened inside an ``overall`` counter (a model loading): its time counts for none
    of the overall counter's work."""

    def __init__(self, counter, overall):
        self.counter, self.tally = counter, overall.tally
        self.tally.pause()

    def update(self, n: float = 1) -> None:
        self.counter.update(n)

    def close(self) -> None:
        self.counter.close()
        self.tally.begin()

    def __enter__(self) -> Waiting:
        return self

    def __exit__(self, *exc) -> None:
        self.counter.__exit__(*exc)
        self.tally.begin()


# What tells transformers, huggingface_hub, datasets and any other tqdm user (transformers' GGUF conversion calls tqdm
# itself) that their bars are off: each library reads its variable when imported (physprobe's own bars say
# ``disable=False``).
QUIET = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}


def quiet_library_bars(environ=os.environ) -> bool:
    """Turn the libraries' own progress bars off (transformers converting or loading weights, datasets,
    huggingface_hub downloads): in a log they would write carriage returns, and on a terminal bars that physprobe
    does not draw would be drawn over by its own; physprobe's bars and lines tell those steps instead (a step counted in
    time alone: its time elapsed). The variables reach worker processes too. Call it before transformers, datasets or
    tqdm is imported. A variable the user set is kept; nothing changes under pytest. Returns whether the bars were
    turned off.

    >>> environ = {"TQDM_DISABLE": "0"}
    >>> quiet_library_bars(environ), environ["HF_HUB_DISABLE_PROGRESS_BARS"], environ["TQDM_DISABLE"]
    (True, '1', '0')
    """
    if "PYTEST_CURRENT_TEST" in environ:
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


@functools.cache
def _bar_class():
    """tqdm's bar, its counts written as ``count`` writes them (``3.4/20``: a count may move in shares of an item) and
    kept within 0 and its total (tqdm warns past it); an ``overall`` bar's time left is its ``Tally``'s; a bar that
    ends shows the time it took (``done in 1m48s``) where its time left stood. Made at first use, not at import:
    tqdm reads its ``TQDM_*`` variables when imported, after ``quiet_library_bars``."""
    from tqdm.auto import tqdm

    class Bar(tqdm):
        tally = None  # an ``overall`` bar's time left
        ended_format = None  # the format of the bar once it ends: "done in", or "stopped after" when an error ends it

        def update(self, n=1):
            if self.total is not None:
                n = min(max(n, -self.n), self.total - self.n)
            return super().update(n)

        def spare(self, n):
            """A step's own bar counts items, not their cost: work spared leaves it as it is."""

        def __exit__(self, kind, *exc):
            if kind is not None and self.ended_format is not None:
                self.ended_format = self.ended_format.replace("done in", "stopped after").replace(" [{pace}]", "")
            return super().__exit__(kind, *exc)

        def close(self):
            if self.ended_format is None or self.disable:
                return super().close()
            self.bar_format = self.ended_format
            if self.total and abs(self.total - self.n) <= 1e-6 * self.total:  # shares summed: a float's last digit
                self.n = self.total
            if self.total is not None:
                return super().close()
            ended = str(self)  # a step counted in time alone: its line stays, above the bars still open
            super().close()
            terminal.above(ended + "\n", terminal.real(sys.stderr))
            return None

        @property
        def format_dict(self):
            shown = super().format_dict
            rate_of, left = (
                shown["rate"] or ((shown["n"] - shown["initial"]) / shown["elapsed"] if shown["elapsed"] else None),
                None,
            )
            if self.tally is not None:
                left = self.tally.left() if self.n < self.total else None
            elif rate_of and self.total:  # tqdm's own estimate, from the items done since the bar opened
                left = max(0.0, self.total - self.n) / rate_of
            pace = rate(rate_of, 1.0, self.unit) if rate_of else "?"
            return {**shown, "count": count(self.n), "left": "?" if left is None else tqdm.format_interval(left),
                    "pace": pace, "took": duration(shown["elapsed"])}  # fmt: skip

    return Bar


def _terminal_bar(desc: str, total: float | None, unit: str, leave: bool = True, done: float = 0, overall: bool = False):
    """A bar on the terminal (its own stream, under ``terminal.Lines``; on even where ``TQDM_DISABLE`` turns the
    libraries' bars off), as wide as the terminal is now, redrawn every second (``terminal.Ticker``)."""
    terminal.Ticker.start()
    shown = {"file": terminal.real(sys.stderr), "disable": False, "desc": desc, "leave": leave, "dynamic_ncols": True}
    if total is None:  # counted in time alone; cleared as it ends, its line then written above the bars open
        bar = _bar_class()(bar_format="{desc}: {elapsed}", **{**shown, "leave": False})
        bar.ended_format = "{desc}: done in {took}"
        return bar
    rated = "" if overall else ", {pace}"  # an ``overall`` bar's items are of several kinds: no one rate
    bar = _bar_class()(total=total, initial=done, unit=unit,
                       bar_format="{l_bar}{bar}| {count}/{total_fmt} {unit} [{elapsed}<{left}" + rated + "{postfix}]",
                       **shown)  # fmt: skip
    bar.ended_format = "{l_bar}{bar}| {count}/{total_fmt} {unit}, done in {took}" + ("" if overall else " [{pace}]")
    return bar


def bar(desc: str, total: float | None = None, unit: str = "items", done: float = 0, weight: float = 1.0, per: float = 1.0):
    """A progress counter for one step (``update(n)``, ``close()``, a context manager): tqdm's bar when stderr is a
    terminal, log lines (``Step``) when it is not, a silent tqdm under pytest. ``total=None``: a step counted in
    time alone (the bar shows the time elapsed). ``done``: items of ``total`` found done (cached), counted at once
    in no time. Inside ``overall``, a counted step adds its items to it too, as ``per`` of its units each (a card
    counts answers), each of cost ``weight`` to its ``Tally`` (its ``done`` at once, in no time); a step counted in
    time alone counts for none of it."""
    counter = _counter(desc, total, unit, nested=bool(_OVERALL), done=done)
    if not _OVERALL:
        return counter
    if total is None:
        return Waiting(counter, _OVERALL[-1])
    _OVERALL[-1].update(done * per)
    _OVERALL[-1].tally.add(done * weight, timed=False)
    return Adding(counter, _OVERALL[-1], weight, per)


@contextlib.contextmanager
def overall(desc: str, total: float, cost: float, unit: str = "answers", parts: int = 1):
    """A counter of a task made of steps (``set_description`` names the step it is at), of ``total`` items in ``unit``
    (a card's answers) that cost ``cost`` together: each step opened inside the block with ``bar`` adds its items to
    it (as ``per`` units each); its time left is its ``Tally``'s (``counter.tally.part`` opens one of its ``parts``,
    read at its own pace once a tenth of it is done); in a log, its line leads the step's; on a terminal, its bar
    stays above the step's.

    In a log, a card 26 s in: 80 options (cost 11 each) took 4 s, then 30 of its first 80 generations (cost 138
    each) 22 s; the benchmark's 50 left at its own pace, with 10 s of work counted at the options' pace (35 s), and
    the card's last 380 at the pace of all the work so far (26 s for 5,020 units of cost: 4m32s):

    >>> import io
    >>> reporter = Reporter(io.StringIO(), INTERVAL)
    >>> clock = iter([0.0, 0.0, 4.0, 4.0, 4.0, 4.0, 26.0, 26.0, 26.0, 26.0]).__next__
    >>> card = Step("benchmark 2 of 2 (newton)", 540, "answers", reporter, clock=clock)
    >>> card.leads, card.tally = True, Tally(80 * 11 + 460 * 138, clock=clock)
    >>> card.tally.begin(); card.update(80); card.tally.add(80 * 11)
    >>> card.tally.part(80 * 138)
    >>> step = Adding(Step("newton/track1", 80, "generations", reporter, clock=clock), card, 138)
    >>> step.update(30)
    >>> reporter.line()
    'physprobe: benchmark 2 of 2 (newton): 110/540 answers, 26s elapsed, ~5m06s left | newton/track1: 30/80 generations, 1.4 generations/s, 22s elapsed, ~37s left'
    """
    counter = _counter(desc, total, unit, nested=False, overall=True)
    counter.tally = Tally(cost, parts)
    if isinstance(counter, Step):
        counter.leads = True
    _OVERALL.append(counter)
    try:
        with counter:
            yield counter
    finally:
        _OVERALL.remove(counter)


def _counter(desc: str, total: float | None, unit: str, nested: bool, done: float = 0, overall: bool = False):
    if "PYTEST_CURRENT_TEST" in os.environ:
        return _bar_class()(total=total, initial=done, disable=True)
    if _terminal(sys.stderr):
        return _terminal_bar(desc, total, unit, leave=not nested, done=done, overall=overall)
    global _REPORTER  # noqa: PLW0603 - the process's one log reporter (one thread), made at first use
    if _REPORTER is None:
        _REPORTER = Reporter(sys.stderr, INTERVAL)
    return Step(desc, total, unit, _REPORTER, done=done)
