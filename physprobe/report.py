"""``physprobe report``: the papers' own tables with the user's runs in them, comparison figures, Markdown and HTML.

This module names no benchmark. Each benchmark declares its published tables in
``physprobe/dataset_scripts/<benchmark>/paper_tables.yaml``:

- ``paper``, ``seed`` (the paper's text in ``../shared/seeds``), ``title``;
- ``protocols``: the protocol the paper used for each scoring method (run.json ``method`` -> the name, or the
  names, of protocols in ``physprobe protocols``; checked against the benchmark's ``evaluation.py``);
- ``tables``: ``id``, ``source`` (e.g. "Table 5"; null for a physprobe breakdown the paper does not print),
  ``title``, ``format`` (``scale``: percent or fraction, ``digits``), optional ``chance``, ``chance_label``,
  ``methods`` (the run methods the table reports; all when absent), ``notes``, ``columns`` and ``rows``.
  A column has a ``name`` (its printed header), optional ``label`` (for figures), ``key`` (a dot path into a
  run's metrics.json, a list of paths for cells printed as several ``parts``, or null with a ``why``), ``n``
  (the number of questions behind the cell, a path or list of paths), ``summary`` (an overall column, left
  out of per-group figures), ``chance`` and ``excluded_by`` (protocols whose skip rule leaves the column's
  questions out, e.g. PROST's sliding for T5: a footnote says so). A row has ``model``, ``cells`` (strings exactly as printed;
  null for a cell the paper's text lost, explained by ``note``), optional ``kind`` (model, average, human,
  baseline) and ``section``;
- ``figures``: ``bars`` (one panel per column, published models and runs as bars) or ``lines`` (one line per
  model across a table's columns).

Example (a run folder written by ``physprobe score``)::

    physprobe report runs/roberta-prost runs/gpt2-prost --out report

writes ``report/report.md``, ``report/report.html`` (self-contained) and ``report/figures/*.png``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import importlib.resources
import json
import math
import os
import re
import shutil
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from physprobe import registry, run_files
from physprobe.errors import DataError, PhysprobeError

MANIFEST = "physprobe-report.json"  # marks a folder as a report physprobe wrote, listing its files
Z95 = 1.959963984540054  # two-sided 95% normal quantile
# Okabe & Ito (2008), a palette told apart with every common colour-vision deficiency; runs get these colours.
OKABE_ITO = ("#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442", "#000000")
PUBLISHED_GREY = "#BBBBBB"
INTERVALS = (
    "95% intervals are Wilson score intervals computed from each cell's value and its n (the questions behind "
    "the cell, from metrics.json). For cells that average other figures (macro averages over templates or groups, "
    "agreement-weighted accuracy, accuracy over class pairs) they treat the value as a proportion of n questions: "
    "an approximation."
)


class ReportError(PhysprobeError):
    """A run folder, a table declaration or the output folder is not what the report needs."""


# --- declarations -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    label: str
    keys: tuple[str | None, ...]  # one per part; (None,) for a column physprobe does not score
    ns: tuple[str | None, ...]
    parts: tuple[str, ...]
    summary: bool
    chance: float | None
    why: str | None
    excluded_by: tuple[str, ...] = ()  # protocols that leave this column's questions out (their skip rule)


@dataclass(frozen=True)
class Row:
    model: str
    cells: tuple[str | None, ...]
    kind: str
    section: str | None
    note: str | None


@dataclass(frozen=True)
class Table:
    id: str
    source: str | None
    title: str
    scale: str
    digits: int
    methods: tuple[str, ...] | None
    notes: tuple[str, ...]
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    chance_label: str

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)


@dataclass(frozen=True)
class Figure:
    id: str
    kind: str
    title: str
    panels: tuple[dict, ...]  # bars: {table, columns, part, title}; lines: one {table}
    columns: int | None


@dataclass(frozen=True)
class PaperTables:
    benchmark: str
    paper: str
    seed: str
    title: str
    protocols: dict[str, tuple[str, ...]]  # run method -> the protocols the paper's models of that method used
    tables: tuple[Table, ...]
    figures: tuple[Figure, ...]

    def table(self, table_id: str) -> Table:
        return next(t for t in self.tables if t.id == table_id)


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, list) else (value,)


def _column(raw: dict, table_chance, where: str) -> Column:
    keys, ns = _as_tuple(raw.get("key")), _as_tuple(raw.get("n"))
    parts = tuple(raw.get("parts", ("value",)))
    if len(keys) != len(parts) or (raw.get("n") is not None and len(ns) != len(parts)):
        raise DataError(f"{where}: key and n need one entry per part {list(parts)}")
    if keys == (None,) and not raw.get("why"):
        raise DataError(f"{where}: a column without a key needs `why` (the report's footnote)")
    chance = raw.get("chance", table_chance)
    return Column(str(raw["name"]), str(raw.get("label", raw["name"])), keys, ns if raw.get("n") is not None else (None,) * len(parts),
                  parts, bool(raw.get("summary", False)), chance, raw.get("why"), tuple(raw.get("excluded_by", ())))  # fmt: skip


def _table(raw: dict, where: str) -> Table:
    where = f"{where} table {raw.get('id')!r}"
    fmt = raw.get("format", {})
    if fmt.get("scale") not in ("percent", "fraction") or not isinstance(fmt.get("digits"), int):
        raise DataError(f"{where}: format needs scale (percent or fraction) and digits")
    columns = tuple(_column(c, raw.get("chance"), f"{where} column {c.get('name')!r}") for c in raw["columns"])
    rows = []
    for i, r in enumerate(raw.get("rows") or []):
        if len(r["cells"]) != len(columns):
            raise DataError(f"{where} row {i} ({r.get('model')}): {len(r['cells'])} cells for {len(columns)} columns")
        if None in r["cells"] and not r.get("note"):
            raise DataError(f"{where} row {i} ({r.get('model')}): a null cell needs a `note` saying why")
        rows.append(Row(str(r["model"]), tuple(r["cells"]), r.get("kind", "model"), r.get("section"), r.get("note")))
    methods = raw.get("methods")
    return Table(raw["id"], raw.get("source"), raw["title"], fmt["scale"], fmt["digits"],
                 None if methods is None else tuple(methods), tuple(raw.get("notes", ())), columns, tuple(rows),
                 raw.get("chance_label", "chance"))  # fmt: skip


def paper_tables(benchmark: str) -> PaperTables:
    """The published tables a benchmark declares in its ``paper_tables.yaml``.

    >>> prost = paper_tables("prost")
    >>> prost.table("table5").rows[0].model, prost.table("table5").rows[0].cells[0]
    ('GPT', '46.7')
    """
    if benchmark not in registry.names():
        raise ReportError(f"unknown benchmark {benchmark!r}; known: {', '.join(sorted(registry.names()))}")
    resource = importlib.resources.files(f"physprobe.dataset_scripts.{benchmark}") / "paper_tables.yaml"
    where = f"physprobe/dataset_scripts/{benchmark}/paper_tables.yaml"
    try:
        raw = yaml.safe_load(resource.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{where} is missing: {benchmark} declares no published tables") from None
    protocols = _paper_protocols(benchmark, raw.get("protocols") or {}, where)
    tables = tuple(_table(t, where) for t in raw["tables"])
    _check_exclusions(benchmark, tables, where)
    ids = {t.id: t for t in tables}
    figures = []
    for f in raw.get("figures", ()):
        if f.get("kind") not in ("bars", "lines"):
            raise DataError(f"{where} figure {f.get('id')!r}: kind must be bars or lines, got {f.get('kind')!r}")
        panels = tuple(f["panels"]) if f["kind"] == "bars" else ({"table": f["table"]},)
        for panel in panels:
            table = ids.get(panel["table"])
            if table is None:
                raise DataError(f"{where} figure {f['id']!r}: no table {panel['table']!r}")
            for name in panel.get("columns", ()):
                if name not in {c.name for c in table.columns}:
                    raise DataError(f"{where} figure {f['id']!r}: table {table.id!r} has no column {name!r}")
                if panel.get("part") and panel["part"] not in table.column(name).parts:
                    raise DataError(f"{where} figure {f['id']!r}: column {name!r} has no part {panel['part']!r}")
        figures.append(Figure(f["id"], f["kind"], f["title"], panels, f.get("columns")))
    return PaperTables(benchmark, raw["paper"], raw["seed"], raw["title"], protocols, tables, tuple(figures))


def _check_exclusions(benchmark: str, tables: tuple[Table, ...], where: str) -> None:
    """Every ``excluded_by`` name is a protocol of the benchmark that leaves questions out (has a ``skip``)."""
    from physprobe import registry

    skipping = {p.name for p in registry.evaluation(benchmark).protocols if p.skip is not None}
    for table in tables:
        for column in table.columns:
            for name in column.excluded_by:
                if name not in skipping:
                    raise DataError(f"{where} table {table.id!r} column {column.name!r}: excluded_by names {name!r}, "
                                    f"not a {benchmark} protocol that leaves questions out ({', '.join(sorted(skipping)) or 'none'})")  # fmt: skip


def _paper_protocols(benchmark: str, raw: dict, where: str) -> dict[str, tuple[str, ...]]:
    """``protocols`` of a paper_tables.yaml: each name a protocol of the benchmark, of the method it is listed under."""
    from physprobe import registry

    evaluation = registry.evaluation(benchmark)
    known = {p.name: p for p in evaluation.protocols}
    out = {}
    for method, names in raw.items():
        names = tuple(_as_tuple(names))
        for name in names:
            if name not in known:
                raise DataError(f"{where} protocols.{method}: {benchmark} has no protocol {name!r}; "
                                f"known: {', '.join(known)} (see `physprobe protocols {benchmark}`)")  # fmt: skip
            if known[name].method != method:
                raise DataError(f"{where} protocols.{method}: protocol {name!r} uses method {known[name].method!r}; "
                                f"list it under {known[name].method}")  # fmt: skip
        out[str(method)] = names
    return out


# --- runs ---------------------------------------------------------------------------------------------------


@dataclass
class Run:
    folder: Path
    info: dict
    metrics: dict
    id: str = field(init=False)

    def __post_init__(self):
        canonical = json.dumps([self.info, self.metrics], sort_keys=True, default=str).encode()
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


# --- cells --------------------------------------------------------------------------------------------------

MISSING = object()


def lookup(metrics: dict, path: str):
    """The value at a dot path of metrics.json, or ``MISSING``.

    >>> lookup({"default": {"by_group": {"mass": {"accuracy": 0.5}}}}, "default.by_group.mass.accuracy")
    0.5
    """
    node = metrics
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def wilson(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``p`` observed over ``n`` trials.

    >>> [round(x, 4) for x in wilson(0.5, 100)]
    [0.4038, 0.5962]
    """
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # The interval holds p; clamping to it removes float error at p = 0 or 1 (e.g. a low bound of 1e-17 above 0).
    return min(max(0.0, centre - half), p), max(min(1.0, centre + half), p)


