"""The papers' published tables as Every Eval Ever records: one record per row of every table of every benchmark's
``paper_tables.yaml``, its source the paper (``documentation``: aggregate figures only), its results the row's printed
numbers.

A record's ``source_metadata`` names the paper (its citation, its authors as the organisation), the table (its
number, id and title) and holds the row's printed cells exactly (``printed_cells``: column name -> cell, JSON; a cell
the paper leaves empty, ``—`` or ``-``, and one the transcription lost, null, are there as they are). Each result is a
printed number in the paper's own scale (``metric_unit`` percent or proportion): one per cell holding a number, one per
part of a cell printed as several (``3.1 / 3.3 / 2.8``), with the cell as printed in its details (marks such as ``*``
and a printed ``±`` spread kept there: the schema's uncertainty fields describe other quantities). The model is named as
the paper prints it: the paper gives no Hub id, and the developer is ``unknown``.

>>> cells = dict(printed_cells("prost", "table5", 0))
>>> cells["Direction"], cells["Macro Average"]
('46.7', '26.1')
"""

from __future__ import annotations

import json

from physprobe.data import registry
from physprobe.publish.every_eval_ever.figures import lower_is_better
from physprobe.publish.every_eval_ever.record import SCHEMA_VERSION, UNKNOWN, model_path_parts
from physprobe.report.cells import printed_value
from physprobe.report.tables import Column, PaperTables, Row, Table, paper_tables


def printed_cells(benchmark: str, table_id: str, index: int) -> list[tuple[str, str | None]]:
    """A row's cells as printed, by column name."""
    table = paper_tables(benchmark).table(table_id)
    return list(zip([c.name for c in table.columns], table.rows[index].cells, strict=True))


def rows() -> list[tuple[str, PaperTables, Table, int, Row]]:
    """Every row of every table of every benchmark, in the files' order: (benchmark, paper, table, index, row)."""
    return [(benchmark, paper, table, index, row) for benchmark in registry.names() for paper in [paper_tables(benchmark)]
            for table in paper.tables for index, row in enumerate(table.rows)]  # fmt: skip


def record(benchmark: str, paper: PaperTables, table: Table, index: int, row: Row, retrieved: str, converter: str) -> dict:
    """The record of one printed row; ``retrieved``: the Unix time it is written, ``converter``: physprobe's version."""
    model_id = row.model
    details = {"paper": paper.paper, "table_id": table.id, "table_title": table.title, "row": row.model, "row_index": str(index),
               "row_kind": row.kind, "scale": table.scale, "digits": str(table.digits),
               "printed_cells": json.dumps(dict(zip([c.name for c in table.columns], row.cells, strict=True)), ensure_ascii=False),
               "transcribed_in": f"physprobe/dataset_scripts/{benchmark}/paper_tables.yaml"}  # fmt: skip
    for key, value in (
        ("table", table.source),
        ("section", row.section),
        ("note", row.note),
        ("table_notes", " | ".join(table.notes)),
    ):
        if value:
            details[key] = value
    developer, _ = model_path_parts(model_id)
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": f"{benchmark}-{table.id}/{model_id}/{retrieved}",
        "retrieved_timestamp": retrieved,
        "source_metadata": {"source_name": paper.paper, "source_type": "documentation",
                            "source_organization_name": paper.paper.split(",")[0],
                            "evaluator_relationship": "third_party" if row.kind == "model" else "other",
                            "additional_details": details},
        "model_info": {"name": row.model, "id": model_id, "developer": developer,
                       "additional_details": {"deployment_type": UNKNOWN, "model_availability": UNKNOWN, "row_kind": row.kind}},
        "eval_library": {"name": UNKNOWN, "version": UNKNOWN, "additional_details": {"converted_by": f"physprobe {converter}"}},
        "evaluation_results": [result for column, cell in zip(table.columns, row.cells, strict=True)
                               for result in results(benchmark, paper, table, column, cell)],
    }  # fmt: skip


def results(benchmark: str, paper: PaperTables, table: Table, column: Column, cell: str | None) -> list[dict]:
    """The evaluation results of one printed cell: one per part holding a number (none for ``—``, ``-`` or a lost cell)."""
    found = []
    for part, name in enumerate(column.parts):
        value = printed_value(cell, part)
        if value is None:
            continue
        several = len(column.parts) > 1
        key = column.keys[part]
        extra = (
            {"table": table.id, "column": column.name}
            | ({"part": name} if several else {})
            | ({"metrics_key": key} if key else {})
        )
        found.append({
            "evaluation_result_id": f"{table.id}.{column.name}" + (f".{name}" if several else ""),
            "evaluation_name": f"{paper.title} {table.source}: {column.name}" + (f" ({name})" if several else ""),
            "source_data": {"dataset_name": paper.title, "source_type": "other", "additional_details": {"benchmark": benchmark}},
            "metric_config": {"evaluation_description": f"{table.title}: {column.label}", "metric_name": column.name,
                              "metric_unit": "percent" if table.scale == "percent" else "proportion",
                              "lower_is_better": bool(key) and lower_is_better(key),
                              "score_type": "continuous", "min_score": 0, "max_score": 100 if table.scale == "percent" else 1,
                              "additional_details": extra},
            "score_details": {"score": value, "details": {"printed": cell}},
        })  # fmt: skip
    return found
