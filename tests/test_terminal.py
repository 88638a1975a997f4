"""The one writer of a terminal (``physprobe.util.terminal``): while physprobe's bars are on a terminal, every line
written to stderr (physprobe's warnings, Python's ``warnings``, ``logging``'s records, a library's print) is shown on
its own line above the bars, and no piece of a bar is left on screen; checked on the screen a person sees (the bytes
rendered through a terminal emulator), in this process and in a real ``physprobe score`` run in a pseudo-terminal."""

from __future__ import annotations

import io
import os
import re
import sys

import pytest

from physprobe.util import progress, streams, terminal

from . import terminal_screen
from .conftest import REPO

COLUMNS, ROWS = 100, 24


class Terminal(io.StringIO):
    """What a terminal is written, as text (a pseudo-terminal's bytes, before the emulator renders them)."""

    def isatty(self) -> bool:
        return True


def environment() -> dict:
    """The environment of a command run as a person runs it: outside pytest (its progress on), on a terminal."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    return {**env, "TERM": "xterm", "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


# A step of a card, with a note of physprobe's, a library's warning, a library's logged line (its handler made at
# import, before the terminal's writer stood in for stderr) and a line written in two parts while its bars are open,
# then a step counted in time alone (a model loading).
SCRIPT = """
import logging, sys, time, warnings
logger = logging.getLogger("a-library")
logger.addHandler(logging.StreamHandler(sys.stderr))
from physprobe.util import progress, terminal
with terminal.writing():
    with progress.overall("card", 40, 40) as card, progress.bar("prost/mass", 20, "options") as step:
        card.set_description("benchmark 1 of 2 (prost)")
        step.update(7)
        time.sleep(0.2)
        print("physprobe: warning: a note of physprobe's", file=sys.stderr)
        warnings.warn("a library's warning", UserWarning, stacklevel=1)
        step.update(3)
        logger.warning("a library's logged line")
        sys.stderr.write("a line written in ")
        sys.stderr.write("two parts\\n")
        step.update(10)
    with progress.bar("loading the model"):
        time.sleep(2.2)  # the ticker redraws the time of a step counted in time alone
