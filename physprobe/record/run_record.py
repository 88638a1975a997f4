"""``RunRecord``, what a ``physprobe score`` run folder holds, written and read through one schema: the record's own
dataclasses, loaded by ``physprobe.util.typed_json`` and held to the few rules a type cannot say
(``physprobe.record.record_schema``).

A run folder (``physprobe.record.run_folder``) holds::

    spec.json            the run as resolved before it scored (``physprobe.record.spec.RunSpec``)
    run.json             the record: schema_version, the spec, and what the run found of itself (backend, chat
                         setting, data revisions, versions, timings, bootstrap, headline figures, baselines)
    metrics.json         per config, the figures of the benchmark's metric wiring (and its counts)
    predictions.parquet  per row: config, row, status, prediction (-1 undecided, -2 unparsed, -3 excluded),
                         scores, reference, generated text and its token count, the texts the model read
                         (prompts) with their token counts, and the row as read with its sha256 (``row_json``,
                         ``row_sha256``: absent from folders written before them) (``physprobe.run.samples``)

No text of spec.json or run.json holds a URL's credentials (``physprobe.util.redact.without_url_credentials``). ``write`` swaps the four
in together (``paths.staged``, the cache and lock kept), so a kill never leaves files of
two runs side by side; ``load`` returns the ``RunRecord`` and refuses, in one line naming the file and field,
anything ``write`` would not have written: ``write`` checks the record with the same rules first, so ``physprobe
score`` never writes what ``physprobe report`` refuses. A folder an earlier physprobe wrote (another schema version)
is refused in one line naming the fix.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from physprobe.errors import RunRecordError
from physprobe.record import record_schema
from physprobe.record.spec import RunSpec
from physprobe.util import typed_json
from physprobe.util.paths import MARKER, Owner, staged, vouched
from physprobe.util.redact import each_text, escaped, without_url_credentials

SCHEMA_VERSION = 3  # 3: the run's spec embedded, statuses and distinct codes of predictions; 2: label, baselines, prompts
SPEC_JSON, RUN_JSON, METRICS_JSON, PREDICTIONS = "spec.json", "run.json", "metrics.json", "predictions.parquet"
RUN_FILES = (SPEC_JSON, RUN_JSON, METRICS_JSON, PREDICTIONS)  # a finished run's files, each vouched for by its marker
STATUSES = ("decided", "undecided", "unparsed", "excluded")  # a line's status (``physprobe.run.samples``)


@dataclass(frozen=True)
class ChatRecord:
    """The chat setting a run's prompts were read under: whether a template was applied, which (its name and
    sha256), and the system instruction (any text)."""

    applied: bool
    template: str | None = None
    template_sha256: str | None = None
    system_instruction: str | None = None


@dataclass(frozen=True)
class DatasetRecord:
    """Where the rows came from: the Hub (``path`` a repo, ``revision`` its commit) or a local build
    (``path`` its folder), and each config's revision (the commit, or a hash of the config's files)."""

    source: str  # "hub" or "local"
    path: str
    revision: str | None
    revisions: dict[str, str]


@dataclass(frozen=True)
class Timings:
    load_model_s: float
    configs_s: dict[str, float]
    total_s: float


@dataclass(frozen=True)
class Bootstrap:
    """The seeded bootstrap behind each overall figure: per config and figure, ``stderr`` and ``ci95``."""

    iterations: int
    seed: int
    figures: dict[str, dict[str, dict]]


@dataclass(frozen=True)
class Baselines:
    """One config's figures for answers that read no question, on the rows the run scored
    (``physprobe.run.baselines``), and how alike the run's own answers were."""

    majority_answer: int | None  # the commonest gold option; None: a 0/1 label per class, each class by its frequency
    majority: dict  # the metric wiring's figures (the config's whole set) when every row gets the majority answer
    constant: dict[str, dict]  # per constant answer ("0", "1", ...; "tied": every class the same score), its overall figures
    chance: dict[str, float]  # the overall figures of a uniform random answer (expected)
    answered: int  # rows the run answered (decided and parsed)
    commonest: int  # of them, the rows given the run's commonest answer
    commonest_answer: int | None  # that answer, an option (None: a set or ranking of classes)


