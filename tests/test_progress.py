"""Progress in logs (``physprobe.progress``): a line at most every interval while a step is open, the step's count,
elapsed and estimated time left; a bar on a terminal; nothing under pytest."""

import io
import re
import sys
import time

import pytest
from tqdm import tqdm

from physprobe import progress
from physprobe.progress import Reporter, Step

LINE = re.compile(r"^physprobe: (\S+): (\d+)/(\d+) questions, \d+s elapsed(, ~\d+s left)?$")


def test_lines_come_at_the_interval_from_the_open_step_only():
    out = io.StringIO()
    reporter = Reporter(out, 0.05)
    try:
        with Step("prost/mass", 8, "questions", reporter) as step:
            step.update(2)
            time.sleep(0.3)
        during = out.getvalue().splitlines()
        time.sleep(0.2)  # no step open: nothing more
        assert out.getvalue().splitlines() == during
        assert 2 <= len(during) <= 7, during  # one per 0.05 s at most, from a thread waking at that interval
        for line in during:
            name, done, total, left = LINE.match(line).groups()
            assert (name, done, total) == ("prost/mass", "2", "8") and left is not None
        with Step("prost/height", 4, "questions", reporter), Step("inner", 3, "questions", reporter) as inner:
            inner.update(3)
            time.sleep(0.15)
        last = out.getvalue().splitlines()[-1]
        assert LINE.match(last).groups()[:3] == ("inner", "3", "3") and "left" not in last  # the newest step, done
    finally:
        reporter.stop()


def test_the_estimate_is_the_time_per_item_done_times_the_items_left():
    clock = iter([100.0, 100.0 + 3 * 60 + 30]).__next__  # opened at 100 s, read 3m30s later
    with Step("text2afford/default", 1000, "questions", Reporter(io.StringIO(), 30), clock=clock) as step:
        step.update(250)
        assert step.line() == "physprobe: text2afford/default: 250/1,000 questions, 3m30s elapsed, ~10m30s left"


def test_a_step_without_total_counts_items_and_time():
    with Step("writing track9", None, "rows", Reporter(io.StringIO(), 30), clock=iter([0.0, 45.0]).__next__) as step:
        step.update(20_000)
        assert step.line() == "physprobe: writing track9: 20,000 rows, 45s elapsed"


def test_bar_is_silent_under_pytest_a_bar_on_a_terminal_and_lines_in_a_log(monkeypatch):
    silent = progress.bar("prost/mass", 10, "questions")
    assert isinstance(silent, tqdm) and silent.disable
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.setattr(sys, "stderr", type("Terminal", (io.StringIO,), {"isatty": lambda self: True})())
    with progress.bar("prost/mass", 10, "questions") as shown:
        assert isinstance(shown, tqdm) and not shown.disable and shown.total == 10
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setattr(progress, "_REPORTER", None)
    with progress.bar("prost/mass", 10, "questions") as logged:
        assert isinstance(logged, Step) and progress._REPORTER.stream is sys.stderr and progress._REPORTER.interval == 30
    progress._REPORTER.stop()


@pytest.mark.parametrize("seconds, text", [(0.4, "0s"), (59.6, "1m00s"), (7322, "2h02m02s")])
def test_durations(seconds, text):
    assert progress.duration(seconds) == text


def test_a_card_counts_the_questions_of_its_steps_and_leads_their_lines(monkeypatch):
    """``overall`` (a card run): each step opened inside it adds its items to it; in a log the line of the card, at
    the benchmark it is at, comes first, then the step's; on a terminal its bar stays and the steps' bars go."""
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    monkeypatch.setattr(progress, "_REPORTER", Reporter(log, 0.05))
    try:
        with progress.overall("card", 30, "questions") as card:
            card.set_description("benchmark 2 of 3 (newton)")
            with progress.bar("newton/track1", 10, "questions") as step:
                step.update(4)
                time.sleep(0.2)
            with progress.bar("loading the model"):  # counted in time alone: adds nothing
                time.sleep(0.1)
            assert card.n == 4 and isinstance(card, Step) and card.leads
        lines = [line for line in log.getvalue().splitlines() if "newton/track1" in line]
        assert lines and all(re.fullmatch(r"physprobe: benchmark 2 of 3 \(newton\): 4/30 questions, \d+s elapsed, ~\d+s left \| "
                                          r"newton/track1: 4/10 questions, \d+s elapsed, ~\d+s left", line) for line in lines)
    finally:
        progress._REPORTER.stop()
    monkeypatch.setattr(sys, "stderr", type("Terminal", (io.StringIO,), {"isatty": lambda self: True})())
    with progress.overall("card", 30, "questions") as card, progress.bar("prost/default", 5, "questions") as step:
        step.update(5)
        assert isinstance(card, tqdm) and card.leave and not step.counter.leave and card.n == 5
