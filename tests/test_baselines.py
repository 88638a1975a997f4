"""Baselines and flags (``physprobe.run.baselines``): the majority, constant and chance figures of real rows, each
worked out here from the rows alone (label counts, agreements, class frequencies), against what the benchmark's
metric wiring gives for those answers; the flags of a run of constant or fallback answers; the fallback rules
the protocols declare."""

import dataclasses
from collections import Counter

import pyarrow.parquet as pq
import pytest

from physprobe.data import registry
from physprobe.protocols import Protocol
from physprobe.protocols.requests import Generate
from physprobe.protocols.results import Answer
from physprobe.record.run_record import Baselines
from physprobe.run import baselines

from .run_folders import record


def rows_of(built_all, benchmark, config, count):
    table = pq.read_table(next((built_all / benchmark / config).glob("*.parquet"))).to_pylist()
    return [table[i * len(table) // count] for i in range(count)]


@pytest.mark.parametrize("config", ["track1", "track2_mc"])
def test_newton_baselines_are_the_label_counts_and_agreements(built_all, config):
    rows = rows_of(built_all, "newton", config, 40)
    labels = [row["label"] for row in rows]
    options = [len(row["choices"]) for row in rows]
    found = baselines.compute(registry.evaluation("newton"), config, rows, options, [0] * len(rows), [[]] * len(rows))
    majority = max(sorted(set(labels)), key=labels.count)
    assert found.majority_answer == majority
    assert found.majority["accuracy"] == pytest.approx(labels.count(majority) / len(rows))
    for k in range(min(options)):
        assert found.constant[str(k)]["accuracy"] == pytest.approx(labels.count(k) / len(rows))
    assert found.chance["accuracy"] == pytest.approx(sum(1 / o for o in options) / len(rows))
    if config == "track1":  # Eq. 1: a right answer counts its question's agreement
        agreements = [row["agreement"] for row in rows]
        assert found.majority["agreement_accuracy"] == pytest.approx(
            sum(a for a, l in zip(agreements, labels) if l == majority) / len(rows)
        )
        assert found.chance["agreement_accuracy"] == pytest.approx(sum(a / o for a, o in zip(agreements, options)) / len(rows))
    assert (found.answered, found.commonest, found.commonest_answer) == (len(rows), len(rows), 0)


def pairwise(rows, scores, ties_correct):
    """Pairwise accuracy (Text2Afford Appendix G) by counting, micro-averaged over the rows with both classes."""
    right = total = 0
    for row, score in zip(rows, scores):
        positives = [c for c, label in enumerate(row["labels"]) if label]
        negatives = [c for c, label in enumerate(row["labels"]) if not label]
        if positives and negatives:
            for p in positives:
                for n in negatives:
                    right += score[p] > score[n] or (ties_correct and score[p] == score[n])
                    total += 1
    return right / total


@pytest.mark.parametrize("protocol", ["yes-no-falcon", "mlm-released-probing"])  # ties wrong, ties correct
def test_text2afford_baselines_rank_classes_by_frequency_and_ties_follow_the_protocol(built_all, protocol):
    rows = rows_of(built_all, "text2afford", "default", 30)
    options = registry.evaluation("text2afford").protocol(protocol).metric_options
    ties_correct = options.get("ties") == "correct"
    found = baselines.compute(registry.evaluation("text2afford"), "default", rows, [15] * len(rows), [None] * len(rows),
                              [[0.5] * 15] * len(rows), **options)  # fmt: skip
    prior = [sum(row["labels"][c] for row in rows) / len(rows) for c in range(15)]
    assert found.majority_answer is None
    assert found.majority["pairwise"]["accuracy"] == pytest.approx(pairwise(rows, [prior] * len(rows), ties_correct))
    # Every class tied: each comparison is a tie, wrong or right as the protocol's released script counts it.
    assert set(found.constant) == {"tied"} and found.constant["tied"]["pairwise.accuracy"] == (1.0 if ties_correct else 0.0)
    assert found.chance["pairwise.accuracy"] == pytest.approx(0.5)  # each class above another as often as below
    assert (found.answered, found.commonest) == (len(rows), len(rows))  # every row ranked its classes alike (all tied)


def test_masked_cccons_answers_are_two_objects_not_four_words(built_all):
    rows = rows_of(built_all, "cccons", "ordinary", 20)
    labels = [row["label"] for row in rows]
    protocol = registry.evaluation("cccons").protocol("mask-four")
    found = baselines.compute(
        registry.evaluation("cccons"), "ordinary", rows, [protocol.answers] * len(rows), labels, [[]] * len(rows)
    )
    assert set(found.constant) == {"0", "1"} and found.chance["accuracy"] == pytest.approx(0.5)
    assert found.constant["1"]["accuracy"] == pytest.approx(labels.count(1) / len(rows))


def flagged(**counts):
    """The flags of a NEWTON Track 1 record whose baselines hold ``counts`` (answered, commonest, fallback)."""
    base = Baselines(0, {"agreement_accuracy": 0.8}, {"0": {"agreement_accuracy": 0.8}}, {"agreement_accuracy": 0.27},
                     counts["answered"], counts["commonest"], 0)  # fmt: skip
    metrics = {"track1": {"agreement_accuracy": 0.65, "n": 5, "fallback": counts.get("fallback", 0)}}
    return baselines.flags(
        dataclasses.replace(record("newton", "generate", metrics, "released-generate"), baselines={"track1": base})
    )


def test_flags_name_constant_and_fallback_answers_and_nothing_else():
    (constant,) = flagged(answered=4, commonest=4)
    assert constant.kind == "constant" and constant.text.startswith("track1: 4 of 4 answers are the first option")
    assert "majority answer (the first option) 0.8, best constant (the first option) 0.8, chance 0.27" in constant.text
    assert flagged(answered=10, commonest=8) == []  # 80%: below the 90% that reads as one answer
    assert flagged(answered=2, commonest=2) == []  # too few answers to tell
    (fallback,) = flagged(answered=4, commonest=2, fallback=3)
    assert fallback.kind == "fallback" and fallback.text == (
        "track1: 3 of 4 answers were decided by protocol released-generate's fallback rule (the answer names several "
        "options (as one echoing the question's options does) and the first is taken)"
    )


def test_declared_fallback_rules_count_echoed_questions():
    cccons = registry.evaluation("cccons").protocol("question-generate")
    request = Generate("Which is bigger, a key or a key box?", ("key", "key box"))
    echoed = Answer("The question: which is bigger, a key or a key box?")
    assert cccons.outcome(echoed, request)[1:4:2] == (0, True)  # prediction, fell back
    assert cccons.outcome(Answer("A key box."), request)[1:4:2] == (1, False)
    assert not cccons.outcome(Answer("Neither."), request).fell_back  # unparsed, not a fallback
    newton = registry.evaluation("newton").protocol("released-generate")
    options = Generate("Which is softer? \\n (a) rock (b) pillow", ("rock", "pillow"))
    assert (
        newton.outcome(Answer(" (a) rock (b) pillow"), options).fell_back
        and not newton.outcome(Answer(" (b) pillow"), options).fell_back
    )
    with pytest.raises(ValueError, match="a fallback rule belongs to a Generate protocol, with its fallback_reason"):
        Protocol("p", Generate, lambda row, config: None, "s", "s", match=lambda t, c: 0, fallback=lambda t, c: True)
    assert Counter(p.fallback is not None for p in registry.evaluation("newton").protocols) == Counter({True: 4, False: 4})
