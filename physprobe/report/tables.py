"""The schema of ``dataset_scripts/<benchmark>/paper_tables.yaml``: a paper's published tables and figures, read
and checked against the benchmark's declared protocols.

>>> paper_tables("prost").table("table6").columns[0].name
'1'
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass

import yaml

from physprobe.data import registry
from physprobe.errors import DeclarationError, ReportError


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
    groups: str | None = None  # what its columns other than the summary ones are (concepts, attributes, ...), if groups
    chance_definition: str | None = None  # what its chance level is, where ``chance_label`` names another than chance

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)


@dataclass(frozen=True)
class CardRow:
    """A row of the card (``physprobe.report.card``): a headline ``figure`` of the paper and the ``sources`` it is
    printed in, (table, column) pairs: a run's value is read through the first whose table reports the run's method
    (else the first), the paper's best model is the best over all; ``groups``: the table whose other columns are the
    groups the figure spans (a run holding fewer is footnoted)."""

    figure: str
    sources: tuple[tuple[Table, Column], ...]
    groups: Table | None


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
    title: str
    protocols: dict[str, tuple[str, ...]]  # run method -> the protocols the paper's models of that method used
    tables: tuple[Table, ...]
    figures: tuple[Figure, ...]
    card: tuple[CardRow, ...] = ()

    def table(self, table_id: str) -> Table:
        return next(t for t in self.tables if t.id == table_id)


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, list) else (value,)


def _column(raw: dict, table_chance, where: str) -> Column:
    keys, ns = _as_tuple(raw.get("key")), _as_tuple(raw.get("n"))
    parts = tuple(raw.get("parts", ("value",)))
    if len(keys) != len(parts) or (raw.get("n") is not None and len(ns) != len(parts)):
        raise DeclarationError(f"{where}: key and n need one entry per part {list(parts)}")
    if keys == (None,) and not raw.get("why"):
        raise DeclarationError(f"{where}: a column without a key needs `why` (the report's footnote)")
    chance = raw.get("chance", table_chance)
    return Column(str(raw["name"]), str(raw.get("label", raw["name"])), keys, ns if raw.get("n") is not None else (None,) * len(parts),
                  parts, bool(raw.get("summary", False)), chance, raw.get("why"), tuple(raw.get("excluded_by", ())))  # fmt: skip


def _table(raw: dict, where: str) -> Table:
    where = f"{where} table {raw.get('id')!r}"
    fmt = raw.get("format", {})
    if fmt.get("scale") not in ("percent", "fraction") or not isinstance(fmt.get("digits"), int):
        raise DeclarationError(f"{where}: format needs scale (percent or fraction) and digits")
    columns = tuple(_column(c, raw.get("chance"), f"{where} column {c.get('name')!r}") for c in raw["columns"])
    rows = []
    for i, r in enumerate(raw.get("rows") or []):
        if len(r["cells"]) != len(columns):
            raise DeclarationError(f"{where} row {i} ({r.get('model')}): {len(r['cells'])} cells for {len(columns)} columns")
        if None in r["cells"] and not r.get("note"):
            raise DeclarationError(f"{where} row {i} ({r.get('model')}): a null cell needs a `note` saying why")
        rows.append(Row(str(r["model"]), tuple(r["cells"]), r.get("kind", "model"), r.get("section"), r.get("note")))
    methods = raw.get("methods")
    return Table(raw["id"], raw.get("source"), raw["title"], fmt["scale"], fmt["digits"],
                 None if methods is None else tuple(methods), tuple(raw.get("notes", ())), columns, tuple(rows),
                 raw.get("chance_label", "chance"), raw.get("groups"), raw.get("chance_definition"))  # fmt: skip


def _card(raw: list, ids: dict[str, Table], where: str) -> tuple[CardRow, ...]:
    """The ``card`` rows of a paper_tables.yaml, each source a column of a declared table."""
    rows = []
    for i, entry in enumerate(raw):
        at = f"{where} card row {i} ({entry.get('figure')!r})"
        sources = []
        for source in entry.get("from") or ():
            table = ids.get(source.get("table"))
            if table is None or source.get("column") not in {c.name for c in table.columns}:
                raise DeclarationError(f"{at}: no table {source.get('table')!r} with a column {source.get('column')!r}")
            column = table.column(source["column"])
            if column.keys[0] is None:
                raise DeclarationError(f"{at}: column {column.name!r} of {table.id!r} is one physprobe does not score")
            sources.append((table, column))
        if not entry.get("figure") or not sources:
            raise DeclarationError(f"{at}: a card row needs its figure's name and where the paper prints it (from)")
        groups = entry.get("groups")
        if groups is not None and (groups not in ids or ids[groups].groups is None):
            raise DeclarationError(f"{at}: groups names {groups!r}, not a table that declares its groups")
        first = sources[0][0]
        rows.append(CardRow(str(entry["figure"]), tuple(sources), ids[groups] if groups else (first if first.groups else None)))
    scales = {table.id: table.scale for row in rows for table, _ in row.sources}
    if len(set(scales.values())) > 1:  # one scale per benchmark: its card rows, its panel of the card's figure
        raise DeclarationError(f"{where} card: its rows read tables of two scales ({', '.join(f'{k}: {v}' for k, v in scales.items())}); "
                               "a benchmark's card rows print in one scale")  # fmt: skip
    return tuple(rows)


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
            raise DeclarationError(f"{where} figure {f.get('id')!r}: kind must be bars or lines, got {f.get('kind')!r}")
        panels = tuple(f["panels"]) if f["kind"] == "bars" else ({"table": f["table"]},)
        for panel in panels:
            table = ids.get(panel["table"])
            if table is None:
                raise DeclarationError(f"{where} figure {f['id']!r}: no table {panel['table']!r}")
            for name in panel.get("columns", ()):
                if name not in {c.name for c in table.columns}:
                    raise DeclarationError(f"{where} figure {f['id']!r}: table {table.id!r} has no column {name!r}")
                if panel.get("part") and panel["part"] not in table.column(name).parts:
                    raise DeclarationError(f"{where} figure {f['id']!r}: column {name!r} has no part {panel['part']!r}")
        figures.append(Figure(f["id"], f["kind"], f["title"], panels, f.get("columns")))
    return PaperTables(
        benchmark, raw["paper"], raw["title"], protocols, tables, tuple(figures), _card(raw.get("card") or [], ids, where)
    )


def _check_exclusions(benchmark: str, tables: tuple[Table, ...], where: str) -> None:
    """Every ``excluded_by`` name is a protocol of the benchmark that leaves questions out (has a ``skip``)."""
    skipping = {p.name for p in registry.evaluation(benchmark).protocols if p.skip is not None}
    for table in tables:
        for column in table.columns:
            for name in column.excluded_by:
                if name not in skipping:
                    raise DeclarationError(f"{where} table {table.id!r} column {column.name!r}: excluded_by names {name!r}, "
                                    f"not a {benchmark} protocol that leaves questions out ({', '.join(sorted(skipping)) or 'none'})")  # fmt: skip


def _paper_protocols(benchmark: str, raw: dict, where: str) -> dict[str, tuple[str, ...]]:
    """``protocols`` of a paper_tables.yaml: each name a protocol of the benchmark, of the method it is listed under."""
    evaluation = registry.evaluation(benchmark)
    known = {p.name: p for p in evaluation.protocols}
    out = {}
    for method, listed in raw.items():
        names = tuple(_as_tuple(listed))
        for name in names:
            if name not in known:
                raise DeclarationError(f"{where} protocols.{method}: {benchmark} has no protocol {name!r}; "
                                f"known: {', '.join(known)} (see `physprobe protocols {benchmark}`)")  # fmt: skip
            if known[name].method != method:
                raise DeclarationError(f"{where} protocols.{method}: protocol {name!r} uses method {known[name].method!r}; "
                                f"list it under {known[name].method}")  # fmt: skip
        out[str(method)] = names
    return out