@dataclass(frozen=True)
class RunRecord:
    """What a run folder holds: the run's ``spec`` and what the run found (run.json), the figures per config
    (metrics.json). ``backend`` is the backend's own section: its ``name`` and what it records of itself
    (``Backend.info``), never keys of the record's top level. ``scored_now``: the questions the model answered in
    this invocation (0 for a run read whole from its resume cache)."""

    spec: RunSpec
    protocol_source: str
    backend: dict
    chat: ChatRecord | None
    config_revisions: dict[str, str]  # per config, the commit it was read at or a hash of its files
    scored_now: int
    versions: dict[str, str | None]
    started: str
    timings: Timings
    bootstrap: Bootstrap
    headline: dict[str, tuple[str, float] | None]
    metrics: dict[str, dict]
    baselines: dict[str, Baselines] = dataclasses.field(default_factory=dict)  # per config and pooled figure
    schema_version: int = SCHEMA_VERSION

    model = property(lambda self: self.spec.model)
    benchmark = property(lambda self: self.spec.benchmark)
    method = property(lambda self: self.spec.method)
    protocol = property(lambda self: self.spec.protocol)
    configs = property(lambda self: self.spec.configs)
    limit = property(lambda self: self.spec.limit)
    label = property(lambda self: self.spec.label)
    command = property(lambda self: self.spec.command)

    @property
    def backend_name(self) -> str:
        return self.backend["name"]

    @property
    def dataset(self) -> DatasetRecord:
        """Where the rows came from (the spec's data source) and each config's revision."""
        data = self.spec.data
        return DatasetRecord("hub" if data.on_hub else "local", data.path, data.revision, dict(self.config_revisions))

    def run_json(self) -> dict:
        """run.json's content: every field but the metrics, JSON-ready."""
        data = typed_json.dump(self)
        del data["metrics"]
        return data


SCHEMAS = {RUN_JSON: "run.schema.json", METRICS_JSON: "metrics.schema.json"}  # each file's JSON Schema, as published
SCHEMA_FOLDER = Path(__file__).parent / "schemas"  # where the package ships them


def json_schemas() -> dict[str, dict]:
    """The JSON Schema (draft 2020-12) of run.json and of metrics.json, by ``SCHEMAS``' names: run.json's read from the
    record's own types (pydantic's reading of the dataclasses), without what is never written (the metrics, in their
    file of their own; ``RunSpec.described``) and no field but the types'; metrics.json's, objects of numbers, nulls and
    objects of them. ``physprobe/record/schemas/`` holds them (a test keeps them equal); ``physprobe publish`` puts
    them beside the runs.

    >>> schemas = json_schemas()
    >>> schemas["run.schema.json"]["properties"]["schema_version"], sorted(schemas)
    ({'const': 3}, ['metrics.schema.json', 'run.schema.json'])
    """
    from pydantic import TypeAdapter

    run = TypeAdapter(RunRecord).json_schema()
    definitions = run["$defs"]
    del run["properties"]["metrics"], definitions["RunSpec"]["properties"]["described"], definitions["Description"]
    run["required"].remove("metrics")
    run["properties"]["schema_version"] = {"const": SCHEMA_VERSION}
    for typed in (run, *definitions.values()):
        typed["additionalProperties"] = False
    figures = {
        "type": "object",
        "additionalProperties": {"anyOf": [{"type": "number"}, {"type": "null"}, {"$ref": "#/$defs/figures"}]},
    }
    metrics = {"title": "metrics.json", "type": "object", "additionalProperties": {"$ref": "#/$defs/figures"},
               "$defs": {"figures": figures}}  # fmt: skip
    dialect = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    return {SCHEMAS[RUN_JSON]: {**dialect, **run, "title": "run.json"}, SCHEMAS[METRICS_JSON]: {**dialect, **metrics}}


