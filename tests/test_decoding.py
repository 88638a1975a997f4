"""Decoding as released (``--decoding released``): each generating protocol's declared decoding against the released
scripts' calls, transcribed here by hand from the upstream files the declarations cite."""

import collections
import copy
import random

import pyarrow.parquet as pq
import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from physprobe.backends.hf import generation
from physprobe.backends.hf.draws import SeededDraws
from physprobe.cli import main
from physprobe.data import registry
from physprobe.errors import ProtocolError
from physprobe.protocols import Protocol
from physprobe.protocols.decoding import Decoding, Released, sample_seed
from physprobe.protocols.requests import Choice, Generate, GenerateEach, decoded
from physprobe.publish.lm_eval_export import export

GENERATING = [(b, p) for b in registry.names() for p in registry.evaluation(b).protocols if p.generates]


def test_every_generating_protocol_declares_its_released_decoding_with_a_source():
    assert len(GENERATING) == 11
    for benchmark, protocol in GENERATING:
        assert protocol.released is not None, (benchmark, protocol.name)
        for _, decoding in protocol.released.all():
            assert decoding.source and ("@" in decoding.source or "no " in decoding.source), (protocol.name, decoding.source)
    scoring = [p for b in registry.names() for p in registry.evaluation(b).protocols if not p.generates]
    assert all(p.released is None for p in scoring)
    with pytest.raises(ValueError, match="released decoding is for protocols that generate"):
        Protocol("demo", Choice, dict, "", "", released=Released(Decoding.greedy("x")))


# The released calls, as the cited lines read (NewtonReasoning/Newton hf_track2.py, query_gpt.py; databrickslabs/dolly
# training/generate.py; sayantan11995/Affordance src/LLM/zero_shot_llama-3.py), model by model.
NEWTON_BY_MODEL = {
    "google/flan-t5-large": ("greedy", {}),  # pipeline(prompt, max_length=128, do_sample=False)
    "declare-lab/flan-alpaca-gpt4-xl": ("greedy", {}),  # 'flan' in the name is tested first: the flan class
    "allenai/unifiedqa-v2-t5-large-1363200": ("greedy", {}),  # generate(max_length=128, do_sample=False)
    "databricks/dolly-v2-3b": ("sampling", {"temperature": 1.0, "top_p": 0.92, "top_k": 0, "max_new_tokens": 256}),
    "chainyo/alpaca-lora-7b": ("beam", {"num_beams": 4, "length_penalty": 1.0, "early_stopping": False, "max_new_tokens": 128}),
    "tiiuae/falcon-7b": ("sampling", {"temperature": 1.0, "top_p": 1.0, "top_k": 10, "max_new_tokens": 200, "max_length": 200}),
}


@pytest.mark.parametrize("protocol", ["released-generate", "table1-generate"])
def test_newton_decodes_each_model_class_as_its_released_class(protocol):
    declared = registry.evaluation("newton").protocol(protocol)
    for model, (kind, settings) in NEWTON_BY_MODEL.items():
        assert declared.decoding("released", model).key() == {"kind": kind, **settings}, model
        assert declared.decoding("greedy", model).kind == "greedy"


def test_sampled_protocols_carry_the_released_settings():
    gpt = registry.evaluation("newton").protocol("released-gpt-chat").decoding("released", "gpt-4")
    assert gpt.key() == {"kind": "sampling", "temperature": 1.0, "top_p": 0.5, "top_k": 0}  # top_p=0.5 alone; no max_tokens
    for name in ("yes-no-llama3-released", "yes-no-llama3-zero-shot"):
        llama = registry.evaluation("text2afford").protocol(name).decoding("released", "meta-llama/Meta-Llama-3-8B-Instruct")
        assert llama.key() == {"kind": "sampling", "temperature": 0.7, "top_p": 0.9, "top_k": 50, "max_new_tokens": 5}
    greedy = [("text2afford", "yes-no-flan-t5"), ("text2afford", "yes-no-falcon"), ("text2afford", "yes-no-vlm-text"),
              ("prost", "released-unifiedqa"), ("cccons", "question-generate")]  # fmt: skip
    for benchmark, name in greedy:
        assert registry.evaluation(benchmark).protocol(name).decoding("released", "any/model").kind == "greedy"


