"""Run folders for report tests, written through ``physprobe.run_record`` as ``physprobe score`` writes them:
every field the schema asks, with plain defaults, and the fields a test is about."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

from physprobe import run_record
from physprobe.run_record import Bootstrap, ChatRecord, DatasetRecord, RunRecord, Timings


def record(benchmark: str, method: str, metrics: dict, protocol: str = "some-protocol", **fields) -> RunRecord:
    """A record of ``benchmark`` scored by ``method``/``protocol`` with ``metrics``; ``fields`` override the rest."""
    configs = tuple(k for k, v in metrics.items() if isinstance(v, dict)) or ("default",)
    base = RunRecord(model="model", benchmark=benchmark, method=method, protocol=protocol, protocol_source="a test",
                     configs=configs, limit=None, backend={"name": "hf", "gguf_file": None}, chat=ChatRecord(False),
                     dataset=DatasetRecord("local", "build", None, {c: "sha256:0" for c in configs}), questions_scored=0,
                     seconds=0.0, versions={"physprobe": "0.1.0"}, command=(), started="2026-11-25T00:00:00Z",
                     timings=Timings(0.0, {}, 0.0), bootstrap=Bootstrap(0, 1234, {}), headline={}, metrics=metrics)  # fmt: skip
    return dataclasses.replace(base, **fields)


def write_run(folder: Path, benchmark: str, method: str, metrics: dict, protocol: str = "some-protocol", **fields) -> Path:
    """``folder`` holding the run ``record(...)`` describes (no predictions)."""
    made = record(benchmark, method, metrics, protocol, **fields)
    run_record.write(folder, run_record.owner(made.model, benchmark, False), made, [])
    return folder


def cached(out: Path) -> int:
    """How many results the run folder ``out``'s resume cache holds (0 before its table exists)."""
    if not (out / "cache.sqlite").exists():
        return 0
    with sqlite3.connect(out / "cache.sqlite") as db:
        try:
            return db.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
        except sqlite3.OperationalError:  # the table is not made yet
            return 0