def number(value: float, table: Table) -> str:
    """A metric value (a fraction) in a table's printed format.

    >>> number(0.4567, Table("t", None, "", "percent", 1, None, (), (), (), "chance"))
    '45.7'
    """
    return f"{(100 * value if table.scale == 'percent' else value):.{table.digits}f}"


def printed_value(cell: str | None, part: int = 0) -> float | None:
    """The number a printed cell shows (its ``part``-th of "a / b / c"), without marks such as * or ±.

    >>> printed_value("27.0*"), printed_value("0.13±0.04"), printed_value("3.1 / 3.3 / 2.8", 2), printed_value("—")
    (27.0, 0.13, 2.8, None)
    """
    if cell is None:
        return None
    pieces = cell.split(" / ")
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)", pieces[part] if part < len(pieces) else "")
    return float(match.group(1)) if match else None


@dataclass(frozen=True)
class Missing:
    """Why a run's cell is empty: ``kind`` is why (physprobe does not score the column), config (the run did
    not score that config), pooled (a figure over several configs the run did not all score), undecided
    (every question of the config was), excluded (the run's protocol left out questions of the config, the
    column's among them), sample (a ``--limit`` run scored no question of the column), or key (metrics.json
    lacks it). ``detail`` is what the footnote needs; footnotes with the same kind and detail merge."""

    kind: str
    detail: str  # the column's why, the config, or the metrics key
    run: str


