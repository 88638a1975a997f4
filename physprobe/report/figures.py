"""The report's figures (matplotlib, Agg): bars (one panel per column) and lines (one line per model across a
table's columns), published models grey, runs coloured with 95% intervals and ⚠ after the name of a run whose
figures say little (``baselines.flags``) and its bars hatched where they do; chance on the runs' own rows under the
card's name (``cells.SAME_ROWS``) and the paper's chance level where it is another (``chance_lines``, defined below the
figure by ``chance_notes``); legends inside the figure; ``DRAW`` maps a figure kind to its drawing function."""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from physprobe.data import registry
from physprobe.errors import ReportError
from physprobe.report.cells import SAME_ROWS, SAME_ROWS_DEFINITION, counts, number, printed_value, run_cell, same_rows_chance
from physprobe.report.runs import Run
from physprobe.report.tables import Column, Figure, PaperTables, Table
from physprobe.run import baselines

# Okabe & Ito (2008), a palette told apart with every common colour-vision deficiency; runs get these colours.
OKABE_ITO = ("#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442", "#000000")
PUBLISHED_GREY = "#BBBBBB"
CHANCE = "--"  # chance on the runs' rows (the card's) and a paper's chance level of the same definition
OTHER_CHANCE = "-."  # a paper's chance level of another definition (``Table.chance_definition``)
FLAGGED = "⚠ hatched: its figures say little (see the tables' footnotes)"


@dataclass
class _Series:
    """One bar or line of a figure: a published model or a run."""

    name: str
    values: list[float | None]
    errors: list[tuple[float, float] | None]
    run: bool
    flagged: list[bool] = field(default_factory=list)  # per value: ⚠, its config's figures say little (a hatched bar)
    fewer: list[str] = field(default_factory=list)  # per value: " n=18 of 20" where the metric left questions out


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
        fewer = [_fewer(run, column) for column in columns]
        series.append(_Series(shown_name(run), values, errors, True, [flagged(run, column) for column in columns], fewer))
    return series


def _fewer(run: Run, column: Column) -> str:
    """`` n=18 of 20`` for a run's figure over its config's n where the metric scored fewer questions than the run
    answered (``cells.counts``: Text2Afford's rows with nothing to rank; the tables' footnote says why), else ""."""
    config = column.keys[0].split(".")[0] if column.keys[0] else None
    found = counts(run, config) if config else None
    if found is None or not found.skipped or column.ns[0] != ".".join(filter(None, (config, found.at, "n"))):
        return ""
    return f" n={found.n} of {found.answered}"


def flagged(run: Run, column: Column) -> bool:
    """Whether a run's figure in a column says little: a flag (``baselines.flags``) of a config it reads, or of a
    pooled figure's configs."""
    pooled = registry.evaluation(run.record.benchmark).pooled
    configs = {member for key in column.keys if key for member in pooled.get(key.split(".")[0], (key.split(".")[0],))}
    return any(flag.config in configs for flag in baselines.flags(run.record))


def chance_lines(table: Table, column: Column, part_name: str | None, runs: list[Run]) -> list[tuple[str, float, str, str]]:
    """The chance lines a panel of a column draws, each (label, value in the table's scale, definition, line style):
    chance on the runs' own rows (``cells.SAME_ROWS``, the card's chance) where a run holds it for the column's
    figure, and the paper's chance level (``chance``) where it is another (``chance_definition``) or no run holds the
    first."""
    part = column.parts.index(part_name) if part_name else 0
    placed = [run for run in runs if table.methods is None or run.method in table.methods]
    same = sorted({value for run in placed if (value := same_rows_chance(run, column, part)) is not None})
    found = [(f"{SAME_ROWS} ({number(value, table)})", _scaled(value, table), SAME_ROWS_DEFINITION, CHANCE) for value in same]
    if column.chance is not None and (table.chance_definition or not same):
        definition = table.chance_definition or "the chance level of a uniform random answer over each question's options"
        label = _reference_label(table.chance_label, column.chance, table)
        found.append((label, _scaled(column.chance, table), definition, OTHER_CHANCE if table.chance_definition else CHANCE))
    return found


