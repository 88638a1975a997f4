"""metrics/probe_accuracy: doctests, PROST-style breakdowns worked by hand, and bad input."""

import evaluate
import pytest

from .conftest import REPO, run_metric_examples


@pytest.fixture(scope="module")
def metric():
    return evaluate.load(str(REPO / "metrics" / "probe_accuracy"))


def test_docstring_examples(metric):
    outcome = run_metric_examples(metric)
    assert outcome.failed == 0 and outcome.attempted >= 5


def test_prost_directions_macro_over_templates(metric):
    # 12 questions of directions_1 (4 right) and the four one-question templates (2 right):
    # the paper's template average is (4/12 + 1 + 1 + 0 + 0) / 5 = 0.4667 ("46.7" for GPT in Table 5),
    # whereas the plain accuracy over the 16 questions is 6/16.
    names = ["d1"] * 12 + ["d2a", "d2b", "d2c", "d2d"]
    predictions = [0] * 4 + [1] * 8 + [0, 1, 1, 0]
    references = [0] * 12 + [0, 1, 0, 1]
    result = metric.compute(predictions=predictions, references=references, groups=["directions"] * 16, templates=names)
    assert result["accuracy"] == pytest.approx(6 / 16)
    assert result["by_group"]["directions"]["accuracy"] == pytest.approx((4 / 12 + 2) / 5)
    assert result["by_template"]["d1"] == {"accuracy": pytest.approx(1 / 3), "n": 12}


def test_macro_is_mean_of_groups_not_of_questions(metric):
    result = metric.compute(predictions=[1, 1, 1, 0], references=[1, 1, 1, 1], groups=["big", "big", "big", "small"])
    assert result["by_group"] == {"big": {"accuracy": 1.0, "n": 3}, "small": {"accuracy": 0.0, "n": 1}}
    assert result["macro_accuracy"] == 0.5 and result["accuracy"] == 0.75


def test_inverse_gap_readings(metric):
    # mass_1: 2/2 vs 0/2 (gap 1.0); mass_2: 1/2 vs 1/2 (gap 0.0). Directions have no inverse (None).
    pairs = ["mass_1"] * 4 + ["mass_2"] * 4 + [None]
    inverted = [False, False, True, True] * 2 + [False]
    predictions = [0, 0, 1, 1, 0, 1, 0, 1, 0]
    references = [0] * 9
    groups = ["mass"] * 8 + ["directions"]
    per_pair = metric.compute(predictions=predictions, references=references, pairs=pairs, inverted=inverted, groups=groups,
                              inverse_gap_reading="per_pair")  # fmt: skip
    assert per_pair["by_pair"]["mass_1"] == {"accuracy": 1.0, "inverted_accuracy": 0.0, "gap": 1.0}
    assert per_pair["inverse_gap"] == 0.5
    assert per_pair["inverse_gap_by_group"] == {"mass": 0.5}
    pooled = metric.compute(predictions=predictions, references=references, pairs=pairs, inverted=inverted, groups=groups)
    assert pooled["inverse_gap_by_group"] == {"mass": pytest.approx(abs(3 / 4 - 1 / 4))}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"predictions": [0, 1], "references": [0]}, "predictions|references|length|Mismatch"),
        ({"predictions": [], "references": []}, "empty|nothing"),
        ({"predictions": [0, -1], "references": [0, 1]}, "negative"),
        ({"predictions": [0, 4], "references": [0, 1], "num_choices": 4}, r"predictions\[1\] = 4 is out of range"),
        ({"predictions": [0, 1], "references": [0, 1], "groups": ["a"]}, "groups has 1 entries"),
        ({"predictions": [0, 1], "references": [0, 1], "positions": [1, 2]}, "template_mean' needs templates"),
        ({"predictions": [0, 1], "references": [0, 1], "positions": [1, 2], "position_reading": "x"}, "position_reading must be"),
        ({"predictions": [0, 1], "references": [0, 1], "pairs": ["p", "p"]}, "pairs and inverted go together"),
        (
            {
                "predictions": [0, 1],
                "references": [0, 1],
                "pairs": ["p", "p"],
                "inverted": [False, False],
                "inverse_gap_reading": "per_pair",
            },
            "both sides",
        ),
    ],
)
def test_bad_input_is_a_value_error(metric, kwargs, message):
    with pytest.raises(ValueError, match=message):
        metric.compute(**kwargs)