@dataclass
class RunCell:
    """One part of a run's cell: value, n, interval, or the reason it is missing."""

    value: float | None
    n: int | None
    interval: tuple[float, float] | None
    missing: Missing | None


def _config_names(benchmark: str) -> set[str]:
    return set(registry.config_names(benchmark))


def run_protocol(run: Run):
    """The ``Protocol`` a run's run.json names, or None (not recorded, or no longer declared)."""
    from physprobe import registry
    from physprobe.protocols import ProtocolError

    try:
        return registry.evaluation(run.info["benchmark"]).protocol(str(run.info.get("protocol")))
    except ProtocolError:
        return None


def exclusion(run: Run, config: str) -> str | None:
    """What a run's protocol left out of ``config`` (metrics.json ``excluded``), as a footnote; None if nothing.

    The figures of that config are over the other questions (PROST Table 5 marks such averages with *).
    """
    scored = run.metrics.get(config)
    count = scored.get("excluded") if isinstance(scored, dict) else None
    if not count:
        return None
    protocol = run_protocol(run)
    why = f" ({protocol.skip_reason})" if protocol is not None and protocol.skip_reason else ""
    return (f"protocol `{run.info.get('protocol')}` leaves out {count} question{'s' if count > 1 else ''} of "
            f"`{config}`{why}; this overall figure is over the other questions")  # fmt: skip


COUNTS = {"n", "undecided", "unparsed", "excluded"}  # what every scored config holds, figures or not


def _why_missing(run: Run, column: Column, key: str) -> Missing:
    """Why metrics.json has no ``key``: the first reason that holds."""
    from physprobe import registry

    config = key.split(".")[0]
    scored = run.metrics.get(config)
    if not isinstance(scored, dict):
        pooled = registry.evaluation(run.info["benchmark"]).pooled.get(config)
        if pooled:
            return Missing("pooled", f"{config}|{','.join(pooled)}", run.id)
        if config in _config_names(run.info["benchmark"]):
            return Missing("config", config, run.id)
        return Missing("key", key, run.id)
    figures = set(scored) - COUNTS
    if not figures and scored.get("n") and scored.get("undecided") == scored.get("n"):
        return Missing("undecided", config, run.id)
    if run.info.get("protocol") in column.excluded_by:
        protocol = run_protocol(run)
        why = f": {protocol.skip_reason}" if protocol is not None and protocol.skip_reason else ""
        return Missing("excluded", f"protocol `{run.info['protocol']}` leaves this column's questions out{why}", run.id)
    if run.info.get("limit") and "." in key:
        return Missing("sample", f"{config}|{run.info['limit']}", run.id)
    return Missing("key", key, run.id)


