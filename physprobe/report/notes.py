"""The footnotes of a table: numbered marks, and the texts saying why a cell is missing, why a run does not
compare with the paper, or what its protocol left out."""

from __future__ import annotations

import re

from physprobe.data import registry
from physprobe.report.cells import Missing, counts, groups_held
from physprobe.report.runs import Run, run_protocol
from physprobe.report.tables import PaperTables, Table

_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _mark(number_: int) -> str:
    return str(number_).translate(_SUPERSCRIPT)


class Footnotes:
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
        elif kind == "empty":
            config, n_key = detail.split("|")
            text = (f"{who}: no question of `{config}` could be scored for this figure (`{n_key}` is 0, e.g. no pair with "
                    f"both a positive and a negative class among a --limit run's rows): no value, no interval")  # fmt: skip
        elif kind == "sample":
            config, limit = detail.split("|")
            text = (f"{who} scored no question of this column (or none it decided) among the --limit {limit} "
                    f"questions of `{config}`")  # fmt: skip
        else:
            segments = zip(*(m.detail.split(".") for m in members), strict=False)  # the segments all share
            pattern = ".".join(s[0] if len(set(s)) == 1 else "*" for s in segments)
            text = f"metrics.json of {who} has no `{pattern}`"
        texts.update({m: text for m in members})
    return texts


def paper_marker(cell: str, table: Table) -> str | None:
    """The footnote of a marker a printed cell ends with (PROST Table 5's ``46.7*``): the table's note that opens with
    it, naming the table; None for a cell without one (or a marker the table's notes do not explain).

    >>> from physprobe.report.tables import paper_tables
    >>> paper_marker("46.7*", paper_tables("prost").table("table5"))[:52]
    '* in Table 5: T5 and UnifiedQA are not evaluated on '
    """
    marker = re.search(r"[*†‡§]+$", cell.strip())
    if marker is None:
        return None
    note = next((n for n in table.notes if n.startswith(marker.group(0) + " ")), None)
    if note is None:
        return None
    return f"{marker.group(0)} in {table.source or table.title}: {note[len(marker.group(0)) + 1 :]}"


def protocol_warning(run: Run, paper: PaperTables) -> str | None:
    """Why a run's numbers may not compare with the paper's, or None when its protocol is the paper's."""
    names = paper.protocols.get(run.method)
    used = run.record.protocol
    if names is None:
        return f"run {run.id} used method `{run.method}`; the paper reports no model scored that way"
    expected = " or ".join(f"`{name}`" for name in names)
    if used not in names:
        return (f"run {run.id} used protocol `{used}`; the paper's `{run.method}` models used {expected}: "
                f"its numbers do not compare one to one with the published rows")  # fmt: skip
    return None


def coverage(run: Run, table: Table) -> str | None:
    """A footnote for a run's summary figure of ``table`` that spans fewer of its groups than the paper's because its
    ``--limit`` sample held no question of some (``cells.groups_held``); None when that left none out."""
    held, missing = groups_held(run, table)
    if not missing:
        return None
    total = sum(not c.summary and c.keys[0] is not None for c in table.columns)
    return (f"run {run.id}: over {len(held)} of the paper's {total} {table.groups}; its --limit "
            f"{run.record.limit} sample held no question of {', '.join(missing)}")  # fmt: skip


def apart_note(run: Run) -> str | None:
    """A footnote for a run whose protocol the paper reports outside its averages (``Protocol.reported_apart``)."""
    protocol = run_protocol(run)
    if protocol is None or not protocol.reported_apart:
        return None
    return (f"run {run.id} used `{protocol.name}`, which the paper reports apart: its models are left out of "
            f"the paper's average rows")  # fmt: skip


def exclusion(run: Run, config: str) -> str | None:
    """What a run's protocol left out of ``config`` (metrics.json ``excluded``), as a footnote; None if nothing.

    The figures of that config are over the other questions (PROST Table 5 marks such averages with *).
    """
    found = counts(run, config)
    count = found.excluded if found is not None else 0
    if not count:
        return None
    protocol = run_protocol(run)
    why = f" ({protocol.skip_reason})" if protocol is not None and protocol.skip_reason else ""
    return (f"protocol `{run.record.protocol}` leaves out {count} question{'s' if count > 1 else ''} of "
            f"`{config}`{why}; this overall figure is over the other questions")  # fmt: skip


def answered(run: Run, config: str) -> str | None:
    """What a run's figures of ``config`` rest on, where some questions got no plain answer: the unparsed,
    undecided and fallback shares of its answered questions (``cells.counts``); None when every question got one."""
    found = counts(run, config)
    if found is None or not found.answered:
        return None
    total = found.answered
    parts = [f"{count} of {total} ({100 * found.share(count):.0f}%) {what}" for count, what in (
        (found.unparsed, "answers named no option (unparsed, counted wrong)"),
        (found.undecided, "questions undecided (left out of the figures)"),
        (found.fallback, "answers decided by the protocol's fallback rule"),
    ) if count]  # fmt: skip
    return f"`{config}`: " + "; ".join(parts) if parts else None


def left_out(run: Run, config: str) -> str | None:
    """A footnote for a run whose ``config`` figures rest on fewer questions than it answered: the metric left some
    out of every figure (metrics.json ``skipped``, ``Evaluation.skipped_reason``); None when it left none out.

    Text2Afford's n=18 of 20 rows: two rows had no class pair to rank.
    """
    found = counts(run, config)
    if found is None or not found.skipped:
        return None
    reason = registry.evaluation(run.record.benchmark).skipped_reason
    where = f"{config}.{found.at + '.' if found.at else ''}skipped"
    return (f"run {run.id}: n={found.n} of the {found.answered} questions of `{config}` it answered: the metric left "
            f"{found.skipped} out of every figure (metrics.json `{where}`)" + (f": {reason}" if reason else ""))  # fmt: skip
