"""What a figure must be to read at a glance, checked on the drawn figure (matplotlib's renderer gives every artist's
box in pixels): no Markdown or code markup in its text, no text crossed by a line, a whisker or another text, text at
least ``MIN_PX`` high once the page shows the PNG at its width, a run's bar too short to see marked in its colour,
a legend listing only what is drawn, and no panel with nothing in it.

``problems(fig)`` lists what a figure breaks, one line each (empty: it reads); ``capturing(monkeypatch)`` collects
every figure the report saves, by file name, with its problems."""

from __future__ import annotations

import re

import numpy as np

MIN_PX = 11  # the smallest text height (its font size) a reader is asked to read, in CSS pixels
MARKUP = re.compile(r"`|\*\*|\]\(|(?<![\w*])_[a-z]")  # code spans, bold, links, Markdown emphasis


def _saved_scale(fig, dpi: float, page_width: float) -> float:
    """CSS pixels per point of the saved PNG as the page shows it: at ``dpi``, shrunk to ``page_width`` if wider."""
    width = fig.get_size_inches()[0] * dpi
    return dpi / 72 * min(1.0, page_width / width)


def texts(fig) -> list:
    """Every visible text drawn: titles, tick and axis labels, texts and annotations, legends', the figure's own."""
    found = list(fig.texts) + ([fig._suptitle] if fig._suptitle is not None else [])
    for legend in fig.legends + [a.get_legend() for a in fig.axes if a.get_legend() is not None]:
        found += list(legend.get_texts()) + [legend.get_title()]
    for axis in (a for a in fig.axes if a.get_visible()):
        found += [axis.title, axis._left_title, axis._right_title, axis.xaxis.label, axis.yaxis.label, *axis.texts]
        found += [*axis.get_xticklabels(), *axis.get_yticklabels()]
    return list({id(t): t for t in found if t.get_visible() and t.get_text().strip()}.values())  # each once


def _lines(axis) -> list:
    """(kind, display path) of every line drawn on ``axis``: Line2D lines, errorbar whiskers (LineCollections)."""
    paths = []
    for line in axis.lines:
        if line.get_visible() and line.get_linestyle() not in ("None", "", " ") and len(line.get_xdata()) > 1:
            paths.append(line.get_transform().transform_path(line.get_path()))
    for collection in axis.collections:
        if collection.get_visible():
            transform = collection.get_transform()
            paths += [transform.transform_path(p) for p in collection.get_paths()]
    return paths


def _markers(axis, renderer) -> list:
    """The boxes of every marker drawn on ``axis`` (errorbar caps, points)."""
    boxes = []
    for line in axis.lines:
        if not line.get_visible() or line.get_marker() in (None, "None", "", " "):
            continue
        size = line.get_markersize() * axis.figure.dpi / 72 / 2
        points = line.get_transform().transform(np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float))
        boxes += [(x - size, y - size, x + size, y + size) for x, y in points if np.isfinite(x) and np.isfinite(y)]  # NaN: a gap
    return boxes


def _overlap(a, b, slack: float = 1.0) -> bool:
    return min(a[2], b[2]) - max(a[0], b[0]) > slack and min(a[3], b[3]) - max(a[1], b[1]) > slack