def run_cell(run: Run, column: Column, part: int) -> RunCell:
    """One part of a run's cell for a column: its value, n and 95% interval, or why it is missing."""
    key, n_key = column.keys[part], column.ns[part]
    if key is None:
        return RunCell(None, None, None, Missing("why", column.why, run.id))
    value = lookup(run.metrics, key)
    if value is MISSING:
        return RunCell(None, None, None, _why_missing(run, column, key))
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return RunCell(None, None, None, Missing("key", key, run.id))
    n = lookup(run.metrics, n_key) if n_key else MISSING
    n = int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0 else None
    interval = wilson(min(max(float(value), 0.0), 1.0), n) if n else None
    return RunCell(float(value), n, interval, None)


# --- document: one structure, written as Markdown and as HTML -------------------------------------------------


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Paragraph:
    text: str
    css: str = ""


@dataclass
class TableBlock:
    header: list[str]
    rows: list[list[str]]
    kinds: list[str]  # per row: published, section, run


@dataclass
class Notes:
    items: list[str]


@dataclass
class Image:
    path: Path
    name: str
    alt: str


_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _mark(number_: int) -> str:
    return str(number_).translate(_SUPERSCRIPT)


class _Footnotes:
    """Numbered footnotes of one table; the same text gets the same number."""

    def __init__(self):
        self.texts: list[str] = []

    def mark(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return _mark(self.texts.index(text) + 1)

    def items(self) -> list[str]:
        return [f"{_mark(i + 1)} {text}" for i, text in enumerate(self.texts)]


def missing_texts(missing: list[Missing]) -> dict[Missing, str]:
    """One footnote per reason, naming every run it concerns; keys that differ only in some segments merge
    into one pattern.

    >>> texts = missing_texts([Missing("key", "t.by_group.a.pos", "r1"), Missing("key", "t.by_group.b.pos", "r2")])
    >>> sorted(set(texts.values()))
    ['metrics.json of runs r1, r2 has no `t.by_group.*.pos`']
    """
    groups: dict[tuple, list[Missing]] = {}
    for m in missing:
        group = (m.kind, *m.detail.split(".")[:2], m.detail.count(".")) if m.kind == "key" else (m.kind, m.detail)
        groups.setdefault(group, []).append(m)
    texts = {}
    for (kind, detail, *_), members in groups.items():
        runs = list(dict.fromkeys(m.run for m in members))
        who = f"run{'s' if len(runs) > 1 else ''} {', '.join(runs)}"
        if kind == "why":
            text = detail
        elif kind == "config":
            text = f"{who} did not score config `{detail}` (physprobe score --config {detail})"
        elif kind == "pooled":
            name, pooled = detail.split("|")
            text = (f"`{name}` pools configs {', '.join(f'`{c}`' for c in pooled.split(','))}: {who} did not score "
                    f"them all in one run")  # fmt: skip
        elif kind == "undecided":
            text = f"every question of `{detail}` was undecided in {who}"
        elif kind == "excluded":
            text = f"{who}: {detail}"
        elif kind == "sample":
            config, limit = detail.split("|")
            text = (f"{who} scored no question of this column (or none it decided) among the --limit {limit} "
                    f"questions of `{config}`")  # fmt: skip
        else:
            segments = zip(*(m.detail.split(".") for m in members))
            pattern = ".".join(s[0] if len(set(s)) == 1 else "*" for s in segments)
            text = f"metrics.json of {who} has no `{pattern}`"
        texts.update({m: text for m in members})
    return texts


def _format_run_cell(cells: list[RunCell], table: Table, notes: _Footnotes, texts: dict[Missing, str]) -> str:
    shown = []
    for cell in cells:
        if cell.missing is not None:
            shown.append("—" + notes.mark(texts[cell.missing]))
        elif cell.interval is not None:
            low, high = (number(x, table) for x in cell.interval)
            shown.append(f"{number(cell.value, table)} ({low}–{high})")
        else:
            shown.append(number(cell.value, table))
    ns = [c.n for c in cells if c.missing is None]
    text = " / ".join(shown)
    if ns and all(n is not None for n in ns):
        text += f" n={'/'.join(str(n) for n in ns)}"
    return text


def protocol_warning(run: Run, paper: PaperTables) -> str | None:
    """Why a run's numbers may not compare with the paper's, or None when its protocol is the paper's."""
    names = paper.protocols.get(run.method)
    used = run.info.get("protocol")
    if names is None:
        return f"run {run.id} used method `{run.method}`; the paper reports no model scored that way"
    expected = " or ".join(f"`{name}`" for name in names)
    if used is None:
        return (f"run {run.id} does not record its protocol (run.json has no `protocol`); the paper's "
                f"`{run.method}` models used {expected}")  # fmt: skip
    if used not in names:
        return (f"run {run.id} used protocol `{used}`; the paper's `{run.method}` models used {expected}: "
                f"its numbers do not compare one to one with the published rows")  # fmt: skip
    return None


def apart_note(run: Run) -> str | None:
    """A footnote for a run whose protocol the paper reports outside its averages (``Protocol.reported_apart``)."""
    protocol = run_protocol(run)
    if protocol is None or not protocol.reported_apart:
        return None
    return (f"run {run.id} used `{protocol.name}`, which the paper reports apart: its models are left out of "
            f"the paper's average rows")  # fmt: skip


def _summary_marks(run: Run, column: Column, notes: "_Footnotes") -> str:
    """Footnote marks for an overall cell whose config the run's protocol scored only in part."""
    if not column.summary:
        return ""
    configs = dict.fromkeys(key.split(".")[0] for key in column.keys if key)
    return "".join(notes.mark(f"run {run.id}: {text}") for text in (exclusion(run, c) for c in configs) if text)


def table_block(table: Table, runs: list[Run], paper: PaperTables) -> tuple[TableBlock, list[str]]:
    """A published table with the runs' rows below, and its footnotes."""
    notes = _Footnotes()
    header = ["Model", *[c.name for c in table.columns]]
    rows, kinds, section = [], [], None
    for row in table.rows:
        if row.section and row.section != section:
            section = row.section
            rows.append([row.section, *[""] * len(table.columns)])
            kinds.append("section")
        cells = ["—" + notes.mark(f"{row.model}: {row.note}") if c is None else c for c in row.cells]
        rows.append([row.model, *cells])
        kinds.append("published")
    placed = [r for r in runs if table.methods is None or r.method in table.methods]
    if placed:
        rows.append(["physprobe runs", *[""] * len(table.columns)])
        kinds.append("section")
    cells = {(run.id, c.name): [run_cell(run, c, i) for i in range(len(c.parts))] for run in placed for c in table.columns}
    texts = missing_texts([cell.missing for parts in cells.values() for cell in parts if cell.missing])
    for run in placed:
        warning, apart = protocol_warning(run, paper), apart_note(run)
        label = run.id + (" ⚠" + notes.mark(warning) if warning else "") + (notes.mark(apart) if apart else "")
        shown = []
        for column in table.columns:
            text = _format_run_cell(cells[run.id, column.name], table, notes, texts)
            shown.append(text if text.startswith("—") else text + _summary_marks(run, column, notes))
        rows.append([label, *shown])
        kinds.append("run")
    left_out = [r for r in runs if r not in placed]
    extra = list(table.notes)
    if left_out:
        reports = f"this table reports {', '.join(table.methods)} models" if table.methods else "physprobe does not score this table's models"
        extra.append(f"Not placed here: {', '.join(f'{r.id} (method {r.method})' for r in left_out)}; {reports}.")
    return TableBlock(header, rows, kinds), extra + notes.items()


# --- figures ------------------------------------------------------------------------------------------------


@dataclass
class _Series:
    """One bar or line of a figure: a published model or a run."""

    name: str
    values: list[float | None]
    errors: list[tuple[float, float] | None]
    run: bool


def _scaled(value: float, table: Table) -> float:
    return 100 * value if table.scale == "percent" else value


def _panel_series(table: Table, columns: list[Column], part_name: str | None, runs: list[Run]) -> list[_Series]:
    series = []
    for row in table.rows:
        if row.kind != "model":
            continue
        values = []
        for column in columns:
            index = column.parts.index(part_name) if part_name else 0
            values.append(printed_value(row.cells[table.columns.index(column)], index))
        series.append(_Series(row.model, values, [None] * len(columns), False))
    for run in runs:
        if table.methods is not None and run.method not in table.methods:
            continue
        values, errors = [], []
        for column in columns:
            cell = run_cell(run, column, column.parts.index(part_name) if part_name else 0)
            values.append(None if cell.value is None else _scaled(cell.value, table))
            errors.append(None if cell.interval is None else tuple(_scaled(x, table) for x in cell.interval))
        series.append(_Series(run.id, values, errors, True))
    return series


def _reference(table: Table, kind: str, column: Column, part_name: str | None) -> float | None:
    row = next((r for r in table.rows if r.kind == kind), None)
    if row is None:
        return None
    index = column.parts.index(part_name) if part_name else 0
    return printed_value(row.cells[table.columns.index(column)], index)


def _reference_label(name: str, value: float, table: Table) -> str:
    return f"{name} ({100 * value:g}%)" if table.scale == "percent" else f"{name} ({value:g})"


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise ReportError("physprobe report draws its figures with matplotlib: pip install 'physprobe[score]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _run_colours(runs: list[Run]) -> dict[str, str]:
    return {run.id: OKABE_ITO[i % len(OKABE_ITO)] for i, run in enumerate(runs)}


def bars_figure(figure: Figure, paper: PaperTables, runs: list[Run], path: Path) -> bool:
    """Small multiples: one panel per (table, column), every published model and run as a horizontal bar,
    the chance level dashed, the paper's human row dotted, 95% intervals on the runs' bars.
    Returns False (and writes nothing) when no panel has a value."""
    panels = []
    for spec in figure.panels:
        table = paper.table(spec["table"])
        names = spec.get("columns") or [c.name for c in table.columns if not c.summary]
        for name in names:
            column = table.column(name)
            part = spec.get("part")
            title = column.label
            if spec.get("title"):  # a panel title, or a prefix when the panel spec spans several columns
                title = spec["title"] if len(names) == 1 else f"{spec['title']}: {column.label}"
            series = _panel_series(table, [column], part, runs)
            panels.append((table, column, part, title, series))
    if not any(v is not None for *_, series in panels for s in series for v in s.values):
        return False
    plt = _plt()
    colours = _run_colours(runs)
    ncols = figure.columns or min(len(panels), 5)
    nrows = math.ceil(len(panels) / ncols)
    shared = len({id(p[0]) for p in panels}) == 1 or len({tuple(s.name for s in p[4]) for p in panels}) == 1
    height = max(len(p[4]) for p in panels) * 0.24 + 1.1
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.0 * ncols + (1.6 if shared else 1.9 * ncols), height * nrows + 1.2),
                             squeeze=False, sharey=shared)  # fmt: skip
    for axis in axes.flat[len(panels):]:
        axis.set_visible(False)
    lines = {}
    rows = max(len(p[4]) for p in panels)
    for axis, (table, column, part, title, series) in zip(axes.flat, panels):
        full = 100 if table.scale == "percent" else 1
        for i, s in enumerate(series):
            value = s.values[0]
            if value is None:
                if s.run:
                    axis.text(full * 0.01, i, "no value (see table)", va="center", fontsize=7, color="#777777", style="italic")
                continue
            colour = colours[s.name] if s.run else PUBLISHED_GREY
            error = None
            if s.errors[0] is not None:
                error = [[value - s.errors[0][0]], [s.errors[0][1] - value]]
            axis.barh(i, value, color=colour, xerr=error, ecolor="#333333", capsize=2, height=0.75,
                      edgecolor="#333333" if s.run else "none", linewidth=0.6)  # fmt: skip
            if s.run:
                end = s.errors[0][1] if s.errors[0] is not None else value
                axis.text(min(end + full * 0.02, full * 0.86), i, number(value / full, table), va="center", fontsize=7,
                          fontweight="bold")  # fmt: skip
        axis.set_xlim(0, full)
        if column.chance is not None:
            lines[_reference_label(table.chance_label, column.chance, table)] = axis.axvline(
                _scaled(column.chance, table), color="black", linestyle="--", linewidth=1)
        human = _reference(table, "human", column, part)
        if human is not None:
            lines["human (paper)"] = axis.axvline(human, color="#009E73", linestyle=":", linewidth=1.6)
        axis.set_title(textwrap.fill(title, 34), fontsize=9)
        axis.set_yticks(range(len(series)))
        axis.set_yticklabels([s.name for s in series], fontsize=7)
        for label, s in zip(axis.get_yticklabels(), series):
            if s.run:
                label.set_fontweight("bold")
        axis.set_ylim(rows - 0.5, -0.5)  # the same bar thickness in every panel
        axis.tick_params(axis="x", labelsize=7)
        axis.grid(axis="x", color="#EEEEEE", linewidth=0.6)
        axis.set_axisbelow(True)
        axis.set_xlabel("%" if table.scale == "percent" else "fraction", fontsize=7)
    _legend(fig, plt, runs, colours, lines)
    fig.suptitle(figure.title, fontsize=11)
    inches = fig.get_size_inches()[1]
    fig.tight_layout(rect=(0, 0.75 / inches, 1, 1 - 0.45 / inches))
    _save(fig, plt, path)
    return True


