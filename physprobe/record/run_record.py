"""``RunRecord``, what a ``physprobe score`` run folder holds, written and read through one schema: the record's own
pydantic dataclasses, whose fields hold their rules (``physprobe.record.fields``), and metrics.json's figures read by
the kinds the benchmark declares (``physprobe.record.figures``).

A run folder (``physprobe.record.run_folder``) holds::

    spec.json            the run as resolved before it scored (``physprobe.record.spec.RunSpec``)
    run.json             the record: schema_version, the spec, and what the run found of itself (backend, chat
                         setting, data revisions, versions, timings, bootstrap, headline figures, baselines) and the
                         kind of each figure metrics.json may hold (``figure_kinds``)
    metrics.json         per config, the figures of the benchmark's metric wiring (and its counts)
    predictions.parquet  per row a ``PredictionLine`` (``physprobe.record.predictions``)

No text of spec.json or run.json holds a URL's credentials (``physprobe.util.redact.without_url_credentials``). ``write`` swaps the four
in together (``paths.staged``, the cache and lock kept), so a kill never leaves files of
two runs side by side; ``load`` returns the ``RunRecord`` and refuses, in one line naming the file and field,
anything ``write`` would not have written: ``write`` checks the record with the same rules first, so ``physprobe
score`` never writes what ``physprobe report`` refuses. A folder an earlier physprobe wrote is read through the
migrations from its schema version (``physprobe.record.migrations``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic.dataclasses import dataclass
from typing_extensions import Required, TypedDict

from physprobe.data import registry
from physprobe.errors import RunRecordError
from physprobe.protocols.figures import Kind
from physprobe.record import figures
from physprobe.record import predictions as prediction_lines
from physprobe.record.fields import RECORD, Count, OneLine, Seconds, Sha256, one_line
from physprobe.record.migrations import SCHEMA_VERSION, migrated
from physprobe.record.spec import RunSpec
from physprobe.util.paths import MARKER, Owner, staged, vouched
from physprobe.util.redact import each_text, escaped, without_url_credentials

SPEC_JSON, RUN_JSON, METRICS_JSON, PREDICTIONS = "spec.json", "run.json", "metrics.json", "predictions.parquet"
RUN_FILES = (SPEC_JSON, RUN_JSON, METRICS_JSON, PREDICTIONS)  # a finished run's files, each vouched for by its marker
STATUSES = ("decided", "undecided", "unparsed", "excluded")  # a line's status (``physprobe.run.samples``)


@dataclass(frozen=True, config=RECORD)
class ChatRecord:
    """The chat setting a run's prompts were read under: whether a template was applied, which (its name and
    sha256), and the system instruction (any text)."""

    applied: bool
    template: OneLine | None = None
    template_sha256: Sha256 | None = None
    system_instruction: str | None = None


@dataclasses.dataclass(frozen=True)
class DatasetRecord:
    """Where the rows came from: the Hub (``path`` a repo, ``revision`` its commit) or a local build
    (``path`` its folder), and each config's revision (the commit, or a hash of the config's files)."""

    source: str  # "hub" or "local"
    path: str
    revision: str | None
    revisions: dict[str, str]


@dataclass(frozen=True, config=RECORD)
class Timings:
    load_model_s: Seconds
    configs_s: dict[str, Seconds]
    total_s: Seconds


def _ordered(interval: list[float]) -> list[float]:
    if interval[0] > interval[1]:
        raise ValueError("expected [low, high]")
    return interval


class Spread(TypedDict):
    """The spread of one figure over the bootstrap's resamples: its standard error and 95% interval [low, high]."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]
    stderr: Annotated[float, Field(ge=0)]
    ci95: Annotated[list[float], Field(min_length=2, max_length=2), AfterValidator(_ordered)]


@dataclass(frozen=True, config=RECORD)
class Bootstrap:
    """The seeded bootstrap behind each overall figure: per config and figure, its ``Spread``."""

    iterations: Count
    seed: int
    figures: dict[str, dict[str, Spread]]


@dataclass(frozen=True, config=RECORD)
class Baselines:
    """One config's figures for answers that read no question, on the rows the run scored
    (``physprobe.run.baselines``), and how alike the run's own answers were."""

    majority_answer: Count | None  # the commonest gold option; None: a 0/1 label per class, each class by its frequency
    majority: dict  # the metric wiring's figures (the config's whole set) when every row gets the majority answer
    constant: dict[str, dict]  # per constant answer ("0", "1", ...; "tied": every class the same score), its overall figures
    chance: dict[str, float]  # the overall figures of a uniform random answer (expected)
    answered: Count  # rows the run answered (decided and parsed)
    commonest: Count  # of them, the rows given the run's commonest answer
    commonest_answer: Count | None  # that answer, an option (None: a set or ranking of classes)

    @model_validator(mode="after")
    def _commonest_of_answered(self) -> Baselines:
        if self.commonest > self.answered:
            raise ValueError(f"commonest ({self.commonest}) is more than answered ({self.answered})")
        return self


class BackendSection(TypedDict, total=False):
    """A backend's own section of run.json (``Backend.info``): its ``name``, a GGUF file's name, a server's count of
    HTTP requests, and whatever else the backend records of itself."""

    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]
    name: Required[OneLine]
    gguf_file: OneLine | None
    requests_sent: Count


