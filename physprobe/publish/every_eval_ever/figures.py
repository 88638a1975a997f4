"""A run's figures as Every Eval Ever evaluation results: every figure its benchmark's paper tables declare (the card's
headline figures and every group column) that the run holds, read as ``physprobe report`` reads it.

Each result is one metrics.json figure (``evaluation_result_id`` is its key, e.g. ``default.by_group.mass.accuracy``):
its value exactly as metrics.json holds it, its ``n``, the report's 95% Wilson interval, the run's seeded bootstrap
standard error where run.json holds one, and the figures on the same rows of the majority answer and of chance, the
paper's chance level, the card figure it is and the run's flags, in the result's details (text: the schema gives
baselines no field of their own). A figure the run does not hold (a config not scored, a group a ``--limit`` missed) is
left out, never written as a number.

>>> metric_id("prost", "default.macro_accuracy"), metric_id("prost", "default.by_group.mass.accuracy")
('prost.macro_accuracy', 'accuracy')
>>> lower_is_better("default.inverse_gap_by_group.mass"), lower_is_better("default.macro_accuracy")
(True, False)
"""

from __future__ import annotations

import re

from physprobe.data import registry
from physprobe.report import card as report_card
from physprobe.report.cells import baseline_cell, config_counts, lookup, run_cell, same_rows_chance, sample_spread
from physprobe.report.runs import Run
from physprobe.report.tables import Column, PaperTables, Table, paper_tables
from physprobe.run import baselines

GLOBAL_METRICS = {"accuracy": "accuracy", "map": "map"}  # figure words with a canonical id of their own
WILSON = "wilson score interval of the figure over n questions (physprobe report's interval)"


def metric_id(benchmark: str, key: str) -> str:
    """The result's ``metric_id``: ``accuracy`` or ``map`` where the figure is one, else the figure's word namespaced by
    the benchmark (``prost.macro_accuracy``)."""
    word = key.rsplit(".", 1)[-1]
    return GLOBAL_METRICS.get(word, f"{benchmark}.{word}")


def lower_is_better(key: str) -> bool:
    """Whether a smaller figure is better: a gap between two accuracies (PROST's superlative inverses)."""
    return "gap" in re.split(r"[_.]", key.lower())


def _text(value) -> str:
    """A number as the details' text: ``repr`` of a float (it reads back exactly), a whole number as it is."""
    return repr(float(value)) if isinstance(value, float) else str(value)


def declared(paper: PaperTables) -> list[tuple[Table, Column, int]]:
    """Every (table, column, part) a paper's tables declare a metrics.json key for, the first place of each key only."""
    seen, found = set(), []
    for table in paper.tables:
        for column in table.columns:
            for part, key in enumerate(column.keys):
                if key is not None and key not in seen:
                    seen.add(key)
                    found.append((table, column, part))
    return found


def card_figures(run: Run, paper: PaperTables) -> dict[str, str]:
    """Per metrics.json key, the card figure it is for this run (the card reads it through the first source whose
    table reports the run's method)."""
    return {report_card.source(row, run)[1].keys[0]: row.figure for row in paper.card}


def results(run: Run, source_data, generation: dict) -> list[dict]:
    """The run's evaluation results, in the paper tables' order; ``source_data(config)`` is a config's
    ``source_data`` object, ``generation`` the run's ``generation_config``."""
    paper = paper_tables(run.record.benchmark)
    cards = card_figures(run, paper)
    found = []
    for table, column, part in declared(paper):
        key = column.keys[part]
        cell = run_cell(run, column, part)
        value = lookup(run.metrics, key)
        if cell.missing is not None or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        config = key.split(".")[0]
        found.append({
            "evaluation_result_id": key,
            "evaluation_name": _name(paper, table, column, part),
            "source_data": source_data(config),
            "evaluation_timestamp": run.record.started,
            "metric_config": _metric_config(run, table, column, part, cards.get(key)),
            "score_details": {"score": value, "details": _details(run, table, column, part, cell),
                              "uncertainty": _uncertainty(run, key, cell)},
            "generation_config": generation,
        })  # fmt: skip
    return found


