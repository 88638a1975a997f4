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
SAVE_DPI = 110
MAX_WIDTH = 12.4  # inches: the page's width (writers.PAGE_WIDTH px) at SAVE_DPI, so a figure is shown at its own size
FONT = 8  # points: 12.2 px at SAVE_DPI, the smallest text a figure prints (at least 11 px on the page)
TITLE = 11
PANEL = 3.3  # inches a panel of bars takes, its label lane included
LANE, LANE_GAP = 0.5, 0.03  # the label lane right of 100%, as a share of the axis's 0-100%, and the gap before a value
NAME_WIDTH = 26  # characters a bar's name takes a line
SHORT = 0.03  # a bar under this share of the axis is marked (``_mark_short``): under about 5 px


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
    return [f"{label[:1].upper()}{label[1:]}: {definition}." for label, definition in ordered]


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
    """Small multiples: one panel per (table, column) with a value, every published model and run as a horizontal
    bar, the chance level dashed, the paper's human row dotted, 95% intervals on the runs' bars, each run's value in
    the panel's label lane right of 100% (``LANE``), so that no line crosses it; as many panels a row as keep the
    figure within the page's width (``MAX_WIDTH``). Returns False (and writes nothing) when no panel has a value."""
    panels = [p for p in _bar_panels(figure, paper, runs) if any(v is not None for s in p[4] for v in s.values)]
    if not panels:
        return False
    plt = _plt()
    colours = _run_colours(runs)
    shared = len({id(p[0]) for p in panels}) == 1 or len({tuple(s.name for s in p[4]) for p in panels}) == 1
    names = max(len(line) for p in panels for s in p[4] for line in _name(s.name).splitlines()) * FONT * 0.6 / 72
    ncols = _columns(len(panels), figure.columns, names, shared)
    nrows = math.ceil(len(panels) / ncols)
    height = max(len(p[4]) for p in panels) * 0.3 + 1.3
    fig, axes = plt.subplots(nrows, ncols, figsize=(PANEL * ncols + names, height * nrows + 1.2), squeeze=False, sharey=shared)
    for axis in axes.flat[len(panels) :]:
        axis.set_visible(False)
    lines = {}
    rows = max(len(p[4]) for p in panels)
    for axis, (table, column, part, title, series, chances) in zip(axes.flat, panels, strict=False):  # spare axes hidden
        _bar_panel(axis, table, column, part, title, series, chances, colours, lines, rows)
    _fit_labels(fig, axes, ncols, 1 if shared else ncols)
    drawn = {s.name for p in panels for s in p[4] if any(v is not None for v in s.values)}
    legend = _legend(fig, plt, [r for r in runs if shown_name(r) in drawn], colours, lines, drawn)
    fig.suptitle(figure.title, fontsize=TITLE)
    inches = fig.get_size_inches()[1]
    below = legend.get_window_extent().height / fig.dpi + 0.15  # the legend's rows, and a margin
    fig.tight_layout(rect=(0, below / inches, 1, 1 - 0.45 / inches))
    _save(fig, plt, path)
    return True


def _columns(panels: int, declared: int | None, names: float, shared: bool) -> int:
    """Panels a row: the declared number (else 5) or fewer, as many as fit ``MAX_WIDTH`` beside the bars' names."""
    for ncols in range(min(panels, declared or 5), 1, -1):
        if PANEL * ncols + names * (1 if shared else ncols) + 0.4 <= MAX_WIDTH:
            return ncols
    return 1


def _name(name: str) -> str:
    """A bar's name as its panel prints it: wrapped at ``NAME_WIDTH`` characters."""
    return textwrap.fill(name, NAME_WIDTH)


def _bar_panels(figure: Figure, paper: PaperTables, runs: list[Run]) -> list[tuple]:
    """``bars_figure``'s panels: per (table, column) of the figure's panel specs, the table, the column, the part of
    the paper's table it reads, its title, its series (every run, and each published model with a value in one of the
    figure's panels) and its ``chance_lines``."""
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
    valued = {s.name for p in panels for s in p[4] if any(v is not None for v in s.values)}
    return [(*p[:4], [s for s in p[4] if s.run or s.name in valued], p[5]) for p in panels]  # no row of a model with no value


