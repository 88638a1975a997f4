"""A fake OpenAI-compatible server for the server fault suite: a toy model whose answers are computed from the text
(its "weights" are a seed), every request counted, and one failure mode switched on at a time.

The toy model splits a text into words (each with the whitespace before it) and gives word ``i`` the log-probability
``-(hash(seed, word i-1, word i) mod 5000) / 1000 - 0.001``, the first word none, as the OpenAI API echoes a prompt;
its greedy answer to a prompt is one of a few short texts, picked by the prompt's hash. ``FAULTS`` lists the failure
modes: each takes the answer the server would give and returns what it sends instead; those of ``WRITTEN`` (slow
loris: a body a byte at a time, headers a line at a time, a chunked body without end, a flood) write it by hand.

In a thread (``FakeServer(...).start()``, for quick checks) or as its own process (``python -m tests.fake_openai
--port P --log FILE [--seed S] [--fault NAME] [--delay SECONDS]``, for kills): each request is appended to the
log file as it arrives (``path``, one line each), so the count survives a kill of either side.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

MODEL = "fake-model"
ANSWERS = (" (a)", " (b)", " (c)", " (d)", " YES", " NO", " larger", " smaller")


def words(text: str) -> list[str]:
    """The toy model's tokens: each word with the whitespace before it (a leading run of whitespace is a token)."""
    return re.findall(r"\s*\S+|\s+$", text)


def logprob(seed: int, previous: str, word: str) -> float:
    digest = hashlib.sha256(f"{seed}|{previous}|{word}".encode()).hexdigest()
    return -(int(digest[:8], 16) % 5000) / 1000 - 0.001


def echo(seed: int, prompt: str) -> dict:
    """The logprobs object of ``prompt`` echoed, and one generated token after it."""
    tokens = [*words(prompt), reply(seed, prompt)]
    values = [None] + [logprob(seed, tokens[i - 1], tokens[i]) for i in range(1, len(tokens))]
    offsets = [0]
    for token in tokens[:-1]:
        offsets.append(offsets[-1] + len(token))
    return {"tokens": tokens, "token_logprobs": values, "text_offset": offsets, "top_logprobs": None}


def reply(seed: int, prompt: str) -> str:
    return ANSWERS[int(hashlib.sha256(f"{seed}|{prompt}".encode()).hexdigest()[:8], 16) % len(ANSWERS)]


# --- failure modes: (path, answer, request headers) -> (status, content type, body bytes), or None to drop -------------


def _json(status: int, body) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(body).encode()


def _logprobs(answer: dict, change) -> tuple[int, str, bytes]:
    logprobs = answer["choices"][0].get("logprobs")
    if logprobs:
        change(logprobs)
    return _json(200, answer)


def _positive(logprobs: dict) -> None:
    logprobs["token_logprobs"][1] = 48.2


def _nan(logprobs: dict) -> None:
    logprobs["token_logprobs"][1] = math.nan


def _strings(logprobs: dict) -> None:
    logprobs["token_logprobs"] = [None if v is None else str(v) for v in logprobs["token_logprobs"]]


def _short(logprobs: dict) -> None:
    logprobs["token_logprobs"].pop()


def _offsets(logprobs: dict) -> None:
    logprobs["text_offset"] = logprobs["text_offset"][::-1]


def _generated_only(logprobs: dict) -> None:
    for field in ("tokens", "token_logprobs", "text_offset"):
        logprobs[field] = logprobs[field][-1:]


def _huge_negative(logprobs: dict) -> None:
    logprobs["token_logprobs"] = [None if v is None else -1e308 for v in logprobs["token_logprobs"]]


def _meta_per_request(path, answer, headers):
    """The model list with a ``meta`` that changes with every request (a load figure, a counter), as some servers give."""
    answer["data"][0]["meta"] = {"n_params": 135_000_000, "load": random.random(), "requests": time.monotonic_ns()}
    return _json(200, answer)


def _no_content(answer: dict) -> tuple[int, str, bytes]:
    if "message" in answer["choices"][0]:
        del answer["choices"][0]["message"]["content"]
    return _json(200, answer)


def _quoting_headers(status: int):
    def fault(path, answer, headers):
        return _json(status, {"error": {"message": f"bad request; headers were {dict(headers)}"}})

    return fault


def _answer_quoting_headers(path, answer, headers):
    """A 200 answer whose text quotes the request's headers (a debugging proxy, a model echoing its input)."""
    quoted = f" (request headers: {dict(headers)})"
    choice = answer["choices"][0]
    if "message" in choice:
        choice["message"]["content"] += quoted
    elif not choice.get("logprobs"):
        choice["text"] += quoted
    return _json(200, answer)


