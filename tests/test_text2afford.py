"""Text2Afford: the pinned release build and its statistics (paper Table 3, Appendix B), the raw-annotation
pipeline worked by hand, prompts, and bad unpinned input."""

import csv

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from physprobe.data.dataset_folder import build
from physprobe.dataset_scripts.text2afford.text2afford import TEXT2AFFORD, UPSTREAM, read_tsv
from physprobe.errors import DataError, SourceError
from physprobe.generators import text2afford as generator

from .conftest import REPO

CLASSES = generator.CLASS_NAMES
FIGURE_10 = REPO.parent / "shared" / "data" / "samples" / "text2afford_paper_figure10.tsv"


def test_fifteen_classes_in_the_paper_order():
    assert CLASSES == ["Grasp", "Lift", "Throw", "Push", "Fix", "Ride", "Play", "Watch", "SitOn", "Feed", "Row",
                       "PourFrom", "LookThrough", "WriteWith", "TypeOn"]  # fmt: skip


def test_release_is_pinned_to_the_authors_commit_and_checksum():
    # The released table and the high-agreement table zero_shot_llama-3.py reads, both at the pinned commit.
    sums = (REPO.parent / "shared" / "data" / "upstream" / "SOURCES.md").read_text()
    assert [item.path for item in UPSTREAM.files] == ["final_normal_dataset.tsv", "data_high_agreement.tsv"]
    for item in UPSTREAM.files:
        assert item.url == ("https://raw.githubusercontent.com/sayantan11995/Affordance/"
                            f"f8593ffc74c90af775d0282629405a3053f9f11f/data/{item.path}")  # fmt: skip
        assert f"{item.sha256}  ./text2afford/{item.path}" in sums


@pytest.fixture(scope="module")
def release_build(built_all):
    """Text2Afford as ``physprobe build all`` builds it (conftest.built_all, once per run)."""
    return built_all / TEXT2AFFORD.name


@pytest.fixture(scope="module")
def release_rows(upstream_dir):
    path = upstream_dir / "text2afford" / "final_normal_dataset.tsv"
    return generator.from_release(read_tsv(path, ["Sentence", "Object", *CLASSES]), str(path))


def test_default_build_is_the_full_release(release_build, tmp_path):
    default = datasets.load_dataset(str(release_build), "default", split="test", cache_dir=str(tmp_path))
    assert default.num_rows == 2368  # paper Table 3: # of sentence-object pairs
    lift = datasets.load_dataset(str(release_build), "lift", split="test", cache_dir=str(tmp_path))
    assert lift.num_rows == 2368 and sum(lift["label"]) == 851  # Table 3: Lift (851 objects)
    write_with = datasets.load_dataset(str(release_build), "write_with", split="test", cache_dir=str(tmp_path))
    assert sum(write_with["label"]) == 3  # Table 3: WriteWith (3 objects)
    assert default[0]["agreement"] is None
    assert " ." in default[0]["sentence"] or " ," in default[0]["sentence"]  # released tokenised


def test_table_3_and_appendix_statistics_from_the_data(release_rows):
    stats = generator.statistics(release_rows)
    assert stats["pairs"] == 2368 and stats["classes"] == 15  # Table 3
    assert stats["triples"] == 35520  # Table 1: 35,520 (2368 * 15)
    assert stats["instances_annotated"] == 106560  # Table 3: 106560 (2368 x 15 x 3)
    assert round(stats["avg_objects_per_class"]) == 333  # Table 3: Avg # of objects / class 333
    assert stats["most_prominent"] == ("Lift", 851) and stats["least_prominent"] == ("WriteWith", 3)  # Table 3
    assert stats["max_positives"] == 9  # Appendix B.1: "the maximum number of positive affordances per pair is 9"
    assert stats["pairs_with_a_positive"] == 1819  # Appendix E: 1819 pairs with at least one positive
    assert stats["pairs_without_a_negative"] == 0  # footnote 5: no instance without a negative class
    # Not in the paper: repeated (sentence, object) pairs, kept as released (counted from the file by hand).
    assert (stats["distinct_pairs"], stats["repeated_pairs"], stats["repeated_pairs_with_different_labels"]) == (2202, 158, 126)


def test_card_reports_the_statistics_and_no_sample_warning(release_build):
    card = (release_build / "README.md").read_text()
    body = card.split("---", 2)[2]
    assert "Built from the authors' released table" in card and "f8593ffc74c90af775d0282629405a3053f9f11f" in card
    assert "| # of sentence-object pairs | 2,368 | 2368 (Table 3) |" in body
    assert "| most prominent class | Lift (851 pairs) |" in body
    assert "tokenised" in body and "MIT" in body
    assert "$" not in body and "cannot be reached" not in body and "paper sample" not in body


def test_figure_10_rows_are_in_the_release_with_the_same_labels(release_rows):
    # The release is tokenised and the figure is not; the figure also misprints one first word
    # ("While ran towards ..." for the release's "White ran towards ..."): compare from the second word.
    squeeze = lambda text: "".join(text.split()[1:])  # noqa: E731
    released = {(squeeze(r["sentence"]), r["object"]): r["labels"] for r in release_rows}
    figure = generator.from_release(read_tsv(FIGURE_10, ["Sentence", "Object", *CLASSES]), str(FIGURE_10))
    assert len(figure) == 10
    for row in figure:
        assert released[(squeeze(row["sentence"]), row["object"])] == row["labels"]


