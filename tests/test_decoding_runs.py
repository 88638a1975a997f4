"""``physprobe score --decoding released --samples 3 --seed 0`` end to end with a tiny causal model on CPU, for each
protocol whose released script samples: the same texts twice, with batch sizes 1 and 16 and after a resumed run,
other texts than greedy; the settings in spec.json, run.json and the cache keys; a greedy rerun in the same folder
never served the sampled answers (and the reverse); the spread over the samples in metrics.json and the report."""

import json

import datasets
import pyarrow.parquet as pq
import pytest
from transformers import AutoTokenizer

from physprobe.backends import hf
from physprobe.cli import main
from physprobe.record import spec
from physprobe.report.cells import Spread
from physprobe.report.tables import paper_tables
from physprobe.run import runner
from tests import tiny_models
from tests.interrupting import interrupt_second_call

# (benchmark, protocol, config, the model's name as the protocol's released decoding reads it): every protocol whose
# released decoding samples for some model (tests/test_decoding.py holds the settings).
SAMPLED = [
    ("newton", "released-generate", "track1", "tiny-falcon"),  # hf_track2.py's falcon class: top_k=10, max_length=200
    ("newton", "table1-generate", "track2_boolean", "tiny-dolly"),  # dolly's pipeline: top_p=0.92, 256 new tokens
    ("newton", "released-gpt-chat", "track3", "tiny-chat"),  # query_gpt.py: top_p=0.5
    ("newton", "gpt-chat-printed-template", "track2_mc", "tiny-chat"),
    ("text2afford", "yes-no-llama3-released", "high_agreement", "tiny-llama"),  # zero_shot_llama-3.py: T=0.7, top_p=0.9
    ("text2afford", "yes-no-llama3-zero-shot", "default", "tiny-llama"),
]
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant:{% endif %}")  # fmt: skip


@pytest.fixture(scope="module")
def models(built_all, made, tmp_path_factory):
    """One tiny GPT-2 with a chat template, saved under each name the released decodings read."""
    texts = list(datasets.load_dataset(str(built_all / "newton"), "track3", split="test").select(range(1500))["question"])
    texts += datasets.load_dataset(str(built_all / "text2afford"), "default", split="test")["sentence"]
    root = tmp_path_factory.mktemp("sampled")

    def chat_model(folder):
        tiny_models.causal_lm(folder, texts)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.chat_template = CHAT_TEMPLATE
        tokenizer.save_pretrained(folder)

    folder = made.folder("tiny-base", ["causal", texts, CHAT_TEMPLATE], chat_model)
    named = {}
    for name in {m for *_, m in SAMPLED}:
        (root / name).symlink_to(folder)
        named[name] = root / name
    return named


def _score(model, benchmark, protocol, config, data, out, *extra) -> int:
    return main(["score", "--model", str(model), "--benchmark", benchmark, "--protocol", protocol, "--config", config,
                 "--limit", "3", "--data", str(data), "--out", str(out), "--bootstrap-iters", "0", *extra])  # fmt: skip


def _texts(out) -> list:
    return [
        (line["row"], line["generated"], line.get("draws_generated"))
        for line in pq.read_table(out / "predictions.parquet").to_pylist()
    ]


SAMPLED_ARGS = ("--decoding", "released", "--samples", "3", "--seed", "0")


