"""The resume cache of ``physprobe score``: every request's result in SQLite, keyed by all that changes it.

A key is the sha256 of the run's key base (``key_base`` of the backend's identity, the version of the engine that
answers the request type (``Backend.ENGINE_VERSIONS``), the protocol with its version (``Protocol.version``) and the
dataset revision) and the request (``Request.key``); never physprobe's release number, which does not change between
commits, so an engine fixed in place rescores the answers it changes and nothing else does. A value is the
result's cached form (``physprobe.protocols.results``: ``to_json``, read back by the request type's result class). Results are committed as the backend hands them over (a server's answers one by one, an
in-process engine's per engine call; ``synchronous=OFF``: a commit is a write to the operating system, which a
killed process cannot lose), so an interrupted run (Ctrl-C, SIGKILL, out-of-memory, a server gone) restarts where
it stopped and a changed model, dataset or chat setting is never served stale results.

A backend's identity may hold numbers it measured of its model (``measured``: a server's log-probabilities of a
probe text, which jitter in their last digits from run to run); ``settled`` reads them as the first measurement
stored within ``MEASURE_TOLERANCE`` of them, so the same weights key the same entries and other weights do not.

A sampled answer depends on the batch shape it was drawn in (docs/scoring.md), so a sampled request's key holds the
run's batch size too, and the cache records the batch sizes each sampled run's answers were drawn at (``drawn_at``),
so that a resume at another one is said (``physprobe.run.runner``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

from physprobe.errors import OutputFolderError
from physprobe.protocols import results
from physprobe.protocols.results import MEASURE_TOLERANCE


def key_base(**parts) -> str:
    """The key base of a run's requests: everything that changes a result besides the request itself.

    >>> key_base(model="sha256:ab", dtype="float32", device="cpu") == key_base(device="cpu", dtype="float32", model="sha256:ab")
    True
    """
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


class Cache:
    """Scores per request in SQLite, committed as they are handed over, so a run resumes where it stopped.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     cache = Cache(Path(folder) / "cache.sqlite")
    ...     first = cache.settled({"model": "m", "measured": [-1.0, -2.0]})
    ...     again = cache.settled({"model": "m", "measured": [-1.01, -2.02]})
    ...     other = cache.settled({"model": "m", "measured": [-1.5, -2.0]})
    >>> again == first, other["measured"]
    (True, [-1.5, -2.0])
    """

    def __init__(self, path: Path):
        if path.is_symlink():
            raise OutputFolderError(
                f"{path} is a symlink (to {os.readlink(path)}); physprobe writes no cache through a link: remove it"
            )
        self.path = path
        try:
            self.db = self._open(path)
        except sqlite3.DatabaseError as error:  # not a database, or damaged: set it aside and start afresh
            aside = path.with_name(f"{path.stem}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}")
            os.replace(path, aside)
            print(f"physprobe: warning: {path} is unreadable ({error}); moved to {aside.name}, scoring afresh", file=sys.stderr)
            self.db = self._open(path)

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(path)
        try:
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("integrity check failed")
            db.execute("PRAGMA synchronous=OFF")
            db.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS measured (scope TEXT NOT NULL, value TEXT NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS drawn (scope TEXT NOT NULL, batch_size TEXT NOT NULL)")
            db.execute("SELECT key, value FROM scores LIMIT 1").fetchall()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    @staticmethod
    def keys(requests: list, /, **parts) -> list[str]:
        """The cache key of each request (``physprobe.protocols.requests``) under ``parts``, all else that changes its result
        (``key_base``)."""
        base = key_base(**parts)
        return [hashlib.sha256(json.dumps([base, request.key()]).encode()).hexdigest() for request in requests]

    def get(self, keys: list[str], result: type) -> dict[str, results.Result]:
        """The results the cache holds of ``keys`` (requests whose results are of class ``result``)."""
        found = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            query = f"SELECT key, value FROM scores WHERE key IN ({','.join('?' * len(chunk))})"
            found.update(self.db.execute(query, chunk).fetchall())
        values = {k: result.from_json(_loads(v)) for k, v in found.items()}
        if all(v is not None for v in values.values()):
            return values
        # Values of the wrong shape in a healthy file: set the file aside (like a corrupted one), keep the good ones.
        good = {k: v for k, v in self._all().items() if results.readable(v)}
        self.db.close()
        aside = self.path.with_name(f"{self.path.stem}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}{self.path.suffix}")
        os.replace(self.path, aside)
        print(f"physprobe: warning: {self.path} holds scores of the wrong shape; moved to {aside.name}, "
              f"kept its {len(good)} good entries, rescoring the rest", file=sys.stderr)  # fmt: skip
        self.db = self._open(self.path)
        self._store(good)
        return {k: v for k, v in values.items() if v is not None}

    def _all(self) -> dict:
        return {k: _loads(v) for k, v in self.db.execute("SELECT key, value FROM scores")}

    def put(self, items: dict[str, results.Result]) -> None:
        """Commit ``items`` (key -> result) at once."""
        self._store({k: v.to_json() for k, v in items.items()})

    def _store(self, items: dict[str, object]) -> None:
        try:
            self.db.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?)", [(k, json.dumps(v)) for k, v in items.items()])
            self.db.commit()
        except sqlite3.OperationalError as error:  # SQLITE_FULL, I/O errors: the cli's one line for a failed write
            full = "full" in str(error)
            raise OSError(errno.ENOSPC if full else errno.EIO, str(error), str(self.path)) from None

    def drop(self, keys: list[str]) -> None:
        """Remove the results of ``keys`` (answers that may be another model's: ``ServedModelChanged``)."""
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            self.db.execute(f"DELETE FROM scores WHERE key IN ({','.join('?' * len(chunk))})", chunk)
        self.db.commit()

    def drawn_at(self, scope: str, batch_size: int | None) -> list:
        """The batch sizes (``--batch-size``; None: automatic) at which sampled answers under ``scope`` (their key base
        but for the batch size) were drawn into this cache before, ``batch_size`` recorded now too.

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     cache = Cache(Path(folder) / "cache.sqlite")
        ...     cache.drawn_at("run", 2), cache.drawn_at("run", None), cache.drawn_at("run", 2)
        ([], [2], [2, None])
        """
        earlier = [
            _loads(text) for (text,) in self.db.execute("SELECT batch_size FROM drawn WHERE scope = ? ORDER BY rowid", (scope,))
        ]
        if batch_size not in earlier:
            try:
                self.db.execute("INSERT INTO drawn VALUES (?, ?)", (scope, json.dumps(batch_size)))
                self.db.commit()
            except sqlite3.OperationalError as error:
                raise OSError(errno.ENOSPC if "full" in str(error) else errno.EIO, str(error), str(self.path)) from None
        return earlier

    def settled(self, identity: dict) -> dict:
        """``identity`` with its ``measured`` numbers read as the first stored measurement of the same identity within
        ``MEASURE_TOLERANCE`` of each, or stored as a new one."""
        if "measured" not in identity:
            return identity
        values = identity["measured"]
        scope = hashlib.sha256(
            json.dumps({k: v for k, v in identity.items() if k != "measured"}, sort_keys=True).encode()
        ).hexdigest()
        for (text,) in self.db.execute("SELECT value FROM measured WHERE scope = ? ORDER BY rowid", (scope,)):
            stored = _loads(text)
            if (isinstance(stored, list) and len(stored) == len(values)
                    and all(abs(a - b) <= MEASURE_TOLERANCE for a, b in zip(stored, values, strict=True))):  # fmt: skip
                return {**identity, "measured": stored}
        try:
            self.db.execute("INSERT INTO measured VALUES (?, ?)", (scope, json.dumps(values)))
            self.db.commit()
        except sqlite3.OperationalError as error:
            raise OSError(errno.ENOSPC if "full" in str(error) else errno.EIO, str(error), str(self.path)) from None
        return identity


def _loads(text: str):
    """A cached value, or None where it is not JSON (no result class reads it)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None
