"""Score runs and the papers' published tables as Every Eval Ever records (EvalEval's shared format for evaluation
results, schema 0.3.0): ``physprobe export every-eval-ever RUNS... [--papers] --out DIR``.

Per run (a run folder, or a card run's folder holding one per benchmark): one aggregate record
(``record``, ``figures``) and its instance-level JSONL (``instances``), each pointing at the other, laid out as the
datastore's ``data/`` folder is::

    DIR/<benchmark>/<developer>/<model>/<uuid>.json            the aggregate record
    DIR/<benchmark>/<developer>/<model>/<uuid>_samples.jsonl   one line per scored question (and sampled answer)

With ``--papers``: one record per row of every ``paper_tables.yaml`` (``papers``), in the same layout, with no JSONL
(a paper prints aggregates only).

The uuid is derived from what the record holds (a run's published spec.json, metrics.json and data revisions; a
paper row's benchmark, table and place), so the same runs give the same bytes; it has the form of a version-4 uuid,
which the schema's ``file_path`` pattern asks for. What leaves the machine is what ``physprobe publish --runs``
publishes (``physprobe.publish.verify``, ``physprobe.publish.redaction``): only run folders physprobe wrote, each
file as its marker recorded it; no secret, no local path (a local model by its folder name and content digest, or
``--model-id``); the folder is read back for them before it replaces ``DIR``. A paper record's
``retrieved_timestamp`` is ``$SOURCE_DATE_EPOCH`` where set (reproducible output), else the time of the export; a
run's is the time its run.json was written.

>>> record_uuid("prost", "table5", "0")
'd222d1c6-b06b-4769-92dd-917cb5387cef'
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from physprobe.errors import ExportError, PublishError
from physprobe.publish import redaction
from physprobe.publish.every_eval_ever import figures, instances, papers
from physprobe.publish.every_eval_ever import record as records
from physprobe.publish.verify import RunFiles, check_record, read_verified
from physprobe.record.run_record import METRICS_JSON, SPEC_JSON
from physprobe.record.spec import short_name
from physprobe.report.runs import Run, collect
from physprobe.util.paths import Owner, staged
from physprobe.util.redact import escaped

OWNER = Owner("every-eval-ever", {})


@dataclass
class Written:
    """What an export wrote: aggregate records and instance lines, and the folders skipped (each with why)."""

    records: int = 0
    lines: int = 0
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def record_uuid(*parts: str) -> str:
    """A uuid of the version-4 form made from ``parts`` alone (sha256): the same parts, the same uuid."""
    return str(uuid.UUID(bytes=hashlib.sha256("\0".join(parts).encode()).digest()[:16], version=4))


def _dump(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def retrieved_now() -> str:
    """A paper record's ``retrieved_timestamp``: ``$SOURCE_DATE_EPOCH`` (whole seconds) where set, else now."""
    given = os.environ.get("SOURCE_DATE_EPOCH")
    if given is None:
        return str(int(time.time()))
    if not given.isdigit():
        raise ExportError(f"SOURCE_DATE_EPOCH={escaped(given)!r} is not a Unix time in whole seconds; set it to one, or unset it")
    return given


def export(out: Path, folders: list[Path], with_papers: bool = False, organization: str = records.UNKNOWN,
           model_id: str | None = None) -> Written:  # fmt: skip
    """Write the records of the finished runs among ``folders`` and, ``with_papers``, of the papers' tables into
    ``out`` (replaced whole, or left as it was on any failure); ``organization``: who ran them (the records' source)."""
    written = Written()
    runs: list[Run] = []
    verified: dict[Path, RunFiles] = {}
    if folders:
        runs, written.skipped = collect(folders)
        for run in runs:
            verified[run.folder] = read_verified(run.folder)
            check_record(verified[run.folder])
        local = sorted({redaction.local_model(files) for files in verified.values()} - {None})
        if model_id and len(local) > 1:
            raise PublishError(f"--model-id {escaped(model_id)!r} names one model, but the runs are of {len(local)} local models "
                               f"({', '.join(sorted(escaped(Path(m).name) for m in local))}); export each model's runs on their own")  # fmt: skip
    secrets = redaction.environment_secrets() if runs else []
    with staged(out, OWNER) as staging:
        forbidden: dict[str, str] = {}
        for run in runs:
            forbidden |= _write_run(staging, run, verified[run.folder], organization, model_id, secrets, written)
        if with_papers:
            _write_papers(staging, written)
        redaction.check_leaks(staging, forbidden)
    return written


