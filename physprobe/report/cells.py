"""A run's cell in a published table: its value read from metrics.json, n, Wilson interval, the printed format,
or why it is missing.

>>> wilson(0.0, 10)[0]
0.0
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from physprobe.data import registry
from physprobe.protocols import COUNTS
from physprobe.report.runs import Run, run_protocol
from physprobe.report.tables import Column, Table

Z95 = 1.959963984540054  # two-sided 95% normal quantile
SAME_ROWS = "chance, same rows"  # the card's chance and every figure's, under one name and one definition
SAME_ROWS_DEFINITION = ("the expected figure of an answer drawn uniformly at random for each question, scored by the same "
                        "metric on the run's own rows")  # fmt: skip
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
    column's among them), empty (the cell's n is 0: nothing the figure could be computed over), sample (a ``--limit`` run scored no question of the column), or key (metrics.json
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
    spread: Spread | None = None  # a sampled run's figure over its samples (``sample_spread``)


@dataclass(frozen=True)
class Counts:
    """What a config's figures rest on, as its metrics.json counts it whatever the benchmark's layout: ``n``, the
    questions behind its headline figure; ``skipped``, questions the metric left out of every figure (nothing to
    compute over, ``Evaluation.skipped_reason``); ``excluded``, questions the protocol left out; ``unparsed``,
    ``undecided`` and ``fallback`` among the answered ones (``answered``: n and skipped); ``at``, the node n is read
    from ("" for the config's top level, ``pairwise`` for Text2Afford's)."""

    n: int
    skipped: int = 0
    excluded: int = 0
    unparsed: int = 0
    undecided: int = 0
    fallback: int = 0
    at: str = ""

    @property
    def answered(self) -> int:
        return self.n + self.skipped

    def share(self, count: int) -> float:
        """``count`` as a share of the answered questions (0 without any)."""
        return count / self.answered if self.answered else 0.0


def config_counts(benchmark: str, scored) -> Counts | None:
    """The ``Counts`` of one config's (or pooled figure's) metrics: ``n`` at its top level, else beside the
    benchmark's headline figure (``Evaluation.headline``); None where neither holds one. The one place the card and
    every table read n and the shares from.

    >>> config_counts("prost", {"n": 20, "undecided": 1, "accuracy": 0.5})
    Counts(n=20, skipped=0, excluded=0, unparsed=0, undecided=1, fallback=0, at='')
    >>> config_counts("text2afford", {"pairwise": {"n": 18, "skipped": 2, "accuracy": 0.0}, "strict": {"n": 18}})
    Counts(n=18, skipped=2, excluded=0, unparsed=0, undecided=0, fallback=0, at='pairwise')
    """
    if not isinstance(scored, dict):
        return None
    nodes = [("", scored)] + [(at, lookup(scored, at)) for key in registry.evaluation(benchmark).headline
                              for at in [key.rpartition(".")[0]] if at]  # fmt: skip
    at, node = next(((at, node) for at, node in nodes if isinstance(node, dict) and _count(node, "n") is not None), ("", None))
    if node is None:
        return None
    found = {name: _count(scored, name) or _count(node, name) or 0 for name in ("skipped", "excluded", "unparsed", "undecided",
                                                                              "fallback")}  # fmt: skip
    return Counts(_count(node, "n"), **found, at=at)


def _count(node: dict, name: str) -> int | None:
    value = node.get(name)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def counts(run: Run, config: str) -> Counts | None:
    """A run's ``config_counts`` of ``config``."""
    return config_counts(run.record.benchmark, run.metrics.get(config))


def _config_names(benchmark: str) -> set[str]:
    return set(registry.config_names(benchmark))


def _why_missing(run: Run, column: Column, key: str) -> Missing:
    """Why metrics.json has no ``key``: the first reason that holds."""
    config = key.split(".")[0]
    scored = run.metrics.get(config)
    if not isinstance(scored, dict):
        pooled = registry.evaluation(run.record.benchmark).pooled.get(config)
        if pooled:
            return Missing("pooled", f"{config}|{','.join(pooled)}", run.id)
        if config in _config_names(run.record.benchmark):
            return Missing("config", config, run.id)
        return Missing("key", key, run.id)
    figures = set(scored) - set(COUNTS)
    if not figures and scored.get("n") and scored.get("undecided") == scored.get("n"):
        return Missing("undecided", config, run.id)
    if run.record.protocol in column.excluded_by:
        protocol = run_protocol(run)
        why = f": {protocol.skip_reason}" if protocol is not None and protocol.skip_reason else ""
        return Missing("excluded", f"protocol `{run.record.protocol}` leaves this column's questions out{why}", run.id)
    if run.record.limit and "." in key:
        return Missing("sample", f"{config}|{run.record.limit}", run.id)
    return Missing("key", key, run.id)


