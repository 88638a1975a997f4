"""Building PROST into a Hub-ready folder: Parquet + card, load_dataset round trip, determinism, bad input."""

import hashlib

import datasets
import pytest
import yaml

from physprobe.data.builder import Benchmark, Card, Config, MadeRows
from physprobe.data.dataset_folder import build
from physprobe.dataset_scripts.prost.prost import PROST
from physprobe.errors import DataError, OutputFolderError, SourceError, TemplateError


def front_matter(card_path):
    text = card_path.read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


@pytest.mark.parametrize(
    "config, n",
    [("default", 18_736), ("directions", 16), ("mass", 1440), ("height", 1440), ("circumference", 1440),
     ("stacking", 2400), ("rolling", 2400), ("grasping", 2400), ("breaking", 2400), ("sliding", 2400),
     ("bouncing", 2400)],
)  # fmt: skip
def test_every_config_loads_with_load_dataset(prost_build, tmp_path, config, n):
    dataset = datasets.load_dataset(str(prost_build), config, split="test", cache_dir=str(tmp_path))
    assert dataset.num_rows == n
    assert dataset.column_names == [
        "A",
        "B",
        "C",
        "D",
        "context",
        "question",
        "ex_question",
        "group",
        "label",
        "name",
        "example_idx",
    ]
    assert dataset.features["label"].names == ["A", "B", "C", "D"]
    if config != "default":
        assert set(dataset["group"]) == {config}


def test_loaded_rows_equal_generated_rows(prost_build, tmp_path, upstream_dir):
    mass = datasets.load_dataset(str(prost_build), "mass", split="test", cache_dir=str(tmp_path))
    row = mass.filter(lambda r: r["name"] == "mass_1_a" and r["A"] == "leaf" and r["B"] == "coin" and r["C"] == "egg")[0]
    assert row["context"] == (
        "A leaf, a coin, an egg, and an apple moving at identical speeds each collide with a static hockey puck."
    )
    assert row["label"] == 3
    assert mass["example_idx"] == sorted(mass["example_idx"])


def test_card_front_matter(prost_build):
    meta = front_matter(prost_build / "README.md")
    assert meta["license"] == "apache-2.0"
    assert meta["pretty_name"].startswith("PROST")
    assert "multiple-choice" in meta["task_categories"]
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert configs["mass"]["data_files"] == [{"split": "test", "path": "mass/test-00000-of-00001.parquet"}]
    assert configs["default"].get("default") is True
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert infos["sliding"]["splits"][0]["num_examples"] == 2400
    body = (prost_build / "README.md").read_text()
    assert "| `mass` | 1,440 |" in body and "@inproceedings" in body and "$configs_table" not in body