FAULTS = {
    "html_502": lambda p, a, h: (
        502,
        "text/html",
        b"<html><head><title>502 Bad Gateway</title></head><body><h1>502</h1></body></html>",
    ),
    "not_json": lambda p, a, h: (200, "application/json", b"this is not JSON"),
    "truncated": lambda p, a, h: (200, "application/json", json.dumps(a).encode()[:40]),
    "not_utf8": lambda p, a, h: (200, "application/json", b'{"choices": "\xff\xfe"}'),
    "error_object": lambda p, a, h: _json(200, {"error": {"message": "model overloaded", "type": "server_error"}}),
    "no_choices": lambda p, a, h: _json(200, {**a, "choices": []}),
    "choice_not_object": lambda p, a, h: _json(200, {**a, "choices": ["text"]}),
    "no_logprobs": lambda p, a, h: _logprobs(a, lambda lp: lp.clear()),
    "string_logprobs": lambda p, a, h: _logprobs(a, _strings),
    "positive_logprobs": lambda p, a, h: _logprobs(a, _positive),
    "nan_logprobs": lambda p, a, h: _logprobs(a, _nan),
    "huge_negative_logprobs": lambda p, a, h: _logprobs(a, _huge_negative),
    "count_mismatch": lambda p, a, h: _logprobs(a, _short),
    "offsets_decreasing": lambda p, a, h: _logprobs(a, _offsets),
    "generated_only": lambda p, a, h: _logprobs(a, _generated_only),
    "text_not_string": lambda p, a, h: _json(200, {**a, "choices": [{**a["choices"][0], "text": 5}]}),
    "no_content": lambda p, a, h: _no_content(a),
    "quotes_headers_400": _quoting_headers(400),
    "quotes_headers_403": _quoting_headers(403),
    "quotes_headers_200": _answer_quoting_headers,
    "unauthorized": lambda p, a, h: _json(401, {"error": {"message": "invalid key"}}),
    "drop": lambda p, a, h: None,
    "slow": lambda p, a, h: (time.sleep(1.0), _json(200, a))[1],
    "models_not_a_list": lambda p, a, h: _json(200, {"object": "list", "data": "fake-model"}),
    "models_meta_per_request": _meta_per_request,
    "nested": lambda p, a, h: (200, "application/json", b"[" * 200_000),
    **{name: None for name in ("drip_body", "drip_headers", "endless_chunked", "flood")},  # written by hand: WRITTEN
    "flaky": None,  # the first attempt of every other request a 503 or a 429
    # A prompt of two words or more kills the server with SIGSEGV, as llama.cpp's AMX kernels do (only under spawn).
    "segfault_past_one_word": None,
}
ANSWER_PATHS = ("/v1/completions", "/v1/chat/completions")

# --- slow-loris faults: the answer written by hand, slowly or without end (for at most DRIP_FOR seconds) --------------------
DRIP, DRIP_FOR = 0.2, 20.0  # seconds between two pieces; how long a slow answer lasts at most


def _dripped(pieces, write) -> None:
    """``write`` each of ``pieces`` DRIP seconds apart, for at most DRIP_FOR seconds (then the connection closes)."""
    ends = time.monotonic() + DRIP_FOR
    for piece in pieces:
        if time.monotonic() > ends:
            return
        write(piece)
        time.sleep(DRIP)


def _drip_body(handler, content: bytes) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(content)))
    handler.end_headers()
    _dripped((content[i : i + 1] for i in range(len(content))), lambda b: (handler.wfile.write(b), handler.wfile.flush()))


def _drip_headers(handler, content: bytes) -> None:
    handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
    _dripped(iter(lambda: b"X-Still-Thinking: yes\r\n", None), lambda b: (handler.wfile.write(b), handler.wfile.flush()))


