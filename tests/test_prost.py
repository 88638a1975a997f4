"""PROST: rows generated from the upstream templates, checked against counts and hand-worked rows."""

from collections import Counter

import pytest

from physprobe.data.sources import fetch
from physprobe.dataset_scripts.prost import prost as builder
from physprobe.generators import prost as generator


@pytest.fixture(scope="module")
def rows(upstream_dir):
    return builder.make_rows(fetch(builder.UPSTREAM, upstream_dir)).rows


def by_context(rows, name, context):
    found = [row for row in rows if row["name"] == name and row["context"] == context]
    assert len(found) == 1, (name, context, len(found))
    return found[0]


def test_total_and_per_concept_counts(rows):
    assert len(rows) == 18_736
    assert Counter(row["group"] for row in rows) == {
        "directions": 16, "mass": 1440, "height": 1440, "circumference": 1440, "stacking": 2400,
        "rolling": 2400, "grasping": 2400, "breaking": 2400, "sliding": 2400, "bouncing": 2400,
    }  # fmt: skip


def test_per_template_counts(rows):
    counts = Counter(row["name"] for row in rows)
    assert counts["directions_1"] == 12  # 4 headings x 3 turns
    assert all(counts[f"directions_2_{s}"] == 1 for s in "abcd")
    for concept in ("mass", "height", "circumference"):  # 6 objects, ordered 4 at a time: 6*5*4*3
        assert all(counts[f"{concept}_{k}_{s}"] == 360 for k in (1, 2) for s in "ab")
    for concept in ("stacking", "rolling", "grasping", "breaking", "sliding", "bouncing"):
        # 5 objects with the property x 5*4*3 ordered without it, for each of 4 positions and both polarities
        assert all(counts[f"{polarity}{concept}_{k}"] == 300 for k in range(1, 5) for polarity in ("", "non"))
    assert len(counts) == 5 + 3 * 4 + 6 * 8


def test_turning_row_worked_by_hand(rows):
    row = by_context(rows, "directions_1", "A person is walking west. They turn to the left.")
    # Facing west and turning left means walking south.
    assert (row["A"], row["B"], row["C"], row["D"]) == ("north", "east", "south", "west")
    assert row["question"] == "They are now walking [MASK]."
    assert row["label"] == 2
    right = by_context(rows, "directions_1", "A person is walking north. They turn to the right.")
    assert right["label"] == 1  # east
    around = by_context(rows, "directions_1", "A person is walking east. They turn around.")
    assert around["label"] == 3  # west


def test_constant_rows(rows):
    (peak,) = [row for row in rows if row["name"] == "directions_2_c"]
    assert peak["context"] == "A person throws a ball straight into the air."
    assert peak["question"] == (
        "Immediately after reaching the highest point in it's trajectory, the ball is moving toward the [MASK]."
    )
    assert (peak["A"], peak["label"]) == ("ground", 0)
    (bounce,) = [row for row in rows if row["name"] == "directions_2_d"]
    assert (bounce["B"], bounce["label"]) == ("sky", 1)


def test_ranked_rows_worked_by_hand(rows):
    context = "A leaf, a coin, an egg, and an apple moving at identical speeds each collide with a static hockey puck."
    longest = by_context(rows, "mass_1_a", context)
    assert (longest["A"], longest["B"], longest["C"], longest["D"]) == ("leaf", "coin", "egg", "apple")
    assert longest["question"] == "The puck hit by the [MASK] slides the longest distance."
    assert longest["ex_question"] == "Which puck slides the longest distance?"
    assert longest["label"] == 3  # the apple is the heaviest of the four
    assert by_context(rows, "mass_1_b", context)["label"] == 0  # the leaf is the lightest


def test_filtered_ranked_row_only_compares_the_two_objects_in_the_context(rows):
    seesaw = [r for r in rows if r["name"] == "mass_2_b" and r["A"] == "microwave" and r["B"] == "leaf"]
    assert len(seesaw) == 12  # 4 objects left for C, 3 for D
    for row in seesaw:
        assert row["context"] == "A microwave and a leaf are placed in baskets on either end of a perfectly balanced seesaw."
        assert row["label"] == 1  # the leaf side goes up, whatever C and D are (even if lighter)


def test_template_without_article_slot(rows):
    # circumference_2 writes "a {circ_obj4}" literally rather than "{a:circ_obj4}".
    row = by_context(rows, "circumference_2_a", "A person paints a circle around a mountain, a car, a book, and a table.")
    assert row["label"] == 0  # the mountain needs the most paint


def test_odd_one_out_row(rows):
    row = by_context(rows, "nonstacking_3", "A person is trying to stack books, coins, eggs, and plates.")
    assert row["question"] == "The [MASK] are the hardest to stack."
    assert row["label"] == 2


def test_upstream_order_and_example_idx(rows):
    assert [row["example_idx"] for row in rows] == list(range(18_736))
    first, last = rows[0], rows[-1]
    # Rows are sorted by their JSON text: A first, so the smallest A ("apple") with the smallest B, C, D.
    assert (first["name"], first["A"], first["B"], first["C"], first["D"]) == (
        "nonrolling_3", "apple", "ball", "block", "bottle")  # fmt: skip
    # The largest A is "table"; then B, C, D; then "There are four staircases" and "hardest" > "easiest".
    assert (last["name"], last["A"], last["B"], last["C"], last["D"], last["label"]) == (
        "height_2_a", "table", "mountain", "microwave", "house", 1)  # fmt: skip


def test_label_positions_are_balanced_for_affordances(rows):
    affordance = [row["label"] for row in rows if row["group"] == "stacking"]
    assert Counter(affordance) == {0: 600, 1: 600, 2: 600, 3: 600}


@pytest.mark.parametrize(
    "name, expected", [("mass_1_b", ("mass_1", True)), ("stacking_4", ("stacking_4", False)), ("directions_1", (None, False))]
)
def test_superlative_pairs(name, expected):
    assert generator.superlative_pair(name) == expected
