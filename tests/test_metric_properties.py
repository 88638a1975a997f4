"""Property-based tests: the three metric modules against independent reference implementations written
as plain loops over the definitions (random shapes, ties, empty groups, all-positive rows)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def mean(values):
    values = list(values)
    return sum(values) / len(values)


# --- probe_accuracy -------------------------------------------------------------------------
@st.composite
def probe_inputs(draw):
    n = draw(st.integers(1, 30))
    labels = st.integers(0, 3)
    predictions = draw(st.lists(labels, min_size=n, max_size=n))
    references = draw(st.lists(labels, min_size=n, max_size=n))
    # templates belong to one group: draw a template, derive its group from it
    templates = draw(st.lists(st.sampled_from(["t1", "t2", "t3", "u1", "u2", "v\x1f1"]), min_size=n, max_size=n))
    groups = [name[0] for name in templates]
    return predictions, references, groups, templates


def reference_probe(predictions, references, groups, templates):
    correct = [int(p == r) for p, r in zip(predictions, references)]
    by_template = {}
    for t, c in zip(templates, correct):
        by_template.setdefault(t, []).append(c)
    template_accuracy = {t: mean(cs) for t, cs in by_template.items()}
    group_accuracy = {}
    for g in set(groups):
        group_accuracy[g] = mean(template_accuracy[t] for t in set(t for t, gg in zip(templates, groups) if gg == g))
    return mean(correct), group_accuracy, mean(group_accuracy.values()), template_accuracy


@pytest.mark.slow
@SETTINGS
@given(probe_inputs())
def test_probe_accuracy_matches_the_definition(probe, inputs):
    predictions, references, groups, templates = inputs
    accuracy, by_group, macro, by_template = reference_probe(*inputs)
    result = probe.compute(predictions=predictions, references=references, groups=groups, templates=templates)
    assert result["accuracy"] == pytest.approx(accuracy)
    assert {g: v["accuracy"] for g, v in result["by_group"].items()} == pytest.approx(by_group)
    assert {g: v["n"] for g, v in result["by_group"].items()} == {g: groups.count(g) for g in set(groups)}
    assert {t: v["accuracy"] for t, v in result["by_template"].items()} == pytest.approx(by_template)
    assert result["macro_accuracy"] == pytest.approx(macro)


# --- agreement_accuracy -----------------------------------------------------------------------
@st.composite
def agreement_inputs(draw):
    n = draw(st.integers(1, 30))
    predictions = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    references = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    agreements = draw(st.lists(st.sampled_from([0.0, 0.5, 0.6, 0.75, 1.0]), min_size=n, max_size=n))
    groups = draw(st.lists(st.sampled_from(["soft", "sharp", "hard"]), min_size=n, max_size=n))
    reading = draw(st.sampled_from(["per_question", "global"]))
    return predictions, references, agreements, groups, reading


def reference_agreement(predictions, references, agreements, reading):
    correct = [float(p == r) for p, r in zip(predictions, references)]
    if reading == "per_question":
        value = sum(c * a for c, a in zip(correct, agreements)) / len(correct)
    else:
        value = mean(correct) * mean(agreements)
    return {"agreement_accuracy": value, "accuracy": mean(correct), "n": len(correct)}


@SETTINGS
@given(agreement_inputs())
def test_agreement_accuracy_matches_the_definition(agreement, inputs):
    predictions, references, agreements, groups, reading = inputs
    result = agreement.compute(
        predictions=predictions, references=references, agreements=agreements, groups=groups, reading=reading
    )
    expected = reference_agreement(predictions, references, agreements, reading)
    assert {k: result[k] for k in expected} == pytest.approx(expected)
    for group in set(groups):
        rows = [i for i, g in enumerate(groups) if g == group]
        pick = lambda values: [values[i] for i in rows]  # noqa: E731
        assert result["by_group"][group] == pytest.approx(
            reference_agreement(pick(predictions), pick(references), pick(agreements), reading)
        )


# --- affordance_rank --------------------------------------------------------------------------
@st.composite
def rank_inputs(draw):
    classes = draw(st.integers(1, 6))
    n = draw(st.integers(1, 12))
    score = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0])  # few values: many ties
    predictions = draw(st.lists(st.lists(score, min_size=classes, max_size=classes), min_size=n, max_size=n))
    references = draw(st.lists(st.lists(st.integers(0, 1), min_size=classes, max_size=classes), min_size=n, max_size=n))
    return predictions, references, draw(st.sampled_from(["strict", "pairwise"])), draw(st.sampled_from(["micro", "macro"]))


def average_precision(scores, labels):
    """Step-wise AP over the distinct score thresholds, high to low (ties enter together): the pessimistic reading."""
    positives = sum(labels)
    ap, seen_positive, seen = 0.0, 0, 0
    for threshold in sorted(set(scores), reverse=True):
        at = [label for s, label in zip(scores, labels) if s == threshold]
        seen += len(at)
        seen_positive += sum(at)
        ap += (sum(at) / positives) * (seen_positive / seen)
    return ap


def reference_rank(predictions, references, mode, average):
    rows = [(s, l) for s, l in zip(predictions, references) if 0 < sum(l) < len(l)]
    if not rows:
        return None
    counts = []
    for scores, labels in rows:
        pos = [s for s, l in zip(scores, labels) if l]
        neg = [s for s, l in zip(scores, labels) if not l]
        if mode == "strict":
            counts.append((sum(p > max(neg) for p in pos), len(pos)))
        else:
            counts.append((sum(p > q for p in pos for q in neg), len(pos) * len(neg)))
    if average == "micro":
        accuracy = sum(c for c, _ in counts) / sum(t for _, t in counts)
    else:
        accuracy = mean(c / t for c, t in counts)
    return {"accuracy": accuracy, "map_pessimistic": mean(average_precision(s, l) for s, l in rows), "n": len(rows),
            "skipped": len(predictions) - len(rows)}  # fmt: skip


@pytest.mark.slow
@SETTINGS
@given(rank_inputs())
def test_affordance_rank_matches_the_definition(rank, inputs):
    predictions, references, mode, average = inputs
    expected = reference_rank(*inputs)
    if expected is None:
        with pytest.raises(ValueError, match="no pair has a positive class and a negative class"):
            rank.compute(predictions=predictions, references=references, mode=mode, average=average)
        return
    result = rank.compute(predictions=predictions, references=references, mode=mode, average=average, map_ties="pessimistic")
    assert result == pytest.approx(expected)
