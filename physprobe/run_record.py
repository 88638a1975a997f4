"""A ``physprobe score`` run folder: the one place that knows its layout, and ``RunRecord``, what it holds.

A run folder belongs to one model (its name, or a local folder's absolute path) on one benchmark
(``owner``): a second model whose default folder has the same name (``--model A/gpt2`` then ``B/gpt2``:
``runs/gpt2-prost``) is refused with a one-line error suggesting ``--out``. It holds::

    run.json             the record's settings and provenance (schema_version, model, label, protocol, backend,
                         ..., the baselines of each config)
    metrics.json         per config, the figures of the benchmark's metric wiring (and its counts)
    predictions.parquet  per scored row: config, row, scores, prediction, reference, generated text, and the
                         texts the model read (prompts) with their token counts
    cache.sqlite         the resume cache (cache.rank<r>.sqlite for data-parallel rank r), run.lock

``write`` swaps the first three in together (``paths.staged``, the cache and lock kept), so a kill never
leaves files of two runs side by side; ``read`` returns the ``RunRecord`` and refuses, in one line naming
the file and field, anything ``write`` would not have written: ``write`` checks the record with the same
rules first, so ``physprobe score`` never writes what ``physprobe report`` refuses.

>>> check_metrics({"mass": {"accuracy": 0.5, "n": 10}}, "metrics.json")
>>> check_metrics({"mass": {"accuracy": 7.5}}, "metrics.json")
Traceback (most recent call last):
physprobe.errors.RunRecordError: metrics.json: mass.accuracy is 7.5, outside 0-1 for a fraction; score the run again
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from physprobe.errors import RunRecordError
from physprobe.paths import MARKER, Owner, check_folder_name, claim, staged
from physprobe.protocols import COUNTS, METHODS

SCHEMA_VERSION = 2  # 2: label, baselines, and the prompts of each prediction
LABEL_LENGTH = 80
RUN_JSON, METRICS_JSON, PREDICTIONS = "run.json", "metrics.json", "predictions.parquet"


def default_folder(model: str, benchmark: str) -> Path:
    """The run folder ``physprobe score`` writes without ``--out``.

    >>> default_folder("HuggingFaceTB/SmolLM2-135M", "prost").as_posix()
    'runs/SmolLM2-135M-prost'
    """
    return Path("runs") / f"{Path(model).name}-{benchmark}"


def cache_file(folder: Path, rank: int = 0) -> Path:
    """The resume cache of data-parallel ``rank`` (rank 0, a single process's, is ``cache.sqlite``)."""
    return folder / ("cache.sqlite" if rank == 0 else f"cache.rank{rank}.sqlite")


def lock_name(rank: int = 0) -> str:
    """The lock file ``rank`` holds in the run folder while it scores."""
    return "run.lock" if rank == 0 else f"run.rank{rank}.lock"


def owner(model: str, benchmark: str, local: bool) -> Owner:
    """The owner of a run folder: the model (a local folder by its absolute path) and the benchmark.

    >>> owner("A/gpt2", "prost", local=False).describe()
    'a run of benchmark prost, model A/gpt2'
    """
    return Owner("run", {"model": os.path.abspath(model) if local else model, "benchmark": benchmark})


def open_folder(out: Path, run_owner: Owner) -> Path:
    """Claim the run folder ``out`` (``paths.claim``): created and marked if new; a folder of another model,
    benchmark or program is a one-line error naming it."""
    check_folder_name(Path(os.path.abspath(out)).name, "--out")
    return claim(out, run_owner)


def new_folders(out: Path) -> list[Path]:
    """``out`` and its parents that do not exist yet (what ``open_folder`` would create), innermost first."""
    out = Path(os.path.abspath(out))
    return [p for p in (out, *out.parents) if not os.path.lexists(p)]


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` is a run folder, finished or not: it holds run.json, or a run's marker."""
    if (folder / RUN_JSON).is_file():
        return True
    try:
        return json.loads((folder / MARKER).read_text(encoding="utf-8"))["kind"] == "run"
    except (OSError, ValueError, KeyError, TypeError):
        return False


def discard_unscored(created: list[Path]) -> bool:
    """Remove the run folder ``created[0]`` and the parents ``created`` lists (``new_folders``, taken before
    ``open_folder``) when the run folder holds only its marker, locks and caches and no cache holds a score:
    a run refused before scoring (a bad argument found late) leaves nothing it created. Returns whether it did."""
    import shutil
    import sqlite3

    if not created or not created[0].is_dir():
        return False
    for path in created[0].iterdir():
        if path.name == MARKER or (path.name.startswith("run") and path.name.endswith(".lock")):
            continue
        if not (path.name.startswith("cache") and path.suffix == ".sqlite") or path.is_symlink():
            return False
        try:
            with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
                tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if "scores" in tables and db.execute("SELECT count(*) FROM scores").fetchone()[0]:
                    return False
        except sqlite3.Error:
            return False
    shutil.rmtree(created[0])
    for parent in created[1:]:
        with contextlib.suppress(OSError):  # only while empty
            parent.rmdir()
    return True


# --- the record -------------------------------------------------------------------------------------------


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
    (``path`` its folder), and each config's fingerprint (the commit, or a hash of the config's files)."""

    source: str  # "hub" or "local"
    path: str
    revision: str | None
    fingerprints: dict[str, str]


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
    (``physprobe.baselines``), and how alike the run's own answers were."""

    majority_answer: int | None  # the commonest gold option; None: a 0/1 label per class, each class by its frequency
    majority: dict  # the metric wiring's figures (the config's whole set) when every row gets the majority answer
    constant: dict[str, dict]  # per constant answer ("0", "1", ...; "tied": every class the same score), its overall figures
    chance: dict[str, float]  # the overall figures of a uniform random answer (expected)
    answered: int  # rows the run answered (decided and parsed)
    commonest: int  # of them, the rows given the run's commonest answer
    commonest_answer: int | None  # that answer, an option (None: a set or ranking of classes)


@dataclass(frozen=True)
class Prediction:
    """One scored row, as predictions.parquet holds it (``prediction`` -1: undecided or unparsed; ``scores``
    NaN where the model gave none; ``prompts``: each text the row's request made the model read, as it read
    it (through the chat template where one applied; ``Backend.read``), and ``prompt_tokens`` their token
    counts where the backend has the tokenizer)."""

    config: str
    row: int
    scores: list[float]
    prediction: int
    reference: list[int]
    generated: object = None  # the generated text, the list of a YES/NO protocol's answers, or None
    prompts: list[str] = dataclasses.field(default_factory=list)
    prompt_tokens: list[int] | None = None


@dataclass(frozen=True)
class RunRecord:
    """What a run folder holds: the run's settings and provenance (run.json), the figures per config
    (metrics.json) and, when written, the predictions. ``backend`` is the backend's own section: its
    ``name`` and what it records of itself (``Backend.info``), never keys of the record's top level."""

    model: str
    benchmark: str
    method: str
    protocol: str
    protocol_source: str
    configs: tuple[str, ...]
    limit: int | None
    backend: dict
    chat: ChatRecord | None
    dataset: DatasetRecord
    questions_scored: int
    seconds: float
    versions: dict[str, str | None]
    command: tuple[str, ...]
    started: str
    timings: Timings
    bootstrap: Bootstrap
    headline: dict[str, tuple[str, float] | None]
    metrics: dict[str, dict]
    label: str | None = None  # --label: the run's name in a report
    baselines: dict[str, Baselines] = dataclasses.field(default_factory=dict)  # per config and pooled figure
    schema_version: int = SCHEMA_VERSION

    @property
    def backend_name(self) -> str:
        return self.backend["name"]

    def run_json(self) -> dict:
        """run.json's content: every field but the metrics."""
        data = dataclasses.asdict(self)
        del data["metrics"]
        return data


def write(folder: Path, run_owner: Owner, record: RunRecord, predictions: list[Prediction]) -> None:
    """Check ``record`` as ``read`` would, then replace the run folder's results as one: predictions.parquet,
    metrics.json and run.json (the cache and lock stay)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_json = _json_ready(record.run_json())
    check_info(run_json, f"the record of {folder / RUN_JSON}")
    check_metrics(record.metrics, f"the record of {folder / METRICS_JSON}")
    table = pa.Table.from_pylist([dataclasses.asdict(p) for p in predictions])
    with staged(folder, run_owner, carry=True) as staging:
        pq.write_table(table, staging / PREDICTIONS)
        for name, data in ((METRICS_JSON, record.metrics), (RUN_JSON, run_json)):
            (staging / name).write_text(json.dumps(data, indent=2, sort_keys=True))


def _json_ready(value):
    """Tuples as lists, recursively: what ``json`` writes and reads back."""
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def read(folder: Path) -> RunRecord:
    """The record a run folder holds (run.json and metrics.json); one ``RunRecordError`` line naming the file
    and field for a folder ``write`` did not finish, or a value it never writes."""
    if not folder.is_dir():
        raise RunRecordError(f"{folder} is not a folder; give the run folders written by `physprobe score`")
    info = _read_json(folder / RUN_JSON, folder)
    metrics = _read_json(folder / METRICS_JSON, folder)
    check_info(info, str(folder / RUN_JSON))
    check_metrics(metrics, str(folder / METRICS_JSON))
    chat = info["chat"]
    return RunRecord(
        model=info["model"], benchmark=info["benchmark"], method=info["method"], protocol=info["protocol"],
        protocol_source=info["protocol_source"], configs=tuple(info["configs"]), limit=info["limit"],
        backend=info["backend"], chat=None if chat is None else ChatRecord(**chat), dataset=DatasetRecord(**info["dataset"]),
        questions_scored=info["questions_scored"], seconds=info["seconds"], versions=info["versions"],
        command=tuple(info["command"]), started=info["started"], timings=Timings(**info["timings"]),
        bootstrap=Bootstrap(**info["bootstrap"]),
        headline={c: None if h is None else (h[0], h[1]) for c, h in info["headline"].items()}, metrics=metrics,
        label=info["label"], baselines={c: Baselines(**b) for c, b in info["baselines"].items()},
        schema_version=info["schema_version"],
    )  # fmt: skip


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


# --- the schema: what write writes and read accepts -------------------------------------------------------

FRACTIONS = {"accuracy", "map", "agreement"}  # words of a key naming a fraction (0-1)
PARTS_OF_N = ("undecided", "unparsed")  # counts of scored questions, so at most ``n``


def _finite(value: int | float) -> bool:
    """Whether a JSON number is finite as a float (an integer of 400 digits is not).

    >>> _finite(10**400), _finite(float("nan")), _finite(3)
    (False, False, True)
    """
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _rule(key: str, inherited: str | None) -> str | None:
    """What a metrics.json number under ``key`` may be: a ``count``, a ``fraction`` (0-1), a ``difference``
    of fractions (-1..1), or None (unchecked); keys naming nothing (a group's name) inherit their parent's.

    >>> _rule("macro_accuracy", None), _rule("n", None), _rule("mass", "difference"), _rule("mass", None)
    ('fraction', 'count', 'difference', None)
    """
    words = set(re.split(r"[_.]", key.lower()))
    if key in COUNTS:
        return "count"
    if "gap" in words:
        return "difference"
    if words & FRACTIONS:
        return "fraction"
    return inherited


def _refuse(where: str, field: str, value, expected: str):
    raise RunRecordError(f"{where}: {field} is {value!r}, {expected}; score the run again")


def check_metrics(metrics, where: str, path: str = "", inherited: str | None = None) -> None:
    """``RunRecordError`` (one line naming ``where`` and the field) for a metrics.json value no scorer writes:
    not finite, a fraction outside 0-1 (a difference outside -1..1), a count that is negative, not whole or
    above 1e12, text or a flag, or anything but numbers, null and objects of them."""
    if not isinstance(metrics, dict):
        raise RunRecordError(f"{where}: {path or 'the file'} is {type(metrics).__name__}, expected an object; score the run again")
    for key, value in metrics.items():
        field = f"{path}.{key}" if path else str(key)
        rule = _rule(str(key), inherited)
        if isinstance(value, dict):
            check_metrics(value, where, field, rule)
        elif value is None:
            continue
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            _refuse(where, field, value, "not a number")
        elif not _finite(value):
            raise RunRecordError(f"{where}: {field} is {value}, not a finite number; score the run again")
        elif rule == "count" and (value < 0 or value != int(value) or value > 1e12):
            raise RunRecordError(f"{where}: {field} is {value}, not a count (a whole number from 0 to 1e12); score the run again")
        elif rule == "fraction" and not 0 <= value <= 1:
            raise RunRecordError(f"{where}: {field} is {value}, outside 0-1 for a fraction; score the run again")
        elif rule == "difference" and not -1 <= value <= 1:
            raise RunRecordError(f"{where}: {field} is {value}, outside -1..1 for a difference of fractions; score the run again")
    total = metrics.get("n")
    for part in PARTS_OF_N:  # questions among the n scored
        value = metrics.get(part)
        if isinstance(total, (int, float)) and isinstance(value, (int, float)) and value > total:
            field = f"{path}.{part}" if path else part
            raise RunRecordError(f"{where}: {field} is {value}, more than the {total} questions scored (n); score the run again")


def _line(where: str, field: str, value, optional: bool = False) -> None:
    """One line of printable text (or null where ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, str) or not value or not value.isprintable():
        _refuse(where, field, value, "expected one line of printable text")


def _number(where: str, field: str, value, whole: bool = False) -> None:
    """A finite number from 0 (a whole one where ``whole``)."""
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) or not _finite(value) or value < 0:
        _refuse(where, field, value, "expected a whole number from 0" if whole else "expected a finite number from 0")


def _object(where: str, field: str, value, keys: tuple[str, ...]) -> None:
    """A JSON object with exactly ``keys``."""
    if not isinstance(value, dict):
        _refuse(where, field, value, "expected an object")
    if set(value) != set(keys):
        wrong = sorted(set(value) ^ set(keys))
        raise RunRecordError(f"{where}: {field} has {'unknown' if wrong[0] in value else 'no'} field {wrong[0]!r}; score the run again")


def check_info(info, where: str) -> None:
    """``RunRecordError`` (one line naming ``where`` and the field) for a run.json ``write`` never writes:
    another schema version, a field missing or unknown, text that is not one printable line where physprobe wrote
    it (the model's name and the system instruction are any text: the report escapes them), a count or time that is negative or not finite, configs not a list of names.

    >>> check_info({"schema_version": 0}, "run.json")
    Traceback (most recent call last):
    physprobe.errors.RunRecordError: run.json: schema_version is 0, expected 2 (this physprobe's run folders); score the run again
    """
    if not isinstance(info, dict):
        raise RunRecordError(f"{where}: the file holds {type(info).__name__}, expected an object; score the run again")
    if info.get("schema_version") != SCHEMA_VERSION:
        _refuse(where, "schema_version", info.get("schema_version"), f"expected {SCHEMA_VERSION} (this physprobe's run folders)")
    _object(where, "run.json", info, tuple(f.name for f in dataclasses.fields(RunRecord) if f.name != "metrics"))
    if not isinstance(info["model"], str) or not info["model"]:  # any text: a served model's id is the server's choice
        _refuse(where, "model", info["model"], "expected the model's name")
    for field in ("benchmark", "protocol", "started"):
        _line(where, field, info[field])
    if label_fault(info["label"]):
        _refuse(where, "label", info["label"], label_fault(info["label"]))
    if not isinstance(info["protocol_source"], str):
        _refuse(where, "protocol_source", info["protocol_source"], "expected text")
    if info["method"] not in METHODS:
        _refuse(where, "method", info["method"], f"expected one of {', '.join(METHODS)}")
    configs = info["configs"]
    if not isinstance(configs, list) or not configs or not all(isinstance(c, str) and c and c.isprintable() for c in configs):
        _refuse(where, "configs", configs, "expected a list of config names")
    limit = info["limit"]
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        _refuse(where, "limit", limit, "expected a whole number of at least 1 or null")
    backend = info["backend"]
    if not isinstance(backend, dict):
        _refuse(where, "backend", backend, "expected an object")
    _line(where, "backend.name", backend.get("name"))
    _line(where, "backend.gguf_file", backend.get("gguf_file"), optional=True)
    if "requests_sent" in backend:  # a server backend's count of HTTP requests
        _number(where, "backend.requests_sent", backend["requests_sent"], whole=True)
    _check_chat(where, info["chat"])
    _check_dataset(where, info["dataset"])
    _number(where, "questions_scored", info["questions_scored"], whole=True)
    _number(where, "seconds", info["seconds"])
    if not isinstance(info["command"], list) or not all(isinstance(a, str) for a in info["command"]):
        _refuse(where, "command", info["command"], "expected a list of arguments")
    versions = info["versions"]
    if not isinstance(versions, dict) or not all(v is None or isinstance(v, str) for v in versions.values()):
        _refuse(where, "versions", versions, "expected package names and versions")
    _check_timings(where, info["timings"])
    _check_bootstrap(where, info["bootstrap"])
    _check_headline(where, info["headline"])
    _check_baselines(where, info["baselines"])


def _check_chat(where: str, chat) -> None:
    if chat is None:
        return
    _object(where, "chat", chat, tuple(f.name for f in dataclasses.fields(ChatRecord)))
    if not isinstance(chat["applied"], bool):
        _refuse(where, "chat.applied", chat["applied"], "expected true or false")
    _line(where, "chat.template", chat["template"], optional=True)
    sha = chat["template_sha256"]
    if sha is not None and not (isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
        _refuse(where, "chat.template_sha256", sha, "expected a sha256 in hex or null")
    instruction = chat["system_instruction"]
    if instruction is not None and not isinstance(instruction, str):
        _refuse(where, "chat.system_instruction", instruction, "expected text or null")


def _check_dataset(where: str, dataset) -> None:
    _object(where, "dataset", dataset, tuple(f.name for f in dataclasses.fields(DatasetRecord)))
    if dataset["source"] not in ("hub", "local"):
        _refuse(where, "dataset.source", dataset["source"], "expected hub or local")
    _line(where, "dataset.path", dataset["path"])
    _line(where, "dataset.revision", dataset["revision"], optional=True)
    prints = dataset["fingerprints"]
    if not isinstance(prints, dict) or not all(isinstance(v, str) for v in prints.values()):
        _refuse(where, "dataset.fingerprints", prints, "expected config names and fingerprints")


def _check_timings(where: str, timings) -> None:
    _object(where, "timings", timings, tuple(f.name for f in dataclasses.fields(Timings)))
    _number(where, "timings.load_model_s", timings["load_model_s"])
    _number(where, "timings.total_s", timings["total_s"])
    if not isinstance(timings["configs_s"], dict):
        _refuse(where, "timings.configs_s", timings["configs_s"], "expected an object")
    for config, seconds in timings["configs_s"].items():
        _number(where, f"timings.configs_s.{config}", seconds)


def _check_bootstrap(where: str, bootstrap) -> None:
    _object(where, "bootstrap", bootstrap, tuple(f.name for f in dataclasses.fields(Bootstrap)))
    _number(where, "bootstrap.iterations", bootstrap["iterations"], whole=True)
    if isinstance(bootstrap["seed"], bool) or not isinstance(bootstrap["seed"], int):
        _refuse(where, "bootstrap.seed", bootstrap["seed"], "expected a whole number")
    figures = bootstrap["figures"]
    if not isinstance(figures, dict):
        _refuse(where, "bootstrap.figures", figures, "expected an object")
    for config, by_figure in figures.items():
        if not isinstance(by_figure, dict):
            _refuse(where, f"bootstrap.figures.{config}", by_figure, "expected an object")
        for figure, spread in by_figure.items():
            field = f"bootstrap.figures.{config}.{figure}"
            _object(where, field, spread, ("ci95", "stderr"))
            _number(where, f"{field}.stderr", spread["stderr"])
            interval = spread["ci95"]
            if (not isinstance(interval, list) or len(interval) != 2
                    or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and _finite(x) for x in interval)
                    or interval[0] > interval[1]):  # fmt: skip
                _refuse(where, f"{field}.ci95", interval, "expected [low, high]")


def label_fault(label) -> str | None:
    """What is wrong with a run's label (``--label``), or None when it is one printable line of at most
    ``LABEL_LENGTH`` characters, or absent.

    >>> label_fault("SmolLM2 chat"), label_fault(None), label_fault("two\\nlines")
    (None, None, 'give one printable line of at most 80 characters')
    """
    if label is None or (isinstance(label, str) and label.strip() == label and label and label.isprintable()
                         and len(label) <= LABEL_LENGTH):  # fmt: skip
        return None
    return f"give one printable line of at most {LABEL_LENGTH} characters"


def _check_baselines(where: str, baselines) -> None:
    if not isinstance(baselines, dict):
        _refuse(where, "baselines", baselines, "expected an object")
    for config, found in baselines.items():
        field = f"baselines.{config}"
        _object(where, field, found, tuple(f.name for f in dataclasses.fields(Baselines)))
        for answer in ("majority_answer", "commonest_answer"):
            if found[answer] is not None:
                _number(where, f"{field}.{answer}", found[answer], whole=True)
        _number(where, f"{field}.answered", found["answered"], whole=True)
        _number(where, f"{field}.commonest", found["commonest"], whole=True)
        if found["commonest"] > found["answered"]:
            _refuse(where, f"{field}.commonest", found["commonest"], f"expected at most answered ({found['answered']})")
        for part in ("majority", "constant", "chance"):
            check_metrics(found[part], where, f"{field}.{part}")


def _check_headline(where: str, headline) -> None:
    if not isinstance(headline, dict):
        _refuse(where, "headline", headline, "expected an object")
    for config, pair in headline.items():
        if pair is None:
            continue
        if (not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str) or isinstance(pair[1], bool)
                or not isinstance(pair[1], (int, float)) or not _finite(pair[1])):  # fmt: skip
            _refuse(where, f"headline.{config}", pair, "expected [figure, value]")
