"""CConS: the eight released files as configs, prompts, template induction, the order, new examples."""

import csv

import datasets
import pytest

from physprobe.data.dataset_folder import build, write
from physprobe.data.sources import fetch
from physprobe.dataset_scripts.cccons import cccons as builder
from physprobe.errors import DataError
from physprobe.generators import cccons as generator

EXPECTED = {"ordinary": 772, "ccommon": 332, "ordinary_easy": 336, "ordinary_hard": 420, "ccommon_easy": 150,
            "ccommon_hard": 179, "ordinary_nocontext": 772, "ccommon_nocontext": 332}  # fmt: skip


def upstream_rows(upstream_dir, config):
    with open(upstream_dir / "cccons" / builder.FILES[config][0], newline="") as handle:
        return [(c, o1, o2, int(label)) for c, o1, o2, label in csv.reader(handle)]


@pytest.fixture(scope="module")
def built(built_all):
    """CConS as ``physprobe build all`` builds it (conftest.built_all, once per run)."""
    return built_all / builder.CCCONS.name


@pytest.fixture(scope="module")
def paths(upstream_dir):
    return fetch(builder.UPSTREAM, upstream_dir)


@pytest.mark.parametrize("config", list(EXPECTED))
def test_every_upstream_row_once_in_order(built, upstream_dir, tmp_path, config):
    dataset = datasets.load_dataset(str(built), config, split="test", cache_dir=str(tmp_path))
    assert dataset.num_rows == EXPECTED[config]
    assert list(zip(dataset["context"], dataset["obj1"], dataset["obj2"], dataset["label"])) == upstream_rows(
        upstream_dir, config
    )
    assert dataset.features["label"].names == ["obj1_larger", "obj1_smaller"]
    assert set(dataset["subset"]) == {config.split("_")[0]}


def test_ccommon_hard_has_the_released_179_rows_with_prompts(built, tmp_path):
    hard = datasets.load_dataset(str(built), "ccommon_hard", split="test", cache_dir=str(tmp_path))
    assert hard.num_rows == 179 and set(hard["difficulty"]) == {"hard"}
    assert all(row["mlm_input"].startswith(row["context"] + " In this situation, the size of ") for row in hard)
    assert all(row["template_id"] for row in hard)


def test_exact_duplicate_is_kept(built, tmp_path):
    ccommon = datasets.load_dataset(str(built), "ccommon", split="test", cache_dir=str(tmp_path))
    assert ccommon["context"].count("A tank cruised a leaf.") == 2


def test_prompts_worked_by_hand(built, tmp_path):
    ordinary = datasets.load_dataset(str(built), "ordinary", split="test", cache_dir=str(tmp_path))
    first = ordinary[0]  # "A human abandoned a curtain in a studio.",curtain,studio,1
    assert first["mlm_input"] == (
        "A human abandoned a curtain in a studio. In this situation, the size of a curtain is probably much "
        "[MASK] than the size of a studio."
    )
    assert first["generative_input"] == (
        "A human abandoned a curtain in a studio. Which is bigger in this situation, a curtain or a studio?"
    )
    assert (first["label"], first["difficulty"]) == (1, "easy")
    nocon = datasets.load_dataset(str(built), "ccommon_nocontext", split="test", cache_dir=str(tmp_path))
    second = nocon[1]  # "",oven,rice cooker,0
    assert second["context"] == "" and second["template_id"] is None
    assert second["mlm_input"] == "The size of an oven is probably much [MASK] than the size of a rice cooker."
    assert second["generative_input"] == "Which is bigger in general, an oven or a rice cooker?"


def test_difficulty_comes_from_the_split_files(paths):
    ordinary = builder.released(paths)["ordinary"]
    by_context = {row["context"]: row["difficulty"] for row in ordinary}
    assert by_context["A bear grasped a cat."] is None  # in neither split file
    assert sum(row["difficulty"] == "easy" for row in ordinary) + sum(row["difficulty"] == "hard" for row in ordinary) == 772 - 35


def test_every_released_context_regenerates_byte_for_byte(paths):
    induced = builder.induction(paths)
    count = 0
    for config, rows in builder.released(paths).items():
        for row in rows:
            if not row["context"]:
                continue
            item = generator.induce(row["context"], row["obj1"], row["obj2"], row["label"])
            assert generator.render(item.template, item.fills, induced.articles) == row["context"], (config, row["line"])
            count += 1
    assert count == 772 + 332 + 336 + 420 + 150 + 179


