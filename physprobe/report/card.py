"""The card a report opens with: a row per headline figure of each benchmark (``card`` in its paper_tables.yaml),
the user's models side by side, beside the majority answer and chance on the same rows and the papers' best model
and human figure where printed; each model's cell with its n, its unparsed share and footnotes for what it rests on
(flags, a protocol other than the paper's, fewer groups than the paper's). Its figure: one panel per benchmark, drawn
from the same ``Card`` value as the table (``panels``), so every flag, chance and scale is the table's.

``card_markdown(folders)`` renders the card from run folders in one call (e.g. as a score repository's card);
``card_text(folders)`` is the card as ``physprobe score --benchmark all`` prints it.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from physprobe.data import registry
from physprobe.report import differences
from physprobe.report.blocks import Heading, Image, Notes, Paragraph, TableBlock
from physprobe.report.cells import (
    SAME_ROWS,
    SAME_ROWS_DEFINITION,
    Spread,
    baseline_cell,
    counts,
    number,
    printed_value,
    run_cell,
    same_rows_chance,
)
from physprobe.report.figures import FONT, LANE_GAP, OKABE_ITO, PUBLISHED_GREY, TITLE, _lane, _mark_short, _plt, _save
from physprobe.report.notes import (
    Footnotes,
    apart_note,
    coverage,
    exclusion,
    left_out,
    missing_texts,
    paper_marker,
    protocol_warning,
)
from physprobe.report.runs import Run, collect, model_name
from physprobe.report.tables import CardRow, Column, PaperTables, Table, paper_tables
from physprobe.report.writers import to_markdown
from physprobe.run import baselines

HUMAN_GREEN = "#009E73"
CARD_WIDTH = 12.0  # inches: within the page's width at the figures' dpi (``figures.MAX_WIDTH``)
CARD_LANE = 0.9  # the label lane right of 100%, as a share of the axis's 0-100%: a cell's text, marks and all
INTRO = ("Each benchmark's headline figures as its paper prints them (its scale: % or 0–1, the figure's too), your models "
         "beside the paper's best model and its human figure where printed, and the majority answer and chance on the "
         f"same questions ({SAME_ROWS}: {SAME_ROWS_DEFINITION}). A cell reads: value, n=questions, the shares of answers that named no option (unparsed, "
         "counted wrong) and of questions left undecided; ⚠ and the footnotes say what a figure rests on; — a figure "
         "the model has not (footnoted).")  # fmt: skip


@dataclass
class Model:
    """A column of the card: one model's runs, at most one per benchmark."""

    name: str
    runs: dict[str, Run]


def models(runs: list[Run]) -> list[Model]:
    """The card's columns: the runs of one model in one card run's folder together (``Run.parent``), the others by
    their model's name; a second run of a benchmark under one name opens a column of its own, named as the report
    names that run."""
    columns: list[tuple[object, Model]] = []
    for run in runs:
        record, benchmark = run.record, run.record.benchmark
        key = (run.parent, record.model, record.backend.get("gguf_file")) if run.parent else model_name(record)
        column = next((c for k, c in columns if k == key and benchmark not in c.runs), None)
        if column is None:
            taken = any(k == key for k, _ in columns)
            column = Model(run.id if taken else model_name(run.record), {})
            columns.append((key, column))
        column.runs[benchmark] = run
    shown = [c for _, c in columns]
    for column in shown:
        if sum(c.name == column.name for c in shown) > 1:  # two card folders of one model's name: the folders tell them apart
            parent = next(iter(column.runs.values())).parent
            column.name += f" ({parent.name})" if parent is not None else ""
    return shown


def source(row: CardRow, run: Run) -> tuple[Table, Column]:
    """The (table, column) a run's value of a card row is read through: the first whose table reports its method."""
    return next(((t, c) for t, c in row.sources if t.methods is None or run.method in t.methods), row.sources[0])


def _fraction(printed: float, table: Table) -> float:
    return printed / 100 if table.scale == "percent" else printed


def best(row: CardRow) -> tuple[str, str, Table] | None:
    """The paper's best model on a card row (over all its sources): its name, the cell as printed, its table."""
    found = [(_fraction(value, table), r.model, cell, table) for table, column in row.sources for r in table.rows
             if r.kind == "model" and (cell := r.cells[table.columns.index(column)]) is not None
             and (value := printed_value(cell)) is not None]  # fmt: skip
    if not found:
        return None
    top = max(found, key=lambda item: item[0])  # the first of equals
    return top[1], top[2], top[3]


