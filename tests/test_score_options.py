"""``physprobe score`` options as lm-eval users know them: every user error is one line naming the fix and is
caught before any weight loads; Hub-first data through a Hub-compatible server; the resume cache's key and
run.json's provenance."""

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest
import torch

from physprobe.backends.base import BackendError
from physprobe.backends.hf import model as hf_model
from physprobe.cli import main
from physprobe.data.sources import build_hint
from physprobe.protocols import model_options
from physprobe.record import spec
from physprobe.run import runner
from physprobe.util import provenance

from . import tiny_models
from .olah_hub import free_port, serve

TEXTS = ["The ball rolls off the table.", "A heavy brick is on the shelf.", "Which object is the [MASK]?",
         "Put the glass on the plate. The plate is stacked under the glass."] * 20  # fmt: skip


@pytest.fixture(scope="module")
def models(tiny_model):
    return {"gpt": tiny_model("causal", TEXTS, "gpt"), "bert": tiny_model("masked", TEXTS, "bert")}


@pytest.fixture
def no_weights(monkeypatch):
    """Fail the test if a model's weights are loaded: every error below must come first."""

    def loaded(facts, tokenizer=None):
        raise AssertionError(f"weights of {facts.name} were loaded")

    monkeypatch.setattr(hf_model, "load", loaded)


def one_line_error(capsys, args):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("physprobe: error: "), err
    return err


@pytest.mark.parametrize("extra, message", [
    (["--model", "./no/such/model"], r"--model ./no/such/model: no such folder"),
    (["--method", "mlm"], r"is a causal model \(GPT2LMHeadModel\): it cannot score --method mlm; leave out --method or use --method causal"),
    (["--device", "tpu9"], r"--device 'tpu9' is not a device; use cpu, cuda, cuda:N or mps"),
    (["--limit", "0"], r"--limit must be at least 1, got 0"),
    (["--config", "mass,,height"], r"--config has an empty entry"),
    (["--config", "mass,height,mass"], r"--config names mass more than once"),
    (["--config", "weight"], r"prost has no config 'weight'; known: default, directions, mass"),
    (["--model-args", "revision"], r"--model-args entry 'revision' is not KEY=VALUE"),
    (["--model-args", "temperature=0.5"], r"--model-args key 'temperature' is not supported"),
    (["--model-args", "dtype=float16", "--dtype", "bfloat16"], r"--dtype bfloat16 and --model-args dtype=float16 disagree"),
    (["--batch-size", "0"], r"--batch-size '0': give a whole number of at least 1, or auto"),
    (["--model-args", "load_in_8bit=true"], r"need bitsandbytes: pip install bitsandbytes"),
])  # fmt: skip
def test_prost_option_errors_are_one_line_before_loading(models, prost_build, no_weights, capsys, extra, message):
    import re

    args = ["score", "--model", str(models["gpt"]), "--benchmark", "prost", "--data", str(prost_build.parent), *extra]
    if extra[0] == "--model":
        args = ["score", *extra, "--benchmark", "prost", "--data", str(prost_build.parent)]
    if "bitsandbytes" in message and _installed("bitsandbytes"):
        pytest.skip("bitsandbytes is installed here")
    assert re.search(message, one_line_error(capsys, args))


def _installed(name):
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_causal_on_bert_and_cuda_without_cuda(models, prost_build, no_weights, capsys):
    base = ["score", "--benchmark", "prost", "--data", str(prost_build.parent)]
    err = one_line_error(capsys, [*base, "--model", str(models["bert"]), "--method", "causal"])
    assert "is a mlm model (BertForMaskedLM): it cannot score --method causal; leave out --method or use --method mlm" in err
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    err = one_line_error(capsys, [*base, "--model", str(models["gpt"]), "--device", "cuda"])
    assert "--device cuda: CUDA is not available here" in err and "use --device cpu" in err


def test_gguf_folder_without_gguf_file(tmp_path, prost_build, no_weights, capsys):
    folder = tmp_path / "smol"
    folder.mkdir()
    (folder / "SmolLM2-135M-Q8_0.gguf").write_bytes(b"GGUF")
    err = one_line_error(capsys, ["score", "--model", str(folder), "--benchmark", "prost", "--data", str(prost_build.parent)])
    assert "holds GGUF files (SmolLM2-135M-Q8_0.gguf) but no config.json; pass --gguf-file SmolLM2-135M-Q8_0.gguf" in err


