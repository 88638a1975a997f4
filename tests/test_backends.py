"""The backend seam: ``--backend`` resolution, a protocol a backend cannot serve, and chat templates in the
``hf`` backend (what the model reads, worked by hand from the template; the cache key, run.json and
metrics.json; the one-line errors; the unparsed warning) on a tiny GPT-2 whose tokenizer has a template."""

import hashlib
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from physprobe import backends
from physprobe.backends.base import BackendError, Description
from physprobe.backends.chat import Chat, Templating
from physprobe.backends.hf import score_loaded, scoring
from physprobe.backends.hf.model import Loaded
from physprobe.cli import main
from physprobe.data.hub_data import DataSource
from physprobe.protocols import requests
from physprobe.protocols.requests import Choice, Generate, GenerateEach, YesNo
from physprobe.protocols.results import Answer
from physprobe.record import spec
from physprobe.record.options import ScoreOptions

from . import tiny_models

TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")  # fmt: skip


@pytest.fixture(scope="module")
def models(built_all, made, tiny_model):
    """A tiny GPT-2 without a chat template and the same one with ``TEMPLATE``."""
    table = pq.read_table(built_all / "cccons" / "ordinary" / "test-00000-of-00001.parquet").to_pylist()
    texts = [f"{r['generative_input']} {r['obj1']} {r['obj2']}" for r in table]

    def chat_model(folder):
        tiny_models.causal_lm(folder, texts)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.chat_template = TEMPLATE
        tokenizer.save_pretrained(folder)

    return {"plain": tiny_model("causal", texts, "plain"), "chat": made.folder("chat", ["causal", texts, TEMPLATE], chat_model)}


def _loaded(folder):
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return Loaded(AutoModelForCausalLM.from_pretrained(folder).eval(), tokenizer, "causal", torch.device("cpu"))


# --- registry ---------------------------------------------------------------------------------
def test_backend_resolution(monkeypatch):
    assert backends.resolve(None, {}) == "hf" and backends.resolve("hf", {"revision": "main"}) == "hf"
    with pytest.raises(BackendError, match="unknown --backend 'tpu'; known: hf"):
        backends.resolve("tpu", {})
    with pytest.raises(BackendError, match="base_url=... names a server, which --backend hf does not use"):
        backends.resolve("hf", {"base_url": "http://127.0.0.1:8080/v1"})
    monkeypatch.setitem(
        backends.REGISTRY, "openai", backends.Registered("nowhere:Server", (), False, False)
    )  # a base_url implies the server backend
    assert backends.resolve(None, {"base_url": "http://127.0.0.1:8080/v1"}) == "openai"


@pytest.mark.parametrize("name", sorted(backends.REGISTRY))
def test_each_backend_serves_exactly_the_request_types_its_registry_line_names(name):
    # The registry's strings (read without importing a backend) against the engines the class dispatches to: a type
    # named but not served would fail at scoring time, one served but not named would never be offered.
    engines = backends.backend_class(name).ENGINES
    assert {kind.__name__ for kind in engines} == set(backends.REGISTRY[name].serves)
    versions = backends.backend_class(name).ENGINE_VERSIONS  # each engine's version, for the resume cache's key
    assert set(versions) == set(engines) and all(type(v) is int and v >= 1 for v in versions.values())
    assert all(issubclass(kind, requests.Request) and getattr(requests, kind.__name__) is kind for kind in engines)


def test_the_score_hint_and_run_json_versions_read_every_backends_libraries():
    # (the score extra itself: tests/test_wheel.py reads it from the built wheel)
    from physprobe.exit_status import score_extra
    from physprobe.util import provenance

    libraries = set(backends.libraries())
    assert {"torch", "transformers", "httpx"} <= libraries and score_extra() == {"matplotlib", *libraries}
    assert libraries <= set(provenance.versions(backends.libraries()))


