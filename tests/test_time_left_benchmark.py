"""``benchmarks/time_left.py`` reads a card's time left off a pseudo-terminal as tqdm draws it: a stand-in command that
draws the card's bar as tqdm does (carriage returns, colours, a config's bar on the next line) is read frame by frame,
each time left with the moment it was drawn."""

import doctest
import importlib
import sys
import textwrap

import pytest

from .conftest import REPO


@pytest.fixture
def time_left(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    return importlib.import_module("time_left")


def test_its_examples_hold(time_left):
    assert doctest.testmod(time_left).failed == 0


@pytest.mark.processes
def test_every_card_time_left_drawn_is_read_with_when_it_was_drawn(time_left, tmp_path):
    # The card's bar three times (01:05 left, then 1:02:03, then 00:00 as it ends), a config's bar beside it that is
    # not the card's, a warning on a line of its own: three estimates, in order, the last drawn after a 0.3 s pause.
    script = tmp_path / "draws.py"
    script.write_text(textwrap.dedent('''
        import sys, time
        card = "\\rbenchmark 2 of 4 (newton):  40%|####      | 112/280 answers [00:30<{}]"
        sys.stderr.write(card.format("01:05") + "\\n\\x1b[32mnewton/track1:  5%| | 1/20 generations [00:01<00:19]\\x1b[0m\\x1b[A")
        sys.stderr.write(card.format("1:02:03") + "\\nphysprobe: warning: a note\\n")
        sys.stderr.flush(); time.sleep(0.3)
        sys.stderr.write(card.format("00:00") + "\\n")
    '''))  # fmt: skip
    shown, took, status = time_left.watched([sys.executable, str(script)])
    assert status == 0 and took >= 0.3
    assert [(left, benchmark) for _, left, benchmark in shown] == [(65, "newton"), (3723, "newton"), (0, "newton")]
    assert shown[2][0] - shown[1][0] >= 0.25 and all(0 <= at <= took for at, _, _ in shown)
