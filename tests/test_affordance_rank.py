"""metrics/affordance_rank: doctests, both accuracy readings and mAP worked by hand, ties, bad input."""

import evaluate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    # Three classes tie at the top, two of them positive. In class order (the released sort) the two positives
    # come first: AP 1. Pessimistically each is ranked third with two positives ahead: precision 2/3 each.
    assert metric.compute(predictions=scores, references=labels)["map"] == 1.0
    pessimistic = metric.compute(predictions=scores, references=labels, map_ties="pessimistic")
    assert pessimistic["map_pessimistic"] == pytest.approx(2 / 3) and "map" not in pessimistic


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
        ({"predictions": [[0.1, 0.2]], "references": [[1, 0]], "map_ties": "random"}, "map_ties must be one of"),
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


# --- the released scripts' own computation, rebuilt by hand -------------------------------------------------


def released_apk(actual, predicted, k=10):
    # src/utils/eval.py apk, as released.
    if len(predicted) > k:
        predicted = predicted[:k]
    score, num_hits = 0.0, 0.0
    for i, p in enumerate(predicted):
        if p in actual and p not in predicted[:i]:
            num_hits += 1.0
            score += num_hits / (i + 1.0)
    if not actual:
        return 0.0
    return score / min(len(actual), k)


def released_question(scores, labels, classes, strict_greater):
    """One pair as src/probing.py:191-231 (and multi_choice.py:111-152, zero_shot_llama-3.py:152-199) process it:
    scores in a dict in class order, sorted by score (a stable sort), positives/negatives from the labels (a NaN
    cell, here -1, in neither), the pairwise counts (`>=`, or `>` for the YES/NO scripts) and apk@15."""
    predicted = dict(zip(classes, scores))
    ranked = list(dict(sorted(predicted.items(), key=lambda item: item[1], reverse=True)).keys())
    positives = [c for c, label in zip(classes, labels) if label == 1]
    negatives = [c for c, label in zip(classes, labels) if label == 0]
    correct = wrong = 0
    for pos in positives:
        for neg in negatives:
            won = predicted[pos] > predicted[neg] if strict_greater else predicted[pos] >= predicted[neg]
            correct, wrong = correct + won, wrong + (not won)
    return correct, wrong, released_apk(positives, ranked, 15)


def test_average_precision_of_tied_scores_worked_by_hand(metric):
    # 15 classes, masked-LM style: classes 0, 2 and 5 are <unk> (0.1 each), class 9 scores 0.5, the rest 0.0.
    # Positives: 2 and 9. Stable sort: 9 (0.5), then 0, 2, 5 (0.1, class order), then the rest.
    # Ranks: class 9 first (precision 1/1), class 2 third (2/3) -> AP (1 + 2/3) / 2 = 5/6.
    scores = [0.0] * 15
    scores[0] = scores[2] = scores[5] = 0.1
    scores[9] = 0.5
    labels = [0] * 15
    labels[2] = labels[9] = 1
    assert metric.compute(predictions=[scores], references=[labels])["map"] == pytest.approx(5 / 6)
    assert released_question(scores, labels, CLASS_NAMES, strict_greater=False)[2] == pytest.approx(5 / 6)
    # Pessimistic: class 2 ties with 0 and 5, so it is ranked fourth with two positives ahead: (1 + 2/4) / 2.
    assert metric.compute(predictions=[scores], references=[labels], map_ties="pessimistic")["map_pessimistic"] == 0.75


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]), min_size=15, max_size=15),
            st.lists(st.sampled_from([0, 1, 1, -1]), min_size=15, max_size=15),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_each_question_as_the_released_scripts_compute_it(metric, pairs):
    # Scores from a few values (ties everywhere, as <unk> class words and YES/NO answers make them).
    kept = [(s, l) for s, l in pairs if 1 in l and 0 in l]
    if not kept:
        return
    released = [released_question(s, l, CLASS_NAMES, strict_greater=True) for s, l in kept]
    ours = metric.compute(predictions=[s for s, _ in pairs], references=[l for _, l in pairs])
    assert ours["map"] == pytest.approx(sum(ap for _, _, ap in released) / len(released))
    assert ours["accuracy"] == pytest.approx(sum(c for c, _, _ in released) / sum(c + w for c, w, _ in released))
    correct_ties = metric.compute(predictions=[s for s, _ in pairs], references=[l for _, l in pairs], ties="correct")
    released = [released_question(s, l, CLASS_NAMES, strict_greater=False) for s, l in kept]
    assert correct_ties["accuracy"] == pytest.approx(sum(c for c, _, _ in released) / sum(c + w for c, w, _ in released))
    assert ours["n"] == len(kept) and ours["skipped"] == len(pairs) - len(kept)
