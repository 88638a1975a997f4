"""A command run in a pseudo-terminal, and what a person would see of it: the bytes it wrote rendered through a
terminal emulator (pyte), the lines scrolled off the top kept above the screen's."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import termios
import time


def run(argv: list[str], env: dict, columns: int = 120, rows: int = 30, timeout: float = 600, cwd=None) -> tuple[int, bytes]:
    """``argv`` run with its stdin, stdout and stderr on a new pseudo-terminal of ``columns`` x ``rows``; its exit
    status and every byte it wrote there."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal's size set before the command starts, then the command
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        if cwd is not None:
            os.chdir(cwd)
        os.execvpe(argv[0], argv, env)
    written, until = bytearray(), time.monotonic() + timeout
    try:
        while time.monotonic() < until:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the command ended and the terminal closed
                break
            if not chunk:
                break
            written += chunk
        else:
            os.kill(pid, 9)
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), bytes(written)


def screen(written: bytes, columns: int = 120, rows: int = 30) -> list[str]:
    """The lines a person sees in the terminal once ``written`` is shown (the ones scrolled above it first), each
    without its trailing blanks, the blank lines at the end left out."""
    import pyte

    shown = pyte.HistoryScreen(columns, rows, history=10_000)
    stream = pyte.ByteStream(shown)
    stream.feed(written)
    above = ["".join(line[x].data for x in range(columns)).rstrip() for line in shown.history.top]
    lines = above + [line.rstrip() for line in shown.display]
    while lines and not lines[-1]:
        lines.pop()
    return lines
