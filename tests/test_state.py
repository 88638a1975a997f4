"""The suite's check that no test leaves the process changed (``tests/state.py``, ``conftest.unchanged_process``): each
kind of change is named, never a variable's value, and put back; and a run started with SIGINT ignored (a background
job of a shell without job control) gives its tests' children Ctrl-C again (``conftest.pytest_configure``)."""

import ctypes
import os
import signal
import subprocess
import sys
import threading

import pytest
import torch

from tests import state

from .conftest import REPO


@pytest.fixture
def before():
    taken = state.snapshot()
    yield taken
    state.restore(taken)


def test_nothing_changed_is_nothing_named(before):
    assert state.changes(before) == []


def test_a_signal_handler_is_named_and_put_back(before):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: None)
    found = state.changes(before)
    assert "SIGINT handler Python's KeyboardInterrupt -> ignored" in found
    assert any(f.startswith("SIGTERM handler the default action -> test_a_signal_handler") for f in found), found
    state.restore(before)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler and state.changes(before) == []


def test_a_signal_ignored_behind_pythons_back_is_named_and_put_back(before):
    ctypes.CDLL(None).signal(signal.SIGINT, ctypes.c_void_p(1))  # SIG_IGN through libc, as a C library would
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python does not know
    assert state.changes(before) == ["SIGINT ignored by the kernel, behind Python's signal module (a library's sigaction)"]
    state.restore(before)
    assert state.changes(before) == []
    done = subprocess.run([sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT))"], capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert done.stdout.strip() == "<built-in function default_int_handler>"  # what exec passes on is the default again


def test_environment_working_directory_and_torch_threads_are_named_without_values(before, tmp_path):
    os.environ["PHYSPROBE_TEST_SECRET"] = "hf_not_to_be_printed"
    os.chdir(tmp_path)
    torch.set_num_threads(torch.get_num_threads() + 1)
    found = state.changes(before)
    assert "environment variable PHYSPROBE_TEST_SECRET set" in found
    assert f"working directory {before.cwd} -> {tmp_path}" in found
    assert f"torch.get_num_threads() {before.torch_threads} -> {before.torch_threads + 1}" in found
    assert not any("hf_not_to_be_printed" in f for f in found)
    state.restore(before)
    assert "PHYSPROBE_TEST_SECRET" not in os.environ and os.getcwd() == before.cwd
    assert torch.get_num_threads() == before.torch_threads


def test_a_thread_still_running_is_named_and_one_that_ends_in_time_is_not(before, monkeypatch):
    monkeypatch.setattr(state, "THREAD_GRACE_S", 0.2)
    stop = threading.Event()
    ending = threading.Thread(target=lambda: stop.wait(0.05), name="ends-soon")
    running = threading.Thread(target=stop.wait, name="left-running")
    ending.start()
    running.start()
    try:
        assert state.changes(before) == ["non-daemon thread 'left-running' still running"]
    finally:
        stop.set()
        running.join()


CHILD_SIGINT = "import signal, subprocess, sys; print(signal.getsignal(signal.SIGINT))"
AS_A_RUN = ("import subprocess, sys; from tests import conftest; conftest.pytest_configure(None); "
            f"print(subprocess.run([sys.executable, '-c', {CHILD_SIGINT!r}], capture_output=True, text=True).stdout)")  # fmt: skip


def _ignoring_sigint(code: str) -> str:
    """What ``python -c code`` prints when started with SIGINT ignored (as a background job of a script starts)."""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # fmt: skip
    return done.stdout.strip()


@pytest.mark.processes
def test_a_run_started_with_sigint_ignored_gives_its_tests_children_ctrl_c():
    """The cause of a Ctrl-C test's child running to its end in the whole suite: a suite started as a background job
    of a shell without job control inherits SIGINT ignored, and exec passes it on to every child. The suite's
    ``pytest_configure`` puts KeyboardInterrupt back first, so a test's child gets Ctrl-C."""
    assert _ignoring_sigint(f"import subprocess, sys; print(subprocess.run([sys.executable, '-c', {CHILD_SIGINT!r}], "
                            "capture_output=True, text=True).stdout)") == str(int(signal.SIG_IGN))  # fmt: skip
    assert _ignoring_sigint(AS_A_RUN) == "<built-in function default_int_handler>"
