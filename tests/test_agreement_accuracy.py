"""metrics/agreement_accuracy: doctests, both readings of Eq. 1 worked by hand, groups, bad input."""

import evaluate
import pytest

from .conftest import REPO, run_metric_examples


@pytest.fixture(scope="module")
def metric():
    return evaluate.load(str(REPO / "metrics" / "agreement_accuracy"))


def test_docstring_examples(metric):
    outcome = run_metric_examples(metric)
    assert outcome.failed == 0 and outcome.attempted >= 4


def test_readings_of_eq_1_worked_by_hand(metric):
    # Right on the two 1.0-agreement questions, wrong on the two 0.75 ones.
    kwargs = {"predictions": [0, 2, 0, 0], "references": [0, 2, 2, 2], "agreements": [1.0, 1.0, 0.75, 0.75]}
    per_question = metric.compute(**kwargs)
    assert per_question["agreement_accuracy"] == pytest.approx((1.0 + 1.0) / 4)
    glob = metric.compute(**kwargs, reading="global")
    assert glob["agreement_accuracy"] == pytest.approx(0.5 * 0.875)
    assert per_question["accuracy"] == glob["accuracy"] == 0.5


def test_groups_and_micro_overall(metric):
    result = metric.compute(
        predictions=[1, 1, 1, 0], references=[1, 1, 1, 1], agreements=[1.0, 1.0, 1.0, 0.75],
        groups=["elastic", "elastic", "elastic", "sharp"],
    )  # fmt: skip
    assert result["by_group"]["sharp"] == {"agreement_accuracy": 0.0, "accuracy": 0.0, "n": 1}
    assert result["accuracy"] == 0.75  # micro over questions, not the mean of the groups (0.5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"predictions": [0, 1], "references": [0]}, "predictions|references|Mismatch"),
        ({"predictions": [], "references": []}, "empty|nothing"),
        ({"predictions": [0], "references": [0], "agreements": [1.5]}, r"agreements\[0\] = 1.5 is outside \[0, 1\]"),
        ({"predictions": [0], "references": [0], "agreements": [0.5, 0.5]}, "agreements has 2 entries"),
        ({"predictions": [0], "references": [0], "reading": "both"}, "reading must be one of"),
    ],
)
def test_bad_input_is_a_value_error(metric, kwargs, message):
    with pytest.raises(ValueError, match=message):
        metric.compute(**kwargs)


def test_polarity_and_position_breakdowns_worked_by_hand(metric):
    # NEWTON Table 9 / Figure 4B (polarity) and Figure 4C (position of the correct option).
    result = metric.compute(predictions=[0, 1, 3, 2, 2], references=[0, 1, 3, 0, 2],
                            polarities=["pos", "neg", "neg", "pos", "pos"], by_position=True)  # fmt: skip
    assert result["by_polarity"] == {"neg": {"accuracy": 1.0, "n": 2}, "pos": {"accuracy": 2 / 3, "n": 3}}
    assert result["by_position"] == {"0": {"accuracy": 0.5, "n": 2}, "1": {"accuracy": 1.0, "n": 1},
                                     "2": {"accuracy": 1.0, "n": 1}, "3": {"accuracy": 1.0, "n": 1}}  # fmt: skip
    with pytest.raises(ValueError, match="polarities has 1 entries"):
        metric.compute(predictions=[0, 1], references=[0, 1], polarities=["pos"])