@pytest.mark.parametrize("benchmark, config, scorable", [
    ("newton", "repository", "track1, track2_boolean, track2_mc, track3"),
    ("text2afford", "grasp", "default, released_generative, high_agreement"),
])  # fmt: skip
def test_unscorable_configs(models, built_all, no_weights, capsys, benchmark, config, scorable):
    args = ["score", "--model", str(models["gpt"]), "--benchmark", benchmark, "--config", config, "--data", str(built_all)]
    assert f"{benchmark} config {config!r} holds no questions to score; scorable: {scorable}" in one_line_error(capsys, args)


def test_model_args_reach_from_pretrained(models):
    facts = hf_model.describe_model(
        str(models["gpt"]), "cpu", None, model_options.parse_model_args("attn_implementation=eager,dtype=float32")
    )
    assert facts.kwargs == {"attn_implementation": "eager"} and facts.dtype == "float32" and facts.family == "causal"
    loaded = hf_model.load(facts)
    assert loaded.model.config._attn_implementation == "eager" and loaded.model.dtype == torch.float32
    assert hf_model.load(hf_model.describe_model(str(models["gpt"]), "cpu", dtype="bfloat16")).model.dtype == torch.bfloat16


def test_batch_size_gives_the_same_scores(models, prost_build, tmp_path):
    common = dict(configs=["mass"], limit=12, bootstrap_iters=0)
    auto = runner.run(spec.make(str(models["gpt"]), "prost", out=tmp_path / "auto", data=prost_build.parent, **common))
    two = runner.run(
        spec.make(str(models["gpt"]), "prost", out=tmp_path / "two", data=prost_build.parent, batch_size=2, **common)
    )
    assert auto.metrics == two.metrics
    assert json.loads((tmp_path / "two" / "run.json").read_text())["backend"]["batch_size"] == 2


def test_cache_key_changes_with_what_changes_a_score(models, prost_build, tmp_path, monkeypatch):
    """A changed local model (same path) or another dtype must not be served the cached scores."""
    out = tmp_path / "run"
    args = dict(configs=["mass"], limit=8, bootstrap_iters=0)
    runner.run(spec.make(str(models["gpt"]), "prost", out=out, data=prost_build.parent, **args))
    assert json.loads((out / "run.json").read_text())["scored_now"] == 8
    runner.run(spec.make(str(models["gpt"]), "prost", out=out, data=prost_build.parent, **args))
    assert json.loads((out / "run.json").read_text())["scored_now"] == 0  # resumed: all from the cache
    runner.run(spec.make(str(models["gpt"]), "prost", out=out, data=prost_build.parent, dtype="bfloat16", **args))
    assert json.loads((out / "run.json").read_text())["scored_now"] == 8
    changed = tiny_models.causal_lm(tmp_path / "gpt", TEXTS, seed=1)
    out = tmp_path / "changed-run"  # a run folder belongs to one model path
    runner.run(spec.make(str(changed), "prost", out=out, data=prost_build.parent, **args))
    first = json.loads((out / "run.json").read_text())
    tiny_models.causal_lm(changed, TEXTS, seed=2)  # same folder, new weights
    runner.run(spec.make(str(changed), "prost", out=out, data=prost_build.parent, **args))
    second = json.loads((out / "run.json").read_text())
    assert second["scored_now"] == 8 and first["backend"]["model_revision"] != second["backend"]["model_revision"]


