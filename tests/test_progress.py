"""Progress in logs (``physprobe.util.progress``): a line at most every interval while a step is open, the step's count,
elapsed and estimated time left; a bar on a terminal; nothing under pytest."""

import io
import os
import re
import subprocess
import sys
import time
import warnings
from types import SimpleNamespace

import pytest
from tqdm import tqdm

from physprobe.util import progress, progress_lines
from physprobe.util.progress import Adding, Reporter, Step


@pytest.fixture
def reporter():
    """A reporter whose thread (started by a step) ends with the test, before a fake clock runs out."""
    made = Reporter(io.StringIO(), 30)
    yield made
    made.stop()


LINE = re.compile(
    r"^physprobe: (\S+): ([\d.]+)/(\d+) questions(?:, [\d.]+ (?:questions/s|s/question))?, \d+s elapsed(, ~\d+s left)?$"
)


def test_lines_come_at_the_interval_from_the_open_step_then_once_from_the_one_closed_last():
    out = io.StringIO()
    reporter = Reporter(out, 0.05)
    try:
        with Step("prost/mass", 8, "questions", reporter) as step:
            step.update(2)
            time.sleep(0.3)
            during = out.getvalue().splitlines()
        idle = "physprobe: still working (the last step, prost/mass, ended "
        # no step open: once, the finished line of the step closed last; then that the run goes on
        after = _lines_once(out, lambda lines: sum(line.startswith(idle) for line in lines) >= 2)[len(during) :]
        assert 2 <= len(during) <= 7, during  # one per 0.05 s at most
        for line in during:
            name, done, total, left = LINE.match(line).groups()
            assert (name, done, total) == ("prost/mass", "2", "8") and left is not None
        finished = after.index("physprobe: prost/mass: 2/8 questions done in 0s")
        assert finished <= 1 and all(line.startswith(idle) for line in after[finished + 1 :]), after
        with Step("prost/height", 4, "questions", reporter), Step("inner", 3, "questions", reporter) as inner:
            inner.update(3)
            time.sleep(0.15)
            last = out.getvalue().splitlines()[-1]
        assert LINE.match(last).groups()[:3] == ("inner", "3", "3") and "left" not in last  # the newest step, all done
    finally:
        reporter.stop()


def _lines_once(out: io.StringIO, ready, seconds: float = 20.0) -> list[str]:
    """The lines written to ``out`` once ``ready(lines)`` holds (waiting up to ``seconds``: a busy machine may hold
    the reporter's thread back)."""
    until = time.monotonic() + seconds
    while not ready(lines := out.getvalue().splitlines()) and time.monotonic() < until:
        time.sleep(0.01)
    return lines


def test_between_steps_a_line_says_the_run_goes_on_and_the_next_step_has_the_next_line():
    out = io.StringIO()
    reporter = Reporter(out, 0.5)
    try:
        with Step("loading", None, "", reporter):
            pass
        lines = _lines_once(out, lambda lines: len(lines) >= 2)  # the finished line, once; then that the run goes on
        assert lines[0] == "physprobe: loading: done in 0s"
        assert lines[1].startswith("physprobe: still working (the last step, loading, ended ")
        with Step("newton/track1", 20, "questions", reporter):
            lines = _lines_once(out, lambda lines: any("newton/track1" in line for line in lines))
        assert [line for line in lines if "newton" in line][0].startswith("physprobe: newton/track1: 0/20 questions, ")
    finally:
        reporter.stop()


def test_a_line_that_fails_ends_no_line_after_it():
    # A fake clock run out (StopIteration) or any other error in making one line: that line is skipped, the thread
    # goes on, and no exception leaves it (pytest would warn of an unhandled thread exception).
    out = io.StringIO()
    reporter = Reporter(out, 0.05)
    try:
        broken = Step("broken", 10, "options", reporter, clock=iter([0.0]).__next__)
        time.sleep(0.3)
        assert out.getvalue() == ""
        reporter.close(broken)
        with Step("prost/mass", 8, "options", reporter):
            lines = _lines_once(out, lambda lines: any("prost/mass" in line for line in lines))
        assert any(line.startswith("physprobe: prost/mass: 0/8 options, ") for line in lines), lines
    finally:
        reporter.stop()
    assert not reporter._thread.is_alive()