def human(row: CardRow) -> tuple[str, Table] | None:
    """The paper's human figure on a card row, as printed (None: the paper prints none)."""
    for table, column in row.sources:
        for r in table.rows:
            if r.kind == "human" and r.cells[table.columns.index(column)] is not None:
                return r.cells[table.columns.index(column)], table
    return None


def _config(column: Column) -> str:
    return column.keys[0].split(".")[0]


@dataclass(frozen=True)
class Cell:
    """A model's cell on a card row, one value for the table and the figure: ``text`` as the card prints it (marks and
    all), ``value`` (a fraction; None: not run or missing) and its 95% ``interval``, and whether it is ``warned`` (⚠:
    its figures say little, or its protocol is not the paper's)."""

    text: str
    value: float | None = None
    interval: tuple[float, float] | None = None
    warned: bool = False


@dataclass(frozen=True)
class Printed:
    """A figure the paper prints on a card row (its best model's, its human figure): who, the cell as printed, its
    value as a fraction, and the footnote mark of a marker the cell carries (PROST's ``46.7*``)."""

    who: str
    cell: str
    value: float
    table: Table
    marks: str = ""


@dataclass(frozen=True)
class Line:
    """A card row: its benchmark, paper row, the table whose scale it prints in, a ``Cell`` per model, the majority
    answer's and chance's figures on each model's rows, the paper's best model and human figure."""

    benchmark: str
    paper: PaperTables
    row: CardRow
    table: Table
    cells: list[Cell]
    majority: list[float | None]
    chance: list[float | None]
    best: Printed | None
    human: Printed | None


@dataclass(frozen=True)
class Card:
    """The card: its columns (models), lines and footnotes; the table, the terminal and the figure all read it."""

    columns: list[Model]
    lines: list[Line]
    notes: list[str]


def _marks(run: Run, row: CardRow, column: Column, paper: PaperTables, notes: Footnotes) -> tuple[str, bool]:
    """⚠ and the footnote marks of a run's cell, and whether it is warned: flags of its configs, a protocol other than
    the paper's, a protocol reported apart or leaving questions out, questions the metric left out, fewer groups."""
    config = _config(column)
    members = registry.evaluation(run.record.benchmark).pooled.get(config, (config,))
    warning = protocol_warning(run, paper)
    warned = [warning] * bool(warning) + [f"run {run.id}: {f.text}" for f in baselines.flags(run.record) if f.config in members]
    texts = warned + [text for text in (apart_note(run), exclusion(run, config)) if text]
    texts = [text if text.startswith("run ") else f"run {run.id}: {text}" for text in texts]
    texts += [text for text in [left_out(run, config)] if text]
    if row.groups is not None:
        texts += [text for text in [coverage(run, row.groups)] if text]
    texts += [text for text in [differences.card_note(run, column.keys[0])] if text]
    return (" ⚠" if warned else "") + ",".join(notes.mark(text) for text in texts), bool(warned)


def _cell(run: Run | None, name: str, title: str, row: CardRow, paper: PaperTables, notes: Footnotes) -> Cell:
    if run is None:
        return Cell("—" + notes.mark(f"{name}: no {title} run among the folders given (a card run skips a benchmark its "
                                     f"model's family has no protocol for, or its backend cannot serve, and says so "
                                     f"when it runs; `physprobe score --benchmark {paper.benchmark}` scores it)"))  # fmt: skip
    table, column = source(row, run)
    found = run_cell(run, column, 0)
    if found.missing is not None:
        return Cell("—" + notes.mark(next(iter(missing_texts([found.missing]).values()))))
    text = number(found.value, table) + (
        "" if found.spread is None else f" ± {number(found.spread.sd, table)}{notes.mark(Spread.NOTE)}"
    )
    text += f" n={found.n}" if found.n else ""
    shares = counts(run, _config(column))
    if shares is not None:
        text += "".join(f", {100 * shares.share(count):.0f}% {what}" for count, what in (
            (shares.unparsed, "unparsed"), (shares.undecided, "undecided")) if count)  # fmt: skip
    marks, warned = _marks(run, row, column, paper, notes)
    return Cell(text + marks, found.value, found.interval, warned)


