"""Figures the papers' tables need that the scorer now writes: Text2Afford per-class accuracy
(``affordance_rank`` ``by_class``), NEWTON Track 2 Combined (Boolean and Multiple Choice pooled) and
NEWTON per attribute per polarity (Table 9). Inputs and answers worked by hand."""

import datasets
import pytest

from physprobe import report
from physprobe.dataset_scripts.newton import evaluation as newton
from physprobe.dataset_scripts.text2afford import evaluation as text2afford
from physprobe.protocols import metric_modules

CLASSES = ["grasp", "lift", "throw", "push"]


def test_by_class_counts_each_positive_class_comparisons():
    rank = metric_modules.load("affordance_rank")
    scores = [[0.5, 0.9, 0.7, 0.1], [0.8, 0.2, 0.3, 0.9], [0.4, 0.4, 0.1, 0.3]]
    labels = [[1, 0, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]]
    # Pair 1: grasp 0.5 beats push 0.1, not lift 0.9 (1/2); throw 0.7 likewise (1/2).
    # Pair 2: grasp 0.8 beats throw 0.3, not push 0.9 (1/2); lift 0.2 beats neither (0/2).
    # Pair 3: grasp 0.4 ties lift 0.4 (wrong), beats throw 0.1 and push 0.3 (2/3).
    out = rank.compute(predictions=scores, references=labels, class_names=CLASSES)
    assert out["by_class"] == {"grasp": {"accuracy": 4 / 7, "n": 3}, "lift": {"accuracy": 0.0, "n": 1},
                               "throw": {"accuracy": 0.5, "n": 1}}  # fmt: skip
    assert out["accuracy"] == pytest.approx(5 / 11)  # the same 11 comparisons, all classes together: (4 + 0 + 1) / (7 + 2 + 2)
    macro = rank.compute(predictions=scores, references=labels, class_names=CLASSES, average="macro")["by_class"]
    assert macro["grasp"]["accuracy"] == pytest.approx((1 / 2 + 1 / 2 + 2 / 3) / 3)
    strict = rank.compute(predictions=scores, references=labels, class_names=CLASSES, mode="strict")["by_class"]
    # strict: a positive class is right when it beats every negative: none does (pair 3's grasp only ties lift).
    assert strict == {"grasp": {"accuracy": 0.0, "n": 3}, "lift": {"accuracy": 0.0, "n": 1}, "throw": {"accuracy": 0.0, "n": 1}}
    ties = rank.compute(predictions=scores, references=labels, class_names=CLASSES, mode="strict", ties="correct")
    assert ties["by_class"]["grasp"] == {"accuracy": 1 / 3, "n": 3}  # pair 3: 0.4 >= 0.4, 0.1, 0.3
    with pytest.raises(ValueError, match="class_names has 3 names but there are 4 classes"):
        rank.compute(predictions=scores, references=labels, class_names=CLASSES[:3])


def test_text2afford_metrics_write_by_class_for_both_modes():
    rows = [{"labels": [1, 0] + [0] * 13}, {"labels": [0, 1] + [1] + [0] * 12}]
    scores = [[0.9, 0.1] + [0.5] * 13, [0.2, 0.8, 0.1] + [0.3] * 12]
    out = text2afford.metrics("default", rows, [None, None], scores)
    # Grasp (pair 1) beats all 14 negatives; Lift (pair 2) beats 13 of 13, Throw 0.1 beats none of 13.
    assert out["pairwise"]["by_class"] == {"Grasp": {"accuracy": 1.0, "n": 1}, "Lift": {"accuracy": 1.0, "n": 1},
                                           "Throw": {"accuracy": 0.0, "n": 1}}  # fmt: skip
    assert out["pairwise"]["accuracy"] == pytest.approx((14 + 13) / (14 + 26))
    assert set(out["strict"]["by_class"]) == {"Grasp", "Lift", "Throw"}