def test_the_estimate_is_the_time_per_item_done_times_the_items_left(reporter):
    clock = iter([100.0, 100.0 + 3 * 60 + 30]).__next__  # opened at 100 s, read 3m30s later
    step = Step("text2afford/default", 1000, "questions", reporter, clock=clock)
    step.update(250)
    assert step.line() == "physprobe: text2afford/default: 250/1,000 questions, 1.2 questions/s, 3m30s elapsed, ~10m30s left"


def test_a_count_in_shares_of_questions_moves_the_line_rate_and_estimate(reporter):
    # A generating engine advances each question by the share of its tokens answered: 20 questions a quarter answered
    # after a minute is 5 questions' worth, 12 s each, 3 minutes left for the other 15.
    step = Step("newton/track1", 20, "questions", reporter, clock=iter([0.0, 60.0, 60.0]).__next__)
    for _ in range(20 * 32):
        step.update(1 / 128)
    assert step.line() == "physprobe: newton/track1: 5/20 questions, 12.0 s/question, 1m00s elapsed, ~3m00s left"
    step.update(0.37)
    assert step.line().startswith("physprobe: newton/track1: 5.4/20 questions, ")


def test_a_step_without_total_counts_items_and_time(reporter):
    step = Step("writing track9", None, "rows", reporter, clock=iter([0.0, 45.0]).__next__)
    step.update(20_000)
    assert step.line() == "physprobe: writing track9: 20,000 rows, 444.4 rows/s, 45s elapsed"


def test_bar_is_silent_under_pytest_a_bar_on_a_terminal_and_lines_in_a_log(monkeypatch):
    silent = progress.bar("prost/mass", 10, "questions")
    assert isinstance(silent, tqdm) and silent.disable
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.setattr(sys, "stderr", type("Terminal", (io.StringIO,), {"isatty": lambda self: True})())
    with progress.bar("prost/mass", 10, "questions") as shown:
        assert isinstance(shown, tqdm) and not shown.disable and shown.total == 10
        shown.update(3.25)
        assert "3.2/10 questions" in str(shown) or "3.3/10 questions" in str(shown)  # shares, not 3.25/10 or 3/10
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setattr(progress, "_REPORTER", None)
    with progress.bar("prost/mass", 10, "questions") as logged:
        assert isinstance(logged, Step) and progress._REPORTER.stream is sys.stderr and progress._REPORTER.interval == 30
    progress._REPORTER.stop()


@pytest.mark.parametrize("seconds, text", [(0.4, "0s"), (59.6, "1m00s"), (7322, "2h02m02s")])
def test_durations(seconds, text):
    assert progress.duration(seconds) == text


def test_library_bars_are_turned_off_on_a_terminal_and_in_a_log_but_not_under_pytest():
    # On a terminal as in a log: physprobe's bars and lines tell the libraries' steps (on a terminal, physprobe's
    # bars are on whatever TQDM_DISABLE says: test_terminal).
    environ = {}
    assert progress.quiet_library_bars(environ) and environ == progress.QUIET
    assert not progress.quiet_library_bars(environ := {"PYTEST_CURRENT_TEST": "x"}) and environ == {"PYTEST_CURRENT_TEST": "x"}
    environ = {"HF_DATASETS_DISABLE_PROGRESS_BARS": "0"}  # the user's choice stands
    assert progress.quiet_library_bars(environ)
    assert environ == {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "0", "TQDM_DISABLE": "1"}