def _printed(found: tuple[str, str, Table] | None, notes: Footnotes) -> Printed | None:
    """A printed figure with the footnote of the marker it carries (``notes.paper_marker``)."""
    if found is None:
        return None
    who, cell, table = found
    note = paper_marker(cell, table)
    return Printed(who, cell, _fraction(printed_value(cell), table), table, notes.mark(note) if note else "")


def card(runs: list[Run]) -> Card:
    """The card of ``runs``: a line per card row of each benchmark among them, a cell per model, and the footnotes
    of every mark (one numbering for the table, the terminal and the figure)."""
    columns = models(runs)
    notes = Footnotes()
    lines = []
    for name, paper, row in rows(runs):
        here = [c.runs.get(name) for c in columns]
        cells = [_cell(run, c.name, paper.title, row, paper, notes) for run, c in zip(here, columns, strict=True)]
        placed = [(run, source(row, run)[1]) for run in here if run is not None]
        top, people = best(row), human(row)
        lines.append(Line(name, paper, row, row.sources[0][0], cells, [baseline_cell(run, c, 0) for run, c in placed],
                          [same_rows_chance(run, c) for run, c in placed], _printed(top, notes),
                          _printed(None if people is None else ("human (paper)", *people), notes)))  # fmt: skip
    return Card(columns, lines, notes.items())


def _same_rows(values: list[float | None], table: Table) -> str:
    """One figure where every model's rows give the same, else each model's (in column order)."""
    shown = ["—" if v is None else number(v, table) for v in values]
    return "—" if not shown else shown[0] if len(set(shown)) == 1 else " / ".join(shown)


def rows(runs: list[Run]) -> list[tuple[str, PaperTables, CardRow]]:
    """The card's rows: each benchmark among ``runs`` (in the registered order) and its paper's card rows."""
    present = {run.record.benchmark for run in runs}
    return [
        (name, paper, row) for name in registry.names() if name in present for paper in [paper_tables(name)] for row in paper.card
    ]


def card_block(found: Card) -> TableBlock:
    """The card as a table: a section row per benchmark, a row per line."""
    header = ["Figure", *[c.name for c in found.columns], "Majority answer (same rows)", "Chance (same rows)",
              "Paper's best model", "Human (paper)"]  # fmt: skip
    body, kinds, section = [], [], None
    for line in found.lines:
        if line.benchmark != section:
            section = line.benchmark
            body.append([f"{line.paper.title} ({line.paper.paper.split(',')[0]})", *[""] * (len(header) - 1)])
            kinds.append("section")
        sources = line.row.sources
        where = ", ".join(dict.fromkeys(t.source or f"physprobe's {t.title}" for t, _ in sources))
        top, people = line.best, line.human
        body.append([
            f"{line.row.figure} ({'%' if line.table.scale == 'percent' else '0–1'}), {where}",
            *[cell.text for cell in line.cells],
            _same_rows(line.majority, line.table), _same_rows(line.chance, line.table),
            "—" if top is None else f"{top.who} {top.cell}{top.marks}" + (f" ({top.table.source})" if len(sources) > 1 and top.table.source else ""),
            "—" if people is None else people.cell + people.marks,
        ])  # fmt: skip
        kinds.append("card")
    return TableBlock(header, body, kinds, css="card")


@dataclass(frozen=True)
class Bar:
    """A bar of the card's figure, in its panel's scale (the paper's, as the table prints it): ``text`` is what it
    reads (a run's: its cell, marks and all), ``hatched`` a warned run's (⚠)."""

    label: str
    value: float | None
    text: str
    error: tuple[float, float] | None
    colour: str
    run: bool
    hatched: bool = False


@dataclass(frozen=True)
class Panel:
    """A panel of the card's figure: one benchmark, its scale, and per card line its figure, bars, and the majority
    answer's and chance's figures on the same rows (in the panel's scale)."""

    title: str
    scale: str
    figures: list[tuple[str, list[Bar], list[float], list[float]]]