def test_released_is_refused_where_nothing_is_generated():
    with pytest.raises(ProtocolError, match="'released-gpt' generates no answer: --decoding released"):
        registry.evaluation("prost").protocol("released-gpt").decoding("released", "gpt2")


def test_a_greedy_request_keeps_its_cache_key_and_a_sampled_one_carries_settings_and_seed():
    protocol = registry.evaluation("text2afford").protocol("yes-no-llama3-released")
    ask = GenerateEach(("Can a human lift it?",), 5, ())
    assert decoded(ask, protocol.decoding("greedy", "llama"), 3) is ask
    sampled = decoded(ask, protocol.decoding("released", "llama"), 3)
    assert sampled.key() != ask.key() and sampled.seed == 3 and sampled.max_new_tokens == 5
    beam = decoded(Generate("q", ("a",), 128, max_length=128), newton_released("chainyo/alpaca-lora-7b"), 9)
    assert beam.seed is None and (beam.max_new_tokens, beam.max_length) == (128, None)  # the beam call's own budget


def newton_released(model):
    return registry.evaluation("newton").protocol("released-generate").decoding("released", model)


def test_a_sample_seed_depends_on_seed_row_sample_and_settings_alone():
    top_p = Decoding.sampling("x", top_p=0.5)
    base = sample_seed(0, "newton", "track1", 4, 0, top_p)
    assert base == sample_seed(0, "newton", "track1", 4, 0, Decoding.sampling("another source", top_p=0.5))
    others = [sample_seed(1, "newton", "track1", 4, 0, top_p), sample_seed(0, "newton", "track2_mc", 4, 0, top_p),
              sample_seed(0, "newton", "track1", 5, 0, top_p), sample_seed(0, "newton", "track1", 4, 1, top_p),
              sample_seed(0, "newton", "track1", 4, 0, Decoding.sampling("x", top_p=0.6))]  # fmt: skip
    assert base not in others and len(set(others)) == len(others) and 0 <= base < 2**63


WORDS = "the a heavy light glass brick stone feather falls rolls breaks bends is are on under box ball cup table".split()


@pytest.fixture(scope="module")
def tiny_causal(tiny_model):
    """A tiny random GPT-2 (``tests/tiny_models.py``) and its tokenizer, trained on sentences of a small vocabulary."""
    rng = random.Random(0)
    texts = [" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(400)]
    folder = tiny_model("causal", texts, "gpt")
    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def _asks(decoding, n=20, sample=0, seed=0, budget=8):
    rng = random.Random(1)
    prompts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]
    return [{"prompt": p, "max_new_tokens": budget, "stop": [], "decoding": decoding,
             "seed": sample_seed(seed, "demo", "default", row, sample, decoding) if decoding.samples else None}
            for row, p in enumerate(prompts)]  # fmt: skip


def _texts(model, tokenizer, asks, max_batch=None):
    return [a.text for a in generation.generate(model, tokenizer, asks, torch.device("cpu"), max_batch=max_batch)]


LLAMA3 = registry.evaluation("text2afford").protocol("yes-no-llama3-released").decoding("released", "llama")


@pytest.mark.parametrize("processors", [False, True], ids=["own-loop", "model.generate"])
def test_seeded_samples_are_reproducible_and_independent_of_batches_and_order(tiny_causal, processors):
    model, tokenizer = tiny_causal
    if processors:  # a generation config with a logits processor: answers come from model.generate
        model = copy.deepcopy(model)
        model.generation_config.repetition_penalty = 1.3
        assert not generation.argmax_decodes(model)
    decoding = Decoding.sampling("test", temperature=1.5, top_p=0.95, top_k=50)
    asks = _asks(decoding)
    first = _texts(model, tokenizer, asks, max_batch=16)
    assert first == _texts(model, tokenizer, asks, max_batch=16)
    assert first == _texts(model, tokenizer, asks, max_batch=1)
    assert first[::-1] == _texts(model, tokenizer, asks[::-1], max_batch=16)
    assert first[5:9] == _texts(model, tokenizer, asks[5:9])  # a resumed run asks only the rest
    greedy = _texts(model, tokenizer, _asks(Decoding.greedy("test")))
    assert sum(a != b for a, b in zip(first, greedy)) >= 10
    again = _texts(model, tokenizer, _asks(decoding, sample=1))  # another sample index: other draws
    assert sum(a != b for a, b in zip(first, again)) >= 10


