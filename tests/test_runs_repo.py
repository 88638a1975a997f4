"""Score runs as a Hub dataset repository (``physprobe.publish.runs``, ``physprobe publish --runs``): its layout, its card,
each run's predictions as a dataset config, the runs read back by ``physprobe report`` once downloaded, and the
repository published through the fake Hub like the benchmarks."""

import json
import shutil

import datasets
import pyarrow.parquet as pq
import pytest
import yaml

from physprobe.cli import main
from physprobe.data import registry
from physprobe.publish import hub as hub_calls
from physprobe.publish import runs as runs_repo
from physprobe.record import run_folder, run_record
from physprobe.run.samples import Sample
from physprobe.util.paths import MARKER

from . import tiny_models
from .conftest import REPO
from .fake_hub import FakeHub
from .run_folders import record
from .test_upload import api_for, local_files, upload

FIGURES = {"ordinary": {"accuracy": 2 / 3, "n": 3, "undecided": 0}}


def finished(folder, model, labels):
    """A finished CConS masked-LM run of ``model`` whose predictions are ``labels`` (one row each)."""
    made = record("cccons", "mlm", FIGURES, "mask-four", model=model)
    rows = [Sample("ordinary", i, {}, (1,), "decided", label, (0.2, 0.8), 2) for i, label in enumerate(labels)]
    run_record.write(folder, run_folder.owner(model, "cccons", False), made, rows)
    return folder


@pytest.fixture
def runs(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    finished(folder / "bert", "google-bert/bert-base-uncased", [1, 0, 1])
    finished(folder / "roberta", "FacebookAI/roberta-base", [1, 1, 1])
    run_folder.open_folder(folder / "unfinished", run_folder.owner("gpt2", "prost", False))  # claimed, nothing written
    return sorted(folder.iterdir())


def test_a_runs_repository_holds_each_finished_run_and_the_report(runs, tmp_path, capsys):
    repo = runs_repo.write(runs, tmp_path / "hub", "my-runs")
    assert "skipped" in capsys.readouterr().err  # the unfinished folder, in one line as the report says it
    files = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file() and p.name != MARKER)
    configs = ["cccons-bert-base-uncased", "cccons-roberta-base"]
    assert [f for f in files if f.startswith("runs/")] == [
        f"runs/{c}/{name}" for c in configs for name in ("metrics.json", "predictions.parquet", "run.json", "spec.json")
    ]
    for config, source in zip(configs, ("bert", "roberta")):  # the files as `physprobe score` wrote them
        for name in ("metrics.json", "predictions.parquet"):
            assert (repo / "runs" / config / name).read_bytes() == (tmp_path / "runs" / source / name).read_bytes()
        spec = json.loads((tmp_path / "runs" / source / "spec.json").read_text())  # but its paths: their placeholders
        spec["out"], spec["data"]["path"] = "<out>", "<data>"
        assert json.loads((repo / "runs" / config / "spec.json").read_text()) == spec
        assert json.loads((repo / "runs" / config / "run.json").read_text())["spec"] == spec
    assert any(f.startswith("figures/") and f.endswith(".png") for f in files)
    text = (repo / "README.md").read_text()
    meta = yaml.safe_load(text.split("---\n")[1])
    assert [c["config_name"] for c in meta["configs"]] == configs
    assert meta["configs"][0]["data_files"] == [{"split": "test", "path": f"runs/{configs[0]}/predictions.parquet"}]
    assert (
        "| **`cccons-bert-base-uncased`** | bert-base-uncased | google-bert/bert-base-uncased | cccons | mask-four | "
        "ordinary: accuracy 0.667 |"
    ) in text
    assert "## physprobe report" in text and "figures/" in text  # the report, a level down, its figures beside it
    # Each config loads as the Hub's viewer and `load_dataset` read it: one row per prediction.
    for config, rows in zip(configs, (3, 3)):
        loaded = datasets.load_dataset(str(repo), config, split="test", cache_dir=str(tmp_path / "cache"))
        assert (
            loaded.num_rows == rows
            and loaded["prediction"] == pq.read_table(repo / "runs" / config / "predictions.parquet")["prediction"].to_pylist()
        )
    # Downloaded, the runs are run folders again.
    copy = shutil.copytree(repo / "runs", tmp_path / "downloaded")
    assert main(["report", *map(str, sorted(copy.iterdir())), "--out", str(tmp_path / "report")]) == 0
    assert "bert-base-uncased" in (tmp_path / "report" / "report.md").read_text()


