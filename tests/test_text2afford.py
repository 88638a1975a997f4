"""Text2Afford: the paper sample build, the raw-annotation pipeline worked by hand, prompts, bad input."""

import csv

import datasets
import pytest

from physprobe.dataset_scripts.text2afford.text2afford import PAPER_SAMPLE, TEXT2AFFORD
from physprobe.errors import DataError
from physprobe.export import build
from physprobe.generators import text2afford as generator

from .conftest import REPO

CLASSES = generator.CLASS_NAMES


def test_fifteen_classes_in_the_paper_order():
    assert CLASSES == ["Grasp", "Lift", "Throw", "Push", "Fix", "Ride", "Play", "Watch", "SitOn", "Feed", "Row",
                       "PourFrom", "LookThrough", "WriteWith", "TypeOn"]  # fmt: skip


def test_embedded_sample_is_the_papers_figure_10():
    shared = REPO.parent / "shared" / "data" / "samples" / "text2afford_paper_figure10.tsv"
    assert PAPER_SAMPLE.read_bytes() == shared.read_bytes()


@pytest.fixture(scope="module")
def sample_build(tmp_path_factory):
    return build(TEXT2AFFORD, tmp_path_factory.mktemp("t2a"), tmp_path_factory.mktemp("empty-mirror")).path


def test_paper_sample_default_and_grasp_load(sample_build, tmp_path):
    default = datasets.load_dataset(str(sample_build), "default", split="test", cache_dir=str(tmp_path))
    assert default.num_rows == 10
    first = default[0]
    assert (first["object"], first["labels"]) == ("cattle", [0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0])
    assert first["agreement"] is None
    grasp = datasets.load_dataset(str(sample_build), "grasp", split="test", cache_dir=str(tmp_path))
    assert grasp.features["label"].names == ["cannot", "can"]
    assert sum(grasp["label"]) == 7  # Grasp column of Figure 10
    sit_on = datasets.load_dataset(str(sample_build), "sit_on", split="test", cache_dir=str(tmp_path))
    assert [r["object"] for r in sit_on if r["label"] == 1] == ["bench", "deck"]


def test_card_says_which_source_built_it(sample_build):
    card = (sample_build / "README.md").read_text()
    assert "Built from the paper sample only" in card
    assert "$" not in card.split("---", 2)[2]


def annotation_rows():
    """Two pairs rated by three annotators; everything not listed is rated 0."""
    def rows(sentence, obj, ratings):
        for annotator, scores in ratings.items():
            yield {"sentence": sentence, "object": obj, "annotator": annotator,
                   **{c: str(scores.get(c, 0)) for c in CLASSES}}  # fmt: skip

    return [
        *rows("He rode the horse.", "horse", {"ann1": {"Ride": 3, "Feed": 2, "Watch": 1},
                                              "ann2": {"Ride": 2, "Feed": 1, "Watch": 3},
                                              "ann3": {"Ride": 3, "Feed": 0, "Watch": 2}}),
        *rows("She typed a letter.", "keyboard", {"ann1": {"TypeOn": 3}, "ann2": {"TypeOn": 3, "Push": 2},
                                                  "ann4": {"TypeOn": 1, "Grasp": 3}}),
    ]  # fmt: skip


def test_majority_votes_and_agreement_worked_by_hand():
    horse, keyboard = generator.aggregate(annotation_rows())
    ride, feed, watch = (CLASSES.index(c) for c in ("Ride", "Feed", "Watch"))
    # Ride: 3,2,3 -> can,can,can; Feed: 2,1,0 -> can,cannot,cannot; Watch: 1,3,2 -> cannot,can,can.
    assert (horse["labels"][ride], horse["labels"][feed], horse["labels"][watch]) == (1, 0, 1)
    assert horse["agreement"][ride] == 1.0 and horse["agreement"][feed] == pytest.approx(2 / 3)
    assert horse["likert_agreement"][ride] == pytest.approx(2 / 3)  # two 3s and a 2
    assert horse["likert_agreement"][watch] == pytest.approx(1 / 3)  # 1, 3, 2 all differ
    assert generator.agreement_category(horse["likert_agreement"][watch]) == "low"
    assert sum(horse["labels"]) == 2
    type_on, push = CLASSES.index("TypeOn"), CLASSES.index("Push")
    assert keyboard["labels"][type_on] == 1 and keyboard["labels"][push] == 0