def test_a_protocol_the_backend_cannot_serve_is_one_line_naming_those_that_can(monkeypatch):
    # Resolved from the registry's line alone, before the backend is made (its class is never imported).
    monkeypatch.setitem(
        backends.REGISTRY, "generate-only", backends.Registered("nowhere:GenerateOnly", ("Generate",), False, False)
    )
    # Built unchecked (its checks would import the registered class): the options as they reach ``resolve``.
    arguments = ScoreOptions.model_construct(model="gpt2", benchmark="prost", out="runs/gpt2-prost", backend="generate-only")
    source = DataSource("prost", "data/prost", None, ("default",))
    with pytest.raises(BackendError, match="protocol 'released-gpt' asks for mean log-probabilities of the options' tokens, "
                                           "which --backend generate-only cannot serve; use --backend hf$"):  # fmt: skip
        spec.resolve(arguments, Description("causal", "GPT2LMHeadModel"), source)
    with pytest.raises(BackendError, match="protocol 'sentence-sum' asks for log-likelihoods of options after a shared context, "
                                           "which --backend generate-only cannot serve; use --backend hf or openai$"):  # fmt: skip
        spec.resolve(arguments.model_copy(update={"protocol": "sentence-sum"}), Description("causal", "GPT2LMHeadModel"), source)


# --- chat templates: what the model reads -------------------------------------------------------
def test_templating_renders_prompts_only_when_asked(models):
    tokenizer = AutoTokenizer.from_pretrained(models["chat"])
    default = Templating(tokenizer, Chat())  # raw text, as the released scripts read it, whatever the request
    assert default.render("Which is bigger?", Generate) == default.render("Which is bigger?", Choice) == "Which is bigger?"
    instructed = Templating(tokenizer, Chat("on", system_instruction="Be brief."))
    assert instructed.render("Which?", Generate) == "<system>Be brief.\n<user>Which?\n<assistant>"
    raw = Templating(tokenizer, Chat(system_instruction="Be brief."))
    assert raw.render("Which?", YesNo) == "Be brief.\n\nWhich?"  # no template applied: instruction, blank line
    assert Templating(tokenizer, Chat("on")).render("Which?", Choice) == "<user>Which?\n<assistant>"
    assert Templating(tokenizer, Chat("on")).render("Which?", Generate) == "<user>Which?\n<assistant>"
    plain = Templating(AutoTokenizer.from_pretrained(models["plain"]), Chat())
    assert plain.render("Which?", Generate) == "Which?" and plain.template is None
    named = AutoTokenizer.from_pretrained(models["chat"])
    named.chat_template = {"default": TEMPLATE, "terse": "{{ messages[-1]['content'] }}="}
    assert Templating(named, Chat("on", "terse")).render("Which?", Generate) == "Which?="
    with pytest.raises(BackendError, match="has no chat template named 'nosuch'; its named templates: default, terse"):
        Templating(named, Chat("on", "nosuch")).applied(Generate)


def test_templated_prompts_are_fed_as_rendered_without_an_extra_bos(models):
    loaded = _loaded(models["chat"])
    model, tokenizer = loaded.model, loaded.tokenizer
    prompt = "A key box contains a key. Which is bigger, a key or a key box?"
    (generated,) = score_loaded(loaded, [Generate(prompt, ("key", "key box"), max_new_tokens=4)], Chat("on"))
    ids = tokenizer(f"<user>{prompt}\n<assistant>", add_special_tokens=False)["input_ids"]  # the template carries no BOS
    with torch.inference_mode():
        out = list(ids)
        for _ in range(4):
            out.append(int(model(input_ids=torch.tensor([out])).logits[0, -1].argmax()))
            if out[-1] == tokenizer.eos_token_id:
                break
    assert generated.text == tokenizer.decode(out[len(ids) :], skip_special_tokens=True) and generated.tokens == len(out) - len(
        ids
    )
    # Log-likelihood through the template when asked: context rendered, continuation after it, no BOS.
    request = Choice("Which is bigger?", (" a key", " a key box"))
    (scores,) = [r.values for r in score_loaded(loaded, [request], Chat("on"))]
    whole = [
        tokenizer(f"<user>Which is bigger?\n<assistant>{c}", add_special_tokens=False)["input_ids"] for c in request.continuations
    ]
    shared = scoring.common_prefix(whole)
    with torch.inference_mode():
        naive = []
        for sequence in whole:
            logprobs = torch.log_softmax(model(torch.tensor([sequence])).logits[0].float(), dim=-1)
            naive.append(sum(logprobs[i - 1, sequence[i]].item() for i in range(shared, len(sequence))))
    assert scores == pytest.approx(naive, abs=1e-4)
    (raw,) = [r.values for r in score_loaded(loaded, [request])]  # the default: raw text with BOS
    assert raw == pytest.approx(scoring.sequence_logprobs(model, tokenizer, [["Which is bigger? a key", "Which is bigger? a key box"]],
                                                          torch.device("cpu"))[0], abs=1e-6)  # fmt: skip