def chance_notes(figure: Figure, paper: PaperTables, runs: list[Run]) -> list[str]:
    """What each chance line of a figure is (``chance_lines``), one line per name, as the report states it below the
    figure."""
    if figure.kind == "bars":
        panels = [(table, column, part) for table, column, part, *_ in _bar_panels(figure, paper, runs)]
    else:
        table = paper.table(figure.panels[0]["table"])
        panels = [(table, next((c for c in table.columns if c.chance is not None), table.columns[0]), None)]
    found = {}
    for table, column, part in panels:
        for label, _, definition, _ in chance_lines(table, column, part, runs):
            found.setdefault(label.rpartition(" (")[0] or label, definition)
    ordered = sorted(found.items(), key=lambda item: item[0] != SAME_ROWS)  # the card's chance first
    return [f"{label}: {definition}." for label, definition in ordered]


def shown_name(run: Run) -> str:
    """A run's name in a figure: ⚠ after it when its figures say little (``baselines.flags``)."""
    return run.id + (" ⚠" if baselines.flags(run.record) else "")


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
    return {shown_name(run): OKABE_ITO[i % len(OKABE_ITO)] for i, run in enumerate(runs)}


def bars_figure(figure: Figure, paper: PaperTables, runs: list[Run], path: Path) -> bool:
    """Small multiples: one panel per (table, column), every published model and run as a horizontal bar,
    the chance level dashed, the paper's human row dotted, 95% intervals on the runs' bars.
    Returns False (and writes nothing) when no panel has a value."""
    panels = _bar_panels(figure, paper, runs)
    if not any(v is not None for *_, series, _ in panels for s in series for v in s.values):
        return False
    plt = _plt()
    colours = _run_colours(runs)
    ncols = figure.columns or min(len(panels), 5)
    nrows = math.ceil(len(panels) / ncols)
    shared = len({id(p[0]) for p in panels}) == 1 or len({tuple(s.name for s in p[4]) for p in panels}) == 1
    height = max(len(p[4]) for p in panels) * 0.24 + 1.1
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.0 * ncols + (1.6 if shared else 1.9 * ncols), height * nrows + 1.2),
                             squeeze=False, sharey=shared)  # fmt: skip
    for axis in axes.flat[len(panels) :]:
        axis.set_visible(False)
    lines = {}
    rows = max(len(p[4]) for p in panels)
    for axis, (table, column, part, title, series, chances) in zip(axes.flat, panels, strict=False):  # spare axes hidden
        _bar_panel(axis, table, column, part, title, series, chances, colours, lines, rows)
    _fit_labels(fig, axes, ncols, 1 if shared else ncols)
    legend = _legend(fig, plt, runs, colours, lines)
    fig.suptitle(figure.title, fontsize=11)
    inches = fig.get_size_inches()[1]
    below = legend.get_window_extent().height / fig.dpi + 0.15  # the legend's rows, and a margin
    fig.tight_layout(rect=(0, below / inches, 1, 1 - 0.45 / inches))
    _save(fig, plt, path)
    return True


def _bar_panels(figure: Figure, paper: PaperTables, runs: list[Run]) -> list[tuple]:
    """``bars_figure``'s panels: per (table, column) of the figure's panel specs, the table, the column, the part of
    the paper's table it reads, its title, its series (every published model and run) and its ``chance_lines``."""
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
            panels.append((table, column, part, title, series, chance_lines(table, column, part, runs)))
    return panels