def _bar_panel(axis, table, column, part, title: str, series, chances, colours: dict[str, str], lines: dict, rows: int) -> None:
    """One panel of ``bars_figure`` on ``axis``: a bar per series (the runs' with their intervals and values, hatched
    where ⚠; one too short to see marked in its colour, ``_mark_short``), the chance and human lines (added to
    ``lines``, by legend label), ``rows`` bars' room whatever the panel holds; values in the lane right of 100%."""
    full = 100 if table.scale == "percent" else 1
    for i, s in enumerate(series):
        value = s.values[0]
        if value is None:
            if s.run:
                axis.text(full * (1 + LANE_GAP), i, "no value", va="center", fontsize=FONT, color="#555555", style="italic")
            continue
        colour = colours[s.name] if s.run else PUBLISHED_GREY
        error = None
        if s.errors[0] is not None:
            error = [[value - s.errors[0][0]], [s.errors[0][1] - value]]
        hatched = s.run and s.flagged[0]
        axis.barh(i, value, color=colour, xerr=error, ecolor="#333333", capsize=2, height=0.75,
                  edgecolor="#333333" if s.run else "none", linewidth=0.6, hatch="////" if hatched else None)  # fmt: skip
        _mark_short(axis, value, i, colour, full)
        if hatched:
            lines[FLAGGED] = None
        if s.run:
            axis.text(full * (1 + LANE_GAP), i, number(value / full, table) + s.fewer[0], va="center", fontsize=FONT,
                      fontweight="bold")  # fmt: skip
    _lane(axis, full, LANE)
    for label, value, _, style in chances:
        lines[label] = axis.plot([value] * 2, [-0.5, rows - 0.5], color="black", linewidth=1, linestyle=style)[0]
    human = _reference(table, "human", column, part)
    if human is not None:
        lines["human (paper)"] = axis.plot([human] * 2, [-0.5, rows - 0.5], color="#009E73", linestyle=":", linewidth=1.6)[0]
    axis.set_title(textwrap.fill(title, 30), fontsize=FONT + 1)
    axis.set_yticks(range(len(series)))
    axis.set_yticklabels([_name(s.name) for s in series], fontsize=FONT)
    for label, s in zip(axis.get_yticklabels(), series, strict=False):  # matplotlib may keep fewer labels than series
        if s.run:
            label.set_fontweight("bold")
    axis.set_ylim(rows - 0.5, -0.5)  # the same bar thickness in every panel
    axis.set_xlabel("%" if table.scale == "percent" else "0–1", fontsize=FONT)


def _mark_short(axis, value: float, row: float, colour: str, full: float) -> None:
    """A bar too short to see (a zero) gets a diamond in its colour, so every run is drawn whatever its value."""
    if value < full * SHORT:
        axis.plot([value], [row], marker="D", markersize=6, color=colour, markeredgecolor="#333333", linestyle="none",
                  clip_on=False)  # fmt: skip