def run_cell(run: Run, column: Column, part: int) -> RunCell:
    """One part of a run's cell for a column: its value, n and 95% interval, or why it is missing."""
    key, n_key = column.keys[part], column.ns[part]
    if key is None:
        return RunCell(None, None, None, Missing("why", column.why, run.id))
    value = lookup(run.metrics, key)
    if value is MISSING and n_key and lookup(run.metrics, n_key) == 0:
        return RunCell(None, None, None, Missing("empty", f"{key.split('.')[0]}|{n_key}", run.id))
    if value is MISSING:
        return RunCell(None, None, None, _why_missing(run, column, key))
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        return RunCell(None, None, None, Missing("key", key, run.id))
    n = lookup(run.metrics, n_key) if n_key else MISSING
    n = int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0 else None
    spread = sample_spread(run.metrics, key)
    value = float(value) if spread is None else spread.mean  # a sampled run's cell is its mean over the samples
    interval = wilson(min(max(value, 0.0), 1.0), n) if n else None
    return RunCell(value, n, interval, None, spread)


@dataclass(frozen=True)
class Spread:
    """A figure of a run sampled ``drawn`` times (``physprobe score --samples K``): its ``mean`` and standard deviation
    ``sd`` over the samples (metrics.json ``<config>.samples``); the run's figure itself is its first sample's."""

    mean: float
    sd: float
    drawn: int

    NOTE = ("a sampled run (`--decoding released --samples K`): its mean ± standard deviation over the K samples "
            "(metrics.json `samples`), n its first sample's; figures draw the mean")  # fmt: skip


def sample_spread(metrics: dict, key: str) -> Spread | None:
    """The spread of figure ``key`` (``config.figure``) over a sampled config's samples; None where the config was
    answered once (or the figure is pooled over configs, which keep their first sample's only).

    >>> sample_spread({"c": {"accuracy": 0.5, "samples": {"drawn": 3, "mean": {"accuracy": 0.55}, "sd": {"accuracy": 0.05}}}},
    ...               "c.accuracy")
    Spread(mean=0.55, sd=0.05, drawn=3)
    >>> sample_spread({"c": {"accuracy": 0.5}}, "c.accuracy") is None
    True
    """
    config, _, figure = key.partition(".")
    samples = metrics.get(config, {}).get("samples") if isinstance(metrics.get(config), dict) else None
    if not isinstance(samples, dict) or not figure:
        return None
    mean, sd = lookup(samples.get("mean", {}), figure), lookup(samples.get("sd", {}), figure)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (mean, sd)):
        return None
    return Spread(float(mean), float(sd), int(samples["drawn"]))


def groups_held(run: Run, table: Table) -> tuple[list[str], list[str]]:
    """Of a table declaring its groups (``Table.groups``: its columns other than the summary ones), those the run has
    a figure for, and those its ``--limit`` sample held no question of (``Missing`` sample or empty), by column name;
    the others (a protocol's exclusion, ...) have footnotes of their own. Both empty for a table without groups."""
    if table.groups is None:
        return [], []
    cells = {c.name: run_cell(run, c, 0) for c in table.columns if not c.summary and c.keys[0] is not None}
    return (
        [name for name, cell in cells.items() if cell.value is not None],
        [name for name, cell in cells.items() if cell.missing is not None and cell.missing.kind in ("sample", "empty")],
    )


def baseline_cell(run: Run, column: Column, part: int) -> float | None:
    """The figure a column shows for the run's majority answer on the same rows (``Baselines.majority``), or None."""
    return _baseline(run, column, part, lambda found, figure: lookup(found.majority, figure))


def same_rows_chance(run: Run, column: Column, part: int = 0) -> float | None:
    """Chance on the run's rows for a column's figure (``Baselines.chance``, ``SAME_ROWS_DEFINITION``), or None where
    the run holds none for it (a breakdown by group, a run without baselines)."""
    return _baseline(run, column, part, lambda found, figure: found.chance.get(figure))


def _baseline(run: Run, column: Column, part: int, read) -> float | None:
    """What ``read(baselines, figure)`` finds for the column's figure in the run's baselines of its config, as a
    number, or None."""
    key = column.keys[part]
    if key is None:
        return None
    config, _, figure = key.partition(".")
    found = run.record.baselines.get(config)
    value = read(found, figure) if found is not None and figure else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
