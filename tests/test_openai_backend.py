"""``--backend openai`` against a real server: llama.cpp's OpenAI-compatible server (``tests/llama_server.py``) with
SmolLM2-135M-Instruct's GGUF; the same GGUF read by transformers (float32) is the independent reference."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from physprobe import backends
from physprobe.backends.base import BackendError, Settings
from physprobe.backends.chat import Chat
from physprobe.backends.openai.backend import OpenAIBackend
from physprobe.backends.openai.client import Client, ServerOptions
from physprobe.cli import main
from physprobe.protocols.requests import Generate, Masked
from physprobe.record import spec
from physprobe.run.runner import run
from tests.conftest import cache_with
from tests.llama_server import ALIAS, GGUF, LlamaServer, free_port, gguf_folder
from tests.run_folders import cached


def backend(base_url: str, model: str = ALIAS, **args) -> OpenAIBackend:
    return OpenAIBackend(Settings(model, {"base_url": base_url, **{k: str(v) for k, v in args.items()}}))


def test_unreachable_server_is_one_line():
    port = free_port()  # nothing listens there
    with pytest.raises(BackendError) as error:
        backend(f"http://127.0.0.1:{port}/v1", max_retries=0).score([Generate("Hi", ("a", "b"))])
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"cannot reach the server at http://127.0.0.1:{port}/v1 (")
    assert message.endswith("after 1 attempt; start it, or check --model-args base_url=...")


def test_options_a_server_does_not_take_are_refused():
    url = "http://127.0.0.1:1/v1"
    with pytest.raises(BackendError, match="^--dtype does not apply to --backend openai"):
        OpenAIBackend(Settings(ALIAS, {"base_url": url}, dtype="float32"))
    with pytest.raises(
        BackendError, match=r"^--model-args gguf_file=\.\.\. does not apply to --backend openai; its keys: base_url, "
    ):
        OpenAIBackend(Settings(ALIAS, {"base_url": url, "gguf_file": GGUF}))
    for key, value, expected in [("num_concurrent", "many", "a whole number from 1 to 1024"), ("num_concurrent", "0", "a whole number from 1 to 1024"),
                                 ("max_retries", "-1", "a whole number from 0 to 100"), ("timeout", "nan", "a number from 0.001 to 86400.0"),
                                 ("timeout", "inf", "a number from 0.001 to 86400.0"), ("timeout", "0", "a number from 0.001 to 86400.0"),
                                 ("timeout", "-1", "a number from 0.001 to 86400.0")]:  # fmt: skip
        with pytest.raises(BackendError, match=rf"^--model-args {key}='{value}': expected {expected}$"):
            backend(url, **{key: value})
    assert not backends.serves("openai", Masked)  # the runner names the backends that serve masked-LM and NLI protocols


@pytest.mark.slow
def test_model_the_server_does_not_serve_is_one_line(llama_server):
    # llama.cpp's server answers any model name with the model it holds; the backend asks /v1/models first.
    with pytest.raises(BackendError, match=rf"^{llama_server.base_url} does not serve model 'gpt-4'; it serves: {ALIAS} \(pass"):
        backend(llama_server.base_url, model="gpt-4").score([Generate("Hi", ("a", "b"))])


@pytest.mark.slow
def test_echo_holds_the_prompt_tokens_only(llama_server):
    # llama-cpp-python decodes each echoed token on its own: the three bytes of a CJK character split over tokens
    # come back as empty strings. The prompt's tokens end at its full stop; the generated token after it is left out.
    tokens = Client(ServerOptions(llama_server.base_url), ALIAS).echo("The \u6771\u4eac tower is tall.")
    assert [token for token, _ in tokens][-4:] == [" tower", " is", " tall", "."]
    assert tokens[0] == ("The", None) and all(value is not None for _, value in tokens[1:])


@pytest.mark.slow
def test_refused_key_is_one_line_and_never_printed(tmp_path, monkeypatch):
    with LlamaServer(tmp_path / "server.log", api_key="right-key") as server:
        monkeypatch.setenv("OPENAI_API_KEY", "wrong-key")
        with pytest.raises(BackendError) as error:
            backend(server.base_url).score([Generate("Hi", ("a", "b"))])
        assert str(error.value) == (f"{server.base_url} refused the API key (HTTP 401; $OPENAI_API_KEY is set); "
                                    "export OPENAI_API_KEY with a key it accepts")  # fmt: skip
        monkeypatch.setenv("OPENAI_API_KEY", "right-key")
        chosen = backend(server.base_url)
        assert chosen.score([Generate("The capital of France is", ("Paris",), max_new_tokens=4)])[0].text
        assert "right-key" not in repr(chosen.info()) + repr(chosen.identity(Generate))


@pytest.mark.slow
def test_retries_until_the_server_comes_up(tmp_path):
    server = LlamaServer(tmp_path / "server.log")
    client = Client(ServerOptions(server.base_url, max_retries=8), ALIAS)  # waits 1, 2, 4, 8, 16, 30, ... s between attempts
    outcome = []
    asking = threading.Thread(target=lambda: outcome.append(client.check()))
    asking.start()  # connection refused at first
    time.sleep(1.5)
    try:
        server.start()  # from this thread: the server dies with the thread that started it
        asking.join(timeout=120)
    finally:
        server.stop()
    assert [entry["id"] for entry in outcome] == [ALIAS] and client.requests_sent > 1  # the served entry, once it answered


def test_cli_errors_are_one_line(built_all, tmp_path, capsys):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    common = ["score", "--model", ALIAS, "--data", str(built_all), "--limit", "2", "--model-args"]
    for case, (args, expected) in enumerate([
        ([f"base_url={url},max_retries=0", "--benchmark", "newton", "--config", "track1"],
         f"physprobe: error: cannot reach the server at {url} ("),
        ([f"base_url={url}", "--benchmark", "prost", "--protocol", "released-mlm"],  # refused before the server is asked
         "physprobe: error: protocol 'released-mlm' asks for candidate words at a mask, which --backend openai cannot serve; use "
         "--backend hf\n"),
        ([f"base_url={url}", "--benchmark", "text2afford", "--method", "nli"],
         "physprobe: error: --method nli of text2afford asks for entailment of sentence pairs (NLI), which --backend openai cannot "
         "serve; use --backend hf\n"),
    ]):  # fmt: skip
        # Each case its own folder: a run folder belongs to one model and benchmark (the first case claims its own).
        assert main([*common, *args, "--out", str(tmp_path / f"never-{case}")]) == 2
        stderr = capsys.readouterr().err
        assert stderr.startswith(expected), stderr
        assert stderr.count("\n") == 1 and "Traceback" not in stderr


def test_the_papers_protocol_a_server_cannot_serve_is_refused_once_the_server_describes_its_model(built_all, tmp_path, capsys):
    # The served model is described (/v1/models) before its protocol is chosen: PROST's paper protocol for a causal
    # model reads token ids, which no server gives; nothing but the model list was asked.
    from tests.fake_openai import MODEL, FakeServer

    with FakeServer(log=tmp_path / "server.log") as server:
        status = main(["score", "--model", MODEL, "--data", str(built_all), "--limit", "2", "--model-args",
                       f"base_url={server.base_url}", "--benchmark", "prost", "--out", str(tmp_path / "never")])  # fmt: skip
    assert status == 2 and capsys.readouterr().err == ("physprobe: error: protocol 'released-gpt' asks for mean log-probabilities of "
                                                    "the options' tokens, which --backend openai cannot serve; use --backend "
                                                    "hf, or --protocol sentence-sum\n")  # fmt: skip
    assert (tmp_path / "server.log").read_text().splitlines() == ["/v1/models"] and not (tmp_path / "never").exists()


def predictions(folder: Path) -> list[dict]:
    return pq.read_table(folder / "predictions.parquet").to_pylist()


def test_both_backends_read_the_same_chat_prompt_ids(built_all):
    """Where the two backends' answers part, it is not their input: NEWTON's prompts through physprobe's hf
    templating (the GGUF's template, no special tokens added) and through llama-cpp-python's chat handler (the
    GGUF's template rendered by its Jinja2 formatter, tokenized by llama.cpp as the server does for
    ``/v1/chat/completions``, with the fixture's BOS override) are the same token ids."""
    import datasets
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    from transformers import AutoTokenizer

    from physprobe.backends.chat import Templating
    from physprobe.data import registry

    folder = gguf_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF)
    server = llama_cpp.Llama(model_path=str(folder / GGUF), vocab_only=True, verbose=False,
                             kv_overrides={"tokenizer.ggml.add_bos_token": True})  # fmt: skip
    formatter = Jinja2ChatFormatter(template=server.metadata["tokenizer.chat_template"], eos_token="<|im_end|>",
                                    bos_token="<|im_start|>")  # fmt: skip
    templating = Templating(tokenizer, Chat("on"))
    protocol = registry.evaluation("newton").protocol("released-generate")
    compared = 0
    for config in ("track1", "track2_boolean", "track2_mc", "track3"):
        for row in datasets.load_dataset(str(built_all / "newton"), config, split="test").select(range(0, 200, 10)):
            prompt = protocol.build(row, config).prompt
            ours = tokenizer(templating.render(prompt, Generate), add_special_tokens=False)["input_ids"]
            rendered = formatter(messages=[{"role": "user", "content": prompt}])
            theirs = server.tokenize(rendered.prompt.encode(), add_bos=not rendered.added_special, special=True)
            assert ours == theirs, prompt
            compared += 1
    assert compared == 80


@pytest.fixture(scope="module")
def same_questions(llama_server, built_all, smollm2_conversion, tmp_path_factory):
    """PROST (``sentence-sum``, log-likelihood) and NEWTON Track 1 (``gpt-chat-printed-template``: the GPT scripts'
    system message and question through the chat template, hf's from the GGUF, the server's own) scored through both
    backends: the same GGUF, float32 in transformers (read from the run's conversion of it, ``smollm2_conversion``)."""
    out = tmp_path_factory.mktemp("same")
    folder = str(gguf_folder())
    runs = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PHYSPROBE_CACHE", str(cache_with(smollm2_conversion, out / "cache")))
        for benchmark, config, protocol, limit in (
            ("prost", "default", "sentence-sum", 4),
            ("newton", "track1", "gpt-chat-printed-template", 10),
        ):
            hf, api = out / f"{benchmark}-hf", out / f"{benchmark}-openai"
            common = dict(data=built_all, configs=[config], limit=limit, protocol=protocol, bootstrap_iters=0)
            run(spec.make(folder, benchmark, out=hf, gguf_file=GGUF, dtype="float32", **common))
            run(spec.make(ALIAS, benchmark, out=api, model_args={"base_url": llama_server.base_url, "num_concurrent": 2},
                          **common))  # fmt: skip
            runs[benchmark] = predictions(hf), predictions(api), json.loads((api / "run.json").read_text())
    return runs


@pytest.mark.slow
def test_loglikelihoods_agree_with_hf(same_questions):
    # llama.cpp multiplies Q4_1 weights with activations quantised to 8 bits; transformers dequantises the same
    # weights to float32 and keeps float32 activations: measured per-option differences up to 1.1 nats (a PROST
    # option's summed tokens), 0.3 on average; tolerance 1.5 nats each, 0.6 on average.
    hf, api, info = same_questions["prost"]
    gaps = [abs(a - b) for x, y in zip(hf, api) for a, b in zip(x["scores"], y["scores"])]
    assert len(gaps) == 16 and max(gaps) < 1.5 and sum(gaps) / len(gaps) < 0.6, gaps
    # The model list and the fingerprint's probe, each of the 16 sentences once, the probe again after the last.
    assert info["backend"]["requests_sent"] == 2 + 16 + 1


@pytest.mark.slow
def test_generated_decisions_agree_with_hf(same_questions):
    hf, api, info = same_questions["newton"]
    assert info["chat"]["applied"] and info["backend"]["name"] == "openai"
    # The protocol's chat (system message, then the question) through both backends' templates. Measured 10 of 10
    # equal decisions and 9 of 10 identical answers (2026-11-25; the tenth lost its final full stop to quantised
    # kernels). Under `released-generate` the two part: its released budget counts the prompt (max_length=128),
    # which the hf backend counts and a server cannot (it has no tokenizer to count with), so answers end apart.
    same = sum(x["prediction"] == y["prediction"] for x, y in zip(hf, api))
    assert same >= 9, [(x["generated"], y["generated"]) for x, y in zip(hf, api)]


@pytest.mark.slow
@pytest.mark.processes
def test_killed_server_resumes_from_the_cache(built_all, tmp_path, capsys):
    def score(out: Path, url: str, retries: int = 5) -> list[str]:
        return ["score", "--model", ALIAS, "--benchmark", "newton", "--config", "track1", "--limit", "6", "--data",
                str(built_all), "--bootstrap-iters", "0", "--model-args", f"base_url={url},max_retries={retries}", "--out", str(out)]  # fmt: skip

    server = LlamaServer(tmp_path / "server.log").start()
    try:
        reference, out = tmp_path / "reference", tmp_path / "killed"
        assert main(score(reference, server.base_url)) == 0, capsys.readouterr().err  # here: the server is what is killed
        # Each answer is committed as it arrives: kill the server once two are.
        scoring = subprocess.Popen([sys.executable, "-m", "physprobe", *score(out, server.base_url, retries=0)],
                                   stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and cached(out) < 2 and scoring.poll() is None:
            time.sleep(0.05)
        server.kill()
        _, stderr = scoring.communicate(timeout=300)
        assert scoring.returncode == 2 and "newton/track1 row " in stderr and server.base_url in stderr, stderr
        kept = cached(out)
        assert 2 <= kept < 6
        server = LlamaServer(tmp_path / "server.log", port=server.port).start()  # the same URL and weights: the same cache key
        assert main(score(out, server.base_url)) == 0, capsys.readouterr().err
    finally:
        server.stop()
    assert predictions(out) == predictions(reference)
    # The model list and the fingerprint's probe, exactly the answers the cache lacked, the probe after the last.
    assert json.loads((out / "run.json").read_text())["backend"]["requests_sent"] == 2 + 6 - kept + 1