def test_an_engines_version_rescores_and_physprobes_release_does_not(models, prost_build, tmp_path, monkeypatch):
    """The resume cache's key holds the version of the engine that answered (``ENGINE_VERSIONS``) and the protocol's
    (``Protocol.version``): bumping the one the run's requests go to rescores them, with the same figures; another
    release number of physprobe, or another engine's version, serves them from the cache."""
    from physprobe.backends.hf import HFBackend
    from physprobe.data import registry
    from physprobe.protocols.requests import Choice, MeanTokens

    out, args = tmp_path / "run", dict(configs=["mass"], limit=8, bootstrap_iters=0)

    def scored_now() -> int:
        record = runner.run(spec.make(str(models["gpt"]), "prost", out=out, data=prost_build.parent, **args))
        assert record.spec.sends == "MeanTokens" and record.protocol == "released-gpt"  # prost's causal default
        return json.loads((out / "run.json").read_text())["scored_now"], record.metrics

    first, metrics = scored_now()
    assert first == 8
    installed = provenance.installed
    monkeypatch.setattr(provenance, "installed", lambda names: {**installed(names), "physprobe": "9.9.9"})
    assert scored_now() == (0, metrics)  # a new release number: the same engines, the answers kept
    monkeypatch.setattr(HFBackend, "ENGINE_VERSIONS", {**HFBackend.ENGINE_VERSIONS, Choice: 2})
    assert scored_now() == (0, metrics)  # an engine this run does not use
    monkeypatch.setattr(HFBackend, "ENGINE_VERSIONS", {**HFBackend.ENGINE_VERSIONS, MeanTokens: 2})
    assert scored_now() == (8, metrics)  # its engine changed: every request scored again
    assert scored_now() == (0, metrics)
    protocol = registry.evaluation("prost").protocol("released-gpt")
    object.__setattr__(protocol, "version", 2)  # a frozen declaration, restored below
    try:
        assert scored_now() == (8, metrics)
    finally:
        object.__setattr__(protocol, "version", 1)
    monkeypatch.setattr(HFBackend, "ENGINE_VERSIONS", {Choice: 1})
    with pytest.raises(BackendError, match=r"^--backend hf declares no version of its MeanTokens engine"):
        scored_now()


