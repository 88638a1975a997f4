"""``--backend openai`` against a real server: llama.cpp's OpenAI-compatible server (``tests/llama_server.py``) with
SmolLM2-135M-Instruct's GGUF; the same GGUF read by transformers (float32) is the independent reference."""

from __future__ import annotations

import threading
import time

import pytest

from physprobe.backends.base import BackendError, Chat, Settings
from physprobe.backends.openai import Client, OpenAIBackend
from physprobe.requests import Choice, Generate, Masked, YesNo
from tests.llama_server import ALIAS, GGUF, LlamaServer, free_port, gguf_folder


def backend(base_url: str, model: str = ALIAS, chat: Chat = Chat(), **args) -> OpenAIBackend:
    return OpenAIBackend(Settings(model, {"base_url": base_url, **{k: str(v) for k, v in args.items()}}, chat=chat))


def test_unreachable_server_is_one_line():
    port = free_port()  # nothing listens there
    with pytest.raises(BackendError) as error:
        backend(f"http://127.0.0.1:{port}/v1", max_retries=0).score([Generate("Hi", ("a", "b"))])
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"cannot reach the server at http://127.0.0.1:{port}/v1 (")
    assert message.endswith("after 1 attempts; start it, or check --model-args base_url=...")


def test_options_a_server_does_not_take_are_refused():
    url = "http://127.0.0.1:1/v1"
    with pytest.raises(BackendError, match="^--dtype does not apply to --backend openai"):
        OpenAIBackend(Settings(ALIAS, {"base_url": url}, dtype="float32"))
    with pytest.raises(BackendError, match=r"^--model-args gguf_file=\.\.\. does not apply to --backend openai; its keys: base_url, "):
        OpenAIBackend(Settings(ALIAS, {"base_url": url, "gguf_file": GGUF}))
    with pytest.raises(BackendError, match=r"^--model-args num_concurrent='many': expected int$"):
        backend(url, num_concurrent="many")
    assert Masked not in OpenAIBackend.serves  # the runner names the backends that serve masked-LM and NLI protocols


@pytest.mark.slow
def test_model_the_server_does_not_serve_is_one_line(llama_server):
    # llama.cpp's server answers any model name with the model it holds; the backend asks /v1/models first.
    with pytest.raises(BackendError, match=rf"^{llama_server.base_url} does not serve model 'gpt-4'; it serves: {ALIAS} \(pass"):
        backend(llama_server.base_url, model="gpt-4").score([Generate("Hi", ("a", "b"))])


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
        assert chosen.score([Generate("The capital of France is", ("Paris",), max_new_tokens=4)])[0][0]
        assert "right-key" not in repr(chosen.info()) + repr(chosen.identity(Generate))


@pytest.mark.slow
def test_retries_until_the_server_comes_up(tmp_path):
    server = LlamaServer(tmp_path / "server.log")
    starter = threading.Timer(1.0, server.start)
    starter.start()
    try:
        started = time.monotonic()
        client = Client(server.base_url, ALIAS, max_retries=8)
        client.check()  # connection refused at first: retried after 1, 2, 4, ... s
        assert client.requests_sent > 1
        assert time.monotonic() - started > 1.0
    finally:
        starter.join()
        server.stop()


@pytest.fixture(scope="module")
def reference():
    """SmolLM2-135M-Instruct's GGUF through transformers, float32: log-probability of each token given those before."""
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = str(gguf_folder())
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF, dtype=torch.float32).eval()

    def token_logprobs(text: str) -> list[tuple[str, float]]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            logits = model(torch.tensor([ids])).logits[0].float()
        values = torch.log_softmax(logits[:-1], dim=-1).gather(-1, torch.tensor(ids[1:]).unsqueeze(-1)).squeeze(-1)
        return [(tokenizer.decode([i]), float(v)) for i, v in zip(ids[1:], values)]

    return token_logprobs