@pytest.mark.slow
@pytest.mark.parametrize("benchmark, protocol, config, name", SAMPLED, ids=[p for _, p, _, _ in SAMPLED])
def test_sampled_runs_are_reproducible_and_kept_apart_from_greedy(models, built_all, tmp_path, monkeypatch, capsys,
                                                                  benchmark, protocol, config, name):  # fmt: skip
    model = models[name]
    assert _score(model, benchmark, protocol, config, built_all, tmp_path / "a", *SAMPLED_ARGS) == 0
    sampled = _texts(tmp_path / "a")
    assert all(len(draws) == 3 for _, _, draws in sampled)
    assert any(len(set(map(json.dumps, draws))) > 1 for _, _, draws in sampled)  # the three samples are not one
    assert _score(model, benchmark, protocol, config, built_all, tmp_path / "b", *SAMPLED_ARGS) == 0
    assert _texts(tmp_path / "b") == sampled
    assert _score(model, benchmark, protocol, config, built_all, tmp_path / "c", *SAMPLED_ARGS, "--batch-size", "1") == 0
    assert _texts(tmp_path / "c") == sampled
    assert _score(model, benchmark, protocol, config, built_all, tmp_path / "d", *SAMPLED_ARGS, "--batch-size", "16") == 0
    assert _texts(tmp_path / "d") == sampled

    # Killed after its first engine call (one sample's answers committed), then resumed: the same texts.
    real = interrupt_second_call(monkeypatch, hf.HFBackend, "score")
    made = spec.make(str(model), benchmark, protocol=protocol, configs=[config], limit=3, data=built_all, out=tmp_path / "e",
                     bootstrap_iters=0, decoding="released", samples=3, seed=0)  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        runner.run(made)
    monkeypatch.setattr(hf.HFBackend, "score", real)
    resumed = runner.run(made)
    assert 0 < resumed.scored_now < 9 and _texts(tmp_path / "e") == sampled

    # The settings are recorded; a greedy rerun in the same folder gets greedy answers, then the sampled ones again.
    saved = json.loads((tmp_path / "a" / "spec.json").read_text())
    assert (saved["samples"], saved["seed"], saved["decoding"]["kind"]) == (3, 0, "sampling")
    assert json.loads((tmp_path / "a" / "run.json").read_text())["spec"]["decoding"] == saved["decoding"]
    assert _score(model, benchmark, protocol, config, built_all, tmp_path / "greedy", "--decoding", "greedy") == 0
    greedy = [(row, text) for row, text, _ in _texts(tmp_path / "greedy")]
    assert greedy != [(row, text) for row, text, _ in sampled]
    assert _score(model, benchmark, protocol, config, built_all, tmp_path / "a") == 0
    assert [(row, text) for row, text, _ in _texts(tmp_path / "a")] == greedy
    assert json.loads((tmp_path / "a" / "run.json").read_text())["scored_now"] == 3  # none served from the sampled answers
    assert "decoding" not in json.loads((tmp_path / "a" / "spec.json").read_text())
    assert _score(model, benchmark, protocol, config, built_all, tmp_path / "a", *SAMPLED_ARGS) == 0
    assert _texts(tmp_path / "a") == sampled and json.loads((tmp_path / "a" / "run.json").read_text())["scored_now"] == 0
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())[config]
    assert metrics["samples"]["drawn"] == 3 and 1 / 3 <= metrics["samples"]["agreement"] <= 1
    assert "over 3 samples (seed 0)" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "greedy"), "--out", str(tmp_path / "report")]) == 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert report.count(" ˢ mean ") == 1 and "sd over 3 samples" in report  # the sampled run's row, not the greedy one's
    # Where a paper's table reads the sampled config, its cell is the run's mean ± sd over its samples, with the footnote.
    read = {
        key.split(".")[0] for table in paper_tables(benchmark).tables for column in table.columns for key in column.keys if key
    }
    assert (Spread.NOTE in report and " ± " in report) == (config in read)
    assert "was sampled several times a question (--samples)" in report  # not compared on its first sample, silently


def test_a_sampled_run_resumed_at_another_batch_size_is_a_new_run_said_in_one_line(models, built_all, tmp_path, monkeypatch,
                                                                                   capsys):  # fmt: skip
    """A sampled answer depends on the batch shape it was drawn in (docs/scoring.md): the batch size is in a sampled
    request's cache key, so a run killed at --batch-size 2 and resumed at --batch-size 1 reuses none of its draws,
    says so in one line, and writes the texts of a run at --batch-size 1 done in one go."""
    benchmark, protocol, config, name = SAMPLED[4]  # Llama-3's released sampling, 5 new tokens: cheap to draw
    model, args = models[name], (*SAMPLED_ARGS, "--batch-size")
    assert _score(model, benchmark, protocol, config, built_all, tmp_path / "one", *args, "1") == 0
    real = interrupt_second_call(monkeypatch, hf.HFBackend, "score")  # killed after its first sample's answers
    assert _score(model, benchmark, protocol, config, built_all, tmp_path / "resumed", *args, "2") == 130
    monkeypatch.setattr(hf.HFBackend, "score", real)
    capsys.readouterr()
    assert _score(model, benchmark, protocol, config, built_all, tmp_path / "resumed", *args, "1") == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "--batch-size" in line]
    assert said == [f"physprobe: warning: {tmp_path / 'resumed'} holds sampled answers of {benchmark}/{config} drawn at "
                    "--batch-size 2; a sampled answer depends on the batch size (docs/scoring.md), so none is reused at "
                    "--batch-size 1: a new run"], said  # fmt: skip
    assert json.loads((tmp_path / "resumed" / "run.json").read_text())["scored_now"] == 9  # 3 rows, 3 samples each
    assert _texts(tmp_path / "resumed") == _texts(tmp_path / "one")
    assert json.loads((tmp_path / "resumed" / "spec.json").read_text())["settings"]["batch_size"] == 1
    capsys.readouterr()  # the same batch size again: every draw from the cache, nothing said
    assert _score(model, benchmark, protocol, config, built_all, tmp_path / "resumed", *args, "1") == 0
    assert not [line for line in capsys.readouterr().err.splitlines() if "--batch-size" in line]
    assert json.loads((tmp_path / "resumed" / "run.json").read_text())["scored_now"] == 0
