"""The standard streams a command writes to, made safe to lose: a stdout or stderr that is closed (``2>&-``) or that
cannot be written (a full disk, a pipe whose reader is gone) never stops a command, and never lets a file the
command opens take the place of one.

``guarded()`` is around every command (``physprobe``, ``upload.py``): it points a closed descriptor 0, 1 or 2 at
``/dev/null`` (else the next file opened would get its number, and a library's write to "stderr" would land in it),
and stands a ``Guarded`` stream in for ``sys.stdout`` and ``sys.stderr``: the first write that fails turns that
stream quiet (its descriptor pointed at ``/dev/null``, what it held dropped) and is kept as ``lost``, so the command
goes on and ends by saying what was lost (``exit_status.handled``).

>>> import io
>>> class Full(io.StringIO):
...     def write(self, text):
...         raise OSError(28, "No space left on device")
>>> out = Guarded(Full(), None)
>>> out.write("a line\\n"), out.lost.strerror, out.isatty()
(7, 'No space left on device', False)
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from typing import TextIO


class Guarded(io.TextIOBase):
    """``stream`` (None: closed), written until a write or flush fails; then quiet, the failure kept as ``lost``.
    ``fd``: the descriptor ``stream`` writes to, pointed at ``/dev/null`` when it fails (None: leave it)."""

    def __init__(self, stream: TextIO | None, fd: int | None):
        self.stream, self.fd = stream, fd
        self.lost: OSError | None = None

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._call("write", text)
        return len(text)

    def flush(self) -> None:
        self._call("flush")

    def isatty(self) -> bool:
        try:
            return self.stream is not None and self.lost is None and self.stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        if self.stream is None:
            raise io.UnsupportedOperation("the stream is closed")
        return self.stream.fileno()

    def _call(self, name: str, *args) -> None:
        if self.stream is None or self.lost is not None:
            return
        try:
            getattr(self.stream, name)(*args)
        except (OSError, ValueError) as error:  # ValueError: a closed file
            self.lost = error if isinstance(error, OSError) else OSError(errno.EBADF, str(error))
            self._drop()

    def _drop(self) -> None:
        """Point the descriptor at ``/dev/null`` and let the stream hand it what it still holds."""
        if self.fd is None:
            return
        with contextlib.suppress(OSError, ValueError):
            _null(self.fd)
            self.stream.flush()


def _null(fd: int) -> None:
    """Descriptor ``fd`` made to lead to ``/dev/null``."""
    null = os.open(os.devnull, os.O_RDWR)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


@contextlib.contextmanager
def guarded():
    """``sys.stdout`` and ``sys.stderr`` as ``Guarded`` streams inside the block (closed descriptors 0-2 pointed at
    ``/dev/null`` first, for the rest of the process); flushed and put back after it."""
    for fd in (0, 1, 2):
        if _closed(fd):
            _null(fd)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (
        Guarded(stream, fd if _writes_to(stream, fd) else None) for stream, fd in ((saved[0], 1), (saved[1], 2))
    )
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = saved


def _writes_to(stream: TextIO | None, fd: int) -> bool:
    """Whether ``stream`` is the process's own stream of descriptor ``fd`` (not a test's capture)."""
    try:
        return stream is not None and stream.fileno() == fd
    except (OSError, ValueError, io.UnsupportedOperation):
        return False


def lost(stream: TextIO) -> OSError | None:
    """Why ``stream`` (``sys.stdout``) lost what was written to it, flushed first; None if nothing was lost."""
    with contextlib.suppress(OSError, ValueError):
        stream.flush()
    return getattr(stream, "lost", None)