def test_krippendorff_alpha_worked_by_hand():
    # Binary votes on 30 units (2 pairs x 15 classes), 3 coders each: n = 90 values. Ones: Ride 3,
    # Feed 1, Watch 2, TypeOn 2, Push 1, Grasp 1 -> n1 = 10, n0 = 80. Five units have one dissenter;
    # each adds 2 * 1 * 2 / (3 - 1) = 2 to the off-diagonal coincidences: o_01 + o_10 = 10.
    # Nominal alpha = 1 - (n - 1) * (o_01 + o_10) / (2 * n0 * n1).
    expected = 1 - 89 * 10 / (2 * 80 * 10)
    assert generator.alpha(annotation_rows(), "nominal") == pytest.approx(expected)


def write_tsv(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter="\t")
        writer.writeheader()
        writer.writerows(rows)


def test_raw_annotations_build_end_to_end(tmp_path):
    (tmp_path / "mirror" / "text2afford").mkdir(parents=True)
    write_tsv(tmp_path / "mirror" / "text2afford" / "annotations.tsv", annotation_rows())
    path = build(TEXT2AFFORD, tmp_path / "out", tmp_path / "mirror").path
    ride = datasets.load_dataset(str(path), "ride", split="test", cache_dir=str(tmp_path / "cache"))
    assert ride["label"] == [1, 0] and ride["agreement"] == [1.0, 1.0]
    card = (path / "README.md").read_text()
    assert "Built from raw annotations" in card and "Krippendorff's alpha: 0.444" in card


@pytest.mark.parametrize(
    "edit, message",
    [({"Ride": "4"}, r"line 2: column 'Ride' must be a Likert rating 0-3, got '4'"),
     ({"Feed": "x"}, r"line 2: column 'Feed' must be a Likert rating"),
     ({"annotator": ""}, r"line 2: empty 'annotator'")],
)  # fmt: skip
def test_bad_annotation_names_line_and_column(tmp_path, edit, message):
    rows = annotation_rows()
    rows[0].update(edit)
    (tmp_path / "text2afford").mkdir()
    write_tsv(tmp_path / "text2afford" / "annotations.tsv", rows)
    with pytest.raises(DataError, match=message):
        build(TEXT2AFFORD, tmp_path / "out", tmp_path)
    assert not (tmp_path / "out" / "text2afford").exists()


def test_tied_vote_is_an_error():
    with pytest.raises(DataError, match="tied vote on Watch"):  # ann1 rates Watch 1, ann2 rates it 3
        generator.aggregate([r for r in annotation_rows() if r["annotator"] != "ann3"][:2])


def test_release_table_with_a_non_binary_label(tmp_path):
    (tmp_path / "text2afford").mkdir()
    text = PAPER_SAMPLE.read_text().replace("cattle\t0", "cattle\t2", 1)
    (tmp_path / "text2afford" / "text2afford.tsv").write_text(text)
    with pytest.raises(DataError, match=r"text2afford\.tsv: line 2: column 'Grasp' must be 0 or 1, got '2'"):
        build(TEXT2AFFORD, tmp_path / "out", tmp_path)


def test_prompts_of_table_4_and_10():
    sentence, obj = "All the women in India wear bangles", "bangles"
    pour = generator.CLASSES[CLASSES.index("PourFrom")]
    assert generator.prompt("nli_hypothesis", sentence, obj, pour) == "bangles can be used for pour from by human"
    assert generator.prompt("yes_no_falcon", sentence, obj, pour).endswith("Can human pour from the bangles? \n \u00bbANSWER\u00ab")
    assert generator.prompt("mlm", sentence, obj, sep_token="[SEP]", mask_token="[MASK]") == (
        "All the women in India wear bangles [SEP] bangles can be used for [MASK] by human")
    with pytest.raises(ValueError, match="needs an affordance"):
        generator.prompt("yes_no_flan_t5", sentence, obj)
