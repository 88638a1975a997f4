"""The resume cache of ``physprobe score``: every request's result in SQLite, keyed by all that changes it.

A key is the sha256 of the run's key base (``provenance.cache_key`` of the backend's identity, the
physprobe version, the protocol and the dataset revision), the method and the request
(``physprobe.requests.key``); chunks are committed as they are scored, so an interrupted run
(Ctrl-C, crash, out-of-memory, a server gone) restarts where it stopped and a changed model, dataset or
chat setting is never served stale results.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

from physprobe import requests


class Cache:
    """Scores per request in SQLite, committed after every chunk, so a run resumes where it stopped."""

    def __init__(self, path: Path):
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
            db.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("SELECT key, value FROM scores LIMIT 1").fetchall()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    @staticmethod
    def key(base: str, method: str, request) -> str:
        """The cache key of one request (``physprobe.requests``), under ``base`` (``provenance.cache_key``:
        all that changes a result)."""
        return hashlib.sha256(json.dumps([base, method, requests.key(request)]).encode()).hexdigest()

    def get(self, keys: list[str]) -> dict[str, list]:
        found = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            query = f"SELECT key, value FROM scores WHERE key IN ({','.join('?' * len(chunk))})"
            found.update({k: json.loads(v) for k, v in self.db.execute(query, chunk)})
        return found

    def put(self, items: dict[str, list]) -> None:
        self.db.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?)", [(k, json.dumps(v)) for k, v in items.items()])
        self.db.commit()
