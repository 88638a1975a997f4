"""The protocol framework: registry, protocol choice and validation before any model loads, generation
(left-padded greedy decoding equals one prompt at a time, stop strings, a scripted model's answers parsed),
and the CLI's `protocols` listing and `--protocol` / `--method generate`."""

import json

import pyarrow.parquet as pq
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
)
from transformers.modeling_outputs import CausalLMOutputWithPast

from physprobe import protocols
from physprobe.backends.hf import generation
from physprobe.cli import main
from physprobe.data import registry
from physprobe.protocols.requests import Choice, Generate, Seq2Seq, YesNo
from physprobe.record import spec
from physprobe.run import runner


def _texts(answers) -> list[str]:
    """The texts of the generation engine's answers."""
    return [answer.text for answer in answers]


def test_every_registered_benchmark_declares_an_evaluation():
    from physprobe.dataset_scripts import BENCHMARKS

    assert registry.names() == list(BENCHMARKS)
    for name in registry.names():
        evaluation = registry.evaluation(name)
        assert evaluation.benchmark == name
        configs = {config.name for config in registry.builder(name).configs}
        assert set(evaluation.configs) <= configs
        assert len({p.name for p in evaluation.protocols}) == len(evaluation.protocols)
        for member in (m for members in evaluation.pooled.values() for m in members):
            assert member in configs
        scorable = configs if evaluation.scorable is None else set(evaluation.scorable)
        for protocol in evaluation.protocols:  # the rows and system turns a protocol declares are the benchmark's
            assert set(protocol.configs) <= scorable
            if isinstance(protocol.system_message, dict):
                assert set(protocol.system_message) <= scorable
            assert protocol.needs_chat or protocol.system_message is None  # a system turn goes through a chat


def _echo(row, config):
    return Choice("", tuple(row["q"] + " " + o for o in row["options"]))


def test_default_protocol_by_model_name_then_family_then_method():
    named = protocols.Protocol("named", Generate, lambda r, c: Generate("", ()), "s", "x",
                               families=("seq2seq",), default_for_models=(r"unifiedqa",), match=protocols.first_mentioned)  # fmt: skip
    plain = protocols.Protocol("plain", Seq2Seq, _echo, "s", "x", default_for=("seq2seq",))
    other = protocols.Protocol("other", YesNo, _echo, "s", "x")
    evaluation = protocols.Evaluation("demo", ("default",), (plain, other, named), metrics=lambda *a: {})
    assert evaluation.default("seq2seq").name == "plain"
    assert evaluation.default("seq2seq", model_name="allenai/UnifiedQA-t5-small").name == "named"
    assert evaluation.default("seq2seq", method="yes_no").name == "other"
    with pytest.raises(protocols.ProtocolError, match="demo has no protocol for a mlm model"):
        evaluation.default("mlm")
    with pytest.raises(protocols.ProtocolError, match="demo has no protocol 'nope'; known: plain, other, named"):
        evaluation.protocol("nope")
    with pytest.raises(ValueError, match="needs a match rule"):
        protocols.Protocol("bad", Generate, _echo, "s", "x")