def test_run_json_provenance_and_bootstrap(models, prost_build, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["score", "--model", str(models["gpt"]), "--benchmark", "prost", "--config", "mass", "--limit", "40",
            "--data", str(prost_build.parent), "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    info = json.loads((out / "run.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    assert info["spec"]["command"] == ["physprobe", *args]
    assert {"physprobe", "torch", "transformers", "datasets"} <= {k for k, v in info["versions"].items() if v}
    assert info["backend"]["model_revision"] == provenance.folder_hash(models["gpt"])
    assert info["spec"]["data"]["revision"] is None and info["config_revisions"]["mass"].startswith("sha256:")
    assert (
        info["spec"]["method"] == "causal"
        and info["spec"]["protocol"] == "released-gpt"
        and info["backend"]["dtype"] == "float32"
    )
    assert set(info["timings"]) == {"load_model_s", "configs_s", "total_s"}
    bands = info["bootstrap"]["figures"]["mass"]
    assert set(bands) == set(provenance.overall_figures(metrics["mass"])) and "accuracy" in bands
    assert info["headline"]["mass"] == ["macro_accuracy", metrics["mass"]["macro_accuracy"]]  # PROST Table 5's macro average
    # A 40-question accuracy has a binomial standard error near sqrt(p (1 - p) / 40).
    p = metrics["mass"]["accuracy"]
    assert bands["accuracy"]["stderr"] == pytest.approx((p * (1 - p) / 40) ** 0.5, rel=0.3)
    assert bands["accuracy"]["ci95"][0] <= p <= bands["accuracy"]["ci95"][1]
    assert main(args) == 0 and json.loads((out / "run.json").read_text())["bootstrap"] == info["bootstrap"]  # seeded


# --- Hub-first data, through olah on loopback ---------------------------------------------------
def score_cli(args, endpoint, home):
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HUB_OFFLINE": "0", "HF_HOME": str(home), "HF_DATASETS_OFFLINE": "0"}
    return subprocess.run(
        [sys.executable, "-m", "physprobe.cli", "score", *args], env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
@pytest.mark.processes
def test_score_reads_the_hub_dataset_by_default(models, prost_build, tmp_path):
    with serve(tmp_path, {"physprobe/prost": prost_build, "someone/prost-fork": prost_build}) as endpoint:
        common = [
            "--model",
            str(models["gpt"]),
            "--benchmark",
            "prost",
            "--config",
            "mass",
            "--limit",
            "8",
            "--bootstrap-iters",
            "0",
        ]
        hub_run = score_cli([*common, "--out", str(tmp_path / "hub")], endpoint, tmp_path / "hf")
        assert hub_run.returncode == 0, hub_run.stderr[-2000:]
        pinned = score_cli([*common, "--revision", "v1", "--dataset-repo", "someone/prost-fork", "--out", str(tmp_path / "fork")],
                           endpoint, tmp_path / "hf2")  # fmt: skip
        assert pinned.returncode == 0, pinned.stderr[-2000:]
    head = subprocess.run(["git", "-C", str(tmp_path / "mirrors/datasets/physprobe/prost"), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    info = json.loads((tmp_path / "hub" / "run.json").read_text())
    data = info["spec"]["data"]
    assert (data["path"], data["revision"], info["config_revisions"]) == ("physprobe/prost", head, {"mass": head})
    fork = json.loads((tmp_path / "fork" / "run.json").read_text())["spec"]["data"]
    assert fork["path"] == "someone/prost-fork" and len(fork["revision"]) == 40
    local = runner.run(
        spec.make(
            str(models["gpt"]),
            "prost",
            out=tmp_path / "local",
            data=prost_build.parent,
            configs=["mass"],
            limit=8,
            bootstrap_iters=0,
        )
    )
    assert json.loads((tmp_path / "hub" / "metrics.json").read_text()) == json.loads(json.dumps(local.metrics))


@pytest.mark.slow
@pytest.mark.processes
def test_unreachable_hub_is_one_line_with_the_local_way(models, prost_build, tmp_path):
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = score_cli(["--model", str(models["gpt"]), "--benchmark", "prost"], endpoint, tmp_path / "hf")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(
        f"physprobe: error: cannot reach the Hugging Face Hub ({endpoint}) for dataset physprobe/prost"
    )
    hint = build_hint("prost", "data")  # its three forms: tests/test_cli_edges.py
    assert result.stderr.strip().endswith(f"build it locally with {hint} and pass --data data")
    args = ["--model", "nobody/no-model", "--benchmark", "prost", "--data", str(prost_build.parent)]
    result = score_cli(args, endpoint, tmp_path / "hf")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"physprobe: error: cannot reach the Hugging Face Hub ({endpoint}) for model nobody/no-model")


def test_a_gguf_file_that_is_not_one_names_the_option(tmp_path, prost_build, no_weights, capsys, monkeypatch):
    monkeypatch.setenv("PHYSPROBE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "smol"
    folder.mkdir()
    (folder / "SmolLM2-135M-Q8_0.gguf").write_bytes(b"GGUF")  # the magic, then nothing
    err = one_line_error(capsys, ["score", "--model", str(folder), "--gguf-file", "SmolLM2-135M-Q8_0.gguf", "--benchmark", "prost",
                                  "--data", str(prost_build.parent)])  # fmt: skip
    assert "--gguf-file SmolLM2-135M-Q8_0.gguf: cannot read its metadata (" in err and "is it a complete GGUF file?" in err


def test_cache_keys_are_the_bytes_earlier_versions_wrote():
    """A run folder's cache resumes across physprobe versions only while a request's key stays the same: these two keys
    were computed by the code of 3a13007 (``provenance.cache_key`` and ``Cache.key``), before the keys moved into
    ``result_cache``."""
    from physprobe.protocols.requests import Choice, Masked
    from physprobe.run.result_cache import Cache

    parts = dict(backend="hf", model="sha256:ab", dtype="float32", chat={"applied": False}, physprobe="0.1.0",
                 protocol="released-gpt", dataset="abc123")  # fmt: skip
    requests = [Choice("The ball", (" falls.", " rises.")), Masked("A [MASK] one.", ("big", "small"))]
    assert Cache.keys(requests, **parts) == [
        "145f42eae070d6d97a4fc0b54df19fae99473105a459eeb26f2f815d6d98a352",
        "21a9213d0ce5e10f1721a6564deee7776f05b983a92d4c6c78656fc291e1a013",
    ]
    assert (
        Cache.keys(requests, **{**parts, "dataset": "abc124"})[0]
        != "145f42eae070d6d97a4fc0b54df19fae99473105a459eeb26f2f815d6d98a352"
    )


def test_the_options_are_one_typed_value_with_a_rule_on_each_field():
    """``ScoreOptions`` (the command line's or a Python call's): each rule is its field's one line, a value of the
    wrong type from a caller is one line naming the option, and a card's options are each benchmark's, checked again."""
    from physprobe.errors import PhysprobeError
    from physprobe.record.options import ScoreOptions

    options = ScoreOptions.of(model="gpt2", benchmark="prost", configs=["mass"], model_args="revision=main", batch_size="4")
    assert (options.configs, options.model_args, options.batch_size, options.backend) == (
        ("mass",),
        {"revision": "main"},
        4,
        "hf",
    )
    assert options.out == "runs/gpt2-prost" and options.settings().batch_size == 4
    with pytest.raises(PhysprobeError, match=r"^--limit 'ten': give a whole number$"):
        ScoreOptions.of(model="gpt2", benchmark="prost", limit="ten")
    with pytest.raises(PhysprobeError, match=r"^'samplez' is not an option of physprobe score; known: model, benchmark, "):
        spec.make("gpt2", "prost", samplez=3)
    with pytest.raises(PhysprobeError, match=r"^--samples True: give a whole number from 1 to 1000"):
        ScoreOptions.of(model="gpt2", benchmark="prost", samples=True)
    card = ScoreOptions.of(model="gpt2", benchmark="all", method="mlm")  # a card's benchmark rules wait for each benchmark
    assert card.card and card.out is None
    with pytest.raises(PhysprobeError, match=r"^newton cannot be scored with method 'mlm'"):
        card.for_benchmark("newton", "runs/gpt2/newton")


def test_a_model_folder_replaced_while_it_loads_is_refused_and_nothing_is_cached(prost_build, tmp_path, monkeypatch, capsys):
    """The folder's revision is read before its weights load: a folder replaced in between (here, by the loader itself,
    just before it reads the weights) is refused in one line, so no answer of the new weights is recorded or cached
    under the old revision; a run with the old weights back scores every request again, none served from a cache."""
    folder = tiny_models.causal_lm(tmp_path / "gpt", TEXTS, seed=1)
    original = hf_model._from_pretrained

    def replaced_first(facts, source, kwargs):
        with contextlib.redirect_stderr(io.StringIO()):  # the saving's progress bar: not the run's error line
            tiny_models.causal_lm(folder, TEXTS, seed=2)  # another model in the same folder, as the weights are read
        return original(facts, source, kwargs)

    monkeypatch.setattr(hf_model, "_from_pretrained", replaced_first)
    out = tmp_path / "run"
    args = ["score", "--model", str(folder), "--benchmark", "prost", "--config", "mass", "--limit", "8",
            "--data", str(prost_build.parent), "--out", str(out), "--bootstrap-iters", "0"]  # fmt: skip
    capsys.readouterr()  # the model's making
    assert main(args) == 2
    err = capsys.readouterr().err.strip()  # the weights' loading bar, then the one line
    assert "Traceback" not in err and err.splitlines()[-1] == (
        f"physprobe: error: --model {folder}: the model folder changed while it was loaded; run again"
    ), err
    assert not (out / "run.json").exists()
    monkeypatch.setattr(hf_model, "_from_pretrained", original)
    tiny_models.causal_lm(folder, TEXTS, seed=1)  # the first model back
    assert main(args) == 0
    info = json.loads((out / "run.json").read_text())
    assert info["scored_now"] == 8 and info["backend"]["model_revision"] == provenance.folder_hash(folder)


def test_a_model_folder_replaced_as_its_tokenizer_is_read_is_refused_before_any_weight_loads(
    prost_build, tmp_path, monkeypatch, no_weights, capsys
):
    """The tokenizer builds the cache keys (a fully cached run reads nothing else of the model): one read from a folder
    replaced since its revision was hashed is refused in one line too, before any weight loads."""
    folder = tiny_models.causal_lm(tmp_path / "gpt", TEXTS, seed=1)
    original = hf_model.load_tokenizer

    def replaced_first(facts):
        with contextlib.redirect_stderr(io.StringIO()):
            tiny_models.causal_lm(folder, TEXTS, seed=2)
        return original(facts)

    monkeypatch.setattr(hf_model, "load_tokenizer", replaced_first)
    capsys.readouterr()
    err = one_line_error(capsys, ["score", "--model", str(folder), "--benchmark", "prost", "--config", "mass", "--limit", "8",
                                  "--data", str(prost_build.parent), "--out", str(tmp_path / "run")])  # fmt: skip
    assert err == f"physprobe: error: --model {folder}: the model folder changed while it was loaded; run again", err