def digests(folder):
    return {p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_two_builds_are_byte_identical(prost_build, upstream_dir, tmp_path):
    again = build(PROST, tmp_path, upstream_dir).path
    assert digests(again) == digests(prost_build)


def test_rebuild_replaces_the_folder_and_keeps_what_physprobe_did_not_write(upstream_dir, tmp_path):
    first = build(PROST, tmp_path, upstream_dir).path
    written = {p: p.read_bytes() for p in first.rglob("*") if p.is_file()}
    assert build(PROST, tmp_path, upstream_dir).path == first  # a build over its own build: replaced, same bytes
    assert {p: p.read_bytes() for p in first.rglob("*") if p.is_file()} == written
    (first / "data").mkdir()
    (first / "data" / "train-00000-of-00001.parquet").write_bytes(b"a file physprobe did not write")
    with pytest.raises(
        OutputFolderError,
        match=r"prost holds data/train-00000-of-00001.parquet, which physprobe did not "
        r"write there .*nothing was changed: move it away or choose another --out",
    ):
        build(PROST, tmp_path, upstream_dir)
    assert (first / "data" / "train-00000-of-00001.parquet").read_bytes() == b"a file physprobe did not write"


def assert_nothing_written(out):
    assert not out.exists() or list(out.iterdir()) == []


def test_checksum_mismatch_names_the_file(upstream_copy, tmp_path):
    path = upstream_copy / "prost" / "mass.yml"
    path.write_text(path.read_text().replace("longest", "furthest"))
    out = tmp_path / "out"
    with pytest.raises(SourceError, match=r"checksum mismatch for .*mass\.yml"):
        build(PROST, out, upstream_copy)
    assert_nothing_written(out)


def test_missing_file_names_the_file(upstream_copy, tmp_path):
    (upstream_copy / "prost" / "globals" / "lexicons.yml").unlink()
    with pytest.raises(SourceError, match=r"globals/lexicons\.yml not found"):
        build(PROST, tmp_path / "out", upstream_copy)


def unchecked(monkeypatch):
    """Skip checksums, so that tests can feed edited templates through the real builder."""
    monkeypatch.setattr(
        "physprobe.data.sources.file_sha256",
        lambda path: next(f.sha256 for f in PROST.upstream.files if path.as_posix().endswith(f.path)),
    )


def test_malformed_yaml_names_the_file(upstream_copy, tmp_path, monkeypatch):
    unchecked(monkeypatch)
    (upstream_copy / "prost" / "height.yml").write_text("configs: [\n  - name: height_1_a\n   bad: indent")
    out = tmp_path / "out"
    with pytest.raises(DataError, match=r"height\.yml: malformed YAML"):
        build(PROST, out, upstream_copy)
    assert_nothing_written(out)


def test_unknown_answer_rule_names_file_and_template(upstream_copy, tmp_path, monkeypatch):
    unchecked(monkeypatch)
    path = upstream_copy / "prost" / "rolling.yml"
    path.write_text(path.read_text().replace("expect_fn: pick_odd_one_out", "expect_fn: pick_roundest", 1))
    with pytest.raises(TemplateError, match=r"rolling\.yml: configs\[0\].*unknown answer rule expect_fn='pick_roundest'"):
        build(PROST, tmp_path / "out", upstream_copy)


def test_template_key_without_lexicon_names_file_and_key(upstream_copy, tmp_path, monkeypatch):
    unchecked(monkeypatch)
    path = upstream_copy / "prost" / "mass.yml"
    path.write_text(path.read_text().replace("{a:mass_obj4}", "{a:weight_obj4}"))
    out = tmp_path / "out"
    with pytest.raises(TemplateError, match=r"mass\.yml: template 'mass_1_a': no lexicon for template key\(s\) weight_obj"):
        build(PROST, out, upstream_copy)
    assert_nothing_written(out)


def test_source_dir_from_environment(upstream_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PHYSPROBE_SOURCE_DIR", str(upstream_dir))
    assert build(PROST, tmp_path, None).rows["directions"] == 16


def test_unreachable_url_is_a_clear_error(tmp_path, monkeypatch):
    from physprobe.data.sources import Upstream, UpstreamFile, fetch

    monkeypatch.delenv("PHYSPROBE_SOURCE_DIR", raising=False)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path))
    gone = Upstream("prost", "x/y", "0", (UpstreamFile("mass.yml", "http://127.0.0.1:9/mass.yml", "0" * 64),))
    with pytest.raises(SourceError, match=r"could not download upstream file mass\.yml from http://127\.0\.0\.1:9/mass\.yml"):
        fetch(gone)


def test_a_null_fixed_size_list_is_refused_before_anything_is_written(tmp_path):
    # pyarrow before 26 cannot read a null inside a fixed-size list back, whichever version wrote the file.
    features = datasets.Features({"scores": datasets.List(datasets.Value("float32"), length=2)})
    bench = Benchmark("toy", None, features, (Config("default", "all rows"),), Card("Toy", "mit", ("other",), "$configs_table"),
                      make_rows=lambda paths: MadeRows([{"scores": [1.0, 2.0]}, {"scores": None}]))  # fmt: skip
    with pytest.raises(
        DataError, match=r"^toy/default: column 'scores' is a fixed-size list holding 1 null, which pyarrow before 26"
    ):
        build(bench, tmp_path)
    assert list(tmp_path.iterdir()) == []