def lines_figure(figure: Figure, paper: PaperTables, runs: list[Run], path: Path) -> bool:
    """One line per model across a table's columns (e.g. PROST's answer positions): published models grey and
    labelled at their end, the paper's average dashed, runs coloured with 95% intervals."""
    table = paper.table(figure.panels[0]["table"])
    columns = [c for c in table.columns if not c.summary]
    series = _panel_series(table, columns, None, runs)
    if not any(v is not None for s in series for v in s.values):
        return False
    plt = _plt()
    colours = _run_colours(runs)
    fig, axis = plt.subplots(figsize=(8.5, 5.5))
    x = list(range(len(columns)))
    ends = []
    for s in series:
        points = [(i, v) for i, v in zip(x, s.values) if v is not None]
        if not points:
            continue
        xs, ys = zip(*points)
        if s.run:
            errors = [s.errors[i] for i in xs]
            low = [y - e[0] if e else 0 for y, e in zip(ys, errors)]
            high = [e[1] - y if e else 0 for y, e in zip(ys, errors)]
            axis.errorbar(xs, ys, yerr=[low, high], color=colours[s.name], marker="o", linewidth=2.2, capsize=3, label=s.name)
        else:  # a missing value breaks the line rather than bridging it
            axis.plot(x, [math.nan if v is None else v for v in s.values], color="#999999", marker=".", linewidth=1)
            ends.append([ys[-1], s.name, xs[-1]])
    average = next((r for r in table.rows if r.kind == "average"), None)
    if average is not None:
        values = [printed_value(average.cells[table.columns.index(c)]) for c in columns]
        axis.plot(x, values, color="black", linestyle="--", linewidth=1.5, label=f"{average.model} (paper)")
    chance = next((c.chance for c in columns if c.chance is not None), None)
    if chance is not None:
        axis.axhline(_scaled(chance, table), color="black", linestyle=":", linewidth=1,
                     label=_reference_label(table.chance_label, chance, table))
    _label_line_ends(axis, ends, 100 if table.scale == "percent" else 1)
    axis.set_xticks(x)
    axis.set_xticklabels([c.label for c in columns])
    axis.set_xlim(-0.2, len(columns) - 1 + 0.9)
    axis.set_ylim(0, 100 if table.scale == "percent" else 1)
    axis.set_ylabel("accuracy (%)" if table.scale == "percent" else "accuracy")
    axis.grid(axis="y", color="#EEEEEE")
    axis.legend(fontsize=8, loc="upper left", title="grey: published models (paper)", title_fontsize=8)
    axis.set_title(figure.title, fontsize=11)
    fig.tight_layout()
    _save(fig, plt, path)
    return True


