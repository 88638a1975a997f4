"""The card a report opens with: a row per headline figure of each benchmark (``card`` in its paper_tables.yaml),
the user's models side by side, beside the majority answer and chance on the same rows and the papers' best model
and human figure where printed; each model's cell with its n, its unparsed share and footnotes for what it rests on
(flags, a protocol other than the paper's, fewer groups than the paper's). Its figure: one panel per benchmark.

``card_markdown(folders)`` renders the card from run folders in one call (e.g. as a score repository's card);
``card_text(folders)`` is the card as ``physprobe score --benchmark all`` prints it.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

from physprobe.data import registry
from physprobe.report import differences
from physprobe.report.blocks import Heading, Image, Notes, Paragraph, TableBlock
from physprobe.report.cells import baseline_cell, number, printed_value, run_cell
from physprobe.report.figures import OKABE_ITO, PUBLISHED_GREY, _plt, _save
from physprobe.report.notes import Footnotes, apart_note, coverage, exclusion, missing_texts, protocol_warning
from physprobe.report.runs import Run, collect, model_name
from physprobe.report.tables import CardRow, Column, PaperTables, Table, paper_tables
from physprobe.report.writers import to_markdown
from physprobe.run import baselines

HUMAN_GREEN = "#009E73"
INTRO = ("Each benchmark's headline figures as its paper prints them, your models beside the paper's best model and "
         "its human figure where printed, and the majority answer and chance on the same questions. A cell reads: "
         "value, n=questions, the share of answers that named no option (unparsed, counted wrong); ⚠ and the "
         "footnotes say what a figure rests on.")  # fmt: skip


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


def unparsed_share(run: Run, column: Column) -> float | None:
    """The share of the questions behind a column's figure whose answer named no option (None: no such count)."""
    scored = run.metrics.get(_config(column))
    if not isinstance(scored, dict) or not scored.get("n") or "unparsed" not in scored:
        return None
    return scored["unparsed"] / scored["n"]


def chance(run: Run, column: Column) -> float | None:
    """Chance on the run's rows for a column's figure (``Baselines.chance``), else the paper's chance level."""
    found = run.record.baselines.get(_config(column))
    rest = column.keys[0].partition(".")[2]
    value = found.chance.get(rest) if found is not None else None
    return value if value is not None else column.chance


def _marks(run: Run, row: CardRow, table: Table, column: Column, paper: PaperTables, notes: Footnotes) -> str:
    """⚠ and the footnote marks of a run's cell: flags of its configs, a protocol other than the paper's, a protocol
    reported apart or leaving questions out, and fewer groups than the paper's."""
    config = _config(column)
    members = registry.evaluation(run.record.benchmark).pooled.get(config, (config,))
    warning = protocol_warning(run, paper)
    warned = [warning] * bool(warning) + [f"run {run.id}: {f.text}" for f in baselines.flags(run.record) if f.config in members]
    texts = warned + [text for text in (apart_note(run), exclusion(run, config)) if text]
    if row.groups is not None:
        texts += [text for text in [coverage(run, row.groups)] if text]
    texts += [text for text in [differences.card_note(run, column.keys[0])] if text]
    return (" ⚠" if warned else "") + ",".join(
        notes.mark(text if text.startswith("run ") else f"run {run.id}: {text}") for text in texts
    )


def _cell(run: Run | None, row: CardRow, paper: PaperTables, notes: Footnotes) -> str:
    if run is None:
        return ""
    table, column = source(row, run)
    found = run_cell(run, column, 0)
    if found.missing is not None:
        return "—" + notes.mark(next(iter(missing_texts([found.missing]).values())))
    text = number(found.value, table) + (f" n={found.n}" if found.n else "")
    share = unparsed_share(run, column)
    if share:
        text += f", {100 * share:.0f}% unparsed"
    return text + _marks(run, row, table, column, paper, notes)


def _same_rows(values: list[float | None], table: Table) -> str:
    """One figure where every model's rows give the same, else each model's (in column order)."""
    shown = ["—" if v is None else number(v, table) for v in values]
    return shown[0] if len(set(shown)) == 1 else " / ".join(shown)