@dataclass(frozen=True, config=RECORD)
class RunRecord:
    """What a run folder holds: the run's ``spec`` and what the run found (run.json), the figures per config
    (metrics.json) and the kind of each (``figure_kinds``, the benchmark's ``Evaluation.figure_kinds``). ``backend``
    is the backend's own section: its ``name`` and what it records of itself (``Backend.info``), never keys of the
    record's top level. ``scored_now``: the questions the model answered in this invocation (0 for a run read whole
    from its resume cache)."""

    spec: RunSpec
    protocol_source: str
    backend: BackendSection
    chat: ChatRecord | None
    config_revisions: dict[str, str]  # per config, the commit it was read at or a hash of its files
    scored_now: Count
    versions: dict[str, str | None]
    started: OneLine
    timings: Timings
    bootstrap: Bootstrap
    headline: dict[str, tuple[str, float] | None]
    metrics: dict[str, dict]
    figure_kinds: dict[str, Kind]
    baselines: dict[str, Baselines] = dataclasses.field(default_factory=dict)  # per config and pooled figure
    schema_version: Literal[SCHEMA_VERSION] = SCHEMA_VERSION

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

    def config_figures(self, config: str) -> dict[str, figures.Figure]:
        """The figures of ``config`` by their dot paths, each with its kind and n (``physprobe.record.figures``)."""
        return figures.read(self.metrics[config], self.figure_kinds, METRICS_JSON, config)

    def run_json(self) -> dict:
        """run.json's content: every field but the metrics, JSON-ready."""
        data = TypeAdapter(RunRecord).dump_python(self, mode="json")
        del data["metrics"]
        return data

    def check_figures(self, where: str) -> None:
        """One ``RunRecordError`` line naming ``where`` (metrics.json) for a figure out of its kind's range, in the
        metrics or the baselines (``physprobe.record.figures.read``)."""
        figures.read(self.metrics, self.figure_kinds, where)
        for config, found in self.baselines.items():
            for part in ("majority", "constant", "chance"):
                figures.read(getattr(found, part), self.figure_kinds, where, f"baselines.{config}.{part}")


SCHEMAS = {RUN_JSON: "run.schema.json", METRICS_JSON: "metrics.schema.json"}  # each file's JSON Schema, as published
SCHEMA_FOLDER = Path(__file__).parent / "schemas"  # where the package ships them


def json_schemas() -> dict[str, dict]:
    """The JSON Schema (draft 2020-12) of run.json and of metrics.json, by ``SCHEMAS``' names, both made from the
    record's own types: run.json's from the record's dataclasses (pydantic's reading), without what is never written
    (the metrics, in their file of their own; ``RunSpec.described``) and no field but the types'; metrics.json's from
    the figure kinds every registered benchmark declares (``figures.metrics_schema``). ``physprobe/record/schemas/``
    holds them (a test keeps them equal); ``physprobe publish`` puts them beside the runs.

    >>> schemas = json_schemas()
    >>> schemas["run.schema.json"]["properties"]["schema_version"]["const"], sorted(schemas)
    (4, ['metrics.schema.json', 'run.schema.json'])
    """
    run = TypeAdapter(RunRecord).json_schema()
    del run["properties"]["metrics"]
    run["required"].remove("metrics")
    for typed in (run, *run["$defs"].values()):
        if typed.get("type") == "object":  # a backend's own section keeps what it records of itself
            typed.setdefault("additionalProperties", False)
    kinds: dict[str, Kind] = {}
    for benchmark in registry.names():
        for key, kind in registry.evaluation(benchmark).figure_kinds().items():
            if kinds.setdefault(key, kind) is not kind:
                raise RunRecordError(f"figure {key!r} is a {kind.value} in {benchmark} and a {kinds[key].value} elsewhere; "
                                     "give one kind per figure key (Evaluation.figures)")  # fmt: skip
    dialect = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    return {SCHEMAS[RUN_JSON]: {**dialect, **run, "title": "run.json"},
            SCHEMAS[METRICS_JSON]: {**dialect, **figures.metrics_schema(kinds)}}  # fmt: skip


def write(folder: Path, run_owner: Owner, record: RunRecord, samples: list) -> None:
    """Check ``record`` as ``load`` would, then replace the run folder's results as one: spec.json, predictions.parquet
    (a ``PredictionLine`` per sample, ``physprobe.run.samples.Sample.line``), metrics.json and run.json (the cache and
    lock stay)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # as written: no credential of a URL (--model-args base_url=http://user:password@...) in any text
    run_json = each_text(json.loads(json.dumps(record.run_json())), without_url_credentials)
    metrics = json.loads(json.dumps(record.metrics))
    _parsed(run_json, metrics, f"the record of {folder / RUN_JSON}").check_figures(f"the record of {folder / METRICS_JSON}")
    lines = [sample.line() for sample in samples]
    prediction_lines.check(lines, f"the record of {folder / PREDICTIONS}")
    table = pa.Table.from_pylist(lines)
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
    record = _parsed(migrated(info, where, f"`physprobe score ... --out {folder}`"), metrics, where)
    record.check_figures(str(folder / METRICS_JSON))
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
    is its ``row_sha256`` (the row edited since), or a line is not a ``PredictionLine`` (its status and prediction code
    apart)."""
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
    prediction_lines.check(lines, str(path))
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
    """The record of run.json's ``info`` and metrics.json's ``metrics``, typed (strictly, as JSON reads)."""
    try:
        return TypeAdapter(RunRecord).validate_json(json.dumps({**info, "metrics": metrics}), strict=True)
    except ValidationError as error:
        raise RunRecordError(one_line(error, where)) from None


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