def problems(fig, dpi: float, page_width: float) -> list[str]:
    """What ``fig`` (drawn, as it will be saved at ``dpi`` and shown at most ``page_width`` px wide) breaks."""
    from matplotlib.transforms import Bbox

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found, scale = [], _saved_scale(fig, dpi, page_width)
    shown = texts(fig)
    boxes = [t.get_window_extent(renderer) for t in shown]
    for text in shown:
        if MARKUP.search(text.get_text()):
            found.append(f"markup in {text.get_text()!r}")
        if text.get_fontsize() * scale < MIN_PX - 1e-6:
            found.append(f"{text.get_fontsize() * scale:.1f} px text {text.get_text()[:40]!r}")
    for i, j in ((i, j) for i in range(len(shown)) for j in range(i + 1, len(shown))):
        if _overlap(boxes[i].extents, boxes[j].extents):
            found.append(f"texts overlap: {shown[i].get_text()[:40]!r} and {shown[j].get_text()[:40]!r}")
    for axis in (a for a in fig.axes if a.get_visible()):
        paths, markers = _lines(axis), _markers(axis, renderer)
        for text, box in zip(shown, boxes):
            if text.axes is not axis or text in (*axis.get_xticklabels(), *axis.get_yticklabels()):
                continue
            inner = Bbox(box.get_points())
            if any(path.intersects_bbox(inner, filled=False) for path in paths) or any(_overlap(box.extents, m) for m in markers):
                found.append(f"a line crosses {text.get_text()[:40]!r}")
        found += _hidden_runs(axis, renderer) + _empty(axis)
    found += _legend_problems(fig)
    return found


def _bars(axis):
    from matplotlib.patches import Rectangle

    return [p for p in axis.patches if isinstance(p, Rectangle) and p.get_visible()]


def _hidden_runs(axis, renderer) -> list[str]:
    """A coloured bar under 3 px wide (a zero) needs a marker of its colour on its row."""
    out = []
    for bar in _bars(axis):
        if bar.get_window_extent(renderer).width >= 3:
            continue
        colour = bar.get_facecolor()[:3]
        row = bar.get_y() + bar.get_height() / 2
        marked = any(line.get_marker() not in (None, "None", "") and np.allclose(_rgb(line.get_color()), colour, atol=0.01)
                     and np.any(np.isclose(np.asarray(line.get_ydata(), float), row)) for line in axis.lines)  # fmt: skip
        if not marked:
            out.append(f"a bar of {bar.get_x() + bar.get_width():g} has no marker in its colour on {axis.get_title()!r}")
    return out


def _rgb(colour) -> tuple:
    from matplotlib.colors import to_rgb

    return to_rgb(colour)


def _empty(axis) -> list[str]:
    """A panel drawn with no bar and no marked point."""
    drawn = [b for b in _bars(axis) if b.get_width() != 0 or b.get_height() != 0]
    points = [line for line in axis.lines if line.get_marker() not in (None, "None", "") or len(line.get_xdata()) > 2]
    return [] if drawn or points else [f"panel {axis.get_title()!r} is empty"]


def _legend_problems(fig) -> list[str]:
    """Each legend entry stands for something drawn: a patch of its colour (and hatch), a line of its colour and
    style."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    axes = [a for a in fig.axes if a.get_visible()]
    out = []
    for legend in fig.legends + [a.get_legend() for a in axes if a.get_legend() is not None]:
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            if isinstance(handle, Patch):
                colour, hatch = handle.get_facecolor()[:3], handle.get_hatch()
                drawn = any((hatch and b.get_hatch() == hatch) or (not hatch and np.allclose(b.get_facecolor()[:3], colour, atol=0.01))
                            for a in axes for b in _bars(a))  # fmt: skip
            elif isinstance(handle, Line2D):
                drawn = any(np.allclose(_rgb(line.get_color()), _rgb(handle.get_color()), atol=0.01)
                            and line.get_linestyle() == handle.get_linestyle() for a in axes for line in a.lines)  # fmt: skip
                drawn = drawn or any(len(a.containers) for a in axes) and handle.get_marker() not in (None, "None", "")
            else:
                drawn = True
            if not drawn:
                out.append(f"legend lists {text.get_text()!r}, not drawn")
    return out


def capturing(monkeypatch, modules, dpi: float, page_width: float) -> dict[str, list[str]]:
    """Every figure the report saves through ``_save`` of ``modules``, by file name, with its ``problems``."""
    found: dict[str, list[str]] = {}
    for module in modules:
        save = module._save

        def check(fig, plt, path, save=save):
            found[path.name] = problems(fig, dpi, page_width)
            save(fig, plt, path)

        monkeypatch.setattr(module, "_save", check)
    return found