def _bar_panel(axis, table, column, part, title: str, series, chances, colours: dict[str, str], lines: dict, rows: int) -> None:
    """One panel of ``bars_figure`` on ``axis``: a bar per series (the runs' with their intervals and values, hatched
    where ⚠), the chance and human lines (added to ``lines``, by legend label), ``rows`` bars' room whatever the
    panel holds."""
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
        hatched = s.run and s.flagged[0]
        axis.barh(i, value, color=colour, xerr=error, ecolor="#333333", capsize=2, height=0.75,
                  edgecolor="#333333" if s.run else "none", linewidth=0.6, hatch="////" if hatched else None)  # fmt: skip
        if hatched:
            lines[FLAGGED] = None
        if s.run:
            end = s.errors[0][1] if s.errors[0] is not None else value
            axis.text(min(end + full * 0.02, full * 0.86), i, number(value / full, table) + s.fewer[0], va="center", fontsize=7,
                      fontweight="bold")  # fmt: skip
    axis.set_xlim(0, full)
    for label, value, _, style in chances:
        lines[label] = axis.axvline(value, color="black", linewidth=1, linestyle=style)
    human = _reference(table, "human", column, part)
    if human is not None:
        lines["human (paper)"] = axis.axvline(human, color="#009E73", linestyle=":", linewidth=1.6)
    axis.set_title(textwrap.fill(title, 34), fontsize=9)
    axis.set_yticks(range(len(series)))
    axis.set_yticklabels([s.name for s in series], fontsize=7)
    for label, s in zip(axis.get_yticklabels(), series, strict=False):  # matplotlib may keep fewer labels than series
        if s.run:
            label.set_fontweight("bold")
    axis.set_ylim(rows - 0.5, -0.5)  # the same bar thickness in every panel
    axis.tick_params(axis="x", labelsize=7)
    axis.grid(axis="x", color="#EEEEEE", linewidth=0.6)
    axis.set_axisbelow(True)
    axis.set_xlabel("%" if table.scale == "percent" else "0–1", fontsize=7)


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
        points = [(i, v) for i, v in zip(x, s.values, strict=True) if v is not None]
        if not points:
            continue
        xs, ys = zip(*points, strict=True)
        if s.run:
            errors = [s.errors[i] for i in xs]
            low = [y - e[0] if e else 0 for y, e in zip(ys, errors, strict=True)]
            high = [e[1] - y if e else 0 for y, e in zip(ys, errors, strict=True)]
            axis.errorbar(xs, ys, yerr=[low, high], color=colours[s.name], marker="o", linewidth=2.2, capsize=3, label=s.name)
        else:  # a missing value breaks the line rather than bridging it
            axis.plot(x, [math.nan if v is None else v for v in s.values], color="#999999", marker=".", linewidth=1)
            ends.append([ys[-1], s.name, xs[-1]])
    average = next((r for r in table.rows if r.kind == "average"), None)
    if average is not None:
        values = [printed_value(average.cells[table.columns.index(c)]) for c in columns]
        axis.plot(x, values, color="black", linestyle="--", linewidth=1.5, label=f"{average.model} (paper)")
    chance_column = next((c for c in columns if c.chance is not None), None)
    for label, value, _, style in chance_lines(table, chance_column, None, runs) if chance_column else []:
        axis.axhline(value, color="black", linestyle=style, linewidth=1, label=label)
    _label_line_ends(axis, ends, 100 if table.scale == "percent" else 1)
    axis.set_xticks(x)
    axis.set_xticklabels([c.label for c in columns])
    axis.set_xlim(-0.2, len(columns) - 1 + 0.9)
    axis.set_ylim(0, 100 if table.scale == "percent" else 1)
    axis.set_ylabel("accuracy (%)" if table.scale == "percent" else "accuracy (0–1)")
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


def _fit_labels(fig, axes, ncols: int, labelled: int) -> None:
    """Widen the figure so that every panel keeps its width beside the longest bar name (``labelled``: the
    columns of panels that print their names), so nothing runs past its right edge."""
    renderer = fig.canvas.get_renderer()
    widths = [
        label.get_window_extent(renderer).width for axis in axes.flat if axis.get_visible() for label in axis.get_yticklabels()
    ]
    names = max(widths, default=0) / fig.dpi
    fig.set_size_inches(ncols * 2.9 + labelled * (names + 0.25) + 0.3, fig.get_size_inches()[1])


def _legend(fig, plt, runs, colours, lines):
    """The figure's legend at its foot, in as many columns (at most 4) as fit inside its width."""
    from matplotlib.patches import Patch

    handles = [Patch(color=PUBLISHED_GREY, label="published (paper)")]
    handles += [
        Patch(facecolor=colours[shown_name(r)], edgecolor="#333333", label=f"{shown_name(r)} (95% interval)") for r in runs
    ]
    for label, line in lines.items():
        if line is None:  # a hatched run's bar
            handles.append(Patch(facecolor="white", edgecolor="#333333", hatch="////", label=label))
        else:
            handles.append(plt.Line2D([], [], color=line.get_color(), linestyle=line.get_linestyle(), label=label))
    renderer = fig.canvas.get_renderer()
    for columns in range(min(len(handles), 4), 0, -1):
        legend = fig.legend(handles=handles, loc="lower center", ncol=columns, fontsize=8, frameon=False)
        if columns == 1 or legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
            return legend
        legend.remove()


def _save(fig, plt, path: Path) -> None:
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


DRAW = {"bars": bars_figure, "lines": lines_figure}
