"""NEWTON: repository and Track 1 as released, the condition pipeline, Tracks 2-3, specs, bad input."""

import csv
from collections import Counter

import datasets
import pytest

from physprobe.data.sources import fetch
from physprobe.dataset_scripts.newton import newton as builder
from physprobe.errors import DataError
from physprobe.generators import newton as generator


@pytest.fixture(scope="module")
def upstream(upstream_dir):
    with open(upstream_dir / "newton" / "confident_questions.csv", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def repo(upstream_dir):
    return builder.repository(fetch(builder.UPSTREAM, upstream_dir))


@pytest.fixture(scope="module")
def built(built_all):
    """NEWTON as ``physprobe build all`` builds it (conftest.built_all, once per run)."""
    return built_all / builder.NEWTON.name


def load(built, config, tmp_path):
    return datasets.load_dataset(str(built), config, split="test", cache_dir=str(tmp_path))


def test_repository_and_track1_are_the_released_rows(built, upstream, tmp_path):
    repository = load(built, "repository", tmp_path)
    track1 = load(built, "track1", tmp_path)
    assert repository.num_rows == track1.num_rows == len(upstream) == 2891
    assert len(set(repository["object"])) == 777 and len(set(repository["attribute"])) == 8
    for row, source in zip(track1, upstream):
        assert row["question"] == source["question"] and row["object"] == source["category"]
        assert row["choices"] == [source["option_1"], source["option_2"], source["option_3"]]
        assert row["label"] == {"1.0": 0, "3.0": 2}[source["result_majority"]]
        assert row["agreement"] == float(source["agreement"])
    assert repository.features["polarity"].names == ["low", "high"]
    assert Counter(repository["polarity"]) == {0: 2238, 1: 653}


def test_track_sizes_and_every_scenario(built, tmp_path):
    track3 = load(built, "track3", tmp_path)
    per_scenario = Counter(track3["scenario"])
    assert sorted(per_scenario) == list(range(1, 10)) and max(per_scenario.values()) == 10_000
    total = sum(load(built, c, tmp_path).num_rows for c in ("track1", "track2_boolean", "track2_mc", "track3"))
    assert 150_000 < total < 170_000  # "about 160K" in the paper


def test_default_config_is_track1(built, tmp_path):
    # load_dataset("physprobe/newton") with no config name gives Track 1 questions (issue 11).
    rows = datasets.load_dataset(str(built), split="test", cache_dir=str(tmp_path))
    assert rows.num_rows == 2891 and set(rows.column_names) >= {"question", "choices", "label", "agreement"}


def test_scenarios_follow_the_upstream_templates():
    # implicit_querying_template.py at the pinned commit: tags in this order; scenario 9 "insulation for".
    assert [tag for tag, *_ in generator.SCENARIOS] == [
        "backpack_packing", "suitcase_packing", "sandpaper_placing", "plastic_packaging", "fragile_gifts",
        "hammering", "kids_play_area", "robot_tossing", "insulation"]  # fmt: skip
    insulation = generator.SCENARIOS[8]
    assert insulation[1] == "I need an object to provide insulation for a sharp edge on a piece of furniture."
    assert generator.SCENARIOS[7][2].endswith("can be tossed safely?")


@pytest.fixture(scope="module")
def track3_counts(repo):
    return Counter(row["tag"] for row in generator.track3(repo, builder.SEED))


def test_table_6_overall_is_the_question_weighted_mean_with_alphabetical_columns(track3_counts):
    """Paper Table 6 (Track 3): each model's Overall equals the mean of its nine scenario columns weighted
    by questions only when column k is the k-th upstream tag in alphabetical order. Printed figures are
    rounded to 0.1, so the weighted mean may differ from Overall by at most 0.05 + 0.05."""
    from physprobe.dataset_scripts.newton.published import TABLE_6, TABLE_6_COLUMNS, by_tag

    assert track3_counts["hammering"] == 3960 and track3_counts["sandpaper_placing"] == 1456
    assert TABLE_6_COLUMNS.index("hammering") == 2 and TABLE_6_COLUMNS.index("sandpaper_placing") == 7
    table1_order = [tag for tag, *_ in generator.SCENARIOS]
    total = sum(track3_counts.values())
    misses = []
    for model, (columns, overall) in TABLE_6.items():
        accuracy = by_tag(model)
        weighted = sum(accuracy[tag] * track3_counts[tag] for tag in TABLE_6_COLUMNS) / total
        assert abs(weighted - overall) <= 0.1, model
        as_table1 = sum(a * track3_counts[tag] for a, tag in zip(columns, table1_order)) / total
        misses.append(abs(as_table1 - overall))
    assert max(misses) > 5  # Table 1's numbering does not fit (GPT-4: 82.3 vs 87.7)
    assert TABLE_6["GPT-4"] == ((95.7, 92.5, 100.0, 77.9, 75.2, 96.8, 91.8, 50.8, 84.2), 87.7)


def test_track3_rows_carry_their_upstream_tag(built, tmp_path):
    track3 = load(built, "track3", tmp_path)
    first = {}
    for scenario, tag in zip(track3["scenario"], track3["tag"]):
        first.setdefault(scenario, tag)
    assert first == {i: tag for i, (tag, *_) in enumerate(generator.SCENARIOS, start=1)}


def test_object_names_as_upstream_writes_them_or_natural(upstream):
    rows = [r for r in upstream if r["category"] == "birthday_cake"]
    assert rows, "birthday_cake is in the repository"
    assert {e.object for e in generator.read_repository(rows, "csv").entries} == {"birthday_cake"}
    assert {e.object for e in generator.read_repository(rows, "csv", names="natural").entries} == {"birthday cake"}
    with pytest.raises(ValueError, match="object name style"):
        generator.render_name("birthday_cake", "title")


def test_answer_positions_are_flat(built, tmp_path):
    for config in ("track2_mc", "track3"):
        counts = Counter(load(built, config, tmp_path)["label"])
        assert max(counts.values()) - min(counts.values()) <= 9  # balanced within each spec (±1 per spec)


def test_exactly_one_option_satisfies_the_conditions(built, repo, tmp_path):
    track3 = load(built, "track3", tmp_path)
    for row in track3.select(range(0, track3.num_rows, 97)):
        conditions = [tuple(c.split("=")) for c in row["conditions"]]
        satisfying = [o for o in row["choices"] if o in repo.matching(conditions)]
        assert satisfying == [row["answer"]] and row["choices"][row["label"]] == row["answer"]
        flipped = [(a, "low" if p == "high" else "high") for a, p in conditions]
        for other in row["choices"]:
            if other != row["answer"]:  # the paper's rule: opposite polarity on every condition attribute
                assert all(repo.polarity[other].get(a) == p for a, p in flipped)


def test_multi_attribute_conditions_read_across_rows(repo):
    # Upstream filters on a single row (one attribute per row), so two conditions match nothing; physprobe
    # intersects the objects of each condition instead.
    stiff = set(repo.matching([("Stiffness", "high")]))
    tough = set(repo.matching([("Brittleness", "low")]))
    assert repo.matching([("Stiffness", "high"), ("Brittleness", "low")]) == sorted(stiff & tough)
    assert len(stiff & tough) > 0


def test_track2_boolean_statements_worked_by_hand():
    repo = generator.Repository([generator.Entry("pillow", "Softness", "high", 1.0),
                                 generator.Entry("rock", "Softness", "low", 0.75)])  # fmt: skip
    rows = generator.track2_boolean(repo, seed=0)
    statements = {(row["question"], row["answer"], row["polarity"]) for row in rows}
    assert statements == {
        ("pillow is more soft than rock.", "True", "pos"), ("rock is more soft than pillow.", "False", "pos"),
        ("rock is less soft than pillow.", "True", "neg"), ("pillow is less soft than rock.", "False", "neg"),
        ("pillow is soft.", "True", "pos"), ("pillow is not soft.", "False", "neg"),
        ("rock is soft.", "False", "pos"), ("rock is not soft.", "True", "neg"),
    }  # fmt: skip
    assert all(row["choices"] == ["True", "False"] and row["label"] == (row["answer"] == "False") for row in rows)


def test_sampling_caps(repo):
    rng = __import__("random").Random(0)
    groups = generator.sample_groups(list("ab"), list("cdefgh"), 3, cap=7, rng=rng)
    # C(6, 3) = 20 combinations > 7: seven distinct combinations, positives in turn.
    assert len(groups) == 7 and [g[0] for g in groups] == list("abababa")
    assert len({tuple(sorted(g[1:])) for g in groups}) == 7
    assert len(generator.sample_groups(["a"], list("cde"), 3, cap=7, rng=rng)) == 1  # all of them


def test_same_seed_same_bytes(repo, tmp_path):
    spec = generator.scenario_specs()[0]
    first = list(generator.challenge_set(repo, spec, seed=5))
    assert first == list(generator.challenge_set(repo, spec, seed=5))
    assert first != list(generator.challenge_set(repo, spec, seed=6))


def write_spec(path, text):
    path.write_text(text)
    return path


def test_custom_spec_through_the_cli(upstream_dir, tmp_path, capsys):
    from physprobe.cli import main

    spec = write_spec(
        tmp_path / "spec.yaml",
        """
name: pierce
context: I need to make a hole in a leather belt.
question: Which of {object1}, {object2}, {object3} should I use?
conditions:
  - {attribute: Sharpness, polarity: high, padding: 2}
distractors: any
max_questions: 300
""",
    )
    args = ["generate", "newton", "--spec", str(spec), "--out", str(tmp_path / "out"), "--source-dir", str(upstream_dir)]
    assert main(args) == 0
    rows = datasets.load_dataset(str(tmp_path / "out" / "pierce"), split="test", cache_dir=str(tmp_path / "c"))
    assert rows.num_rows == 300 and Counter(rows["label"]) == {0: 100, 1: 100, 2: 100}
    assert rows[0]["question"].startswith("Which of ") and len(rows[0]["choices"]) == 3


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "name: x\nquestion: q\nconditions: [{attribute: Wetness, polarity: high}]\n",
            r"conditions\[0\].attribute 'Wetness' is unknown",
        ),
        (
            "name: x\nquestion: q\nconditions: [{attribute: Softness, polarity: medium}]\n",
            r"conditions\[0\].polarity must be low or high",
        ),
        ("name: x\nquestion: q\nconditions: []\n", "at least one"),
        (
            "name: x\nquestion: q\nconditions: [{attribute: Softness, polarity: high}]\ncolour: red\n",
            r"unknown field\(s\) \['colour'\]",
        ),
        ("name: x\nconditions: [{attribute: Softness, polarity: high}]\n", "missing field 'question'"),
        (
            "name: x\nquestion: 'Which of {object5}?'\nconditions: [{attribute: Softness, polarity: high}]\n",
            r"slot\(s\) \['object5'\]",
        ),
    ],
)
def test_bad_specs_name_the_field(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        builder.read_spec(write_spec(tmp_path / "spec.yaml", text))


def test_conditions_no_object_satisfies(repo):
    spec = generator.Spec("none", "", "q", (generator.Condition("Sharpness", "high", 3), generator.Condition("Softness", "high", 3),
                                            generator.Condition("Brittleness", "high", 3), generator.Condition("Elasticity", "high", 3)))  # fmt: skip
    assert not repo.matching([(c.attribute, c.polarity) for c in spec.conditions])  # none in the pinned release
    with pytest.raises(DataError, match="no object satisfies all conditions"):
        list(generator.challenge_set(repo, spec, 0))


@pytest.mark.parametrize(
    "edit, message",
    [({"attribute": "Wetness"}, r"line 2: unknown attribute 'Wetness'"),
     ({"result_majority": "5.0"}, r"line 2: result_majority 5.0 is outside the Likert scale"),
     ({"agreement": ""}, r"line 2: missing or non-numeric agreement")],
)  # fmt: skip
def test_bad_repository_rows_name_the_line(upstream, edit, message):
    rows = [dict(upstream[0], **edit)] + upstream[1:3]
    with pytest.raises(DataError, match=message):
        generator.read_repository(rows, "confident_questions.csv")


def test_table_4_human_row_is_the_mean_agreement_per_attribute(built, tmp_path):
    """Paper Table 4, row "Human": agreement % per attribute and Overall. A predictor that always gives
    the majority answer scores each question's agreement; Overall is the mean over the eight attributes."""
    import evaluate

    from .conftest import REPO

    track1 = load(built, "track1", tmp_path)
    metric = evaluate.load(str(REPO / "metrics" / "agreement_accuracy"))
    result = metric.compute(predictions=track1["label"], references=track1["label"], agreements=track1["agreement"],
                            groups=track1["attribute"])  # fmt: skip
    human = {"Elasticity": 89.1, "Stiffness": 78.7, "Surface smoothness": 79.2, "Surface Hardness": 78.9,
             "Softness": 89.4, "Brittleness": 82.6, "Malleability": 86.8, "Sharpness": 90.5}  # fmt: skip
    by_attribute = {a: round(100 * f["agreement_accuracy"], 1) for a, f in result["by_group"].items()}
    assert by_attribute == human
    macro = sum(f["agreement_accuracy"] for f in result["by_group"].values()) / 8
    assert round(100 * macro, 1) == 84.4  # Overall: the mean over attributes, not over questions (86.3)
    assert round(100 * result["agreement_accuracy"], 1) == 86.3
