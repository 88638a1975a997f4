"""Every command with its stdout or stderr closed (``2>&-``) or unwritable (a full disk): it completes, writes the same
output folder as with both open, and ends with the status it would have had (1 where what it printed to stdout was
lost, with one line saying so); a progress writer that cannot write goes quiet (``physprobe.util.streams``)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time

import pytest

from physprobe.util import progress, streams
from physprobe.util.paths import MARKER
from physprobe.util.progress import Reporter, Step

from .conftest import REPO
from .test_fault_suite import COMMANDS, Command
from .test_fault_suite import inputs as suite_inputs  # noqa: F401 - the suite's fixture, by this name here

MORE = [  # the commands that write no folder of their own, or write one the suite's table has no row for
    Command("protocols", lambda i, o: ["protocols"], lambda o: None, None),
    Command("report", lambda i, o: ["report", str(i["runs"] / "prost"), "--out", str(o / "report")], lambda o: o / "report", None),
    Command("publish", lambda i, o: ["publish", "--runs", str(i["runs"]), "--runs-repo", "my-runs", "--out", str(o)],
            lambda o: o / "runs" / "my-runs", None),
]  # fmt: skip
# protocols (the issue's `physprobe protocols 2>&-`) in the quick tier; the others start a model or build: slow
ALL = [pytest.param(c, id=c.name, marks=[] if c.name == "protocols" else [pytest.mark.slow]) for c in [*COMMANDS, *MORE]]
FULL = "/dev/full"  # every write fails with ENOSPC


def outputs(folder) -> dict[str, bytes] | None:
    """The files a command wrote under ``folder`` (None: it writes none), but for what names the output folder or
    the time (a run's spec and record) and what a run keeps for itself (its lock, cache and marker)."""
    if folder is None:
        return None
    varying = {"run.lock", "run.json", "spec.json", MARKER}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name not in varying and not p.name.startswith("cache.")}  # fmt: skip


def run_closed(command: Command, inputs: dict, out, closed: int, full: int) -> subprocess.CompletedProcess:
    """``command`` in a fresh process, descriptor ``closed`` closed and ``full`` on a full disk (the other of stdout
    and stderr); its progress lines on (no ``PYTEST_CURRENT_TEST``)."""
    entry = [str(REPO / "upload.py")] if command.entry == "upload" else ["-m", "physprobe"]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    with open(FULL, "w") as disk:
        return subprocess.run([sys.executable, *entry, *command.argv(inputs, out)], cwd=REPO, env=env, timeout=600,
                              **{{1: "stdout", 2: "stderr"}[full]: disk}, preexec_fn=lambda: os.close(closed))  # fmt: skip


@pytest.mark.parametrize("command", ALL)
@pytest.mark.processes
def test_every_command_completes_with_stdout_or_stderr_closed_or_unwritable(command, request, tmp_path):
    inputs = request.getfixturevalue("suite_inputs")
    assert command.run(inputs, tmp_path / "open") == 0  # the reference: both streams open
    expected = outputs(command.target(tmp_path / "open"))
    # stderr closed, what it printed to stdout lost on a full disk: status 1 (the one line saying so had nowhere to go)
    assert run_closed(command, inputs, tmp_path / "no-stderr", closed=2, full=1).returncode == 1
    assert outputs(command.target(tmp_path / "no-stderr")) == expected  # the same files, complete
    # stdout closed (what it printed goes nowhere, as the user asked), its progress and notes lost on a full disk: 0
    assert run_closed(command, inputs, tmp_path / "no-stdout", closed=1, full=2).returncode == 0
    assert outputs(command.target(tmp_path / "no-stdout")) == expected


@pytest.mark.processes
def test_physprobe_protocols_with_stderr_closed_prints_them_all(tmp_path):
    listed = subprocess.run([sys.executable, "-m", "physprobe", "protocols"], capture_output=True, cwd=REPO, check=True).stdout
    closed = subprocess.run([sys.executable, "-m", "physprobe", "protocols"], stdout=subprocess.PIPE, cwd=REPO,
                            preexec_fn=lambda: os.close(2))  # fmt: skip
    assert closed.returncode == 0 and closed.stdout == listed and b"text2afford" in listed


@pytest.mark.processes
def test_what_stdout_lost_is_one_line_on_stderr_and_a_reader_that_stops_is_no_fault(tmp_path):
    with open(FULL, "w") as disk:
        result = subprocess.run([sys.executable, "-m", "physprobe", "protocols"], stdout=disk, stderr=subprocess.PIPE, cwd=REPO)
    assert result.returncode == 1
    assert result.stderr.decode() == ("physprobe: error: stdout could not be written (No space left on device): what protocols "
                                      "printed is lost; any folder it wrote is complete\n")  # fmt: skip
    reader = subprocess.Popen([sys.executable, "-m", "physprobe", "protocols"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              cwd=REPO)  # fmt: skip
    reader.stdout.read(10)  # `physprobe protocols | head -c 10`
    reader.stdout.close()
    assert reader.wait(timeout=60) == 0 and reader.stderr.read() == b""


@pytest.mark.processes
def test_a_closed_descriptor_is_pointed_at_dev_null_so_no_file_takes_its_number(tmp_path):
    script = (
        "import os, sys\n"
        "from physprobe.util.streams import guarded\n"
        "with guarded():\n"
        "    kept = open(sys.argv[1], 'w')\n"
        "    print('to stderr', file=sys.stderr)\n"
        "    os.write(2, b'a library writing to descriptor 2\\n')\n"
        "    kept.write('the file'); kept.close()\n"
        "    print(kept.name)\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(tmp_path / "file")], capture_output=True, cwd=REPO,
                            preexec_fn=lambda: os.close(2))  # fmt: skip
    assert result.returncode == 0 and (tmp_path / "file").read_text() == "the file"


class Full(io.StringIO):
    """A stream on a full disk."""

    def write(self, text):
        raise OSError(28, "No space left on device")


def progress_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == "physprobe-progress"}


def test_a_progress_writer_that_cannot_write_goes_quiet():
    before = progress_threads()  # other tests' reporters in this process may still be writing to their streams
    reporter = Reporter(Full(), 0.02)
    with Step("prost/mass", 8, "questions", reporter) as step:
        step.update(2)
        time.sleep(0.2)
    assert not reporter._thread.is_alive()  # its thread ended at the first failed line, nothing raised
    assert progress_threads() <= before


def test_library_bars_are_quiet_with_stderr_closed(monkeypatch):
    monkeypatch.setattr(sys, "stderr", None)  # Python's `2>&-`
    environ = {}
    assert progress.quiet_library_bars(environ) is True and environ["TQDM_DISABLE"] == "1"


def test_a_guarded_stream_keeps_what_it_lost():
    out = streams.Guarded(Full(), None)
    print("a line", file=out)
    assert out.lost.strerror == "No space left on device" and streams.lost(out) is out.lost and not out.isatty()
    closed = streams.Guarded(None, None)
    print("nowhere", file=closed)
    assert streams.lost(closed) is None and not closed.isatty()