# --- chat templates end to end: run.json, metrics.json, cache, warnings, errors -----------------
def _score(model, data, out, *extra, configs="ordinary"):
    return main(["score", "--model", str(model), "--benchmark", "cccons", "--config", configs, "--limit", "4", "--data", str(data),
                 "--out", str(out), "--device", "cpu", "--bootstrap-iters", "0", *extra])  # fmt: skip


def test_chat_setting_is_recorded_keyed_and_warned(models, built_all, tmp_path, capsys):
    out = tmp_path / "run"
    assert _score(models["chat"], built_all, out, "--apply-chat-template") == 0  # default protocol question-generate
    info = json.loads((out / "run.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    expected = {"applied": True, "template": None, "template_sha256": hashlib.sha256(TEMPLATE.encode()).hexdigest(),
                "system_instruction": None}  # fmt: skip
    assert info["backend"]["name"] == "hf" and info["chat"] == expected and "chat" not in metrics["ordinary"]
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0  # the papers scored raw text: flagged
    runs_row = next(line for line in (tmp_path / "report" / "report.md").read_text().splitlines() if line.startswith("| **chat"))
    assert f"| question-generate (generate) | ⚠ chat template (default) sha256 {expected['template_sha256'][:12]} |" in runs_row
    warned = [line for line in capsys.readouterr().err.splitlines() if "named no option" in line]
    assert len(warned) == (1 if metrics["ordinary"]["unparsed"] * 2 > 4 else 0)
    if warned:
        assert warned[0].startswith(f"physprobe: warning: {metrics['ordinary']['unparsed']} of 4 answers of ")
        assert "read the answers (`generated` in predictions.parquet)" in warned[0]
    # Another chat setting is another cache key: nothing stale is served; the same setting again is all cached.
    assert _score(models["chat"], built_all, out) == 0
    info = json.loads((out / "run.json").read_text())
    assert info["scored_now"] == 4 and info["chat"]["applied"] is False
    assert _score(models["chat"], built_all, out, "--system-instruction", "Answer with one object.") == 0
    assert json.loads((out / "run.json").read_text())["scored_now"] == 4
    assert _score(models["chat"], built_all, out, "--apply-chat-template") == 0
    assert json.loads((out / "run.json").read_text())["scored_now"] == 0


def test_predictions_hold_each_prompt_as_the_model_read_it(models, built_all, tmp_path):
    """predictions.parquet's prompts: through the chat template (worked by hand from ``TEMPLATE``) where one applied,
    else the raw prompt after the system instruction and a blank line; token counts as the tokenizer encodes them."""
    rows = pq.read_table(built_all / "cccons" / "ordinary" / "test-00000-of-00001.parquet").to_pylist()
    tokenizer = AutoTokenizer.from_pretrained(models["chat"])
    for extra, shown, specials in ((["--apply-chat-template"], "<system>Be brief.\n<user>{}\n<assistant>", False),
                                   ([], "Be brief.\n\n{}", True)):  # fmt: skip
        out = tmp_path / f"run{len(extra)}"
        assert _score(models["chat"], built_all, out, "--system-instruction", "Be brief.", *extra) == 0
        for p in pq.read_table(out / "predictions.parquet").to_pylist():
            prompt = shown.format(rows[p["row"]]["generative_input"])
            assert p["prompts"] == [prompt]
            assert p["prompt_tokens"] == [len(tokenizer(prompt, add_special_tokens=specials)["input_ids"])]


@pytest.mark.parametrize(
    "model, fix",
    [
        ("chat", "score with --apply-chat-template, or a log-likelihood protocol"),
        ("plain", "read the answers (`generated` in predictions.parquet)"),
    ],
)
def test_untemplated_generation_warns_with_the_fix_that_applies(models, built_all, tmp_path, capsys, model, fix):
    out = tmp_path / "run"  # two configs and the figure pooled over them: the warning counts the configs' answers
    assert _score(models[model], built_all, out, configs="ordinary_nocontext,ccommon_nocontext") == 0
    metrics = json.loads((out / "metrics.json").read_text())
    unparsed = metrics["ordinary_nocontext"]["unparsed"] + metrics["ccommon_nocontext"]["unparsed"]
    assert json.loads((out / "run.json").read_text())["backend"]["name"] == "hf" and metrics["nocontext"]["unparsed"] == unparsed
    warned = [line for line in capsys.readouterr().err.splitlines() if "named no option" in line]
    assert unparsed * 2 > 8 and len(warned) == 1  # a tiny random model names no option
    assert warned[0].startswith(f"physprobe: warning: {unparsed} of 8 answers of ") and fix in warned[0]


@pytest.mark.parametrize("extra, message", [
    (["--apply-chat-template"], "--apply-chat-template: {plain} has no default chat template"),
    (["--apply-chat-template", "nosuch"], "has no chat template named 'nosuch'; give --apply-chat-template without a name"),
    (["--system-instruction", " "], "--system-instruction is empty"),
])  # fmt: skip
def test_chat_option_errors_are_one_line(models, built_all, tmp_path, capsys, extra, message):
    assert _score(models["plain"], built_all, tmp_path / "run", *extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(plain=models["plain"]) in err


def test_a_template_asked_of_token_sequences_is_one_line(models, built_all, tmp_path, capsys):
    args = ["score", "--model", str(models["chat"]), "--benchmark", "prost", "--limit", "2", "--data", str(built_all),
            "--out", str(tmp_path / "run"), "--apply-chat-template"]  # fmt: skip
    assert main(args) == 2  # PROST's released-gpt scores token sequences: no prompt to template
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("this protocol asks for mean log-probabilities of the options' tokens and reads no "
                                     "prompt: leave them out") in err  # fmt: skip


# --- declarative request fields the hf backend resolves -------------------------------------------
def test_masked_pair_feeds_segment_ids_only_when_the_request_says_so(tmp_path):
    from transformers import AutoModelForMaskedLM

    from physprobe.protocols.requests import MaskedPair

    folder = tiny_models.masked_lm(tmp_path / "bert", ["he rides a horse .", "a horse can be used for riding by human"] * 20)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForMaskedLM.from_pretrained(folder).eval()
    loaded = Loaded(model, tokenizer, "mlm", torch.device("cpu"))
    request = MaskedPair("he rides a horse .", "horse can be used for [MASK] by human", ("horse", "a"))
    encoded = tokenizer(
        request.first, request.second.replace("[MASK]", tokenizer.mask_token), return_tensors="pt", return_token_type_ids=True
    )
    assert encoded["token_type_ids"].sum() > 0  # the second segment's ids are 1: feeding them changes the logits
    where = encoded["input_ids"][0].tolist().index(tokenizer.mask_token_id)
    words = tokenizer.convert_tokens_to_ids(list(request.words))
    with torch.inference_mode():
        typed = torch.log_softmax(model(**encoded).logits[0, where], -1)[words].tolist()
        untyped = torch.log_softmax(model(input_ids=encoded["input_ids"]).logits[0, where], -1)[words].tolist()
    assert typed != pytest.approx(untyped, abs=1e-6)
    assert score_loaded(loaded, [request])[0].values == pytest.approx(typed, abs=1e-5)
    without = MaskedPair(request.first, request.second, request.words, token_type_ids=False)
    assert score_loaded(loaded, [without])[0].values == pytest.approx(untyped, abs=1e-5)


def test_a_separator_placeholder_becomes_the_tokenizers_separator(models, monkeypatch):
    import physprobe.backends.hf.masked  # the engine module, which an earlier test may or may not have imported
    from physprobe.protocols.requests import Masked

    seen = {}

    class Engine:  # stands in for the masked-LM engine: records the texts the backend resolved
        @staticmethod
        def masked_logprobs(model, tokenizer, texts, candidates, device, **options):
            seen["texts"] = texts
            return [[0.0] for _ in texts]

    monkeypatch.setattr(physprobe.backends.hf, "masked", Engine)
    tokenizer = AutoTokenizer.from_pretrained(models["plain"])  # no sep token: its EOS, as RoBERTa's </s>
    assert tokenizer.sep_token is None and tokenizer.eos_token == "<s>"
    request = Masked("A bat . [SEP] bat can be used for [MASK] by human", ("hit",))
    score_loaded(Loaded(None, tokenizer, "mlm", torch.device("cpu")), [request])
    assert seen["texts"] == ["A bat . <s> bat can be used for [MASK] by human"]


@pytest.mark.slow
@pytest.mark.processes
def test_scoring_prints_no_notice_of_transformers_cache_rename(models, built_all, tmp_path):
    # transformers 5.2x renamed a forward's past_key_values to cache and says so on every forward (a FutureWarning) and
    # once in its log; the engines pass the name every transformers 5 accepts, so physprobe silences just those two.
    # A fresh process: transformers logs the notice once per process.
    for benchmark, config in (("prost", "mass"), ("cccons", "ordinary")):  # scoring engine (released-gpt); generation
        done = subprocess.run([sys.executable, "-W", "default", "-m", "physprobe", "score", "--model", str(models["plain"]),
                               "--benchmark", benchmark, "--config", config, "--limit", "2", "--data", str(built_all),
                               "--out", str(tmp_path / benchmark), "--device", "cpu", "--bootstrap-iters", "0"],
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert "past_key_values" not in done.stderr and "Use `cache` instead" not in done.stderr


@pytest.mark.parametrize("request_type", [YesNo, GenerateEach])
def test_a_chunk_of_many_prompt_requests_counts_requests_as_its_batches_end(models, request_type):
    # 4 requests of 3 prompts, batches of 2 prompts: the count moves with the batches and ends at the 4 requests.
    class Counter:
        def __init__(self):
            self.updates, self.spared = [], []

        def update(self, n):
            self.updates.append(n)

        def spare(self, n):
            self.spared.append(n)

    loaded = _loaded(models["plain"])
    loaded.batching = {"max_batch": 2, "batch_tokens": 1 << 62}
    prompts = ("A key box contains a key.", "Which is bigger?", "Can a human lift the box?")
    requests = [request_type(prompts) if request_type is YesNo else request_type(prompts, max_new_tokens=2) for _ in range(4)]
    counter = Counter()
    results = score_loaded(loaded, requests, progress=counter)
    assert len(results) == 4 and sum(counter.updates) == pytest.approx(4) and len(counter.updates) >= 3
    assert 0 <= sum(counter.spared) < 4  # a generation's unused budget, never more than the requests counted


@pytest.mark.parametrize("engine", ["physprobe's loop", "model.generate"])
def test_generation_counts_every_answer_token_as_its_share_of_a_request(models, monkeypatch, engine):
    # One decoding batch of 3 answers of up to 12 tokens: the count moves as the prompts run and at every step (a share of
    # each request per token), never backwards, and ends at the 3 requests; it does not wait for the batch's answers.
    from physprobe.backends.hf import generation

    if engine == "model.generate":
        monkeypatch.setattr(generation, "argmax_decodes", lambda model: False)
    updates, spared = [], []
    counter = type("Counter", (), {"update": lambda self, n: updates.append(n), "spare": lambda self, n: spared.append(n)})()
    loaded = _loaded(models["plain"])
    requests = [
        Generate(f"Which is bigger, the {thing} or the box?", (), max_new_tokens=12, stop=()) for thing in ("cup", "key", "hat")
    ]
    texts = score_loaded(loaded, requests, progress=counter)
    assert len(texts) == 3 and sum(updates) == pytest.approx(3)
    assert len(updates) >= 5 and all(n > 0 for n in updates)
    running = [sum(updates[: i + 1]) for i in range(len(updates))]
    assert running[-2] < 3 and sum(r != round(r) for r in running) >= 4  # shares of the three, step by step, before the end
    assert 0 <= sum(spared) < 3 and (sum(spared) > 0) == any(text.tokens < 12 for text in texts)  # an early end spares


def test_a_protocol_released_through_a_chat_template_gets_it_with_its_system_message(models, built_all, tmp_path, monkeypatch):
    # zero_shot_llama-3.py sends [system, user] through the tokenizer's template (:87-97): the run applies the
    # template without --apply-chat-template and sends the script's system message; the report does not flag it.
    from physprobe.backends.hf import generation
    from physprobe.dataset_scripts.text2afford.evaluation import EVALUATION

    protocol = EVALUATION.protocol("yes-no-llama3-zero-shot")
    read = []

    def answer(model, tokenizer, asks, device, **options):
        read.extend(a["prompt"] for a in asks)
        return [Answer("Yes.", 2)] * len(asks)

    monkeypatch.setattr(generation, "generate", answer)
    out = tmp_path / "llama3"
    assert main(["score", "--model", str(models["chat"]), "--benchmark", "text2afford", "--protocol", protocol.name,
                 "--limit", "1", "--data", str(built_all), "--out", str(out), "--device", "cpu", "--bootstrap-iters", "0"]) == 0  # fmt: skip
    row = pq.read_table(built_all / "text2afford" / "default" / "test-00000-of-00001.parquet").slice(0, 1).to_pylist()[0]
    system = "You are a chatbot who always responds to the query!"
    expected = [f"<system>{system}\n<user>{prompt}\n<assistant>" for prompt in protocol.build(row, "default").prompts]
    assert read == expected and len(read) == 15
    info = json.loads((out / "run.json").read_text())
    assert info["chat"]["applied"] is True and info["spec"]["configs"] == ["default"]
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    assert "⚠ chat template" not in (tmp_path / "report" / "report.md").read_text()


def test_a_system_instruction_beside_a_protocols_own_message_is_one_line(models, built_all, tmp_path, capsys):
    code = main(["score", "--model", str(models["chat"]), "--benchmark", "text2afford", "--protocol", "yes-no-llama3-zero-shot",
                 "--limit", "1", "--data", str(built_all), "--out", str(tmp_path / "run"), "--system-instruction", "Be brief."])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1
    assert (
        "protocol 'yes-no-llama3-zero-shot' sends its released script's system message; leave out --system-instruction" in err[0]
    )
    assert not (tmp_path / "run").exists()


def test_the_released_llama3_protocol_reads_its_scripts_rows_without_config(models, built_all, tmp_path, monkeypatch):
    from physprobe.backends.hf import generation

    monkeypatch.setattr(generation, "generate", lambda model, tokenizer, asks, device, **options: [Answer("no", 1)] * len(asks))
    out = tmp_path / "released"
    assert main(["score", "--model", str(models["chat"]), "--benchmark", "text2afford", "--protocol", "yes-no-llama3-released",
                 "--limit", "1", "--data", str(built_all), "--out", str(out), "--device", "cpu", "--bootstrap-iters", "0"]) == 0  # fmt: skip
    assert json.loads((out / "run.json").read_text())["spec"]["configs"] == ["high_agreement"]