def _write_run(staging: Path, run: Run, files: RunFiles, organization: str, model_id: str | None, secrets: list[str],
               written: Written) -> dict[str, str]:  # fmt: skip
    """Write one run's record and lines; what no file may hold (``Redaction.forbidden``)."""
    import pyarrow.parquet as pq

    published = redaction.published_model(files, model_id)
    redacted = redaction.redaction_for(files, published, secrets)
    spec = json.loads(redaction.spec_json(files, redacted, published))
    info = json.loads(redaction.run_json(files, redacted, published))
    predictions = pq.read_table(io.BytesIO(redaction.predictions(files, redacted))).to_pylist()
    record = run.record
    model = str(spec["model"])
    developer, folder_name = records.model_path_parts(model)
    uid = record_uuid(files.contents[SPEC_JSON].hex(), files.contents[METRICS_JSON].hex(),
                      json.dumps(record.config_revisions, sort_keys=True))  # fmt: skip
    retrieved = records.epoch(record.started, record.timings.total_s)
    evaluation_id = f"{record.benchmark}/{model}/{retrieved}"
    name = short_name(model, (info.get("backend") or {}).get("gguf_file"), record.label)
    generation = records.generation_config(record, spec)
    results = figures.results(run, records.source_data(record, spec), generation)
    lines = instances.Reader(record, evaluation_id, model, {r["evaluation_result_id"] for r in results}).lines(predictions)
    text = "".join(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n" for line in lines)
    folder = staging / record.benchmark / developer / folder_name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{uid}_samples.jsonl").write_text(text, encoding="utf-8")
    excluded = sum(line["status"] == "excluded" for line in predictions)
    aggregate = {
        "schema_version": records.SCHEMA_VERSION, "evaluation_id": evaluation_id, "evaluation_timestamp": record.started,
        "retrieved_timestamp": retrieved, "source_metadata": records.source_metadata(organization),
        "model_info": records.model_info(record, info, model, name, local=published is not None),
        "eval_library": records.eval_library(record), "evaluation_results": results,
        "detailed_evaluation_results": {
            "format": "jsonl", "file_path": f"data/{record.benchmark}/{developer}/{folder_name}/{uid}_samples.jsonl",
            "hash_algorithm": "sha256", "checksum": hashlib.sha256(text.encode()).hexdigest(), "total_rows": len(lines),
            "additional_details": {"questions_excluded": str(excluded),
                                   "questions_in_no_figure": str(len(predictions) - excluded - len({(x["metadata"]["config"], x["metadata"]["row"]) for x in lines}))},
        },
    }  # fmt: skip
    (folder / f"{uid}.json").write_text(_dump(aggregate), encoding="utf-8")
    written.records += 1
    written.lines += len(lines)
    return redacted.forbidden()


def _write_papers(staging: Path, written: Written) -> None:
    """One record per printed row of every benchmark's tables."""
    from physprobe.util.provenance import installed

    retrieved, version = retrieved_now(), installed(["physprobe"])["physprobe"] or records.UNKNOWN
    for benchmark, paper, table, index, row in papers.rows():
        developer, folder_name = records.model_path_parts(row.model)
        folder = staging / benchmark / developer / folder_name
        folder.mkdir(parents=True, exist_ok=True)
        data = papers.record(benchmark, paper, table, index, row, retrieved, version)
        (folder / f"{record_uuid('paper', benchmark, table.id, str(index))}.json").write_text(_dump(data), encoding="utf-8")
        written.records += 1


__all__ = ["OWNER", "Written", "export", "record_uuid", "retrieved_now"]