def test_induction_figures(paths):
    induced = builder.induction(paths)
    main = builder.released(paths)
    main_templates = {
        induced.template_id(r["context"], r["obj1"], r["obj2"], r["label"]) for r in main["ordinary"] + main["ccommon"]
    }
    assert (len(induced.templates), len(main_templates)) == (137, 136)
    assert induced.articles == {"key": "an"}
    assert induced.conflicting_relations == []
    assert sorted(induced.templates["{a:agent} abandoned {a:s1} in {a:s2}."].lexicons["agent"]) == ["actor", "clown", "human"]


def test_partial_order_closure_and_contradictions():
    rows = [
        {"obj1": "house", "obj2": "box", "label": 0, "subset": "ordinary"},  # house > box
        {"obj1": "key", "obj2": "box", "label": 1, "subset": "ordinary"},  # box > key
        {"obj1": "key", "obj2": "ant", "label": 1, "subset": "ccommon"},  # context: ant > key, so key > ant
    ]
    order = generator.partial_order(rows)
    assert order.decides("house", "ant") is True and order.decides("ant", "house") is False
    assert order.decides("house", "moon") is None
    assert order.size == 6 and order.contradictions() == []
    cyclic = generator.partial_order(rows + [{"obj1": "ant", "obj2": "house", "label": 0, "subset": "ordinary"}])
    assert ("ant", "house") in cyclic.contradictions() or ("house", "ant") in cyclic.contradictions()
    assert cyclic.decides("house", "ant") is None


def test_release_order_has_no_contradictions(paths):
    rows = builder.released(paths)
    order = generator.partial_order(rows["ordinary"] + rows["ccommon"])
    assert order.facts == 1031 and order.contradictions() == []


def test_new_examples_are_new_labelled_and_deterministic(paths, tmp_path):
    generated = builder.generate_new(paths, 1000, seed=7)
    rows = generated.rows
    assert len(rows) == 1000 and all(row["generated"] for row in rows)
    induced = builder.induction(paths)
    by_config = builder.released(paths)
    released_contexts = {r["context"] for rows_ in by_config.values() for r in rows_}
    order = generator.partial_order(by_config["ordinary"] + by_config["ccommon"])
    for row in rows:
        assert row["context"] not in released_contexts
        item = generator.induce(row["context"], row["obj1"], row["obj2"], row["label"])
        template = induced.templates[item.template]
        assert item.larger_slot == template.larger_slot  # the label follows the template's relation
        big, small = (row["obj1"], row["obj2"]) if row["label"] == 0 else (row["obj2"], row["obj1"])
        assert order.decides(big, small) is (row["subset"] == "ordinary")
    first = write(builder.GENERATED, generated, tmp_path / "a").path
    second = write(builder.GENERATED, builder.generate_new(paths, 1000, seed=7), tmp_path / "b").path
    assert (first / "default" / "test-00000-of-00001.parquet").read_bytes() == (
        second / "default" / "test-00000-of-00001.parquet"
    ).read_bytes()
    assert builder.generate_new(paths, 5, seed=8).rows != builder.generate_new(paths, 5, seed=7).rows


def test_asking_for_too_many_new_examples(paths):
    with pytest.raises(DataError, match=r"only \d+ new examples can be generated \(asked for 1000000\)"):
        builder.generate_new(paths, 1_000_000, seed=0)


@pytest.mark.parametrize(
    "line, message",
    [('"A box holds a key.",key,box\n', r"line 1 has 3 columns, expected 4"),
     ('"A box holds a key.",key,box,2\n', r"line 1: label must be 0 or 1, got '2'"),
     ('"A box holds a key.",key,cat,1\n', r"line 1: object 'cat' is mentioned with an article 0 times")],
)  # fmt: skip
def test_bad_rows_name_file_and_line(upstream_copy, tmp_path, monkeypatch, line, message):
    monkeypatch.setattr("physprobe.data.sources.file_sha256", lambda path: next(
        f.sha256 for f in builder.UPSTREAM.files if path.name == f.path))  # fmt: skip
    (upstream_copy / "cccons" / "adversarial_auto_easy_new.csv").write_text(line)
    with pytest.raises(DataError, match=r"adversarial_auto_easy_new\.csv: " + message):
        build(builder.CCCONS, tmp_path / "out", upstream_copy)
    assert not (tmp_path / "out" / "cccons").exists()
