"""metrics/affordance_rank: doctests, both accuracy readings and mAP worked by hand, ties, bad input."""

import evaluate
import pytest

from physprobe.dataset_scripts.text2afford.text2afford import read_tsv
from physprobe.generators.text2afford import CLASS_NAMES, from_release

from .conftest import REPO, run_metric_examples

FIGURE_10 = REPO.parent / "shared" / "data" / "samples" / "text2afford_paper_figure10.tsv"


@pytest.fixture(scope="module")
def metric():
    return evaluate.load(str(REPO / "metrics" / "affordance_rank"))


def test_docstring_examples(metric):
    outcome = run_metric_examples(metric)
    assert outcome.failed == 0 and outcome.attempted >= 7


def test_strict_pairwise_and_averages_worked_by_hand(metric):
    # Pair 1: positives 0.6 and 0.2; negatives 0.5 and 0.1. Strict: 0.6 beats both (correct), 0.2 does
    # not (wrong) -> 1/2. Pairwise: 0.6>0.5, 0.6>0.1, 0.2<0.5, 0.2>0.1 -> 3/4.
    # Pair 2: positive 0.9, negatives 0.3, 0.4, 0.8 -> strict 1/1, pairwise 3/3.
    scores = [[0.6, 0.5, 0.2, 0.1], [0.3, 0.9, 0.4, 0.8]]
    labels = [[1, 0, 1, 0], [0, 1, 0, 0]]
    strict = metric.compute(predictions=scores, references=labels, mode="strict")
    assert strict["accuracy"] == pytest.approx(2 / 3)  # (1 + 1) / (2 + 1)
    strict_macro = metric.compute(predictions=scores, references=labels, mode="strict", average="macro")
    assert strict_macro["accuracy"] == pytest.approx(0.75)
    pairwise = metric.compute(predictions=scores, references=labels)  # the default mode
    assert pairwise["accuracy"] == pytest.approx(6 / 7)
    assert metric.compute(predictions=scores, references=labels, average="macro")["accuracy"] == pytest.approx(7 / 8)
    # Pair 1 ranking: pos, neg, pos, neg -> AP = (1/1 + 2/3) / 2; pair 2: AP = 1.
    assert strict["map"] == pytest.approx(((1 + 2 / 3) / 2 + 1) / 2)


def test_ties_count_as_wrong_and_share_a_rank(metric):
    # YES/NO scores: positives 1, 1; negatives 1, 0. Strict: neither positive beats the tied negative.
    scores, labels = [[1.0, 1.0, 1.0, 0.0]], [[1, 1, 0, 0]]
    assert metric.compute(predictions=scores, references=labels, mode="strict")["accuracy"] == 0.0
    assert metric.compute(predictions=scores, references=labels)["accuracy"] == 0.5
    # The released masked-LM / NLI scripts count ties as correct (`>=`): every comparison is then won.
    assert metric.compute(predictions=scores, references=labels, ties="correct")["accuracy"] == 1.0
    assert metric.compute(predictions=scores, references=labels, mode="strict", ties="correct")["accuracy"] == 1.0
    # Three classes tie at the top, two of them positive: precision 2/3 for each positive.
    assert metric.compute(predictions=scores, references=labels)["map"] == pytest.approx(2 / 3)


def test_map_at_k(metric):
    # Ranking: neg, pos, pos, neg. AP@2 counts positives ranked within 2: only the one at rank 2,
    # precision 1/2, divided by min(2, 2 positives) -> 0.25.
    result = metric.compute(predictions=[[0.9, 0.7, 0.5, 0.1]], references=[[0, 1, 1, 0]], k=2)
    assert result["map"] == pytest.approx(0.25)


def test_figure_10_rows_perfect_and_reversed_scorers(metric):
    references = [row["labels"] for row in from_release(read_tsv(FIGURE_10, ["Sentence", "Object"]), "figure 10")]
    perfect = [[float(v) for v in labels] for labels in references]
    reversed_ = [[1.0 - v for v in labels] for labels in perfect]
    for mode in ("strict", "pairwise"):
        assert metric.compute(predictions=perfect, references=references, mode=mode) == {
            "accuracy": 1.0, "map": 1.0, "n": 10, "skipped": 0}  # fmt: skip
        assert metric.compute(predictions=reversed_, references=references, mode=mode)["accuracy"] == 0.0
    assert len(references[0]) == len(CLASS_NAMES)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"predictions": [[0.1, 0.2], [0.3]], "references": [[1, 0], [0, 1]]}, "ragged"),
        ({"predictions": [[0.1, 0.2]], "references": [[1, 2]]}, r"references\[0\] is not binary"),
        ({"predictions": [[0.1, float("nan")]], "references": [[1, 0]]}, r"predictions\[0\] contains NaN"),
        ({"predictions": [[0.1, 0.2], [0.3, 0.1]], "references": [[1, 0]]}, "predictions|references|Mismatch"),
        ({"predictions": [[0.1, 0.2, 0.3]], "references": [[1, 0]]}, "3 scores per pair but references 2"),
        ({"predictions": [[0.1, 0.2]], "references": [[1, 0]], "mode": "loose"}, "mode must be one of"),
        ({"predictions": [[0.1, 0.2]], "references": [[1, 0]], "ties": "half"}, "ties must be one of"),
        ({"predictions": [[0.1, 0.2]], "references": [[0, 0]]}, "no pair has a positive class"),
        ({"predictions": [], "references": []}, "empty|nothing"),
    ],
)
def test_bad_input_is_a_value_error(metric, kwargs, message):
    with pytest.raises(ValueError, match=message):
        metric.compute(**kwargs)
