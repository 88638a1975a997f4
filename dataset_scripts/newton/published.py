"""NEWTON's published Track 3 results (paper Table 6), and which scenario each of its columns is.

Table 6's columns "Scenario 1" .. "Scenario 9" are not Table 1's scenarios 1-9: they are the upstream
templates' ``tag`` s in alphabetical order (the order a pandas ``groupby("tag")`` of the authors'
``implicit_questions.csv`` lists them). Evidence: each model's "Overall" equals the question-weighted
mean of its nine columns only with that mapping (every model to 0.06 pp with physprobe's per-scenario
counts; Table 1's order misses by up to 5.4 pp); see ``tests/test_newton.py``.

>>> TABLE_6_COLUMNS[2], TABLE_6_COLUMNS[7]
('hammering', 'sandpaper_placing')
>>> by_tag("GPT-4")["hammering"]
100.0
"""

from __future__ import annotations

from physprobe.generators.newton import SCENARIOS

TABLE_6_COLUMNS = tuple(sorted(tag for tag, *_ in SCENARIOS))

# Table 6, accuracy % per column (in the paper's column order) and the Overall column.
TABLE_6 = {
    "Dolly-V2-7B": ((9.8, 7.0, 13.2, 8.1, 14.3, 7.9, 7.0, 9.1, 5.7), 8.8),
    "Flan-Alpaca-GPT4-XL": ((39.2, 81.8, 71.5, 72.0, 27.1, 65.4, 22.0, 61.1, 23.9), 48.9),
    "Flan-T5-Small": ((27.9, 33.2, 18.6, 33.8, 30.2, 31.1, 26.8, 28.8, 30.1), 29.8),
    "Flan-T5-Base": ((56.9, 47.2, 30.0, 28.1, 33.8, 36.7, 18.9, 31.5, 20.2), 34.2),
    "Flan-T5-Large": ((65.7, 57.5, 76.9, 42.2, 16.9, 79.1, 20.6, 44.1, 29.4), 46.2),
    "Flan-T5-XL": ((57.6, 78.7, 96.9, 71.5, 30.1, 74.4, 17.4, 72.9, 30.1), 54.2),
    "UnifiedQA-V2-T5-Large": ((55.6, 70.9, 83.4, 66.0, 33.8, 63.5, 39.5, 68.5, 45.1), 55.4),
    "Alpaca-LoRa-7B": ((24.4, 24.6, 26.2, 24.4, 24.1, 26.4, 24.3, 28.6, 24.5), 24.8),
    "GPT-Turbo": ((83.1, 66.9, 77.8, 60.9, 38.4, 63.4, 22.1, 64.1, 37.4), 54.7),
    "GPT-4": ((95.7, 92.5, 100.0, 77.9, 75.2, 96.8, 91.8, 50.8, 84.2), 87.7),
}


def by_tag(model: str) -> dict[str, float]:
    """A model's Table 6 accuracies keyed by upstream scenario tag."""
    return dict(zip(TABLE_6_COLUMNS, TABLE_6[model][0], strict=True))
