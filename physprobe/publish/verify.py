"""What ``physprobe publish --runs`` checks of a run folder before any of it is published: only the files physprobe
wrote there, as it wrote them, and a record that agrees with its predictions.

``read_verified`` reads spec.json, run.json, metrics.json and predictions.parquet of a run folder once each, never through a
link, and checks each against the sha256 the folder's marker recorded when ``physprobe score`` wrote it (a file
edited, replaced or linked since is refused); ``check_record`` checks what they hold against each other: the marker's
benchmark is the record's, spec.json is the spec the record embeds, and the predictions hold rows of the record's
configs only, one per scored question.
Every refusal is one ``PublishError`` line naming the file and the fix.

>>> PUBLISHED
('spec.json', 'run.json', 'metrics.json', 'predictions.parquet')
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from physprobe.errors import PublishError
from physprobe.record.run_record import METRICS_JSON, PREDICTIONS, RUN_FILES, RUN_JSON, SPEC_JSON, again, read_vouched
from physprobe.util.paths import MARKER, Owner, vouched
from physprobe.util.redact import escaped

PUBLISHED = RUN_FILES  # the allow-list: all a run folder publishes


@dataclass(frozen=True)
class RunFiles:
    """A run folder's published files as read and verified: its owner (the marker's model and benchmark) and each
    file's bytes (what is published is made of these bytes, never of a second read)."""

    folder: Path
    owner: Owner
    contents: dict[str, bytes]

    def json(self, name: str) -> dict:
        return json.loads(self.contents[name].decode("utf-8"))

    @property
    def spec(self) -> dict:
        """The run's spec as its record embeds it."""
        spec = self.json(RUN_JSON).get("spec")
        return spec if isinstance(spec, dict) else {}

    def predictions(self):
        import pyarrow.parquet as pq

        return pq.read_table(io.BytesIO(self.contents[PREDICTIONS]))


def read_verified(folder: Path) -> RunFiles:
    """The published files of the run folder ``folder``, each a regular file (not a link) whose sha256 is the one its
    marker records (``run_record.read_vouched``, as ``physprobe report`` reads a run); else one ``PublishError`` line
    naming the file."""
    shown = escaped(str(folder))
    if folder.is_symlink():
        raise PublishError(f"{shown} is a symlink (to {escaped(os.readlink(folder))}); physprobe publishes no run folder "
                           "through a link: give the folder itself")  # fmt: skip
    owner, _ = vouched(folder)
    if owner is None or owner.kind != "run":
        raise PublishError(f"{shown} is not a run folder `physprobe score` wrote (its {MARKER} names no run); "
                           "give the run folders physprobe score wrote")  # fmt: skip
    return RunFiles(folder, owner, read_vouched(folder, PublishError))


def check_record(files: RunFiles) -> None:
    """``PublishError`` (one line naming the file) where the record and the predictions disagree: another benchmark
    than the folder's, predictions of configs the record did not score, or another number of rows than the metrics
    count (``n``: every question of a config; the modes of a nested figure count at most its rows)."""
    folder, spec, metrics = files.folder, files.spec, files.json(METRICS_JSON)
    run_json, predictions = escaped(str(folder / RUN_JSON)), escaped(str(folder / PREDICTIONS))
    if spec.get("benchmark") != files.owner.of.get("benchmark"):
        raise PublishError(f"{run_json} is a run of benchmark {escaped(str(spec.get('benchmark')))}, but its folder holds runs of "
                           f"{escaped(str(files.owner.of.get('benchmark')))}; {again(folder)}")  # fmt: skip
    if files.json(SPEC_JSON) != spec:
        raise PublishError(f"{escaped(str(folder / SPEC_JSON))} is not the spec {run_json} records; {again(folder)}")
    try:
        table = files.predictions()
        rows = list(zip(table.column("config").to_pylist(), table.column("row").to_pylist(), strict=True))
    except Exception as error:  # noqa: BLE001 - not Parquet, or without the columns physprobe writes
        raise PublishError(f"{predictions} cannot be read as physprobe's predictions ({type(error).__name__}: "
                           f"{escaped(str(error).splitlines()[0] if str(error) else '')}); {again(folder)}") from None  # fmt: skip
    counts, configs = Counter(config for config, _ in rows), list(spec.get("configs") or [])
    foreign = sorted(set(counts) - set(configs), key=str)
    if foreign:
        raise PublishError(f"{predictions} holds rows of config {escaped(str(foreign[0]))}, which {run_json} (benchmark "
                           f"{escaped(str(spec.get('benchmark')))}, configs {escaped(', '.join(map(str, configs)))}) did not score; "
                           f"{again(folder)}")  # fmt: skip
    repeated = next((pair for pair, count in Counter(rows).items() if count > 1), None)
    if repeated is not None:
        raise PublishError(f"{predictions} holds row {repeated[1]} of config {escaped(str(repeated[0]))} twice; {again(folder)}")
    for config in configs:
        figures = metrics.get(config) if isinstance(metrics.get(config), dict) else {}
        counted = figures.get("n")
        nested = [mode["n"] for mode in figures.values() if isinstance(mode, dict) and isinstance(mode.get("n"), int)]
        if (isinstance(counted, int) and counts[config] != counted) or any(n > counts[config] for n in nested):
            declared = counted if isinstance(counted, int) else max(nested)
            raise PublishError(f"{predictions} holds {counts[config]} rows of config {escaped(config)}, but "
                               f"{escaped(str(folder / METRICS_JSON))} counts {declared} questions (n); {again(folder)}")  # fmt: skip