def rows(runs: list[Run]) -> list[tuple[str, PaperTables, CardRow]]:
    """The card's rows: each benchmark among ``runs`` (in the registered order) and its paper's card rows."""
    present = {run.record.benchmark for run in runs}
    return [
        (name, paper, row) for name in registry.names() if name in present for paper in [paper_tables(name)] for row in paper.card
    ]


def card_block(runs: list[Run]) -> tuple[TableBlock, list[str], list[Model]]:
    """The card as a table (a section row per benchmark), its footnotes, and its columns."""
    columns = models(runs)
    notes = Footnotes()
    header = ["Figure", *[c.name for c in columns], "Majority answer (same rows)", "Chance (same rows)", "Paper's best model",
              "Human (paper)"]  # fmt: skip
    body, kinds, section = [], [], None
    for name, paper, row in rows(runs):
        if name != section:
            section = name
            body.append([f"{paper.title} ({paper.paper.split(',')[0]})", *[""] * (len(header) - 1)])
            kinds.append("section")
        runs_here = [c.runs.get(name) for c in columns]
        placed = [(run, *source(row, run)) for run in runs_here if run is not None]
        table = row.sources[0][0]
        top, people = best(row), human(row)
        where = ", ".join(dict.fromkeys(t.source or f"physprobe's {t.title}" for t, _ in row.sources))
        figure = f"{row.figure} ({'%' if table.scale == 'percent' else '0–1'}), {where}"
        body.append([
            figure, *[_cell(run, row, paper, notes) for run in runs_here],
            _same_rows([baseline_cell(run, c, 0) for run, _, c in placed], table),
            _same_rows([chance(run, c) for run, _, c in placed], table),
            "—" if top is None else f"{top[0]} {top[1]}" + (f" ({top[2].source})" if len(row.sources) > 1 and top[2].source else ""),
            "—" if people is None else people[0],
        ])  # fmt: skip
        kinds.append("card")
    return TableBlock(header, body, kinds, css="card"), notes.items(), columns


@dataclass
class _Bar:
    label: str
    value: float  # percent
    error: tuple[float, float] | None
    colour: str
    run: bool


def _panel_bars(row: CardRow, runs: list[Run | None], colours: list[str]) -> list[_Bar]:
    bars = []
    for run, colour in zip(runs, colours):
        found = None if run is None else run_cell(run, source(row, run)[1], 0)
        if found is not None and found.value is not None:
            interval = None if found.interval is None else (100 * found.interval[0], 100 * found.interval[1])
            bars.append(_Bar("", 100 * found.value, interval, colour, True))
    top, people = best(row), human(row)
    if top is not None:
        bars.append(_Bar(f"{top[0]} (paper's best)", 100 * _fraction(printed_value(top[1]), top[2]), None, PUBLISHED_GREY, False))
    if people is not None:
        bars.append(_Bar("human (paper)", 100 * _fraction(printed_value(people[0]), people[1]), None, HUMAN_GREEN, False))
    return bars


