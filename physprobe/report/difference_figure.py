"""The Differences section's figure: each tested difference of a benchmark's comparisons with its 95% paired
interval, on the card's scale, a line at zero, a filled marker where the difference is significant after Holm's
correction (``Difference.differs``). A label names the figure once (the run is the marker's colour, in the legend);
labels are wrapped and the figure sized so that no text leaves it (``tests/test_compare.py`` checks its text).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from physprobe.report.figures import OKABE_ITO, _plt, _save

LABEL_WIDTH = 40  # characters of a wrapped label


def label(name: str) -> str:
    """A figure's name as a y-axis label: the table's short name and the column, wrapped.

    >>> label("Accuracy per affordance class (a physprobe breakdown; the paper prints no per-class table): Grasp")
    'Accuracy per affordance class: Grasp'
    """
    table, _, column = name.rpartition(": ")
    short = table.split(" (")[0] if table else ""
    return textwrap.fill(f"{short}: {column}" if short else column, LABEL_WIDTH)


def draw_figure(section):
    """The figure as a matplotlib Figure (None where no difference is tested), for ``draw`` and the tests."""
    shown = [(c, d) for c in section.comparisons for d in c.differences if d.tested and d.low is not None]
    if not shown:
        return None
    plt = _plt()
    from matplotlib.ticker import MaxNLocator

    names = list(dict.fromkeys(d.figure.name for _, d in shown))
    runs = list(dict.fromkeys(c.other for c, _ in shown))
    lines = sum(label(n).count("\n") + 1 for n in names)
    fig, axis = plt.subplots(figsize=(8.5, 0.2 * lines + 0.25 * len(shown) + 2.0))
    offsets = {run: (i - (len(runs) - 1) / 2) * 0.25 for i, run in enumerate(runs)}
    percent = shown[0][1].figure.percent
    scale = 100 if percent else 1
    for comparison, d in shown:
        colour = OKABE_ITO[runs.index(comparison.other) % len(OKABE_ITO)]
        y = names.index(d.figure.name) + offsets[comparison.other]
        delta, low, high = (scale * v for v in (d.delta, d.low, d.high))
        axis.errorbar(delta, y, xerr=[[delta - low], [high - delta]], fmt="o", capsize=3, color=colour,
                      markerfacecolor=colour if d.differs else "white", label=comparison.other)  # fmt: skip
    axis.axvline(0, color="#444444", linewidth=1)
    axis.set_yticks(range(len(names)))
    axis.set_yticklabels([label(n) for n in names], fontsize=8)
    axis.set_ylim(len(names) - 0.5, -0.5)
    axis.xaxis.set_major_locator(MaxNLocator(nbins=7, steps=[1, 2, 2.5, 5, 10]))
    axis.tick_params(axis="x", labelsize=8)
    axis.grid(axis="x", color="#EEEEEE", linewidth=0.6)
    axis.set_axisbelow(True)
    unit = "points" if percent else "0–1"
    axis.set_xlabel(f"B − A ({unit}), 95% paired interval over resampled units; filled: p (Holm) < 0.05", fontsize=8)
    axis.set_title(textwrap.fill(f"{section.benchmark}: differences from {section.reference}", 80), fontsize=10)
    handles, seen = [], set()
    for handle, name in zip(*axis.get_legend_handles_labels(), strict=True):
        if name not in seen:
            seen.add(name)
            handles.append((handle, name))
    axis.legend([h for h, _ in handles], [n for _, n in handles], fontsize=8, loc="best", title="B", title_fontsize=8)
    fig.tight_layout()
    return fig


def draw(section, path: Path) -> bool:
    """Draw the figure to ``path``; False (nothing written) where no difference is tested."""
    fig = draw_figure(section)
    if fig is None:
        return False
    _save(fig, _plt(), path)
    return True