def _lane(axis, full: float, lane: float) -> None:
    """The axis from 0 to 100% (``full``) with ticks and grid, and a label lane past it to ``full * (1 + lane)``."""
    axis.set_xlim(0, full * (1 + lane))
    axis.set_xticks([full * x / 4 for x in range(5)])
    axis.tick_params(axis="x", labelsize=FONT)
    axis.grid(axis="x", color="#EEEEEE", linewidth=0.6)
    axis.set_axisbelow(True)


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
    fig, axis = plt.subplots(figsize=(9.5, 6.2))
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
            ends.append([ys[-1], s.name])
    average = next((r for r in table.rows if r.kind == "average"), None)
    if average is not None:
        values = [printed_value(average.cells[table.columns.index(c)]) for c in columns]
        axis.plot(x, values, color="black", linestyle="--", linewidth=1.5, label=f"{average.model} (paper)")
    chance_column = next((c for c in columns if c.chance is not None), None)
    for label, value, _, style in chance_lines(table, chance_column, None, runs) if chance_column else []:
        axis.plot([x[0], x[-1]], [value] * 2, color="black", linestyle=style, linewidth=1, label=label)
    _label_line_ends(axis, ends, 100 if table.scale == "percent" else 1, x[-1])
    axis.set_xticks(x)
    axis.set_xticklabels([c.label for c in columns], fontsize=FONT + 1)
    axis.tick_params(axis="y", labelsize=FONT + 1)
    axis.set_xlim(-0.2, len(columns) - 1 + 1.1)
    axis.set_ylim(0, 100 if table.scale == "percent" else 1)
    axis.set_ylabel("accuracy (%)" if table.scale == "percent" else "accuracy (0–1)")
    axis.grid(axis="y", color="#EEEEEE")
    handles, labels = axis.get_legend_handles_labels()
    legend = fig.legend(handles, labels, loc="lower center", ncol=min(3, len(handles)) or 1, fontsize=FONT,
                        title="grey: published models (paper), named at their right end", title_fontsize=FONT, frameon=False)  # fmt: skip
    axis.set_title(textwrap.fill(figure.title, 80), fontsize=TITLE)
    inches = fig.get_size_inches()[1]
    fig.tight_layout(rect=(0, (legend.get_window_extent(fig.canvas.get_renderer()).height / fig.dpi + 0.1) / inches, 1, 1))
    _save(fig, plt, path)
    return True


def _label_line_ends(axis, ends: list, full: float, last: float) -> None:
    """Name each published line right of the last column (``last``), at the height of its last value, nudging
    labels apart so none overlap."""
    ends.sort()
    gap = full * 0.04
    for i in range(1, len(ends)):
        ends[i][0] = max(ends[i][0], ends[i - 1][0] + gap)
    for y, name in ends:
        axis.annotate(name, (last + 0.1, y), fontsize=FONT, color="#555555", va="center")


def _fit_labels(fig, axes, ncols: int, labelled: int) -> None:
    """Widen the figure so that every panel keeps its width beside the longest bar name (``labelled``: the
    columns of panels that print their names), so nothing runs past its right edge."""
    renderer = fig.canvas.get_renderer()
    widths = [
        label.get_window_extent(renderer).width for axis in axes.flat if axis.get_visible() for label in axis.get_yticklabels()
    ]
    names = max(widths, default=0) / fig.dpi
    fig.set_size_inches(ncols * PANEL + labelled * (names + 0.25) + 0.3, fig.get_size_inches()[1])


def _legend(fig, plt, runs, colours, lines, drawn: set[str] | None = None):
    """The figure's legend at its foot, in as many columns (at most 4) as fit inside its width: the runs given, the
    published models' grey where one of ``drawn`` (the series drawn; None: every) is a published model, and
    ``lines``."""
    from matplotlib.patches import Patch

    names = {shown_name(r) for r in runs}
    published = drawn is None or any(name not in colours for name in drawn)
    handles = [Patch(color=PUBLISHED_GREY, label="published (paper)")] if published else []
    handles += [
        Patch(facecolor=colours[name], edgecolor="#333333", label=f"{name} (95% interval)") for name in colours if name in names
    ]
    for label, line in lines.items():
        if line is None:  # a hatched run's bar
            handles.append(Patch(facecolor="white", edgecolor="#333333", hatch="////", label=label))
        else:
            handles.append(plt.Line2D([], [], color=line.get_color(), linestyle=line.get_linestyle(), label=label))
    renderer = fig.canvas.get_renderer()
    for columns in range(min(len(handles), 4), 0, -1):
        legend = fig.legend(handles=handles, loc="lower center", ncol=columns, fontsize=FONT, frameon=False)
        if columns == 1 or legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
            return legend
        legend.remove()


def _save(fig, plt, path: Path) -> None:
    """``fig`` saved as ``path`` and closed; an ``OSError`` (a full disk) names ``path``."""
    try:
        fig.savefig(path, dpi=SAVE_DPI, metadata={"Software": None})
    except OSError as error:
        raise OSError(error.errno, error.strerror or str(error), str(path)) from None
    finally:
        plt.close(fig)


DRAW = {"bars": bars_figure, "lines": lines_figure}