def test_while_nothing_moves_the_rate_falls_and_the_estimate_grows(reporter):
    clock = iter([0.0, 30.0, 60.0, 90.0, 120.0, 150.0]).__next__  # a line every 30 s
    step = Step("newton/track1", 20, "questions", reporter, clock=clock)
    step.update(10)
    assert step.line() == "physprobe: newton/track1: 10/20 questions, 3.0 s/question, 30s elapsed, ~30s left"
    lines = [step.line() for _ in range(3)]  # nothing more: the 10 spread over 60, 90, then 120 s
    assert lines == ["physprobe: newton/track1: 10/20 questions, 6.0 s/question, 1m00s elapsed, ~1m00s left",
                     "physprobe: newton/track1: 10/20 questions, 9.0 s/question, 1m30s elapsed, ~1m30s left",
                     "physprobe: newton/track1: 10/20 questions, 12.0 s/question, 2m00s elapsed, ~2m00s left"]  # fmt: skip
    step.update(1)  # one question in the last 90 s
    assert step.line() == "physprobe: newton/track1: 11/20 questions, 90.0 s/question, 2m30s elapsed, ~13m30s left"


def test_a_cards_line_counts_the_engines_items_and_tells_its_tallys_time_left(reporter):
    """A card of 80 options (cost 25 each) then 460 generations (cost 45 each), 2 minutes in: the options took 80 s
    (0.04 s a unit of cost), the first benchmark of generations has done 30 of its 160 in 40 s; its 130 left at its
    own pace, with a tenth of it (720 of cost) counted at the options' (0.0332 s a unit: 3m14s), the card's last
    300 (13,500 of cost) at the pace of all the work so far (120 s for 3,350 of cost: 8m04s)."""
    clock = iter([0.0, 0.0, 80.0, 80.0, 80.0, 80.0, 120.0, 120.0, 120.0, 120.0]).__next__
    card = Step("benchmark 2 of 3 (cccons)", 540, "answers", reporter, clock=clock)
    card.leads, card.tally = True, progress.Tally(80 * 25 + 460 * 45, clock=clock)
    card.tally.begin()
    card.update(80)
    card.tally.add(80 * 25)
    card.tally.part(160 * 45)
    Adding(Step("cccons/ordinary", 80, "generations", reporter, clock=clock), card, 45).update(30)
    assert reporter.line() == (
        "physprobe: benchmark 2 of 3 (cccons): 110/540 answers, 2m00s elapsed, ~11m18s left"
        " | cccons/ordinary: 30/80 generations, 1.3 s/generation, 40s elapsed, ~1m07s left"
    )


def test_items_found_done_count_at_once_and_take_no_time(reporter):
    # A config half cached: its line reads 10 of 20 done at once, and its rate and time left the 2 done since.
    step = Step("cccons/ordinary", 20, "generations", reporter, clock=iter([0.0, 10.0]).__next__, done=10)
    step.update(2)
    assert step.line() == "physprobe: cccons/ordinary: 12/20 generations, 5.0 s/generation, 10s elapsed, ~40s left"


def _terminal(monkeypatch):
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.setattr(sys, "stderr", type("Terminal", (io.StringIO,), {"isatty": lambda self: True})())


def _at(counter, started: float, clock: list):
    """A terminal bar whose time is ``clock[0]``, started at ``started``, its rate the average since (tqdm's smoothing
    off), so that its figures can be worked by hand."""
    bar = getattr(counter, "counter", counter)
    bar._time, bar.start_t, bar.last_print_t, bar.smoothing = (lambda: clock[0]), started, started, 0
    return counter


