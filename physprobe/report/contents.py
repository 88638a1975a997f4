"""The report's opening and its map: what the report is (models, benchmarks, when and with which physprobe the runs
were made, each benchmark's data revision, the commands), read from the runs' records alone so that the same runs give
the same bytes; an anchor for every benchmark, table, figure and Differences section; and the contents linking them.

>>> blocks = [Heading(2, "PROST"), Heading(3, "Table 5: Accuracy"), Image(Path("x.png"), "figures/prost-concepts.png", "x")]
>>> [b.anchor for b in anchored(blocks)]
['prost', 'prost-table-5-accuracy', 'figure-prost-concepts']
>>> [(depth, text, target) for depth, text, target in contents(blocks).items]
[(0, 'PROST', '#prost'), (1, 'Table 5: Accuracy', '#prost-table-5-accuracy'), (2, 'Figure: x', '#figure-prost-concepts')]
"""

from __future__ import annotations

import re
from pathlib import Path

from physprobe.protocols.model_options import model_shown
from physprobe.report.blocks import Heading, Image, Links, Notes, Paragraph
from physprobe.report.runs import Run
from physprobe.report.tables import paper_tables

TOP = "top"  # the report's title: every section links back to it
CONTENTS = "contents"


def slug(text: str) -> str:
    """An anchor's text: lower-case letters and digits, joined by hyphens.

    >>> slug("Table 5: Macro Average (%)")
    'table-5-macro-average'
    """
    return "-".join(re.findall(r"[a-z0-9]+", text.lower())) or "section"


def _revisions(runs: list[Run]) -> str:
    """Each benchmark's data: where its rows came from and each config's revision, as the runs recorded them."""
    shown = []
    for benchmark in sorted({r.record.benchmark for r in runs}):
        found: dict[str, set[str]] = {}
        sources = set()
        for run in (r for r in runs if r.record.benchmark == benchmark):
            data = run.record.dataset
            sources.add(f"{data.source} {Path(data.path).name if data.source == 'local' else data.path}"
                        + (f"@{data.revision[:12]}" if data.revision else ""))  # fmt: skip
            for config, revision in sorted(data.revisions.items()):
                found.setdefault(config, set()).add(revision.removeprefix("sha256:")[:12])
        configs = ", ".join(f"{config} {'/'.join(sorted(revs))}" for config, revs in found.items())
        shown.append(f"{benchmark}: {'; '.join(sorted(sources))} ({configs})")
    return "; ".join(shown)


def header(runs: list[Run]) -> list:
    """The report's title and what it is: a list of its models, benchmarks, dates, physprobe versions, data
    revisions and the commands that made its runs, every entry read from the runs' records."""
    records = [r.record for r in runs]
    started = sorted(r.started for r in records)
    versions = sorted({r.versions.get("physprobe") or "unknown" for r in records})
    models = list(dict.fromkeys(f"{run.id} ({model_shown(run.record.model)})" if run.id != model_shown(run.record.model)
                                else run.id for run in runs))  # fmt: skip
    benchmarks = [paper_tables(b).title for b in sorted({r.benchmark for r in records})]
    items = [f"Models: {', '.join(models)}", f"Benchmarks: {', '.join(benchmarks)}",
             f"Runs made: {started[0] if started[0] == started[-1] else f'{started[0]} to {started[-1]}'} (UTC)",
             f"physprobe: {', '.join(versions)}", f"Data: {_revisions(runs)}"]  # fmt: skip
    for run in runs:
        command = " ".join(run.record.command) if run.record.command else "(not recorded)"
        items.append(f"Command of {run.record.benchmark} run {run.id}: `{command}`")
    return [Heading(1, "physprobe report", TOP), Notes(items, css="about")]


def anchored(blocks: list) -> list:
    """The blocks with an anchor on every heading (its benchmark's first, then its own text, unique in the report)
    and every figure (its file's name); blocks that carry one keep it."""
    taken: set[str] = {TOP, CONTENTS}
    section = ""
    for block in blocks:
        if isinstance(block, Heading) and not block.anchor and block.level > 1:
            section = slug(block.text) if block.level == 2 else section
            block.anchor = _unique(section if block.level == 2 else f"{section}-{slug(block.text)}", taken)
        elif isinstance(block, Image) and not block.anchor:
            block.anchor = _unique(f"figure-{slug(Path(block.name).stem)}", taken)
        else:
            continue
        taken.add(block.anchor)
    return blocks


def _unique(anchor: str, taken: set[str]) -> str:
    found, place = anchor, 1
    while found in taken:
        place += 1
        found = f"{anchor}-{place}"
    return found


def contents(blocks: list) -> Links:
    """The contents: each section heading (depth 0: a benchmark or the card; 1: a table, figures, Differences) and
    each figure (depth 2), linked by its anchor."""
    items = []
    for block in blocks:
        if isinstance(block, Heading) and block.anchor and block.level > 1:
            items.append((block.level - 2, block.text, f"#{block.anchor}"))
        elif isinstance(block, Image) and block.anchor:
            items.append((2, f"Figure: {block.alt}", f"#{block.anchor}"))
    return Links(items, "Contents", css=CONTENTS)


def with_map(opening: list, rest: list) -> list:
    """The report: its opening (``header``), the contents of ``rest`` and ``rest``, every section anchored."""
    body = anchored(rest)
    return [*opening, Paragraph("Every section's heading links back to the top (↑)."), contents(body), *body]
