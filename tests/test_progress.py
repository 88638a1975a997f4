"""Progress in logs (``physprobe.util.progress``): a line at most every interval while a step is open, the step's count,
elapsed and estimated time left; a bar on a terminal; nothing under pytest."""

import io
import os
import re
import subprocess
import sys
import time

import pytest
from tqdm import tqdm

from physprobe.util import progress
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
        time.sleep(0.3)  # no step open: once, the finished line of the step closed last; then nothing
        after = out.getvalue().splitlines()[len(during) :]
        assert 2 <= len(during) <= 7, during  # one per 0.05 s at most
        for line in during:
            name, done, total, left = LINE.match(line).groups()
            assert (name, done, total) == ("prost/mass", "2", "8") and left is not None
        assert after[-1] == "physprobe: prost/mass: 2/8 questions done in 0s" and len(after) <= 2, after
        with Step("prost/height", 4, "questions", reporter), Step("inner", 3, "questions", reporter) as inner:
            inner.update(3)
            time.sleep(0.15)
            last = out.getvalue().splitlines()[-1]
        assert LINE.match(last).groups()[:3] == ("inner", "3", "3") and "left" not in last  # the newest step, all done
    finally:
        reporter.stop()


def test_a_step_opened_after_a_pause_is_reported_at_once():
    out = io.StringIO()
    reporter = Reporter(out, 0.5)
    try:
        with Step("loading", None, "", reporter):
            time.sleep(0.1)
        time.sleep(1.2)  # the finished line, once, half a second after the reporter began; then nothing
        assert out.getvalue().splitlines() == ["physprobe: loading: done in 0s"]
        with Step("newton/track1", 20, "questions", reporter):  # long after the last line: due at the next look
            opened = time.monotonic()
            while len(out.getvalue().splitlines()) < 2 and time.monotonic() - opened < 2:
                time.sleep(0.01)
            waited = time.monotonic() - opened
        assert out.getvalue().splitlines()[1].startswith("physprobe: newton/track1: 0/20 questions, 0s elapsed")
        assert waited < 0.4  # a look every 0.1 s (a fifth of the interval), not the interval's fixed beat
    finally:
        reporter.stop()


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


def test_library_bars_are_turned_off_in_a_log_only():
    terminal = type("Terminal", (io.StringIO,), {"isatty": lambda self: True})()
    environ = {}
    assert not progress.quiet_library_bars(environ, terminal) and environ == {}
    assert not progress.quiet_library_bars({"PYTEST_CURRENT_TEST": "x"}, io.StringIO())
    environ = {"HF_DATASETS_DISABLE_PROGRESS_BARS": "0"}  # the user's choice stands
    assert progress.quiet_library_bars(environ, io.StringIO())
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


def _card_line(reporter, card: tuple, step: tuple, moved: float) -> str:
    """The log line of a card (``(desc, total, count so far, started, now)``) while a step of it (``(desc, total,
    started)``) has moved by ``moved`` items at the card's ``now``."""
    (card_desc, card_total, before, card_started, now), (step_desc, step_total, step_started) = card, step
    counter = Step(card_desc, card_total, "questions", reporter, clock=iter([card_started, now]).__next__)
    counter.leads, counter.n = True, before
    Adding(Step(step_desc, step_total, "questions", reporter, clock=iter([step_started, now]).__next__), counter).update(moved)
    return reporter.line()


def test_a_cards_time_left_counts_its_slow_last_benchmark_at_that_benchmarks_rate(reporter):
    """Three fast benchmarks (262 questions in 50 s), then Text2Afford at 5 s a question: at the card's own rate its 18
    questions left would read as 4 s; read at Text2Afford's rate they are 90 s, the step's own estimate."""
    assert _card_line(
        reporter, ("benchmark 4 of 4 (text2afford)", 280, 260, 0.0, 60.0), ("text2afford/default", 20, 50.0), 2
    ) == (
        "physprobe: benchmark 4 of 4 (text2afford): 262/280 questions, 4.4 questions/s, 1m00s elapsed, ~1m30s left"
        " | text2afford/default: 2/20 questions, 5.0 s/question, 10s elapsed, ~1m30s left"
    )


def test_a_cards_time_left_ignores_a_step_that_has_not_done_one_question(reporter):
    """A generating step's first line tells a share of one question (its prompts' pass): its estimate says little, so
    the card reads all it has left at its own rate."""
    assert _card_line(reporter, ("benchmark 2 of 4 (newton)", 280, 160, 0.0, 30.0), ("newton/track1", 20, 25.0), 0.2) == (
        "physprobe: benchmark 2 of 4 (newton): 160.2/280 questions, 5.3 questions/s, 30s elapsed, ~22s left"
        " | newton/track1: 0.2/20 questions, 25.0 s/question, 5s elapsed, ~8m15s left"
    )


def _at(counter, started: float, clock: list):
    """A terminal bar whose time is ``clock[0]``, started at ``started``, its rate the average since (tqdm's smoothing
    off), so that its figures can be worked by hand."""
    bar = getattr(counter, "counter", counter)
    bar._time, bar.start_t, bar.last_print_t, bar.smoothing = (lambda: clock[0]), started, started, 0
    return counter


def test_a_cards_terminal_bar_counts_its_step_at_the_steps_rate(monkeypatch):
    """On a terminal, as in a log: 2 minutes into a card, its step at 30 of 80 questions in 40 s. tqdm alone reads
    the card's 330 questions left at its average, 130 in 120 s: 304.6 s (tqdm writes the whole seconds: 05:04). The step's 50 take
    50 / 0.75 = 66.7 s, and the card's other 280 at its average 280 / (130 / 120) = 258.5 s: 325.1 s, the log line's
    figure. Once the step closes, the card reads its own rate again."""
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.setattr(sys, "stderr", type("Terminal", (io.StringIO,), {"isatty": lambda self: True})())
    clock = [0.0]
    with progress.overall("card", 460, "questions") as card:
        _at(card, 0.0, clock)
        clock[0] = 80.0
        card.update(100)
        with _at(progress.bar("newton/track1", 80, "questions"), 80.0, clock) as step:
            clock[0] = 120.0
            step.update(30)
            assert "130/460 questions [02:00<05:25," in str(card)
            step.update(0.5)  # a share of a question moves both: 49.5 / (30.5 / 40) + 280 / (130.5 / 120) = 322.4 s
            assert "130.5/460 questions [02:00<05:22," in str(card)
        assert "130.5/460 questions [02:00<05:02," in str(card)  # 329.5 / (130.5 / 120) = 302.99 s


@pytest.mark.slow
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
        rate = r", [\d.]+ (?:questions/s|s/question)"  # the recent rate
        assert lines and all(
            re.fullmatch(
                rf"physprobe: benchmark 2 of 3 \(newton\): 4/30 questions{rate}, \d+s elapsed, ~\d+s left \| "
                rf"newton/track1: 4/10 questions(?:{rate}, \d+s elapsed, ~\d+s left| done in \d+s)",
                line,
            )
            for line in lines
        )  # fmt: skip (the step's finished line, should a line fall between its close and the next open)
    finally:
        progress._REPORTER.stop()
    monkeypatch.setattr(sys, "stderr", type("Terminal", (io.StringIO,), {"isatty": lambda self: True})())
    with progress.overall("card", 30, "questions") as card, progress.bar("prost/default", 5, "questions") as step:
        step.update(5)
        assert isinstance(card, tqdm) and card.leave and not step.counter.leave and card.n == 5