def _label_line_ends(axis, ends: list, full: float) -> None:
    """Name each published line at its right end, nudging labels apart so none overlap."""
    ends.sort()
    gap = full * 0.035
    for i in range(1, len(ends)):
        ends[i][0] = max(ends[i][0], ends[i - 1][0] + gap)
    for y, name, x in ends:
        axis.annotate(name, (x + 0.05, y), fontsize=7, color="#555555", va="center")


def _legend(fig, plt, runs, colours, lines) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=PUBLISHED_GREY, label="published (paper)")]
    handles += [Patch(facecolor=colours[r.id], edgecolor="#333333", label=f"{r.id} (95% interval)") for r in runs]
    for label, line in lines.items():
        handles.append(plt.Line2D([], [], color=line.get_color(), linestyle=line.get_linestyle(), label=label))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4), fontsize=8, frameon=False)


def _save(fig, plt, path: Path) -> None:
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


DRAW = {"bars": bars_figure, "lines": lines_figure}


# --- the report ---------------------------------------------------------------------------------------------


def _runs_table(runs: list[Run], paper: PaperTables) -> TableBlock:
    rows = []
    for run in runs:
        configs = ", ".join(run.info.get("configs") or [])
        limit = run.info.get("limit")
        rows.append([run.id, str(run.info.get("model")), run.method, str(run.info.get("protocol") or "not recorded"),
                     ", ".join(paper.protocols.get(run.method, ("—",))), configs + (f" (limit {limit})" if limit else ""), str(run.folder)])  # fmt: skip
    header = ["Run", "Model", "Method", "Protocol", "Paper's protocol", "Configs", "Folder"]
    return TableBlock(header, rows, ["run"] * len(rows))


