"""The lock that gives a folder one writer at a time: a run folder while a model scores into it, an output's
lock file beside it while ``paths.staged`` writes and swaps it in. It is ``fcntl.flock``, so the kernel lets go
when the holder's process dies and a killed run never leaves a folder locked; the lock file names its holder for
the one-line error a second writer gets.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as folder:
...     with FolderLock(Path(folder)) as lock:
...         lock.path.read_text().split()[0] == str(os.getpid())
True
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from pathlib import Path

from physprobe.errors import FolderInUse, OutputFolderError


class FolderLock:
    """An exclusive lock on a folder (``fcntl.flock`` on ``<folder>/<name>``), held in a ``with`` block: a
    second holder fails at once naming the first; the lock is released when the block ends, however it ends
    (an exception inside it included), or when its process dies, so a killed run never leaves it stuck.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with FolderLock(Path(folder)):
    ...         FolderLock(Path(folder)).acquire()
    Traceback (most recent call last):
    physprobe.errors.FolderInUse: ... is in use by process ...; wait for it to finish or choose another --out
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with FolderLock(Path(folder)):
    ...         pass
    ...     with FolderLock(Path(folder)) as again:  # released: the same process takes it again
    ...         again.handle is not None
    True
    """

    def __init__(self, folder: Path, name: str = "run.lock", subject: Path | None = None, transient: bool = False):
        self.path = Path(folder) / name
        self.subject = subject or Path(folder)  # what the lock guards, as its error names it
        self.transient = transient  # the lock file is removed on release (a lock beside an output, not inside it)
        self.handle = None

    def acquire(self) -> FolderLock:
        while True:
            try:  # O_NOFOLLOW: a lock file that is a symlink is refused, never the linked file written
                handle = open(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o666), "a+")
            except OSError as error:
                if error.errno != errno.ELOOP:
                    raise
                raise OutputFolderError(f"{self.path} is a symlink; physprobe writes no lock through a link: remove it") from None
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                handle.close()
                raise FolderInUse(
                    f"{self.subject} is in use by process {holder}; wait for it to finish or choose another --out"
                ) from None
            if self._current(handle):
                break
            handle.close()  # a file its holder removed as it let go (with its folder, perhaps): lock the one at the path now
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        handle.flush()
        self.handle = handle
        return self

    def _current(self, handle) -> bool:
        try:
            return os.stat(self.path, follow_symlinks=False).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        if self.handle is not None:
            if self.transient:  # removed while still held: whoever opened it meanwhile sees it is gone and retries
                self.path.unlink(missing_ok=True)
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()