def test_a_terminal_bar_reads_the_engines_items_its_cached_ones_done_and_never_passes_its_total(monkeypatch):
    _terminal(monkeypatch)
    clock = [0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tqdm's "clamping frac to range [0, 1]" would fail here
        with _at(progress.bar("text2afford/default", 300, "generations", done=120), 0.0, clock) as bar:
            clock[0] = 90.0
            bar.update(30)  # 30 in 90 s: 3 s a generation, 150 left: 7m30s
            assert "150/300 generations [01:30<07:30, 3.0 s/generation]" in str(bar)
            bar.update(150.4)  # shares that overshoot the total a little
            assert "300/300 generations [01:30<00:00," in str(bar) and bar.n == 300
        with _at(progress.bar("prost/default", 80, "options", done=80), 0.0, clock) as cached:
            assert "80/80 options" in str(cached) and "0/0" not in str(cached)


def test_a_cards_terminal_bar_tells_its_tallys_time_left_without_a_rate(monkeypatch):
    """On a terminal, as in a log: the card's bar reads its tally (its 100 options found in the cache, done at once in
    no time; its 330 generations left at the pace of the 30 done in 40 s: 7m20s), and no rate (its items are of
    several kinds)."""
    _terminal(monkeypatch)
    now = [0.0]
    monkeypatch.setattr(progress_lines, "time", SimpleNamespace(monotonic=lambda: now[0]))  # the tally's clock
    with progress.overall("card", 460, 100 * 25 + 360 * 45) as card:
        _at(card, 0.0, now)
        with progress.bar("prost/default", 100, "options", done=100, weight=25):
            pass
        now[0] = 80.0
        with _at(progress.bar("newton/track1", 80, "generations", weight=45), 80.0, now) as step:
            now[0] = 120.0
            step.update(30)
            assert "130/460 answers [02:00<07:20]" in str(card)  # 50 / 0.75 + 280 / 0.75 = 440 s
        assert "130/460 answers [02:00<" in str(card) and "answers/s" not in str(card)


def test_a_card_counts_the_items_of_its_steps_and_leads_their_lines(monkeypatch):
    """``overall`` (a card run): each step opened inside it adds its items to it; in a log the line of the card, at
    the benchmark it is at, comes first, then the step's; on a terminal its bar stays and the steps' bars go."""
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    monkeypatch.setattr(progress, "_REPORTER", Reporter(log, 0.05))
    try:
        with progress.overall("card", 30, 30) as card:
            card.set_description("benchmark 2 of 3 (newton)")
            with progress.bar("newton/track1", 10, "generations") as step:
                step.update(4)
                time.sleep(0.2)
            with progress.bar("loading the model"):  # counted in time alone: adds nothing
                time.sleep(0.1)
            assert card.n == 4 and isinstance(card, Step) and card.leads
        lines = [line for line in log.getvalue().splitlines() if "newton/track1" in line]
        rate = r", [\d.]+ (?:generations/s|s/generation)"  # the recent rate
        assert lines and all(
            re.fullmatch(
                rf"physprobe: benchmark 2 of 3 \(newton\): 4/30 answers, \d+s elapsed, ~\d+s left \| "
                rf"newton/track1: 4/10 generations(?:{rate}, \d+s elapsed, ~\d+s left| done in \d+s)",
                line,
            )
            for line in lines
        )  # fmt: skip (the step's finished line, should a line fall between its close and the next open)
    finally:
        progress._REPORTER.stop()
    monkeypatch.setattr(sys, "stderr", type("Terminal", (io.StringIO,), {"isatty": lambda self: True})())
    with progress.overall("card", 30, 30) as card, progress.bar("prost/default", 5, "options") as step:
        step.update(5)
        assert isinstance(card, tqdm) and card.leave and not step.counter.leave and card.n == 5


@pytest.mark.slow
@pytest.mark.processes
def test_a_score_logged_to_a_file_holds_physprobes_lines_and_no_librarys_bar(built_all, tmp_path):
    # transformers' "Loading weights" bar and any tqdm bar would write carriage returns into the log.
    from . import tiny_models

    model = tiny_models.causal_lm(tmp_path / "gpt", ["A key box contains a key. Which is bigger?"] * 20)
    environ = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    with open(tmp_path / "log", "w") as log:
        done = subprocess.run([sys.executable, "-m", "physprobe", "score", "--model", str(model), "--benchmark", "cccons",
                               "--config", "ordinary", "--limit", "4", "--data", str(built_all), "--out", str(tmp_path / "run"),
                               "--bootstrap-iters", "0"], stdout=subprocess.DEVNULL, stderr=log, env=environ)  # fmt: skip
    text = (tmp_path / "log").read_text()
    assert done.returncode == 0, text
    assert "\r" not in text and "Loading weights" not in text and "it/s" not in text, text