def card_figure(runs: list[Run], columns: list[Model], path: Path) -> bool:
    """One panel per benchmark: for each headline figure, each model's bar (95% interval), the paper's best model and
    human figure; majority answer and chance on the same rows as ticks. False (nothing written) without a value."""
    colours = [OKABE_ITO[i % len(OKABE_ITO)] for i in range(len(columns))]
    panels: dict[str, list] = {}
    for name, paper, row in rows(runs):
        here = [c.runs.get(name) for c in columns]
        placed = [(run, *source(row, run)) for run in here if run is not None]
        marks = {
            "majority": [v for run, _, c in placed if (v := baseline_cell(run, c, 0)) is not None],
            "chance": [v for run, _, c in placed if (v := chance(run, c)) is not None],
        }
        panels.setdefault(paper.title, []).append((row, _panel_bars(row, here, colours), marks))
    if not any(bar.run for figures in panels.values() for _, bars, _ in figures for bar in bars):
        return False
    plt = _plt()
    heights = [sum(len(bars) + 0.8 for _, bars, _ in figures) for figures in panels.values()]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9.5, 0.26 * sum(heights) + 1.1 * len(panels) + 1.0),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)  # fmt: skip
    for axis, (title, figures) in zip(axes[:, 0], panels.items()):
        y, ticks, labels = 0.0, [], []
        for row, bars, marks in figures:
            top = y
            for bar in bars:
                error = None if bar.error is None else [[bar.value - bar.error[0]], [bar.error[1] - bar.value]]
                axis.barh(y, bar.value, height=0.8, color=bar.colour, xerr=error, ecolor="#333333", capsize=2,
                          edgecolor="#333333" if bar.run else "none", linewidth=0.6)  # fmt: skip
                text = f"{bar.value:.1f}" + (f"  {bar.label}" if bar.label else "")
                axis.text(min(bar.value + 1, 62), y, text, va="center", fontsize=7, fontweight="bold" if bar.run else "normal",
                          bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=0.6))  # fmt: skip
                y += 1
            for kind, style in (("majority", dict(color="black", linestyle="-", linewidth=1.4)),
                                ("chance", dict(color="black", linestyle="--", linewidth=1))):  # fmt: skip
                for value in set(marks[kind]):
                    axis.plot([100 * value] * 2, [top - 0.5, y - 0.5], **style)
            ticks.append((top + y - 1) / 2)
            labels.append(textwrap.fill(row.figure, 22))
            y += 0.8
        axis.set_yticks(ticks)
        axis.set_yticklabels(labels, fontsize=8)
        axis.set_ylim(y - 1.2, -0.7)
        axis.set_xlim(0, 100)
        axis.set_title(title, fontsize=10, loc="left")
        axis.tick_params(axis="x", labelsize=7)
        axis.grid(axis="x", color="#EEEEEE", linewidth=0.6)
        axis.set_axisbelow(True)
    axes[-1, 0].set_xlabel("% (each figure as its paper computes it)", fontsize=8)
    legend = _card_legend(fig, plt, columns, colours)
    fig.suptitle("Your models against the papers' best models and humans", fontsize=11)
    inches = fig.get_size_inches()[1]
    below = legend.get_window_extent(fig.canvas.get_renderer()).height / fig.dpi + 0.1  # the legend's rows, and a margin
    fig.tight_layout(rect=(0, below / inches, 1, 1 - 0.35 / inches))
    _save(fig, plt, path)
    return True


def _card_legend(fig, plt, columns: list[Model], colours: list[str]):
    from matplotlib.patches import Patch

    handles = [
        Patch(facecolor=colour, edgecolor="#333333", label=f"{column.name} (95% interval)")
        for column, colour in zip(columns, colours)
    ]
    handles += [Patch(color=PUBLISHED_GREY, label="the paper's best model"), Patch(color=HUMAN_GREEN, label="human (paper)"),
                plt.Line2D([], [], color="black", linewidth=1.4, label="majority answer, same rows"),
                plt.Line2D([], [], color="black", linestyle="--", linewidth=1, label="chance, same rows")]  # fmt: skip
    return fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)


def card_blocks(runs: list[Run], figures_dir: Path | None, image_name: str = "figures/card.png") -> list:
    """The card as report blocks: a heading, what a cell reads, the table and its footnotes, and its figure (drawn
    into ``figures_dir``; none without one); none where no benchmark of the runs declares card rows."""
    if not rows(runs):  # no benchmark among the runs declares a card
        return []
    block, notes, columns = card_block(runs)
    blocks = [Heading(2, "Card"), Paragraph(INTRO), block]
    if notes:
        blocks.append(Notes(notes))
    if figures_dir is not None:
        path = figures_dir / Path(image_name).name
        if card_figure(runs, columns, path):
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
    block, notes, _ = card_block(runs)
    rows = [block.header] + block.rows
    widths = [max(len(r[i]) for r in rows) for i in range(len(block.header))]
    lines = []
    for row, kind in zip(rows, ["header", *block.kinds]):
        if kind == "section":
            lines.append(row[0])
        else:
            lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if kind == "header":
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines + [""] + notes)
