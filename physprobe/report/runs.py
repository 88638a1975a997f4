"""Run folders written by ``physprobe score``, as the report reads them (through ``physprobe.run_record``)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from physprobe import registry, run_record
from physprobe.protocols import ProtocolError
from physprobe.run_record import RunRecord


@dataclass
class Run:
    """A run in the report: its folder, its record, and an id unique among the report's runs."""

    folder: Path
    record: RunRecord
    id: str = field(init=False)

    def __post_init__(self):
        # The id hashes what the run measured and on what, not how run.json lays it out or how long it took:
        # the same run scored twice gets the same id.
        record = self.record
        chat = None if record.chat is None else dataclasses.asdict(record.chat)
        measured = [record.benchmark, record.method, record.protocol, list(record.configs), record.limit, chat]
        canonical = json.dumps([measured, record.dataset.fingerprints, record.metrics], sort_keys=True, default=str).encode()
        model = Path(record.model).name or "model"
        if record.backend.get("gguf_file"):
            model += "-" + Path(record.backend["gguf_file"]).stem
        self.id = f"{re.sub(r'[^A-Za-z0-9._-]+', '-', model)}-{hashlib.sha256(canonical).hexdigest()[:7]}"

    @property
    def method(self) -> str:
        return self.record.method

    @property
    def metrics(self) -> dict:
        return self.record.metrics


def load_run(folder: Path) -> Run:
    """A run folder written by ``physprobe score`` (``run_record.read``), with its report id."""
    return Run(folder, run_record.read(folder))


def run_protocol(run: Run):
    """The ``Protocol`` a run's record names, or None (no longer declared)."""
    try:
        return registry.evaluation(run.record.benchmark).protocol(run.record.protocol)
    except ProtocolError:
        return None