def test_a_config_name_is_letters_digits_and_dashes_and_nothing_finished_is_one_line(runs, tmp_path):
    assert runs_repo.config_name("../x y", "prost") == "prost-x-y"
    with pytest.raises(Exception, match="the folder given is not a finished physprobe run"):
        runs_repo.write([runs[-1]], tmp_path / "hub", "my-runs")
    assert not (tmp_path / "hub" / "my-runs").exists()


def test_upload_publishes_the_runs_repository_and_only_it(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(hub_calls, "RETRY_DELAYS", (0.0, 0.0, 0.0))
    out = tmp_path / "hub"
    assert upload.main(["--runs", *map(str, runs), "--runs-repo", "my-runs", "--out", str(out)]) == 0  # dry run
    assert "dry run: 1 repository from" in capsys.readouterr().out and sorted(p.name for p in out.iterdir()) == ["runs"]
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    with FakeHub() as hub:
        code = upload.main(["--runs", *map(str, runs), "--runs-repo", "my-runs", "--out", str(out), "--push", "--org", "me"],
                           api=api_for(hub))  # fmt: skip
        printed = capsys.readouterr().out
        assert code == 0, printed
        remote = hub.repos[("dataset", "me/my-runs")].files
        assert set(remote) - {".gitattributes"} == set(local_files(out / "runs" / "my-runs"))
        assert json.loads(remote["runs/cccons-roberta-base/run.json"])["spec"]["model"] == "FacebookAI/roberta-base"
    assert "committed  me/my-runs" in printed and "hf_secret_value" not in printed
    with pytest.raises(SystemExit):
        upload.main(["--runs", str(runs[0]), "--only", "prost"])
    assert "--runs publishes only the runs repository: leave out --only and --tag" in capsys.readouterr().err


@pytest.mark.slow
def test_every_benchmarks_runs_load_from_the_published_folder_exactly_as_scored(built_all, tmp_path):
    # issue 51: what `load_dataset` gives back of a published run is every row the run scored, its prompts and the
    # model's texts as they were, byte for byte: every config of every benchmark, scored by a tiny model
    texts = [line for line in (REPO / "README.md").read_text().splitlines() if line.strip()]
    model = tiny_models.causal_lm(tmp_path / "models" / "tiny-gpt", texts)
    runs, configs_of = tmp_path / "runs", {}
    for benchmark in registry.names():  # every config that holds questions
        scorable = registry.evaluation(benchmark).scorable
        configs_of[benchmark] = [c for c in registry.config_names(benchmark) if scorable is None or c in scorable]
        assert main(["score", "--model", str(model), "--benchmark", benchmark, "--data", str(built_all), "--limit", "2",
                     "--config", ",".join(configs_of[benchmark]), "--bootstrap-iters", "0", "--out", str(runs / benchmark)]) == 0  # fmt: skip
    repo = runs_repo.write([runs], tmp_path / "hub", "tiny-runs")
    configs = [c["config_name"] for c in yaml.safe_load((repo / "README.md").read_text().split("---\n")[1])["configs"]]
    assert len(configs) == len(registry.names())
    for config in configs:
        run = runs / json.loads((repo / "runs" / config / "spec.json").read_text())["benchmark"]
        local = pq.read_table(run / "predictions.parquet").to_pylist()
        assert {row["config"] for row in local} == set(configs_of[run.name])  # every config
        assert all(row["prompts"] for row in local)
        loaded = datasets.load_dataset(str(repo), config, split="test", cache_dir=str(tmp_path / "cache"))
        assert loaded.to_list() == local, config  # every row, every column: prompts and generated texts exactly