def write(folder: Path, run_owner: Owner, record: RunRecord, samples: list) -> None:
    """Check ``record`` as ``load`` would, then replace the run folder's results as one: spec.json, predictions.parquet
    (a line per sample, ``physprobe.run.samples.Sample.line``), metrics.json and run.json (the cache and lock stay)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # as written: no credential of a URL (--model-args base_url=http://user:password@...) in any text
    run_json = each_text(json.loads(json.dumps(record.run_json())), without_url_credentials)
    metrics = json.loads(json.dumps(record.metrics))
    record_schema.check_metrics(metrics, f"the record of {folder / METRICS_JSON}")
    record_schema.check(_parsed(run_json, metrics, f"the record of {folder / RUN_JSON}"), f"the record of {folder / RUN_JSON}")
    table = pa.Table.from_pylist([sample.line() for sample in samples])
    with staged(folder, run_owner, carry=True) as staging:
        pq.write_table(table, staging / PREDICTIONS)
        for name, data in ((SPEC_JSON, run_json["spec"]), (METRICS_JSON, metrics), (RUN_JSON, run_json)):
            (staging / name).write_text(json.dumps(data, indent=2, sort_keys=True))


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` is a run folder, finished or not: it holds run.json, or a run's marker."""
    owner, _ = vouched(folder)
    return (owner is not None and owner.kind == "run") or os.path.lexists(folder / RUN_JSON)


def load(folder: Path) -> RunRecord:
    """The record a run folder holds (run.json and metrics.json); one ``RunRecordError`` line naming the file
    and field for a folder ``write`` did not finish, another schema version, or a value it never writes."""
    if not folder.is_dir():
        raise RunRecordError(f"{folder} is not a folder; give the run folders written by `physprobe score`")
    if not is_run_folder(folder):  # no run began here: not one "still scoring"
        what = "is empty" if not any(folder.iterdir()) else "holds no physprobe run (no run.json, no run folder in it)"
        raise RunRecordError(f"{folder} {what}; give a folder `physprobe score` wrote (its --out, by default runs/<model>)")
    info = _read_json(folder / RUN_JSON, folder)
    metrics = _read_json(folder / METRICS_JSON, folder)
    where = str(folder / RUN_JSON)
    version = info.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RunRecordError(f"{where}: schema_version is {version!r}: the folder was written by "
                             f"{'an earlier' if isinstance(version, int) and version < SCHEMA_VERSION else 'another'} physprobe, "
                             f"which this one (schema {SCHEMA_VERSION}) does not read; score the run again into it "
                             f"(`physprobe score ... --out {folder}`)")  # fmt: skip
    record_schema.check_metrics(metrics, str(folder / METRICS_JSON))
    record = _parsed(info, metrics, where)
    record_schema.check(record, where)
    return record


def again(folder: Path) -> str:
    """The fix for a run folder whose files cannot be trusted: score it again."""
    return f"score the run again (`physprobe score ... --out {escaped(str(folder))}` resumes from its cache)"


def read_vouched(folder: Path, error: type[Exception] = RunRecordError) -> dict[str, bytes]:
    """The bytes of each of ``RUN_FILES`` in ``folder``, read once, never through a link, each the file whose sha256
    the folder's marker recorded when ``write`` wrote it; else one ``error`` line naming the file (edited, replaced,
    linked, missing or not listed since)."""
    _, hashes = vouched(folder)
    contents = {}
    for name in RUN_FILES:
        path, shown = folder / name, escaped(str(folder / name))
        if path.is_symlink():
            raise error(f"{shown} is a symlink (to {escaped(os.readlink(path))}); physprobe reads only the files it wrote in "
                        f"the run folder, never a linked one: {again(folder)}")  # fmt: skip
        if not path.exists():
            raise error(f"{shown} is missing: the run folder is incomplete; {again(folder)}")
        if not path.is_file():
            raise error(f"{shown} is not a regular file; {again(folder)}")
        content = path.read_bytes()
        if name not in hashes:
            raise error(f"{shown} is not listed in {MARKER} (written by another program, or by a physprobe that recorded no "
                        f"hashes); {again(folder)}")  # fmt: skip
        if hashlib.sha256(content).hexdigest() != hashes[name]:
            raise error(f"{shown} changed since physprobe score wrote it (its sha256 is not the one {MARKER} records); "
                        f"{again(folder)}")  # fmt: skip
        contents[name] = content
    return contents