def _chunked(handler) -> None:
    """The headers of a chunked body: its chunks follow (``_chunk``)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    handler.wfile.flush()


def _chunk(handler, chunk: bytes) -> None:
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    handler.wfile.flush()


def _endless_chunked(handler, content: bytes) -> None:
    _chunked(handler)
    _dripped(iter(lambda: b" ", None), lambda chunk: _chunk(handler, chunk))


def _flood(handler, content: bytes) -> None:
    """An endless chunked body as fast as the socket takes it (1 MiB chunks), for at most DRIP_FOR seconds."""
    _chunked(handler)
    ends, chunk = time.monotonic() + DRIP_FOR, b" " * (1 << 20)
    while time.monotonic() < ends:
        _chunk(handler, chunk)


WRITTEN = {"drip_body": _drip_body, "drip_headers": _drip_headers, "endless_chunked": _endless_chunked, "flood": _flood}


class FakeServer:
    """The fake server on 127.0.0.1: ``model`` served with weights ``seed``, ``fault`` applied to every answer to a
    completion or chat request after the first ``fault_after`` of them (``models_fault`` to the model list), each
    request ``delay`` seconds late, each echoed log-probability moved by up to ``noise``; after ``switch_after``
    completion and chat requests it serves other weights (seed + 1) behind the same name."""

    def __init__(self, seed: int = 0, model: str = MODEL, fault: str | None = None, delay: float = 0.0,
                 log: Path | None = None, port: int = 0, models_fault: str | None = None, fault_after: int = 0,
                 noise: float = 0.0, switch_after: int | None = None):  # fmt: skip
        self.seed, self.model, self.fault, self.delay, self.log = seed, model, fault, delay, log
        self.models_fault, self.fault_after, self.noise, self.switch_after = models_fault, fault_after, noise, switch_after
        self.answered = 0  # completion and chat requests
        self.seen: set[bytes] = set()
        self.requests: list[str] = []
        self.bodies: list[dict] = []  # what each completion or chat request sent
        self.lock = threading.Lock()
        self.http = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.http.daemon_threads = True
        self.http.handle_error = lambda request, address: None  # a client gone before its answer: not the test's output
        self.port = self.http.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def answer(self, path: str, body: dict) -> dict | None:
        if path == "/v1/models":
            return {
                "object": "list",
                "data": [{"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "fake"}],
            }
        if body.get("model") != self.model:
            return None
        if path == "/v1/completions":
            prompt = body["prompt"]
            if body.get("echo"):
                logprobs = echo(self.seed, prompt)
                if self.noise:  # the last digits of a busy server's arithmetic
                    jitter = random.Random(len(self.requests))
                    logprobs["token_logprobs"] = [v if v is None else min(0.0, v + jitter.uniform(-self.noise, self.noise))
                                                  for v in logprobs["token_logprobs"]]  # fmt: skip
                return {"object": "text_completion", "choices": [{"index": 0, "text": prompt + logprobs["tokens"][-1],
                                                                  "logprobs": logprobs, "finish_reason": "length"}]}  # fmt: skip
            return {
                "object": "text_completion",
                "choices": [{"index": 0, "text": reply(self.seed, prompt) + ".\nMore", "finish_reason": "stop"}],
            }
        if path == "/v1/chat/completions":
            content = "\n".join(m["content"] for m in body["messages"])
            message = {"role": "assistant", "content": reply(self.seed, content).strip() + "."}
            return {"object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        return None

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}") if method == "POST" else {}
                with server.lock:
                    server.requests.append(self.path)
                    if self.path in ANSWER_PATHS:
                        server.answered += 1
                        server.bodies.append(body)
                        if server.switch_after is not None and server.answered == server.switch_after + 1:
                            server.seed += 1  # other weights from this request on
                    faulty = server.answered > server.fault_after
                    if server.log is not None and self.path.startswith("/v1/"):
                        with open(server.log, "a") as log:
                            log.write(self.path + "\n")
                if server.delay:
                    time.sleep(server.delay)
                answer = server.answer(self.path, body)
                fault = (
                    server.models_fault
                    if self.path == "/v1/models"
                    else server.fault
                    if self.path in ANSWER_PATHS and faulty
                    else None
                )
                if fault == "segfault_past_one_word":
                    if len(words(str(body.get("prompt", "")))) > 1:
                        # to this thread: os.kill may deliver it to another thread while this one still sends its answer
                        signal.pthread_kill(threading.get_ident(), signal.SIGSEGV)
                    fault = None  # a prompt of one word: answered
                if answer is None:
                    sent = _json(404, {"error": {"message": f"no such model or path: {self.path}"}})
                elif fault == "flaky":  # the first attempt of every other request fails
                    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
                    with server.lock:
                        first = digest not in server.seen
                        server.seen.add(digest)
                    busy = first and digest[0] % 2
                    sent = _json(503 if digest[1] % 2 else 429, {"error": {"message": "busy"}}) if busy else _json(200, answer)
                elif fault is not None and fault not in WRITTEN:
                    sent = FAULTS[fault](self.path, answer, self.headers)
                else:
                    sent = _json(200, answer)
                if fault in WRITTEN:
                    try:
                        WRITTEN[fault](self, json.dumps(answer).encode())
                    except OSError:  # the client gave up: what these faults are for
                        pass
                    self.close_connection = True
                    return
                if sent is None:  # the connection dropped before any answer
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                status, kind, content = sent
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

        return Handler

    def start(self) -> FakeServer:
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def spawn(log: Path, port: int = 0, seed: int = 0, fault: str | None = None, delay: float = 0.0) -> tuple[subprocess.Popen, str]:
    """The fake server in its own process (for kills): the process and its base URL, once it answers."""
    command = [sys.executable, "-m", "tests.fake_openai", "--log", str(log), "--port", str(port), "--seed", str(seed),
               "--delay", str(delay), *(["--fault", fault] if fault else [])]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    base_url = process.stdout.readline().strip()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base_url}/health", timeout=1)
            return process, base_url
        except httpx.TransportError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"the fake server did not start ({base_url!r})")


def sent(log: Path, path: str | None = None) -> int:
    """Requests the server logged (to ``path`` only, if given)."""
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if path is None or line == path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fault", choices=sorted(FAULTS))
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    fake = FakeServer(seed=args.seed, fault=args.fault, delay=args.delay, log=args.log, port=args.port)
    print(fake.base_url, flush=True)
    fake.http.serve_forever()