def _name(paper: PaperTables, table: Table, column: Column, part: int) -> str:
    where = table.source or "physprobe breakdown"
    return f"{paper.title} {where}: {column.name}" + (f" ({column.parts[part]})" if len(column.parts) > 1 else "")


def _metric_config(run: Run, table: Table, column: Column, part: int, card_figure: str | None) -> dict:
    key = column.keys[part]
    details = {"metrics_key": key, "table": table.id, "table_title": table.title, "column": column.name,
               "paper_scale": table.scale}  # fmt: skip
    if table.source:
        details["paper_table"] = table.source
    if len(column.parts) > 1:
        details["part"] = column.parts[part]
    if card_figure:
        details["card_figure"] = card_figure
    if table.groups and not column.summary:
        details["group_of"] = table.groups
    return {"evaluation_description": f"{table.title}: {column.label}", "metric_id": metric_id(run.record.benchmark, key),
            "metric_name": column.name, "metric_kind": key.rsplit(".", 1)[-1], "metric_unit": "proportion",
            "lower_is_better": lower_is_better(key), "score_type": "continuous",
            "min_score": -1 if lower_is_better(key) else 0, "max_score": 1,
            "additional_details": details}  # fmt: skip


def _details(run: Run, table: Table, column: Column, part: int, cell) -> dict[str, str]:
    """What the figure rests on, as text: its n and the config's counts, the majority answer's and chance's figures on
    the same rows, the paper's chance level, the headline it is, the config's flags, a sampled run's spread."""
    key = column.keys[part]
    config = key.split(".")[0]
    details = {}
    if cell.n is not None:
        details["n"] = str(cell.n)
    counts = config_counts(run.record.benchmark, run.metrics.get(config))
    if counts is not None:
        for name in ("unparsed", "undecided", "fallback", "excluded", "skipped"):
            if getattr(counts, name):
                details[name] = str(getattr(counts, name))
    majority, chance = baseline_cell(run, column, part), same_rows_chance(run, column, part)
    if majority is not None:
        details["majority_answer_same_rows"] = _text(majority)
    if chance is not None:
        details["chance_same_rows"] = _text(chance)
    if column.chance is not None:
        details["paper_chance"] = _text(float(column.chance))
        details["paper_chance_label"] = table.chance_label
    headline = run.record.headline.get(config)
    if headline is not None and f"{config}.{headline[0]}" == key:
        details["headline"] = "true"
    members = registry.evaluation(run.record.benchmark).pooled.get(config, (config,))
    flagged = [flag.text for flag in baselines.flags(run.record) if flag.config in members]
    if flagged:
        details["flags"] = " | ".join(flagged)
    if cell.spread is not None:
        details |= {"samples_drawn": str(cell.spread.drawn), "samples_mean": _text(cell.spread.mean),
                    "samples_sd": _text(cell.spread.sd)}  # fmt: skip
    return details


def _uncertainty(run: Run, key: str, cell) -> dict:
    """The figure's n, the report's Wilson interval and the run's bootstrap standard error (where it has one)."""
    out = {}
    if cell.n is not None:
        out["num_samples"] = cell.n
    if cell.interval is not None and sample_spread(run.metrics, key) is None:
        out["confidence_interval"] = {"lower": cell.interval[0], "upper": cell.interval[1], "confidence_level": 0.95,
                                      "method": WILSON}  # fmt: skip
    config, _, figure = key.partition(".")
    spread = run.record.bootstrap.figures.get(config, {}).get(figure)
    if spread is not None:
        out["standard_error"] = {"value": spread["stderr"], "method": f"bootstrap (seed {run.record.bootstrap.seed}, "
                                 f"95% percentile interval {spread['ci95'][0]!r} to {spread['ci95'][1]!r})"}  # fmt: skip
        out["num_bootstrap_samples"] = run.record.bootstrap.iterations
    return out