def document(runs: list[Run], figures_dir: Path) -> list:
    """The report as blocks (headings, tables, notes, images), drawing the figures into ``figures_dir``."""
    blocks: list = [Heading(1, "physprobe report"),
                    Paragraph("The papers' published tables, transcribed as printed, with your runs below them. "
                              "Cells are placed by column name; — marks a cell a run did not score (see its footnote). "
                              "Run cells read: value (95% interval) n=questions."),
                    Paragraph(INTERVALS)]  # fmt: skip
    by_benchmark: dict[str, list[Run]] = {}
    for run in runs:
        by_benchmark.setdefault(run.info["benchmark"], []).append(run)
    for benchmark in sorted(by_benchmark):
        paper, group = paper_tables(benchmark), by_benchmark[benchmark]
        blocks += [Heading(2, paper.title), Paragraph(f"Paper: {paper.paper}. Runs in this section:"), _runs_table(group, paper)]
        warnings = [w for w in (protocol_warning(r, paper) for r in group) if w]
        if warnings:
            blocks.append(Notes([f"⚠ {w}" for w in warnings]))
        for table in paper.tables:
            block, notes = table_block(table, group, paper)
            source = f"the paper's {table.source}" if table.source else "physprobe; the paper prints no such table"
            blocks += [Heading(3, f"{table.source or 'physprobe'}: {table.title}"), Paragraph(f"Source: {source}."), block]
            if notes:
                blocks.append(Notes(notes))
        drawn = []
        for figure in paper.figures:
            path = figures_dir / f"{benchmark}-{figure.id}.png"
            if DRAW[figure.kind](figure, paper, group, path):
                drawn.append(Image(path, f"figures/{path.name}", figure.title))
            else:
                drawn.append(Paragraph(f"Figure not drawn: {figure.title} — no published row or run has a value for it.", "note"))
        if drawn:
            blocks += [Heading(3, f"{paper.title} figures"), *drawn]
    return blocks


_CODE = re.compile(r"(`[^`]+`)")


def _md_escape(text: str) -> str:
    """Markdown-escape text, keeping `code` spans (pipes in them escaped, as GFM tables need)."""
    pieces = _CODE.split(text)
    return "".join(p.replace("|", "\\|") if _CODE.fullmatch(p) else re.sub(r"([\\`*_\[\]<>|#])", r"\\\1", p) for p in pieces)


def _html_text(text: str) -> str:
    """HTML-escape text, `code` spans as <code>."""
    return "".join(f"<code>{html.escape(p[1:-1])}</code>" if _CODE.fullmatch(p) else html.escape(p) for p in _CODE.split(text))