def panels(found: Card) -> list[Panel]:
    """The card's figure as data: a panel per benchmark, every model's bar (its cell's text; — for a model that did
    not run it), the paper's best model and human figure as printed, majority answer and chance on the same rows."""
    colours = [OKABE_ITO[i % len(OKABE_ITO)] for i in range(len(found.columns))]
    out: dict[str, Panel] = {}
    for line in found.lines:
        full = 100 if line.table.scale == "percent" else 1
        bars = []
        for cell, colour in zip(line.cells, colours, strict=True):
            error = None if cell.interval is None else (full * cell.interval[0], full * cell.interval[1])
            value = None if cell.value is None else full * cell.value
            bars.append(Bar("", value, cell.text, error, colour, True, cell.warned))
        for printed, colour, what in ((line.best, PUBLISHED_GREY, "paper's best"), (line.human, HUMAN_GREEN, None)):
            if printed is not None:
                label = f"{printed.who} ({what})" if what else printed.who
                bars.append(Bar(label, full * printed.value, printed.cell + printed.marks, None, colour, False))
        marks = [[full * v for v in values if v is not None] for values in (line.majority, line.chance)]
        panel = out.setdefault(line.benchmark, Panel(line.paper.title, line.table.scale, []))
        panel.figures.append((line.row.figure, bars, *marks))
    return list(out.values())


def card_figure(found: Card, path: Path) -> bool:
    """One panel per benchmark (``panels``), in the paper's scale: each model's bar (95% interval; hatched where
    ⚠; a diamond in its colour where too short to see), reading as its cell does in the lane right of 100%, the
    paper's best model and human figure as printed, majority answer and chance on the same rows as ticks; the card's
    footnotes below, as plain text. False (nothing written) without a run's value."""
    drawn = panels(found)
    if not any(bar.run and bar.value is not None for panel in drawn for _, bars, *_ in panel.figures for bar in bars):
        return False
    plt = _plt()
    notes = [textwrap.fill(plain(note), 125, subsequent_indent="   ") for note in found.notes]
    note_lines = sum(note.count("\n") + 1 for note in notes)
    heights = [sum(len(bars) + 0.8 for _, bars, *_ in panel.figures) for panel in drawn]
    fig, axes = plt.subplots(len(drawn), 1, figsize=(CARD_WIDTH, 0.3 * sum(heights) + 1.1 * len(drawn) + 1.2 + 0.17 * note_lines),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)  # fmt: skip
    for axis, panel in zip(axes[:, 0], drawn, strict=True):
        _card_panel(axis, panel)
    legend = _card_legend(fig, plt, found.columns, drawn)
    fig.suptitle("Your models against the papers' best models and humans", fontsize=TITLE)
    inches = fig.get_size_inches()[1]
    text = fig.text(0.01, 0.005, "\n".join(notes), fontsize=FONT, va="bottom", ha="left", family="DejaVu Sans") if notes else None
    renderer = fig.canvas.get_renderer()
    below = 0.1 + (text.get_window_extent(renderer).height / fig.dpi if text is not None else 0)
    legend.set_bbox_to_anchor((0.5, below / inches), transform=fig.transFigure)
    below += legend.get_window_extent(renderer).height / fig.dpi + 0.1  # the legend's rows, and a margin
    fig.tight_layout(rect=(0, below / inches, 1, 1 - 0.35 / inches))
    _save(fig, plt, path)
    return True


def plain(text: str) -> str:
    """A footnote as a figure prints it: code spans as plain words (a PNG shows no Markdown).

    >>> plain("no question of `default` could be scored (`--samples K`)")
    'no question of default could be scored (--samples K)'
    """
    return re.sub(r"`([^`]*)`", r"\1", text)


def _card_panel(axis, panel: Panel) -> None:
    full = 100 if panel.scale == "percent" else 1
    y, ticks, labels = 0.0, [], []
    for figure, bars, majority, chances in panel.figures:
        top = y
        for bar in bars:
            if bar.value is not None:
                error = None if bar.error is None else [[bar.value - bar.error[0]], [bar.error[1] - bar.value]]
                axis.barh(y, bar.value, height=0.8, color=bar.colour, xerr=error, ecolor="#333333", capsize=2,
                          edgecolor="#333333" if bar.run else "none", linewidth=0.6, hatch="////" if bar.hatched else None)  # fmt: skip
                _mark_short(axis, bar.value, y, bar.colour, full)
            text = bar.text + (f"  {bar.label}" if bar.label else "")
            axis.text(full * (1 + LANE_GAP), y, text, va="center", fontsize=FONT, fontweight="bold" if bar.run else "normal")
            y += 1
        for values, style in ((majority, dict(color="black", linestyle="-", linewidth=1.4)),
                              (chances, dict(color="black", linestyle="--", linewidth=1))):  # fmt: skip
            for value in sorted(set(values)):
                axis.plot([value] * 2, [top - 0.5, y - 0.5], **style)
        ticks.append((top + y - 1) / 2)
        labels.append(textwrap.fill(figure, 22))
        y += 0.8
    axis.set_yticks(ticks)
    axis.set_yticklabels(labels, fontsize=FONT)
    axis.set_ylim(y - 1.2, -0.7)
    _lane(axis, full, CARD_LANE)
    axis.set_title(f"{panel.title} ({'%' if full == 100 else '0–1'}, as the paper prints it)", fontsize=FONT + 2, loc="left")