def test_random_baseline_of_table_6_is_pairwise_accuracy(release_rows):
    """Table 6 "Random baseline 0.18" (Appendix B.1: "yes" on a random number of classes, 0 to 9 as
    Python's range(0, 9)). Each (positive, negative) pair is right when the positive got YES and the
    negative NO: with k YES answers, k (15 - k) / (15 x 14); averaged over k = 0..8 that is
    336 / 1890 = 0.178 -> 0.18. Strict accuracy (a positive above every negative) gives far less."""
    import evaluate
    import numpy as np

    metric = evaluate.load(str(REPO / "metrics" / "affordance_rank"))
    rng = np.random.default_rng(0)
    references = [row["labels"] for row in release_rows]
    predictions = []
    for _ in references:
        yes = np.zeros(15)
        yes[rng.choice(15, size=rng.integers(0, 9), replace=False)] = 1.0
        predictions.append(yes.tolist())
    assert sum(k * (15 - k) for k in range(9)) / (9 * 15 * 14) == pytest.approx(0.1778, abs=1e-4)
    pairwise = metric.compute(predictions=predictions, references=references)
    assert round(pairwise["accuracy"], 2) == 0.18  # the default mode is pairwise, ties wrong
    strict = metric.compute(predictions=predictions, references=references, mode="strict")
    assert strict["accuracy"] < 0.1


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


def annotation_mirror(folder):
    """A mirror folder for raw annotations: ``text2afford/`` with the pinned high-agreement table in it."""
    (folder / "text2afford").mkdir(parents=True)
    high = REPO.parent / "shared" / "data" / "upstream" / "text2afford" / "data_high_agreement.tsv"
    (folder / "text2afford" / "data_high_agreement.tsv").write_bytes(high.read_bytes())


def write_tsv(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter="\t")
        writer.writeheader()
        writer.writerows(rows)


def test_raw_annotations_replace_the_release(tmp_path):
    annotation_mirror(tmp_path / "mirror")
    write_tsv(tmp_path / "mirror" / "text2afford" / "annotations.tsv", annotation_rows())
    high = (tmp_path / "mirror" / "text2afford" / "data_high_agreement.tsv").read_bytes()
    path = build(TEXT2AFFORD, tmp_path / "out", tmp_path / "mirror").path
    ride = datasets.load_dataset(str(path), "ride", split="test", cache_dir=str(tmp_path / "cache"))
    assert ride["label"] == [1, 0] and ride["agreement"] == [1.0, 1.0]
    default = datasets.load_dataset(str(path), "default", split="test", cache_dir=str(tmp_path / "cache"))
    assert [len(row["agreement"]) for row in default] == [15, 15] and [len(row["likert_agreement"]) for row in default] == [
        15,
        15,
    ]
    card = (path / "README.md").read_text()
    assert "Built from raw annotations" in card and "Krippendorff's alpha: 0.444" in card
    # The high-agreement table is the pinned one (checksum checked), whatever replaces the majority labels.
    assert datasets.load_dataset(str(path), "high_agreement", split="test", cache_dir=str(tmp_path / "cache")).num_rows == 630
    (tmp_path / "mirror" / "text2afford" / "data_high_agreement.tsv").write_bytes(high.replace(b"1.0", b"0.0", 1))
    with pytest.raises(SourceError, match=r"checksum mismatch for .*data_high_agreement\.tsv"):
        build(TEXT2AFFORD, tmp_path / "again", tmp_path / "mirror")


def test_high_agreement_table_reads_as_pandas_reads_it(upstream_dir):
    import math

    import pandas as pd

    # zero_shot_llama-3.py:59 reads it with pd.read_csv(sep='\t'): quoted fields (six sentences below row 1868
    # quote a title) unquoted, empty cells NaN; every row, not only the scored ones, reads the same.
    path = upstream_dir / "text2afford" / "data_high_agreement.tsv"
    rows = generator.from_high_agreement(read_tsv(path, ["Sentence", "Object", *CLASSES], quoted=True), str(path))
    data = pd.read_csv(path, sep="\t")
    assert len(rows) == len(data) == 2498
    for row, (_, expected) in zip(rows, data.iterrows()):
        assert (row["sentence"], row["object"]) == (expected.iloc[0], expected.iloc[1])
        assert row["labels"] == [-1 if math.isnan(v) else int(v) for v in expected.iloc[2:]]
    assert sum(label == -1 for row in rows[1868:] for label in row["labels"]) == 1787  # NaN cells scored rows hold