@pytest.mark.parametrize(
    "args, message",
    [
        (("prost", ["weight"], None, None), "prost has no config 'weight'; known: default, directions"),
        (("prost", None, "vision", None), "unknown method 'vision'"),
        (("prost", None, None, "gpt4-style"), "prost has no protocol 'gpt4-style'; known: released-gpt"),
        (("prost", None, "mlm", "released-gpt"), "protocol 'released-gpt' uses method 'causal', not --method mlm"),
        (("cccons", None, "nli", None), "cccons cannot be scored with method 'nli'"),
        (("vision", None, None, None), "unknown benchmark 'vision'; known: cccons, newton, prost, text2afford"),
    ],
)
def test_arguments_are_checked_before_any_model_loads(tmp_path, args, message):
    benchmark, configs, method, protocol = args
    with pytest.raises(protocols.ProtocolError, match=message):
        # The model path does not exist: the error must come first, from the arguments.
        runner.run(
            spec.make(
                str(tmp_path / "no-model"),
                benchmark,
                out=tmp_path / "run",
                data=tmp_path,
                configs=configs,
                method=method,
                protocol=protocol,
            )
        )


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["score", "--model", str(tmp_path / "m"), "--benchmark", "prost", "--protocol", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("physprobe: error: prost has no protocol 'nope'") and err.count("\n") == 1


def test_protocols_command_lists_every_default(capsys):
    assert main(["protocols"]) == 0
    out = capsys.readouterr().out
    for name in registry.names():
        evaluation = registry.evaluation(name)
        for protocol in evaluation.protocols:
            assert f"  - {protocol.name} [{protocol.method}; " in out and f"      source: {protocol.source}\n" in out
        for family in {f for p in evaluation.protocols for f in p.default_for}:
            assert f"  {family:<8} default {evaluation.default(family).name:<22} alternatives:" in out
    assert (
        "  seq2seq  default released-t5            alternatives: span-sum, released-unifiedqa (default for names matching /unifiedqa/)"
        in out
    )
    assert main(["protocols", "prost"]) == 0
    assert "released-unifiedqa" in capsys.readouterr().out


# --- generation -------------------------------------------------------------------------------
WORDS = ["<pad>", "<eos>", "Which", "is", "bigger", "?", "Answer:", "a", "key", "box", "or", ".", "more", "no"]
# Each word's successor: after "Answer:" the scripted model says "a key box . more more ..."
SUCCESSOR = {"Answer:": "a", "a": "key", "key": "box", "box": ".", ".": "more", "more": "more", "?": "no", "no": "<eos>"}


class Scripted(GPT2LMHeadModel):
    """A causal LM whose next token depends only on the last one (``SUCCESSOR``): greedy answers are known."""

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        table = torch.full((len(WORDS), len(WORDS)), -10.0)
        for word, after in SUCCESSOR.items():
            table[WORDS.index(word), WORDS.index(after)] = 10.0
        return CausalLMOutputWithPast(logits=table[input_ids])


@pytest.fixture(scope="module")
def scripted():
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    config = GPT2Config(vocab_size=len(WORDS), n_positions=64, n_embd=8, n_layer=1, n_head=1,
                        eos_token_id=1, pad_token_id=0, bos_token_id=None)  # fmt: skip
    return Scripted(config).eval(), tokenizer


def _requests(prompts, budget=6, stop=(".",)):
    return [{"prompt": p, "choices": ["key", "key box"], "max_new_tokens": budget, "stop": list(stop)} for p in prompts]


def test_scripted_answers_are_cut_at_the_stop_string_and_matched(scripted):
    model, tokenizer = scripted
    prompts = ["Which is bigger a key or a key box ? Answer:", "Answer:", "Which is bigger ?"]
    texts = _texts(generation.generate(model, tokenizer, _requests(prompts), torch.device("cpu")))
    assert texts == ["a key box ", "a key box ", "no"]  # "no" then <eos>: generation stops, special tokens dropped
    assert [protocols.first_mentioned(t, ["key", "key box"]) for t in texts] == [1, 1, None]  # None: unparsed
    whole = _texts(generation.generate(model, tokenizer, _requests(prompts[:1], budget=3, stop=()), torch.device("cpu")))
    assert whole == ["a key box"]  # max_new_tokens bounds the answer


@pytest.fixture(scope="module")
def tiny(built_all, tiny_model):
    import datasets

    prost = datasets.load_dataset(str(built_all / "prost"), "default", split="test")
    texts = [f"{r['context']} {r['question']} {r['A']} {r['B']} {r['C']} {r['D']}" for r in prost.select(range(0, 18736, 7))]
    return {"causal": tiny_model("causal", texts, "gpt"), "seq2seq": tiny_model("seq2seq", texts, "t5")}


def _greedy_alone(model, tokenizer, prompt, budget, seq2seq):
    """One prompt at a time, no padding, argmax step by step: the independent reference."""
    if seq2seq:
        encoder = torch.tensor([tokenizer(prompt)["input_ids"]])
        out = [model.config.decoder_start_token_id]
    else:
        out = tokenizer(prompt)["input_ids"]  # as the tokenizer encodes it: no BOS forced (issue 20, item 3)
    start = 1 if seq2seq else len(out)
    for _ in range(budget):
        if seq2seq:
            logits = model(input_ids=encoder, decoder_input_ids=torch.tensor([out])).logits
        else:
            logits = model(input_ids=torch.tensor([out])).logits
        out.append(int(logits[0, -1].argmax()))
        if out[-1] == tokenizer.eos_token_id:
            break
    return tokenizer.decode(out[start:], skip_special_tokens=True)


@pytest.mark.parametrize("family", ["causal", "seq2seq"])
def test_batched_left_padded_generation_equals_one_prompt_at_a_time(tiny, family):
    auto = AutoModelForCausalLM if family == "causal" else AutoModelForSeq2SeqLM
    model, tokenizer = auto.from_pretrained(tiny[family]).eval(), AutoTokenizer.from_pretrained(tiny[family])
    prompts = [
        "A person drops a glass.",
        "The ball is moving toward the",
        "A person is trying to stack books, eggs and balls. The",
    ]
    requests = [{"prompt": p, "choices": [], "max_new_tokens": 5, "stop": []} for p in prompts]
    texts = _texts(generation.generate(model, tokenizer, requests, torch.device("cpu"), seq2seq=family == "seq2seq"))
    with torch.inference_mode():
        expected = [_greedy_alone(model, tokenizer, p, 5, family == "seq2seq") for p in prompts]
    assert texts == expected


def test_score_method_generate_keeps_raw_text_and_counts_unparsed(tiny, built_all, tmp_path):
    out = tmp_path / "run"
    args = ["score", "--model", str(tiny["causal"]), "--benchmark", "cccons", "--config", "ordinary,ccommon",
            "--method", "generate", "--limit", "6", "--data", str(built_all), "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    records = pq.read_table(out / "predictions.parquet").to_pylist()
    assert json.loads((out / "run.json").read_text())["spec"]["protocol"] == "question-generate"
    assert all(isinstance(r["generated"], str) and r["scores"] == [] for r in records)
    for config in ("ordinary", "ccommon"):
        mine = [r for r in records if r["config"] == config]
        parsed = [r for r in mine if r["prediction"] != protocols.UNPARSED]
        assert metrics[config]["unparsed"] == 6 - len(parsed) and metrics[config]["undecided"] == 0
        for record in parsed:  # a parsed answer names the object it was scored as
            assert record["prediction"] in (0, 1)
        # An unparsed answer stays in the denominator, wrong.
        assert metrics[config]["accuracy"] == pytest.approx(sum(r["prediction"] == r["reference"][0] for r in mine) / 6)
    # Resume: the generated answers come from the cache.
    assert main(args) == 0
    assert json.loads((out / "run.json").read_text())["scored_now"] == 0