def _newton_rows():
    boolean = [  # attribute, polarity, label, prediction
        ("Softness", "pos", 0, 0), ("Softness", "pos", 1, 0), ("Softness", "neg", 1, 1), ("Sharpness", "neg", 0, 0),
    ]  # fmt: skip
    mc = [("Softness", "pos", 2, 2), ("Softness", "neg", 3, 0), ("Sharpness", "pos", 1, 1), ("Sharpness", "neg", 0, None)]
    rows = {name: [{"attribute": a, "polarity": p, "label": label} for a, p, label, _ in data]
            for name, data in (("track2_boolean", boolean), ("track2_mc", mc))}  # fmt: skip
    predictions = {"track2_boolean": [x[3] for x in boolean], "track2_mc": [x[3] for x in mc]}
    return rows, predictions


def test_newton_track2_by_attribute_and_polarity():
    rows, predictions = _newton_rows()
    out = newton.metrics("track2_boolean", rows["track2_boolean"], predictions["track2_boolean"], [[]] * 4)
    softness = out["by_group"]["Softness"]
    assert softness["accuracy"] == pytest.approx(2 / 3)
    assert softness["by_polarity"] == {"pos": {"accuracy": 0.5, "n": 2}, "neg": {"accuracy": 1.0, "n": 1}}
    assert out["by_group"]["Sharpness"]["by_polarity"] == {"neg": {"accuracy": 1.0, "n": 1}}
    assert out["by_polarity"]["pos"] == {"accuracy": 0.5, "n": 2}


def test_newton_track2_combined_pools_boolean_and_multiple_choice():
    rows, predictions = _newton_rows()
    outcomes = {c: (rows[c], predictions[c], [[]] * 4) for c in rows}
    pooled = newton.EVALUATION.pooled_metrics(outcomes)["track2"]
    # 8 questions, right: Softness pos/pos-wrong/neg, Sharpness neg; MC Softness pos, Sharpness pos -> 5 of 8;
    # the unparsed MC answer (None) counts as wrong.
    assert (pooled["n"], pooled["undecided"], pooled["accuracy"]) == (8, 1, 5 / 8)
    assert pooled["by_group"]["Softness"]["accuracy"] == pytest.approx(3 / 5)
    assert pooled["by_group"]["Sharpness"]["by_polarity"] == {"neg": {"accuracy": 0.5, "n": 2}, "pos": {"accuracy": 1.0, "n": 1}}
    assert "by_position" not in pooled  # options differ in number between the two kinds
    assert newton.EVALUATION.pooled_metrics({"track2_boolean": outcomes["track2_boolean"]}) == {}


def test_table_5_combined_is_the_question_weighted_pool_of_its_two_parts(built_all):
    """NEWTON Table 5: every model's Combined figure (each attribute and Overall) is the question-weighted mean
    of its Boolean and Multiple Choice figures, with this build's question counts, to the printed rounding:
    what pooling both configs' questions (``track2``) computes. GPT-4's Multiple Choice Overall is Table 9's
    78.7; Table 5 prints 87.7, its Track 3 Overall."""
    counts = {}
    for config in ("track2_boolean", "track2_mc"):
        data = datasets.load_dataset(str(built_all / "newton"), config, split="test")
        counts[config] = [sum(1 for a in data["attribute"] if a == name) for name in ATTRIBUTES] + [len(data)]
    paper = report.paper_tables("newton")
    tables = [paper.table(t) for t in ("table5_boolean", "table5_mc", "table5_combined")]
    checked = 0
    for rows in zip(*(t.rows for t in tables)):
        assert len({row.model for row in rows}) == 1
        if rows[0].kind != "model":
            continue
        for i, (b, m, c) in enumerate(zip(*([report.printed_value(cell) for cell in row.cells] for row in rows))):
            if rows[0].model == "GPT-4" and i == 8:
                m = 78.7  # Table 9's Multiple Choice Overall
            nb, nm = counts["track2_boolean"][i], counts["track2_mc"][i]
            assert abs((nb * b + nm * m) / (nb + nm) - c) <= 0.1, (rows[0].model, tables[2].columns[i].name)
            checked += 1
    assert checked == 90  # ten models, eight attributes and Overall


ATTRIBUTES = [
    "Elasticity",
    "Stiffness",
    "Surface smoothness",
    "Surface Hardness",
    "Softness",
    "Brittleness",
    "Malleability",
    "Sharpness",
]  # the order of Table 5's columns