def test_sampling_follows_the_warped_distribution():
    """Drawn tokens land only where the warpers leave probability (top-k 2 of 4), near their renormalised shares."""
    logits = torch.log(torch.tensor([[0.1, 0.6, 0.3, 0.0001]]))
    counts = collections.Counter()
    for seed in range(2000):
        counts[SeededDraws(Decoding.sampling("t", top_k=2), [seed]).pick(logits, [0]).item()] += 1
    assert set(counts) == {1, 2} and abs(counts[1] / 2000 - 2 / 3) < 0.04


def test_beam_search_equals_transformers_generate_on_the_released_settings(tiny_causal):
    model, tokenizer = tiny_causal
    beam = registry.evaluation("newton").protocol("released-generate").decoding("released", "chainyo/alpaca-lora-7b")
    asks = _asks(beam, n=24, budget=12)
    texts = _texts(model, tokenizer, asks, max_batch=16)
    expected = []
    for ask in asks:
        ids = tokenizer(ask["prompt"], return_tensors="pt").input_ids
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=GenerationConfig(
            temperature=0.2, top_p=0.75, top_k=40, num_beams=4, max_new_tokens=12,  # hf_track2.py:76-82, budget cut to 12
            pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id))  # fmt: skip
        expected.append(tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True))
    assert texts == expected
    greedy = _texts(model, tokenizer, _asks(Decoding.greedy("test"), n=24, budget=12))
    assert texts != greedy


def test_lm_eval_export_carries_the_released_decoding_of_the_named_model(built_all, tmp_path):
    export(tmp_path / "greedy", data=built_all, benchmarks=["newton"])
    export(tmp_path / "falcon", data=built_all, benchmarks=["newton"], decoding="released", model="tiiuae/falcon-7b")
    task = "newton/physprobe_newton_track1_released_generate.yaml"
    greedy = yaml.safe_load((tmp_path / "greedy" / task).read_text().replace("!function", ""))
    falcon = yaml.safe_load((tmp_path / "falcon" / task).read_text().replace("!function", ""))
    assert greedy["generation_kwargs"] == {"until": [], "max_gen_toks": 128, "do_sample": False}
    # hf_track2.py:57-64: pipeline(prompt, max_length=200, do_sample=True, top_k=10); temperature and top_p generate's defaults
    assert falcon["generation_kwargs"] == {"until": [], "max_gen_toks": 200, "do_sample": True, "temperature": 1.0, "top_p": 1.0,
                                           "top_k": 10}  # fmt: skip
    assert "decoding as released: sampling" in (tmp_path / "falcon" / "README.md").read_text()


def test_a_server_is_sent_the_released_sampling_with_each_answers_seed_and_the_run_says_it_is_not_reproducible(
    built_all, tmp_path, capsys
):
    from tests.fake_openai import MODEL, FakeServer

    args = ["score", "--model", MODEL, "--benchmark", "newton", "--protocol", "released-gpt-chat", "--config", "track1",
            "--limit", "2", "--data", str(built_all), "--bootstrap-iters", "0", "--decoding", "released", "--samples", "2"]  # fmt: skip
    with FakeServer() as server:
        assert main([*args, "--model-args", f"base_url={server.base_url}", "--out", str(tmp_path / "run")]) == 0
        chats = [body for body in server.bodies if "messages" in body and body["max_tokens"] == 128]
    seeds = [sample_seed(0, "newton", "track1", row["row"], k, NEWTON_GPT) for row in _lines(tmp_path / "run") for k in (0, 1)]
    assert sorted(body["seed"] for body in chats) == sorted(seeds) and len(set(seeds)) == 4
    assert all((body["temperature"], body["top_p"], "top_k" in body) == (1.0, 0.5, False) for body in chats)  # query_gpt.py:25
    assert "not reproducible as the hf backend's are" in capsys.readouterr().err
    with FakeServer() as server:  # greedy, as before: temperature 0 and no seed
        assert main([*args[:-4], "--model-args", f"base_url={server.base_url}", "--out", str(tmp_path / "greedy")]) == 0
        assert all(body["temperature"] == 0 and "seed" not in body for body in server.bodies if "messages" in body)