def to_markdown(blocks: list) -> str:
    """Markdown (GFM tables); images are paragraphs of their own, after the tables."""
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {_md_escape(block.text)}")
        elif isinstance(block, Paragraph):
            out.append(_md_escape(block.text))
        elif isinstance(block, TableBlock):
            out.append("| " + " | ".join(_md_escape(h) for h in block.header) + " |")
            out.append("|" + "---|" * len(block.header))
            for row, kind in zip(block.rows, block.kinds):
                cells = [_md_escape(c) for c in row]
                if kind != "published" and cells[0]:
                    cells[0] = f"**{cells[0]}**"
                out.append("| " + " | ".join(cells) + " |")
        elif isinstance(block, Notes):
            out.append("\n".join(f"- {_md_escape(item)}" for item in block.items))
        elif isinstance(block, Image):
            out.append(f"![{_md_escape(block.alt)}]({block.name})")
        out.append("")
    return "\n".join(out)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1400px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f2f2f2}tr.section td{background:#fafafa;font-weight:bold;text-align:left}
tr.run td{background:#fff4dc}.scroll{overflow-x:auto}
ul.notes{font-size:12px;color:#444}img{max-width:100%;border:1px solid #eee;margin:.5em 0}p.note{color:#666;font-style:italic}"""


def to_html(blocks: list) -> str:
    """One self-contained HTML page: the same blocks, figures embedded as base64 PNG."""
    out = ['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
           '<title>physprobe report</title>', f"<style>{_CSS}</style>", "</head>", "<body>"]  # fmt: skip
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"<h{block.level}>{_html_text(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            out.append(f'<p class="{block.css}">{_html_text(block.text)}</p>' if block.css else f"<p>{_html_text(block.text)}</p>")
        elif isinstance(block, TableBlock):
            out.append('<div class="scroll"><table><thead><tr>')
            out.append("".join(f"<th>{_html_text(h)}</th>" for h in block.header) + "</tr></thead><tbody>")
            for row, kind in zip(block.rows, block.kinds):
                if kind == "section":
                    out.append(f'<tr class="section"><td colspan="{len(row)}">{_html_text(row[0])}</td></tr>')
                else:
                    out.append(f'<tr class="{kind}">' + "".join(f"<td>{_html_text(c)}</td>" for c in row) + "</tr>")
            out.append("</tbody></table></div>")
        elif isinstance(block, Notes):
            out.append('<ul class="notes">' + "".join(f"<li>{_html_text(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Image):
            data = base64.b64encode(block.path.read_bytes()).decode("ascii")
            out.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(block.alt)}">'
                       f"<figcaption>{html.escape(block.alt)}</figcaption></figure>")  # fmt: skip
    out += ["</body>", "</html>", ""]
    return "\n".join(out)


def _check_out(out: Path) -> None:
    """``--out`` must be a new folder, an empty one, or a report physprobe wrote (nothing else inside)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ReportError(f"--out {out} exists and is not a folder; give a new folder for the report")
    if not out.exists() or not any(out.iterdir()):
        return
    manifest = out / MANIFEST
    try:
        ours = set(json.loads(manifest.read_text())["files"]) | {MANIFEST}
    except (OSError, ValueError, KeyError, TypeError):
        raise ReportError(f"--out {out} is a folder that physprobe report did not write; "
                          "give a new folder (nothing there is touched)") from None  # fmt: skip
    found = {p.relative_to(out).as_posix() for p in out.rglob("*") if not p.is_dir()}
    if found - ours:
        raise ReportError(f"--out {out} holds files physprobe report did not write ({sorted(found - ours)[0]}, ...); "
                          "give a new folder (nothing there is touched)")  # fmt: skip


def render(runs: list[Path], out: Path) -> Path:
    """Write the report folder ``out``: report.md, report.html, figures/*.png; return ``out``.

    ``out`` must not exist, be empty, or be a report folder this command wrote before (replaced as a whole).
    Everything is written to a temporary folder beside ``out`` and renamed into place, so a failure leaves
    nothing behind. Runs of several benchmarks give one section per benchmark.
    """
    if not runs:
        raise ReportError("give at least one run folder written by `physprobe score`")
    loaded = [load_run(Path(r)) for r in runs]
    seen = {}
    for run in loaded:
        if run.id in seen:
            raise ReportError(f"{run.folder} and {seen[run.id]} are the same run (same run.json and metrics.json); give it once")
        seen[run.id] = run.folder
    for run in loaded:
        paper_tables(run.info["benchmark"])  # unknown benchmarks fail before anything is written
    out = Path(out)
    _check_out(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as error:
        raise ReportError(f"cannot write the report folder {out}: {error.strerror}") from None
    try:
        (staging / "figures").mkdir()
        blocks = document(loaded, staging / "figures")
        (staging / "report.md").write_text(to_markdown(blocks), encoding="utf-8")
        (staging / "report.html").write_text(to_html(blocks), encoding="utf-8")
        files = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
        (staging / MANIFEST).write_text(json.dumps({"files": files}, indent=1) + "\n")
        staging.chmod(0o755)
        _replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def _replace(staging: Path, out: Path) -> None:
    """Move the finished report into place; a previous report there (checked by ``_check_out``) goes."""
    if out.exists() and any(out.iterdir()):
        previous = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
        os.replace(out, previous / "report")
        os.replace(staging, out)
        shutil.rmtree(previous)
    else:
        os.replace(staging, out)  # an empty folder is replaced atomically