def _card_legend(fig, plt, columns: list[Model], drawn: list[Panel]):
    """The card figure's legend: each model drawn, and the kinds of bar and line the figure holds."""
    from matplotlib.patches import Patch

    bars = [bar for panel in drawn for _, found, *_ in panel.figures for bar in found if bar.value is not None]
    colours = [OKABE_ITO[i % len(OKABE_ITO)] for i in range(len(columns))]
    handles = [Patch(facecolor=colour, edgecolor="#333333", label=f"{column.name} (95% interval)")
               for column, colour in zip(columns, colours, strict=True) if any(bar.run and bar.colour == colour for bar in bars)]  # fmt: skip
    kinds = [(any(bar.hatched for bar in bars), Patch(facecolor="white", edgecolor="#333333", hatch="////",
                                                      label="⚠ its figures say little (footnote)")),
             (any(not bar.run and bar.colour == PUBLISHED_GREY for bar in bars), Patch(color=PUBLISHED_GREY, label="the paper's best model")),
             (any(not bar.run and bar.colour == HUMAN_GREEN for bar in bars), Patch(color=HUMAN_GREEN, label="human (paper)")),
             (any(m for panel in drawn for _, _, m, _ in panel.figures),
              plt.Line2D([], [], color="black", linewidth=1.4, label="majority answer, same rows")),
             (any(c for panel in drawn for *_, c in panel.figures), plt.Line2D([], [], color="black", linestyle="--", linewidth=1, label=SAME_ROWS))]  # fmt: skip
    handles += [handle for shown, handle in kinds if shown]
    return fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=FONT, frameon=False)


def card_blocks(runs: list[Run], figures_dir: Path | None, image_name: str = "figures/card.png") -> list:
    """The card as report blocks: a heading, what a cell reads, the table and its footnotes, and its figure (drawn
    into ``figures_dir``; none without one); none where no benchmark of the runs declares card rows."""
    if not rows(runs):  # no benchmark among the runs declares a card
        return []
    found = card(runs)
    blocks = [Heading(2, "Card"), Paragraph(INTRO), card_block(found)]
    if found.notes:
        blocks.append(Notes(found.notes))
    if figures_dir is not None:
        path = figures_dir / Path(image_name).name
        if card_figure(found, path):
            blocks.append(Image(path, image_name, "Your models against the papers' best models and humans (the card's figures)"))
    return blocks


def card_markdown(folders: list[Path], figure: Path | None = None) -> str:
    """The card of the runs in ``folders`` (run folders, or card runs' parents) as Markdown; with ``figure``, its
    figure is drawn there and the Markdown shows it by that file's name (beside the Markdown file).

    >>> card_markdown([])
    Traceback (most recent call last):
    physprobe.errors.ReportError: give at least one run folder written by `physprobe score`
    """
    runs, _ = collect(folders)
    blocks = card_blocks(runs, None if figure is None else figure.parent, figure.name if figure is not None else "card.png")
    return to_markdown(blocks)


def card_text(folders: list[Path]) -> str:
    """The card of the runs in ``folders`` as a terminal prints it: aligned columns, then its footnotes."""
    runs, _ = collect(folders)
    found = card(runs)
    block = card_block(found)
    rows = [block.header] + block.rows
    widths = [max(len(r[i]) for r in rows) for i in range(len(block.header))]
    lines = []
    for row, kind in zip(rows, ["header", *block.kinds], strict=True):
        if kind == "section":
            lines.append(row[0])
        else:
            lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        if kind == "header":
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines + [""] + found.notes)