def test_beam_search_is_refused_for_a_server_in_one_line(built_all, capsys):
    from tests.fake_openai import FakeServer

    with FakeServer(model="chainyo/alpaca-lora-7b") as server:
        code = main(["score", "--model", "chainyo/alpaca-lora-7b", "--benchmark", "newton", "--data", str(built_all),
                     "--model-args", f"base_url={server.base_url}", "--decoding", "released"])  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err.startswith(
        "physprobe: error: protocol 'released-generate' decodes chainyo/alpaca-lora-7b by beam search"
    )


NEWTON_GPT = registry.evaluation("newton").protocol("released-gpt-chat").decoding("released", "gpt-4")


def _lines(folder):
    return pq.read_table(folder / "predictions.parquet").to_pylist()


def test_samples_and_seed_are_refused_where_nothing_is_sampled_and_a_card_takes_neither(capsys):
    from physprobe.backends.base import Description
    from physprobe.data import hub_data
    from physprobe.record import spec

    source = hub_data.DataSource("newton", "build/newton", None, ("track1",))
    gpt2 = Description("causal", "GPT2LMHeadModel", chat_template=False)
    with pytest.raises(
        ProtocolError, match=r"^--samples 3 is for sampled answers and protocol 'released-generate' decodes gpt2 by greedy"
    ):
        spec.resolve(spec.check("gpt2", "newton", samples=3), gpt2, source)
    with pytest.raises(ProtocolError, match=r"^--seed 5 is for sampled answers"):
        spec.resolve(spec.check("gpt2", "newton", decoding="released", seed=5), gpt2, source)
    falcon = spec.resolve(spec.check("tiiuae/falcon-7b", "newton", decoding="released", samples=2, seed=5), gpt2, source)
    assert (falcon.decoding.top_k, falcon.samples, falcon.seed) == (10, 2, 5)
    assert spec.resolve(spec.check("gpt2", "newton"), gpt2, source).seed is None  # a greedy run records no seed
    assert main(["score", "--model", "gpt2", "--benchmark", "all", "--decoding", "released"]) == 2
    assert capsys.readouterr().err.startswith("physprobe: error: --decoding released and --samples apply to one benchmark's")


@pytest.mark.parametrize(
    ("benchmark", "sampling"),  # from docs/scoring.md's table: the protocols whose released script samples any model
    [("newton", ["released-gpt-chat", "gpt-chat-printed-template"]),
     ("text2afford", ["yes-no-llama3-released", "yes-no-llama3-zero-shot"]), ("cccons", [])],
)  # fmt: skip
def test_samples_where_nothing_samples_names_the_protocols_that_do_and_the_command_runs(benchmark, sampling):
    import re
    import shlex

    from physprobe.backends.base import Description
    from physprobe.cli import parser, score_options
    from physprobe.data import hub_data
    from physprobe.record import spec

    argv = ["score", "--model", "smollm2", "--benchmark", benchmark, "--decoding=released", "--samples", "3", "--limit", "2"]
    smollm2 = Description("causal", "LlamaForCausalLM", chat_template=True)
    source = hub_data.DataSource(benchmark, f"build/{benchmark}", None, ("default",))

    def options(argv):  # as main reads a command line: its words kept as run.json's command
        args = parser().parse_args(argv)
        args.argv = argv
        return score_options(args)

    with pytest.raises(ProtocolError) as refused:
        spec.resolve(options(argv), smollm2, source)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("--samples 3 is for sampled answers and protocol ")
    if not sampling:
        assert message.endswith(f"leave it out: no protocol of {benchmark} samples as released for this model (docs/scoring.md)")
        return
    assert f"whose released decoding samples smollm2: {', '.join(sampling)} (" in message
    command = shlex.split(re.search(r"\((physprobe score [^)]*)\)$", message).group(1))
    assert command[-4:] == ["--decoding", "released", "--protocol", sampling[0]] and "--decoding=released" not in command
    run = spec.resolve(options(command[1:]), smollm2, source)  # the command to copy works
    assert (run.protocol, run.samples, run.decoding.samples) == (sampling[0], 3, True)
