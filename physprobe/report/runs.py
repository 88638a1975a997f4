"""Run folders written by ``physprobe score`` (run.json and metrics.json), as the report reads them."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from physprobe import registry, run_files
from physprobe.errors import ReportError
from physprobe.protocols import ProtocolError


@dataclass
class Run:
    folder: Path
    info: dict
    metrics: dict
    id: str = field(init=False)

    def __post_init__(self):
        # The id hashes what the run measured and on what, not how run.json lays it out or how long it took:
        # the same run scored twice gets the same id.
        measured = [self.info.get(k) for k in ("benchmark", "method", "protocol", "configs", "limit", "chat")]
        fingerprints = (self.info.get("dataset") or {}).get("fingerprints") if isinstance(self.info.get("dataset"), dict) else None
        canonical = json.dumps([measured, fingerprints, self.metrics], sort_keys=True, default=str).encode()
        model = Path(str(self.info.get("model", "model"))).name or "model"
        if self.info.get("gguf_file"):
            model += "-" + Path(self.info["gguf_file"]).stem
        self.id = f"{re.sub(r'[^A-Za-z0-9._-]+', '-', model)}-{hashlib.sha256(canonical).hexdigest()[:7]}"

    @property
    def method(self) -> str:
        return str(self.info.get("method"))


def _read_json(path: Path, run: Path) -> dict:
    if not path.is_file():
        raise ReportError(f"{run} is not a finished physprobe run: {path.name} is missing "
                          f"(write one with `physprobe score ... --out {run}`)")  # fmt: skip
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ReportError(f"{path} is not valid JSON ({error}); score the run again with `physprobe score`") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path} holds {type(data).__name__}, expected a JSON object; score the run again")
    return data


def load_run(folder: Path) -> Run:
    """A run folder written by ``physprobe score``: its run.json and metrics.json, with a unique id
    (the model's name and a short hash of both files)."""
    if not folder.is_dir():
        raise ReportError(f"{folder} is not a folder; give the run folders written by `physprobe score`")
    info = _read_json(folder / "run.json", folder)
    metrics = _read_json(folder / "metrics.json", folder)
    if not info.get("benchmark") or not info.get("method"):
        raise ReportError(f"{folder / 'run.json'} names no benchmark or method; score the run again")
    run_files.check_run(folder, info, metrics)  # a value no scorer writes (inf, 7.5 for a fraction, a newline): one line
    return Run(folder, info, metrics)


def run_protocol(run: Run):
    """The ``Protocol`` a run's run.json names, or None (not recorded, or no longer declared)."""
    try:
        return registry.evaluation(run.info["benchmark"]).protocol(str(run.info.get("protocol")))
    except ProtocolError:
        return None