def test_a_bad_high_agreement_cell_names_file_line_and_column(upstream_copy, tmp_path):
    path = upstream_copy / "text2afford" / "data_high_agreement.tsv"
    lines = path.read_bytes().split(b"\r\n")
    lines[3] = lines[3].replace(b"\t1.0\t", b"\t2.0\t", 1)
    path.write_bytes(b"\r\n".join(lines))
    # (the checksum is pinned: read the edited table directly, as make_rows does)
    with pytest.raises(
        DataError, match=r"data_high_agreement\.tsv: line 4: column '\w+' must be 1\.0, 0\.0 or empty, got '2\.0'"
    ):
        generator.from_high_agreement(read_tsv(path, ["Sentence", "Object", *CLASSES], quoted=True), str(path))


def test_a_mirror_without_the_release_names_the_missing_file(tmp_path):
    with pytest.raises(SourceError, match=r"upstream file final_normal_dataset\.tsv not found"):
        build(TEXT2AFFORD, tmp_path / "out", tmp_path)


@pytest.mark.parametrize(
    "edit, message",
    [({"Ride": "4"}, r"line 2: column 'Ride' must be a Likert rating 0-3, got '4'"),
     ({"Feed": "x"}, r"line 2: column 'Feed' must be a Likert rating"),
     ({"annotator": ""}, r"line 2: empty 'annotator'")],
)  # fmt: skip
def test_bad_annotation_names_line_and_column(tmp_path, edit, message):
    rows = annotation_rows()
    rows[0].update(edit)
    annotation_mirror(tmp_path)
    write_tsv(tmp_path / "text2afford" / "annotations.tsv", rows)
    with pytest.raises(DataError, match=message):
        build(TEXT2AFFORD, tmp_path / "out", tmp_path)
    assert not (tmp_path / "out" / "text2afford").exists()


def test_tied_vote_is_an_error():
    with pytest.raises(DataError, match="tied vote on Watch"):  # ann1 rates Watch 1, ann2 rates it 3
        generator.aggregate([r for r in annotation_rows() if r["annotator"] != "ann3"][:2])


def test_single_annotator_or_constant_ratings_give_an_undefined_alpha(tmp_path):
    single = [row for row in annotation_rows() if row["annotator"] == "ann1"]
    assert generator.alpha(single, "nominal") is None and generator.alpha(single, "ordinal") is None
    constant = [{**row, **{c: "3" for c in CLASSES}} for row in annotation_rows()]
    assert generator.alpha(constant, "nominal") is None
    annotation_mirror(tmp_path)
    write_tsv(tmp_path / "text2afford" / "annotations.tsv", single)
    card = (build(TEXT2AFFORD, tmp_path / "out", tmp_path).path / "README.md").read_text()
    assert "Krippendorff's alpha: undefined (a single annotator" in card


def test_an_annotator_rating_a_pair_twice_names_both_lines(tmp_path):
    rows = annotation_rows()
    rows.insert(3, dict(rows[1]))  # ann2 rates the horse pair again on line 5
    with pytest.raises(DataError, match=r"annotations: line 5: annotator 'ann2' already rated .* on line 3"):
        generator.aggregate(rows)


def _annotations_file(tmp_path, data: bytes):
    annotation_mirror(tmp_path)
    (tmp_path / "text2afford" / "annotations.tsv").write_bytes(data)


def _tsv_bytes(rows):
    header = "\t".join(rows[0])
    return ("\n".join([header, *("\t".join(str(v) for v in row.values()) for row in rows)]) + "\n").encode()


@pytest.mark.parametrize(
    "mangle, message",
    [(lambda data: data.split(b"\n", 1)[0] + b"\n", r"annotations\.tsv: the table has a header but no rows"),
     (lambda data: b"\xef\xbb\xbf" + data, r"annotations\.tsv: line 1 starts with a UTF-8 byte-order mark"),
     (lambda data: data.replace(b"He rode", b"He r\xf6de", 1), r"annotations\.tsv: line 2 is not UTF-8 \(byte 0xf6\)"),
     (lambda data: data.replace(b"She typed", b"She\ttyped", 1), r"annotations\.tsv: line 5 does not have the header's 18 columns")],
)  # fmt: skip
def test_bad_unpinned_table_is_a_one_line_error(tmp_path, mangle, message):
    _annotations_file(tmp_path, mangle(_tsv_bytes(annotation_rows())))
    with pytest.raises(DataError, match=message) as error:
        build(TEXT2AFFORD, tmp_path / "out", tmp_path)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "out" / "text2afford").exists()


def test_missing_agreements_are_null_lists_every_pyarrow_reads(release_build):
    # pyarrow 24 and 25 fail on a null inside a fixed-size list ("Expected all lists to be of size=15"), whoever
    # wrote it; the agreements are variable-length lists, null where the release has no annotations.
    table = pq.read_table(release_build / "default" / "test-00000-of-00001.parquet")
    for column in ("agreement", "likert_agreement"):
        assert table.schema.field(column).type == pa.list_(pa.float32())
        assert table.column(column).null_count == 2368
    assert table.schema.field("labels").type == pa.list_(pa.int8(), 15) and table.column("labels").null_count == 0
    lift = pq.read_table(release_build / "lift" / "test-00000-of-00001.parquet")
    assert lift.column("agreement").null_count == lift.num_rows == 2368
    assert 'A null (`None` in Python, `null` in Arrow) marks "no value"' in (release_build / "README.md").read_text()
