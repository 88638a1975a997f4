"""What a test may not leave changed in the test process (``conftest.unchanged_process``): signal handlers, environment
variables, the working directory, non-daemon threads still running, torch's thread count.

A change that outlives its test reaches every later test of the same worker and every process they start: a SIGINT
left ignored is passed on through exec, and a child told to stop with Ctrl-C then runs to its end."""

from __future__ import annotations

import concurrent.futures.thread
import os
import signal
import sys
import threading
from dataclasses import dataclass

# Set once by a library the first time it is imported (a test that imports it first is not at fault), and never read
# back by physprobe: left out of the comparison.
LIBRARY_VARIABLES = frozenset(
    {
        "PYTEST_CURRENT_TEST",  # pytest's own, per test phase
        "KMP_DUPLICATE_LIB_OK",  # scikit-learn's import (setdefault), reached through evaluate
        "HF_XET_HIGH_PERFORMANCE",  # lm_eval's import (setdefault; tests/test_lm_eval_export.py imports lm_eval.tasks)
    }
)
# SIGALRM is pytest-timeout's (timeout_method = signal): it sets its handler before each test and puts the default
# back when the test ends or fails, so it differs between a failed test's setup and teardown by design.
_SIGNALS = tuple(s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGALRM))
THREAD_GRACE_S = 5.0  # a thread told to stop (a server shut down, a reader at end of file) gets this long to end


@dataclass(frozen=True)
class Snapshot:
    handlers: dict
    ignored: frozenset  # the signals the kernel ignores for this process: a C library can change them behind Python's back
    environ: dict
    cwd: str
    threads: frozenset
    torch_threads: int | None


def _handler(number):
    try:
        return signal.getsignal(number)
    except (OSError, ValueError):
        return None


def _ignored() -> frozenset:
    """The signals this process ignores, as the kernel has them (``/proc/self/status``, ``SigIgn``): what exec passes on
    to every child, whoever set it."""
    with open("/proc/self/status") as status:
        mask = next(int(line.split()[1], 16) for line in status if line.startswith("SigIgn:"))
    return frozenset(s for s in _SIGNALS if mask >> (s - 1) & 1)


def _torch_threads() -> int | None:
    torch = sys.modules.get("torch")  # never imported here: a test that does not use torch pays nothing
    return torch.get_num_threads() if torch is not None and hasattr(torch, "get_num_threads") else None


def _running_threads() -> frozenset:
    # idle pool workers are exempt: concurrent.futures' (gradio's executors, asyncio's default executor of playwright's
    # loop, named asyncio_N) and AnyIO's keep theirs for the process
    return frozenset(
        t
        for t in threading.enumerate()
        if t.is_alive()
        and not t.daemon
        and t is not threading.main_thread()
        and getattr(t, "_target", None) is not concurrent.futures.thread._worker
        and not t.name.startswith("AnyIO worker")
    )


def snapshot() -> Snapshot:
    environ = {k: v for k, v in os.environ.items() if k not in LIBRARY_VARIABLES}
    handlers = {s: _handler(s) for s in _SIGNALS}
    return Snapshot(handlers, _ignored(), environ, os.getcwd(), _running_threads(), _torch_threads())


def _name(number) -> str:
    return signal.Signals(number).name


def _describe(handler) -> str:
    if handler is signal.SIG_IGN:
        return "ignored"
    if handler is signal.SIG_DFL:
        return "the default action"
    if handler is signal.default_int_handler:
        return "Python's KeyboardInterrupt"
    return getattr(handler, "__qualname__", repr(handler))


def changes(before: Snapshot) -> list[str]:
    """What differs from ``before``, one phrase each (empty when nothing does)."""
    found = []
    for number, handler in before.handlers.items():
        now = _handler(number)
        if now != handler:
            found.append(f"{_name(number)} handler {_describe(handler)} -> {_describe(now)}")
        elif (number in before.ignored) != (number in _ignored()):
            found.append(f"{_name(number)} {'ignored' if number in _ignored() else 'no longer ignored'} by the kernel, behind "
                         "Python's signal module (a library's sigaction)")  # fmt: skip
    environ = {k: v for k, v in os.environ.items() if k not in LIBRARY_VARIABLES}
    for key in sorted(set(environ) | set(before.environ)):
        if environ.get(key) != before.environ.get(key):
            how = "unset" if key not in environ else ("set" if key not in before.environ else "changed")
            found.append(f"environment variable {key} {how}")  # never its value: it may be a secret
    if os.getcwd() != before.cwd:
        found.append(f"working directory {before.cwd} -> {os.getcwd()}")
    for thread in _running_threads() - before.threads:
        thread.join(THREAD_GRACE_S)
        if thread.is_alive():
            found.append(f"non-daemon thread {thread.name!r} still running")
    torch_threads = _torch_threads()
    if before.torch_threads is not None and torch_threads != before.torch_threads:
        found.append(f"torch.get_num_threads() {before.torch_threads} -> {torch_threads}")
    return found


def restore(before: Snapshot) -> None:
    """Put back what ``changes`` compares, except threads (they cannot be stopped from outside)."""
    for number, handler in before.handlers.items():
        if handler is not None and (_handler(number) != handler or (number in before.ignored) != (number in _ignored())):
            signal.signal(number, handler)
    for key in set(os.environ) - set(before.environ) - LIBRARY_VARIABLES:
        del os.environ[key]
    for key, value in before.environ.items():
        if os.environ.get(key) != value:
            os.environ[key] = value
    if os.getcwd() != before.cwd:
        os.chdir(before.cwd)
    if before.torch_threads is not None and _torch_threads() != before.torch_threads:
        sys.modules["torch"].set_num_threads(before.torch_threads)