def predictions(folder: Path) -> list[dict]:
    """predictions.parquet's lines (``physprobe.run.samples.Sample.line``), each as written: one ``RunRecordError``
    line naming the file where it is missing or not Parquet, a column where it has another type than ``COLUMNS`` (or
    is missing), and the row where a value is null, a status unknown, or ``row_json`` not the JSON object whose sha256
    is its ``row_sha256`` (the row edited since)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / PREDICTIONS
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        raise RunRecordError(f"{path} cannot be read ({error}); score the run again with `physprobe score`") from None
    if table.num_rows:
        _check_columns(table.schema, path)
    lines = table.to_pylist()
    for line in lines:
        _check_line(line, path)
    return lines


COLUMNS = {"config": "text", "row": "whole number", "status": "text", "prediction": "whole number", "scores": "list",
           "reference": "list", "prompts": "list", "row_json": "text", "row_sha256": "text"}  # fmt: skip
_OPTIONAL = ("row_json", "row_sha256")  # absent from folders written before them


def _check_columns(schema, path: Path) -> None:
    """A ``RunRecordError`` line naming the first column of ``COLUMNS`` missing from ``schema`` or of another type."""
    import pyarrow as pa

    kinds = {"text": (pa.types.is_string, pa.types.is_large_string), "whole number": (pa.types.is_integer,),
             "list": (pa.types.is_list, pa.types.is_large_list)}  # fmt: skip
    for name, kind in COLUMNS.items():
        if name not in schema.names:
            if name in _OPTIONAL:
                continue
            raise RunRecordError(f"{path}: column {name} is missing (physprobe score writes it); {again(path.parent)}")
        found = schema.field(name).type
        if not any(check(found) for check in kinds[kind]):
            raise RunRecordError(
                f"{path}: column {name} holds {found}, not the {kind} physprobe score writes; {again(path.parent)}"
            )


def _check_line(line: dict, path: Path) -> None:
    """A ``RunRecordError`` line naming ``line``'s row where a column of ``COLUMNS`` holds a null, its status is none
    physprobe writes, or its ``row_json`` is not the JSON object whose sha256 its ``row_sha256`` records."""
    where = f"{path}: row {line.get('row')} of config {escaped(str(line.get('config')))}"
    null = next((name for name in COLUMNS if name in line and line[name] is None), None)
    if null is not None:
        raise RunRecordError(f"{where}: column {null} is null, which physprobe score never writes; {again(path.parent)}")
    if line["status"] not in STATUSES:
        raise RunRecordError(f"{where}: column status is {escaped(repr(line['status']))}, not one of {', '.join(STATUSES)}; "
                             f"{again(path.parent)}")  # fmt: skip
    if "row_json" not in line:
        return
    try:
        data = json.loads(line["row_json"])
    except json.JSONDecodeError as error:
        raise RunRecordError(f"{where}: column row_json is not JSON ({error}); {again(path.parent)}") from None
    if not isinstance(data, dict):
        raise RunRecordError(f"{where}: column row_json is not a JSON object (the row as read); {again(path.parent)}")
    if "row_sha256" in line and hashlib.sha256(line["row_json"].encode()).hexdigest() != line["row_sha256"]:
        raise RunRecordError(f"{where}: its row_json is not the row its row_sha256 records (edited since physprobe score "
                             f"wrote it); {again(path.parent)}")  # fmt: skip


def row_data(line: dict) -> dict:
    """The row a line of predictions.parquet was scored on, as read (``row_json``).

    >>> row_data({"row_json": '{"label":1,"name":"mass_1"}'})
    {'label': 1, 'name': 'mass_1'}
    """
    return json.loads(line["row_json"])


def _parsed(info: dict, metrics, where: str) -> RunRecord:
    """The record of run.json's ``info`` and metrics.json's ``metrics``, typed (``physprobe.util.typed_json``)."""
    try:
        return typed_json.load(RunRecord, {**info, "metrics": metrics}, where)
    except typed_json.TypedJSONError as error:
        raise RunRecordError(f"{error}; score the run again") from None


def _read_json(path: Path, run: Path) -> dict:
    if not path.is_file():
        raise RunRecordError(f"{run} is not a finished physprobe run (still scoring, or stopped before writing its results): "
                             f"{path.name} is missing (`physprobe score ... --out {run}` finishes it, resuming from its cache)")  # fmt: skip
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RunRecordError(f"{path} is not valid JSON ({error}); score the run again with `physprobe score`") from None
    if not isinstance(data, dict):
        raise RunRecordError(f"{path} holds {type(data).__name__}, expected a JSON object; score the run again")
    return data
