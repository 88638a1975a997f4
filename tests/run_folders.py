"""Run folders for report tests, written through ``physprobe.record.run_record`` as ``physprobe score`` writes them:
every field the schema asks, with plain defaults, and the fields a test is about."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

from physprobe.backends.base import Settings
from physprobe.data import registry
from physprobe.data.hub_data import DataSource
from physprobe.record import run_folder, run_record
from physprobe.record.run_record import Bootstrap, ChatRecord, RunRecord, Timings
from physprobe.record.spec import RunSpec

SPEC_FIELDS = {f.name for f in dataclasses.fields(RunSpec)} - {"backend"}  # ``backend``: the record's section (name and info)


def record(benchmark: str, method: str, metrics: dict, protocol: str = "some-protocol", **fields) -> RunRecord:
    """A record of ``benchmark`` scored by ``method``/``protocol`` with ``metrics``; ``fields`` override the rest (the
    spec's fields among them: model, label, limit, configs, ...; ``backend`` is the record's section)."""
    configs = tuple(k for k, v in metrics.items() if isinstance(v, dict)) or ("default",)
    model = fields.get("model", "model")
    spec = RunSpec(model=model, benchmark=benchmark, backend="hf", family="causal", protocol=protocol, method=method,
                   sends="Choice", configs=configs, settings=Settings(model), model_identity={},
                   data=DataSource(benchmark, "build", None, configs), out="runs/run")  # fmt: skip
    spec = dataclasses.replace(spec, **{k: v for k, v in fields.items() if k in SPEC_FIELDS})
    if "backend" in fields:
        spec = dataclasses.replace(spec, backend=fields["backend"]["name"])
    base = RunRecord(spec=spec, protocol_source="a test", backend={"name": "hf", "gguf_file": None}, chat=ChatRecord(False),
                     config_revisions={c: "sha256:0" for c in configs}, scored_now=0, versions={"physprobe": "0.1.0"},
                     started="2026-11-25T00:00:00Z", timings=Timings(0.0, {}, 0.0), bootstrap=Bootstrap(0, 1234, {}),
                     headline={}, metrics=metrics, figure_kinds=registry.evaluation(benchmark).figure_kinds())  # fmt: skip
    return dataclasses.replace(base, **{k: v for k, v in fields.items() if k not in SPEC_FIELDS})


def write_run(folder: Path, benchmark: str, method: str, metrics: dict, protocol: str = "some-protocol", **fields) -> Path:
    """``folder`` holding the run ``record(...)`` describes (no predictions)."""
    made = record(benchmark, method, metrics, protocol, **fields)
    run_record.write(folder, run_folder.owner(made.model, benchmark, False), made, [])
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
