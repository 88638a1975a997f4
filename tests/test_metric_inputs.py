"""Bad metric inputs are a ValueError naming the argument and the first bad index, before evaluate's int64
cast can turn them into something else; affordance_rank skips and counts rows with nothing to rank;
group and template keys never merge."""

import math

import pytest

LABEL_CASES = [
    ({"predictions": [0.0, 1.7], "references": [0, 1]}, r"predictions\[0\] = 0.0 is not an integer option index"),
    ({"predictions": [0, 1], "references": [0, 1.5]}, r"references\[1\] = 1.5 is not an integer option index"),
    ({"predictions": [0, math.nan], "references": [0, 1]}, r"predictions\[1\] = nan is not an integer"),
    ({"predictions": [0, True], "references": [0, 1]}, r"predictions\[1\] = True is not an integer"),
    ({"predictions": ["1"], "references": [1]}, r"predictions\[0\] = '1' is not an integer"),
    ({"predictions": [], "references": []}, "predictions is empty"),
    ({"predictions": [0, 1], "references": [0]}, "2 predictions but 1 references"),
]


@pytest.mark.parametrize("kwargs, message", LABEL_CASES)
def test_probe_and_agreement_accuracy_reject_labels_before_the_cast(probe, agreement, kwargs, message):
    for metric in (probe, agreement):
        with pytest.raises(ValueError, match=message):
            metric.compute(**kwargs)
        with pytest.raises(ValueError, match=message):
            metric.add_batch(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"predictions": [0, 1, 2], "references": [0, 1, 1], "num_choices": 2},
            r"predictions\[2\] = 2 is out of range for num_choices=2",
        ),
        (
            {"predictions": [0, 1], "references": [0, 1], "positions": [1, math.nan], "position_reading": "question_mean"},
            r"positions\[1\] = nan is not an integer",
        ),
        ({"predictions": [0, 1], "references": [0, 1], "groups": ["a", None]}, r"groups\[1\] = None"),
        (
            {"predictions": [0, 1], "references": [0, 1], "groups": [1, "1"]},
            r"groups\[1\] = '1': every groups entry must be a key of the same type",
        ),
        (
            {"predictions": [0, 1], "references": [0, 1], "groups": ["a", "b"], "templates": ["t", "t"]},
            r"templates\[1\] = 't' is in groups 'a' and 'b'",
        ),
    ],
)
def test_probe_accuracy_rejects_bad_breakdown_inputs(probe, kwargs, message):
    with pytest.raises(ValueError, match=message):
        probe.compute(**kwargs)


def test_template_names_with_separators_stay_apart(probe):
    # Joined as group + "\x1f" + template, ("g", "t\x1fx") and ("g\x1ft", "x") used to be one template.
    result = probe.compute(predictions=[0, 0], references=[0, 1], groups=["g", "g\x1ft"], templates=["t\x1fx", "x"])
    assert result["by_template"] == {"t\x1fx": {"accuracy": 1.0, "n": 1}, "x": {"accuracy": 0.0, "n": 1}}
    assert result["by_group"] == {"g": {"accuracy": 1.0, "n": 1}, "g\x1ft": {"accuracy": 0.0, "n": 1}}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"predictions": [0, 1], "references": [0, -1]}, r"references\[1\] = -1 is not an option index"),
        (
            {"predictions": [0, 1], "references": [0, 1], "agreements": [1.0, math.nan]},
            r"agreements\[1\] = nan is outside \[0, 1\]",
        ),
        ({"predictions": [0, 1], "references": [0, 1], "agreements": [1.0, math.inf]}, r"agreements\[1\] = inf is outside"),
        ({"predictions": [0, 1], "references": [0, 1], "agreements": [1.0, "x"]}, r"agreements\[1\] = 'x' is not a number"),
        ({"predictions": [0, 1], "references": [0, 1], "agreements": [1.0]}, "agreements has 1 entries but there are 2"),
        ({"predictions": [0, 1], "references": [0, 1], "groups": [2, "2"]}, r"groups\[1\] = '2'"),
    ],
)
def test_agreement_accuracy_rejects_bad_inputs(agreement, kwargs, message):
    with pytest.raises(ValueError, match=message):
        agreement.compute(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"predictions": [[0.1, math.nan]], "references": [[1, 0]]}, r"predictions\[0\] contains NaN, inf"),
        ({"predictions": [[0.1, 0.2], [0.1, math.inf]], "references": [[1, 0], [1, 0]]}, r"predictions\[1\] contains NaN, inf"),
        ({"predictions": [[0.1, 0.2], [0.3]], "references": [[1, 0], [1, 0]]}, "predictions is ragged"),
        ({"predictions": [[0.1, 0.2]], "references": [[1, 0.5]]}, r"references\[0\] is not binary"),
        ({"predictions": [[0.1, 0.2]], "references": [[1, 2]]}, r"references\[0\] is not binary"),
        ({"predictions": [[]], "references": [[]]}, r"predictions\[0\] must be a non-empty list"),
        ({"predictions": [], "references": []}, "predictions is empty"),
        ({"predictions": [[0.1, 0.2]], "references": [[1, 0], [0, 1]]}, "1 predictions but 2 references"),
        ({"predictions": [[0.1, 0.2, 0.3]], "references": [[1, 0]]}, "3 scores per pair but references 2 labels"),
    ],
)
def test_affordance_rank_rejects_bad_inputs(rank, kwargs, message):
    with pytest.raises(ValueError, match=message):
        rank.compute(**kwargs)


@pytest.mark.parametrize("mode", ["strict", "pairwise"])
@pytest.mark.parametrize("average", ["micro", "macro"])
def test_rows_with_no_negative_or_no_positive_are_skipped_and_counted(rank, mode, average):
    scores = [[0.9, 0.1], [0.2, 0.8], [0.5, 0.4], [0.3, 0.6]]
    labels = [[1, 0], [1, 0], [1, 1], [0, 0]]  # row 1 wrong, row 2 all positive, row 3 all negative
    result = rank.compute(predictions=scores, references=labels, mode=mode, average=average)
    assert result == {"accuracy": 0.5, "map": 0.75, "n": 2, "skipped": 2}
