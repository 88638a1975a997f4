"""The one writer of a terminal: while physprobe's bars are on it, every line a command writes to stderr (physprobe's
notes and warnings, Python's ``warnings``, ``logging``'s records, a library's print, a worker process's relayed line)
is written above the bars, whole, and the bars are drawn again below it; so no line is written over a bar and no piece
of a bar is left on screen.

``writing()`` (around every command, after ``streams.guarded``) stands a ``Lines`` stream in for ``sys.stderr`` when
stderr is a terminal: text is held until its line ends, and each whole line is written through tqdm's ``write`` (the
bars on that terminal cleared, the line written, the bars redrawn). A line that carries carriage returns (a library's
bar written as text) is kept as a terminal would show it: its text after the last one. The logging handlers already
writing to stderr (transformers' and datasets' loggers, made at their import) are pointed at it too. The bars
themselves write to the terminal's own stream (``real``), and a ticker redraws them every ``TICK`` seconds, so that
the time of a step counted in time alone (a model loading) moves, and a time left is read again while nothing moves.

>>> import io
>>> out = io.StringIO()
>>> lines = Lines(out)
>>> lines.write("physprobe: warning: a"), lines.write(" note\\n50%\\r100%\\npart"), out.getvalue()
(21, 19, 'physprobe: warning: a note\\n100%\\n')
>>> lines.flush(); out.getvalue()
'physprobe: warning: a note\\n100%\\npart'
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
from typing import TextIO

TICK = 1.0  # seconds between two redraws of the bars


class Lines(io.TextIOBase):
    """``stream`` (a terminal), written a whole line at a time above physprobe's bars (tqdm's ``write``); text after
    the last line end is held until its line ends, or written as it is by ``flush`` when no bar is open. Other
    attributes (``lost``, ``fileno``) are the stream's."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self._held = ""
        self._lock = threading.RLock()  # a relayed worker's line comes from another thread

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    def __getattr__(self, name: str):
        return getattr(self.stream, name)

    def write(self, text: str) -> int:
        with self._lock:
            whole, _, self._held = (self._held + text).rpartition("\n")
            if _:
                above("\n".join(line.rpartition("\r")[2] for line in whole.split("\n")) + "\n", self.stream)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._held and not _bars():
                self.stream.write(self._held)
                self._held = ""
            self.stream.flush()


def above(text: str, stream: TextIO) -> None:
    """``text`` (whole lines) written to ``stream`` above the bars open on it: through tqdm's ``write`` once tqdm
    is in use, else as it is."""
    if not _bars():
        stream.write(text)
        stream.flush()
        return
    from tqdm import tqdm

    tqdm.write(text, file=stream, end="")
    stream.flush()


def _bars() -> list:
    """The bars open now (none before tqdm is imported)."""
    std = sys.modules.get("tqdm.std")
    if std is None:
        return []
    return [bar for bar in list(getattr(std.tqdm, "_instances", ())) if not bar.disable]


def real(stream: TextIO) -> TextIO:
    """The stream a bar writes to: the terminal's own, under ``Lines``."""
    return stream.stream if isinstance(stream, Lines) else stream


@contextlib.contextmanager
def writing(environ=os.environ):
    """``sys.stderr`` as ``Lines`` inside the block when it is a terminal (not under pytest); the logging handlers
    that wrote to it write there too. Put back after it, what it held written."""
    stream = sys.stderr
    if "PYTEST_CURRENT_TEST" in environ or not _isatty(stream) or isinstance(stream, Lines):
        yield
        return
    lines = Lines(stream)
    handlers = [h for h in _stream_handlers() if h.stream is stream]
    for handler in handlers:
        handler.setStream(lines)
    sys.stderr = lines
    try:
        yield
    finally:
        sys.stderr = stream
        for handler in handlers:
            handler.setStream(stream)
        with contextlib.suppress(OSError, ValueError):
            if lines._held:
                stream.write(lines._held + "\n")
                lines._held = ""
            stream.flush()
        Ticker.stop()


def _isatty(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):
        return False


def _stream_handlers() -> list[logging.StreamHandler]:
    loggers = [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger))]
    return [h for logger in loggers for h in logger.handlers if type(h) is logging.StreamHandler]


class Ticker:
    """The thread that redraws the open bars every ``TICK`` seconds (started by the first bar on a terminal)."""

    _thread: threading.Thread | None = None
    _stopped = threading.Event()

    @classmethod
    def start(cls) -> None:
        if cls._thread is None or not cls._thread.is_alive():
            cls._stopped = threading.Event()
            cls._thread = threading.Thread(target=cls._run, args=(cls._stopped,), name="physprobe-ticker", daemon=True)
            cls._thread.start()

    @classmethod
    def stop(cls) -> None:
        cls._stopped.set()
        if cls._thread is not None:
            cls._thread.join()
            cls._thread = None

    @staticmethod
    def _run(stopped: threading.Event) -> None:
        while not stopped.wait(TICK):
            bars = _bars()
            if not bars:
                continue
            try:
                with bars[0].get_lock():
                    for bar in _bars():
                        bar.refresh(nolock=True)
            except (AttributeError, OSError, ValueError):  # a bar closed meanwhile, or a terminal gone: no redraw
                continue
