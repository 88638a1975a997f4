"""The physprobe command line: build, its summary, and errors as exit status 2."""

import sys

import datasets

from physprobe.cli import main


def test_build_prints_a_summary_and_writes_a_loadable_folder(upstream_dir, tmp_path, capsys):
    assert main(["build", "prost", "--out", str(tmp_path), "--source-dir", str(upstream_dir)]) == 0
    out = capsys.readouterr().out
    assert "prost              mass                        1,440" in out
    assert "prost              default                    18,736" in out
    mass = datasets.load_dataset(str(tmp_path / "prost"), "mass", split="test", cache_dir=str(tmp_path / "cache"))
    assert mass.num_rows == 1440


def test_build_all_builds_every_benchmark(built_all):
    from physprobe.dataset_scripts import BENCHMARKS

    # built_all is the run's `physprobe build all --out ... --source-dir ...`, built once (conftest: it asserts exit 0).
    assert sorted(p.name for p in built_all.iterdir()) == sorted(BENCHMARKS)


def test_bad_source_dir_exits_2_naming_the_file(tmp_path, capsys):
    (tmp_path / "mirror").mkdir()
    assert main(["build", "prost", "--out", str(tmp_path / "out"), "--source-dir", str(tmp_path / "mirror")]) == 2
    assert "upstream file bouncing.yml not found" in capsys.readouterr().err
    assert not (tmp_path / "out" / "prost").exists()


def test_generate_cccons_writes_a_loadable_dataset(upstream_dir, tmp_path, capsys):
    args = ["generate", "cccons", "--n", "25", "--seed", "1", "--out", str(tmp_path), "--source-dir", str(upstream_dir)]
    assert main(args) == 0
    assert "cccons_generated   default                        25" in capsys.readouterr().out
    rows = datasets.load_dataset(str(tmp_path / "cccons_generated"), split="test", cache_dir=str(tmp_path / "cache"))
    assert rows.num_rows == 25 and all(rows["generated"])


def test_generate_rejects_a_non_positive_n(upstream_dir, tmp_path, capsys):
    assert main(["generate", "cccons", "--n", "0", "--out", str(tmp_path), "--source-dir", str(upstream_dir)]) == 2
    assert "generate cccons needs --n at least 1, got 0" in capsys.readouterr().err


def test_score_without_the_score_extra_names_the_install(prost_build, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "transformers", None)  # as in a plain `pip install physprobe`
    args = ["score", "--model", str(tmp_path / "model"), "--benchmark", "prost", "--data", str(prost_build.parent),
            "--out", str(tmp_path / "run"), "--limit", "2"]  # fmt: skip
    assert main(args) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "physprobe: error: score needs transformers, which is not installed: pip install 'physprobe[score]'"
    )