"""


@pytest.mark.processes
def test_lines_written_while_bars_are_open_are_shown_whole_above_them(tmp_path):
    status, written = terminal_screen.run([sys.executable, "-c", SCRIPT], environment(), COLUMNS, ROWS, timeout=120)
    lines = terminal_screen.screen(written, COLUMNS, ROWS)
    assert status == 0, lines
    assert lines[0] == "physprobe: warning: a note of physprobe's", lines
    assert re.fullmatch(r"<string>:\d+: UserWarning: a library's warning", lines[1]), lines
    assert lines[2:4] == ["a library's logged line", "a line written in two parts"], lines
    # the card's bar, ended with its time; the step's gone (it was nested), nothing else left of either
    assert re.fullmatch(r"benchmark 1 of 2 \(prost\): +50%\|█+[▏▎▍▌▋▊▉]? +\| 20/40 answers, done in 0s", lines[4]), lines
    assert lines[5:] == ["loading the model: done in 2s"], lines
    assert b"prost/mass:  35%" in written and b"loading the model: 00:01" in written  # drawn while open, then cleared


def test_text_after_the_last_line_end_waits_for_its_line_and_shows_what_a_terminal_shows():
    out = Terminal()
    lines = terminal.Lines(streams.Guarded(out, None))
    lines.write("downloading 10%\rdownloading 100%")
    assert out.getvalue() == ""
    lines.write("\n")
    assert out.getvalue() == "downloading 100%\n" and lines.isatty() and lines.lost is None  # others are the stream's


def test_stderr_is_left_as_it_is_in_a_log_and_under_pytest(monkeypatch):
    with terminal.writing():
        assert not isinstance(sys.stderr, terminal.Lines)  # under pytest
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with terminal.writing():
        assert not isinstance(sys.stderr, terminal.Lines)  # a log: physprobe's lines, no bar
    terminal_out = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal_out)
    with terminal.writing():
        assert isinstance(sys.stderr, terminal.Lines)
        sys.stderr.write("unfinished")
    assert sys.stderr is terminal_out and terminal_out.getvalue() == "unfinished\n"


BAR = re.compile(r"\d%\||\[\d\d:\d\d|it/s")  # a piece of a bar: its share and bar, its time, tqdm's default rate
FINISHED = re.compile(
    r"(?P<desc>.+?): +100%\|█+\| (?P<n>[\d,]+)/(?P=n) (?P<unit>\w+), done in (?P<took>\d+m\d\ds|\d+s)( \[.+\])?"
)


@pytest.mark.slow
@pytest.mark.processes
def test_a_score_in_a_terminal_shows_its_notes_whole_and_each_bar_ended_with_its_time(tiny_model, benchmark_texts, built_all,
                                                                                    tmp_path):  # fmt: skip
    """``physprobe score`` in a pseudo-terminal, as a person runs the quick start: a card of every benchmark (its notes
    written while the card's bar is open: benchmarks skipped, answers that name no option), then a sampled run. On the
    screen at the end: each note whole on a line of its own; of the bars, the card's and each config's (where no card
    holds it) ended with the time it took, each counting one unit, a sampled run's naming its sample; no piece of a
    bar, and no library's bar."""
    model = tiny_model("causal", benchmark_texts, "tiny-falcon")  # the name NEWTON's released decoding samples for
    common = ["--model", str(model), "--data", str(built_all), "--bootstrap-iters", "0"]
    columns = 400  # the longest note on one line
    card = [
        sys.executable,
        "-m",
        "physprobe",
        "score",
        *common,
        "--benchmark",
        "all",
        "--limit",
        "3",
        "--out",
        str(tmp_path / "card"),
    ]
    status, written = terminal_screen.run(card, environment(), columns, ROWS, cwd=tmp_path)
    lines = terminal_screen.screen(written, columns, ROWS)
    assert status == 0, lines
    notes = [line for line in lines if "physprobe:" in line]
    # each note on a line of its own, from its start, with nothing of a bar after it
    assert notes and all(re.match(r"physprobe: (warning:|skipped) ", line) and not BAR.search(line) for line in notes), notes
    assert any("named no option" in line for line in notes), notes
    bars = [line for line in lines if "%|" in line or re.match(r"\S.*: \d\d:\d\d", line)]
    assert [FINISHED.fullmatch(line)["unit"] for line in bars] == ["answers"], bars  # the card's alone: its configs' went
    assert "it/s" not in written.decode() and "Loading weights" not in written.decode()  # no library's bar
    text = "\n".join(lines)
    assert b"benchmark 2 of" in written and "newton/" not in text and re.search(r"^loading .+: done in \d+s$", text, re.M)

    sampled = [sys.executable, "-m", "physprobe", "score", *common, "--benchmark", "newton", "--config", "track1,track2_mc",
               "--limit", "2", "--decoding", "released", "--samples", "2", "--out", str(tmp_path / "sampled")]  # fmt: skip
    status, written = terminal_screen.run(sampled, environment(), COLUMNS, ROWS, cwd=tmp_path)
    lines = terminal_screen.screen(written, COLUMNS, ROWS)
    assert status == 0, lines
    ended = [FINISHED.fullmatch(line) for line in lines if "%|" in line]
    assert [(m["desc"], m["n"], m["unit"]) for m in ended] == [
        (f"newton/{config} sample {k} of 2", "2", "generations") for config in ("track1", "track2_mc") for k in (1, 2)
    ], lines


def test_a_bar_that_ends_shows_the_time_it_took_and_one_an_error_ends_says_it_stopped(monkeypatch):
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.setattr(sys, "stderr", Terminal())
    try:
        with progress.bar("prost/mass", 10, "options") as ended:
            ended.update(10)
        with pytest.raises(KeyboardInterrupt), progress.overall("card", 20, 20) as card:
            with progress.bar("prost/height", 10, "options") as inner:
                inner.update(4)
                raise KeyboardInterrupt
        with progress.bar("loading the model") as loading:
            pass
    finally:
        terminal.Ticker.stop()
    assert re.fullmatch(r"prost/mass: 100%\|#+\| 10/10 options, done in 0s \[[\d,.]+ options/s\]", str(ended))
    assert re.fullmatch(r"card:  20%\|#+ +\| 4/20 answers, stopped after 0s", str(card))
    assert str(loading) == "loading the model: done in 0s"
