"""The HTTP client of the ``openai`` backend: one OpenAI-compatible server (vLLM, TGI, llama.cpp, OpenAI) and its
``--model-args`` (``ServerOptions``).

Every answer passes its endpoint's validating parser (``physprobe.backends.openai.parsing``); 429, 5xx, timeouts, dropped connections and bodies cut short are retried with exponential backoff;
every other failure is one line naming the server, the request and what was wrong. ``timeout`` bounds each whole
request (connecting, the headers and the body, as the OpenAI SDK's does), so a server that answers a byte at a time
ends the run within ``timeout`` x (``max_retries`` + 1) seconds and the backoff. Requests run in a bounded pool of
``num_concurrent`` threads (``Client.map``), each result handed over as it arrives. The served model is fingerprinted
(``Client.fingerprint``). The API key is read from ``OPENAI_API_KEY``, checked, and never printed or stored: every
error line passes through ``physprobe.util.redact.scrub`` (with the credentials a ``base_url`` carries), and every
answer, before it is cached or written, through ``physprobe.util.redact.known_secrets``: the key and the URL's
credentials hidden, the rest stored as the model wrote it.

>>> Client(ServerOptions("http://127.0.0.1:8000/v1", num_concurrent=4), "my-model").base_url
'http://127.0.0.1:8000/v1'
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import math
import os
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from urllib.parse import urlsplit

from physprobe.backends.base import BackendError
from physprobe.backends.openai.parsing import (
    Malformed,
    Reply,
    parse_body,
    parse_chat,
    parse_completion,
    parse_echo,
    parse_models,
    prompt_tokens,
)
from physprobe.errors import RequestError
from physprobe.protocols.decoding import Decoding
from physprobe.util.redact import known_secrets, printable, scrub, url_secrets
from physprobe.util.retries import TRANSIENT_STATUS, backoff, retried

API_KEY_VARIABLE = "OPENAI_API_KEY"
COMPLETIONS_UNSUPPORTED = (
    "this server has no /v1/completions endpoint for raw prompts: score with --apply-chat-template "
    "(its chat endpoint, which reads each prompt through the server's chat template)"
)
LOGLIKELIHOOD_UNSUPPORTED = (
    "this server cannot score log-likelihood protocols (they need /v1/completions with echo and "
    "logprobs; a chat-only endpoint has none): score a generation protocol, --method generate"
)


def _reason(response, secrets: Sequence[str | None]) -> str:
    """The server's own error message, on one printable line (an HTML error page by its title only), ``secrets``
    scrubbed before it is shortened (so no part of one survives the cut)."""
    text = response.content.decode("utf-8", "replace")
    try:
        body = json.loads(text)
        message = body.get("error", body.get("detail", body)) if isinstance(body, dict) else body
        if isinstance(message, dict):
            message = message.get("message", message)
    except (ValueError, RecursionError):
        title = re.search(r"(?is)<title>(.*?)</title>", text)
        message = f"an HTML page: {title.group(1)}" if title else ("an HTML page" if text.lstrip().startswith("<") else text)
    return printable(scrub(str(message), secrets), 300) or response.reason_phrase


def api_key(key: str | None) -> str | None:
    """The key to send (``key``: ``$OPENAI_API_KEY``; None where unset or empty); one that an HTTP header cannot carry
    (a line break, a space, a control or non-ASCII character) is refused by naming the variable, never by showing it.

    >>> api_key("sk-abc\\r")
    Traceback (most recent call last):
    physprobe.errors.BackendError: $OPENAI_API_KEY holds a character no HTTP header carries (a space, line break, control or non-ASCII character at position 7 of 7); export the key again without it
    """
    key = key or None
    if key is not None:
        bad = next((i for i, c in enumerate(key) if not "!" <= c <= "~"), None)
        if bad is not None:
            raise BackendError(f"${API_KEY_VARIABLE} holds a character no HTTP header carries (a space, line break, control or "
                               f"non-ASCII character at position {bad + 1} of {len(key)}); export the key again without it")  # fmt: skip
    return key


class ItemFailed(RequestError):
    """``Client.map``'s failure: ``index`` is the item's place in the items mapped."""


# The fingerprint: a fixed text whose log-probabilities tell one model's weights from another's, and the field of a
# /v1/models entry that names the model. Its other fields are the server's to change from one request to the next
# (``created``, ``permission``, a ``meta`` of load or counters): kept out, so a resume finds its cached answers.
PROBE = "The quick brown fox jumps over the lazy dog, and a heavy stone sinks in still water."
MODEL_FIELDS = ("id",)
MAX_BODY = 64 << 20  # bytes of one answer: no endpoint physprobe asks answers more (an endless body is refused)


class _EventLoop:
    """asyncio's event loop on a daemon thread, running the client's requests for the threads that wait on them.

    Written by hand because the deadline around a whole request needs an async client: ``asyncio.timeout`` cancels a
    read under way, where httpx's sync timeouts bound each read only (a byte a second never trips them); and anyio's
    blocking portal runs its loop in a non-daemon thread that would hold a failed run's exit until it was closed.

    >>> async def answer():
    ...     return 42
    >>> _EventLoop().run(answer())
    42
    """

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="physprobe-http", daemon=True).start()

    def run(self, coroutine):
        """``coroutine``'s result, run on the loop; cancelled there if this thread is interrupted."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise


class Client:
    """An OpenAI-compatible server at ``base_url`` (ending in ``/v1``) serving ``model``.

    Every answer is parsed by its endpoint's parser before use. Each request is given ``timeout`` seconds in all
    (connect, headers, body: ``_exchange``) and at most ``MAX_BODY`` bytes. ``post`` retries transient failures (429,
    5xx, timeouts, dropped connections, a body cut short or not JSON) ``max_retries`` times with exponential backoff
    (1 s, 2 s, 4 s, ... at most 30 s); ``map`` runs a function over items in a pool of ``num_concurrent`` threads
    sharing one connection pool, each result handed over as it arrives. Every error line passes through
    ``physprobe.util.redact.scrub``: the key, and any credential a server quotes back, is never shown; an answer quoting
    the key or the URL's credentials gets them hidden before it is returned (so before it is cached or written), and
    nothing else of it changed (``known_secrets``).
    """

    def __init__(self, options: ServerOptions, model: str):
        import httpx

        self.base_url, self.model = options.base_url, model
        self.num_concurrent, self.max_retries, self.timeout = options.num_concurrent, options.max_retries, options.timeout
        num_concurrent, timeout = options.num_concurrent, options.timeout
        self.key = api_key(os.environ.get(API_KEY_VARIABLE))
        self.secrets = [self.key, *url_secrets(options.base_url)]  # what no line, cache or file may hold
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        limits = httpx.Limits(max_connections=num_concurrent, max_keepalive_connections=num_concurrent)

        async def connected() -> httpx.AsyncClient:  # made on the loop that runs its requests
            return httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)), limits=limits)

        self._loop = _EventLoop()
        self.http = self._loop.run(connected())
        self.requests_sent = 0  # HTTP requests, retries included
        self._count = threading.Lock()

    def close(self) -> None:
        self._loop.run(self.http.aclose())

    async def _exchange(self, method: str, url: str, body: dict | None):
        """The server's whole answer to one request, within ``timeout`` seconds from the first byte sent to the last
        received (``asyncio.timeout``: past it, an ``httpx.TimeoutException``, retried as any timeout), its body read
        up to ``MAX_BODY`` bytes."""
        import httpx

        try:
            async with asyncio.timeout(self.timeout):
                async with self.http.stream(method, url, json=body) as response:
                    chunks, size = [], 0
                    async for chunk in response.aiter_raw():
                        size += len(chunk)
                        if size > MAX_BODY:
                            raise Malformed(f"a body of more than {MAX_BODY >> 20} MiB")
                        chunks.append(chunk)
        except TimeoutError:
            raise httpx.TimeoutException(f"no complete answer within {self.timeout:g} s") from None
        return httpx.Response(response.status_code, headers=response.headers, content=b"".join(chunks), request=response.request,
                              extensions=response.extensions)  # fmt: skip

    def _error(self, message: str) -> BackendError:
        return BackendError(scrub(message, self.secrets))

    def _shown(self, text: str, limit: int = 200) -> str:
        """A library's or server's text as an error line shows it: scrubbed, then on one printable line."""
        return printable(scrub(text, self.secrets), limit)

    def _send(self, method: str, path: str, body: dict | None, parse: Callable[[dict], object], unsupported: str = ""):
        """``parse`` of the server's 200 answer to one request, after the retries a transient failure gets; any other
        answer is a ``BackendError`` line (``unsupported`` added where the server refuses the request itself: HTTP
        400, 404, 405, 422)."""
        import httpx

        def transient(error: BaseException) -> bool:
            if isinstance(error, httpx.HTTPStatusError):
                return error.response.status_code in TRANSIENT_STATUS
            if isinstance(error, Malformed):
                return error.transient
            return isinstance(error, (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError))

        def attempt():
            with self._count:
                self.requests_sent += 1
            response = self._loop.run(self._exchange(method, f"{self.base_url}{path}", body))
            if response.status_code in TRANSIENT_STATUS:
                response.raise_for_status()
            if response.status_code != 200:
                return response
            return parse(parse_body(response.content))

        attempts = f"after {self.max_retries + 1} attempt{'s' if self.max_retries else ''}"
        try:
            answer = retried(attempt, transient, backoff(self.max_retries))
        except httpx.HTTPStatusError as error:
            raise self._error(f"{self.base_url}{path} answered HTTP {error.response.status_code} "
                              f"({_reason(error.response, self.secrets)}) {attempts}") from None  # fmt: skip
        except (httpx.ConnectError, httpx.ConnectTimeout) as error:
            reason = self._shown(str(error)) or type(error).__name__
            raise self._error(f"cannot reach the server at {self.base_url} ({reason}) {attempts}; start it, or check "
                              "--model-args base_url=...") from None  # fmt: skip
        except httpx.TimeoutException:
            raise self._error(f"{self.base_url}{path} gave no complete answer within {self.timeout:g} s, {attempts}; the server "
                              "is busy or stuck: raise --model-args timeout=... (seconds per request) or lower num_concurrent") from None  # fmt: skip
        except httpx.TransportError as error:
            reason = self._shown(str(error)) or type(error).__name__
            raise self._error(
                f"{self.base_url}{path} dropped the connection ({reason}) {attempts}; see the server's log"
            ) from None
        except Malformed as error:
            tried = f" {attempts}" if error.transient else ""
            raise self._error(f"{self.base_url}{path} gave an answer physprobe cannot use: {error}{tried}; check that the "
                              "server is OpenAI-compatible and serves the model's completions") from None  # fmt: skip
        if not isinstance(answer, httpx.Response):
            return answer
        if answer.status_code == 401:
            state = f"${API_KEY_VARIABLE} is set" if self.key else f"${API_KEY_VARIABLE} is not set"
            raise self._error(
                f"{self.base_url} refused the API key (HTTP 401; {state}); export {API_KEY_VARIABLE} with a key it accepts"
            )
        if answer.status_code in (400, 404, 405, 422) and unsupported:
            raise self._error(
                f"{self.base_url}{path} refused the request (HTTP {answer.status_code}: {_reason(answer, self.secrets)}): {unsupported}"
            )
        raise self._error(f"{self.base_url}{path} answered HTTP {answer.status_code}: {_reason(answer, self.secrets)}")

    def served_models(self) -> dict[str, dict]:
        """The models the server lists at ``/v1/models``: each id and its entry."""
        return self._send("GET", "/models", None, parse_models)

    def check(self) -> dict:
        """Reachable, the key accepted and ``model`` served (a server may silently answer with another model); the
        model's ``/v1/models`` entry."""
        served = self.served_models()
        if self.model not in served:
            names = ", ".join(printable(name, 80) for name in served) or "nothing"
            raise self._error(f"{self.base_url} does not serve model '{printable(self.model, 80)}'; it serves: {names} "
                              "(pass one of them as --model)")  # fmt: skip
        return served[self.model]

    def post(self, path: str, body: dict, parse: Callable[[dict], object], unsupported: str = ""):
        """POST ``body`` (with the model's name) and return ``parse`` of the answer."""
        return self._send("POST", path, {"model": self.model, **body}, parse, unsupported)

    def map(self, function: Callable, items: Sequence, done: Callable[[int, object], None] | None = None) -> list:
        """``function(item)`` for every item, ``num_concurrent`` at a time; the results in item order. ``done(i,
        result)`` is called in this thread as each result arrives. The first ``BackendError`` is raised as an
        ``ItemFailed`` naming its item once the requests under way have ended (their results handed to ``done``);
        the items not yet sent are not sent."""
        results: list = [None] * len(items)

        def call(index: int):
            try:
                return function(items[index])
            except BackendError as error:
                raise ItemFailed(str(error), index) from None

        if self.num_concurrent == 1:
            for index in range(len(items)):
                results[index] = call(index)
                if done is not None:
                    done(index, results[index])
            return results
        # A new item is sent only once an answer is handed to ``done``: at most num_concurrent answers are ever
        # received and not yet handed over (what a kill can lose), however slow ``done`` is.
        pool = ThreadPoolExecutor(self.num_concurrent)
        unsent = iter(range(len(items)))
        futures = {pool.submit(call, index): index for index in itertools.islice(unsent, self.num_concurrent)}
        pending, failure = set(futures), None
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    try:
                        results[futures[future]] = future.result()
                    except ItemFailed as error:
                        failure = failure or error
                        continue
                    if done is not None:
                        done(futures[future], results[futures[future]])
                if failure is None:  # else nothing more is sent; the requests under way still arrive
                    for index in itertools.islice(unsent, len(finished)):
                        future = pool.submit(call, index)
                        futures[future] = index
                        pending.add(future)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        if failure is not None:
            raise failure
        return results

    def echo(self, prompt: str) -> list[tuple[str, float | None]]:
        """The prompt's tokens and their log-probabilities as the server scores them: ``/v1/completions`` with ``echo``
        and ``logprobs``; a server whose echo does not hold the prompt (llama.cpp's own server returns the generated
        token only) is a one-line error."""
        body = {"prompt": prompt, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}
        tokens = prompt_tokens(self.post("/completions", body, parse_echo, LOGLIKELIHOOD_UNSUPPORTED), prompt)
        if tokens is None:
            raise self._error(f"{self.base_url}/completions does not echo the prompt's tokens with their log-probabilities "
                              f"(asked for {printable(prompt, 40)!r}): {LOGLIKELIHOOD_UNSUPPORTED}")  # fmt: skip
        return tokens

    def complete(self, prompt: str, max_tokens: int, sampling: dict | None = None) -> Reply:
        """The greedy completion of a raw prompt (``/v1/completions``), or one sampled with ``sampling`` (``sampled``'s
        temperature, top_p, seed), as the server wrote it but for a known secret it quotes (``known_secrets``)."""
        body = {"prompt": prompt, "max_tokens": max_tokens, **(sampling or {"temperature": 0})}
        reply = self.post("/completions", body, parse_completion, COMPLETIONS_UNSUPPORTED)
        return reply._replace(text=known_secrets(reply.text, self.secrets))

    def chat(self, messages: list[dict], max_tokens: int, sampling: dict | None = None) -> Reply:
        """The greedy reply to chat ``messages`` (``/v1/chat/completions``), or one sampled with ``sampling``, any
        known secret it quotes hidden (``known_secrets``)."""
        body = {"messages": messages, "max_tokens": max_tokens, **(sampling or {"temperature": 0})}
        reply = self.post("/chat/completions", body, parse_chat)
        return reply._replace(text=known_secrets(reply.text, self.secrets))

    def fingerprint(self, entry: dict, chat: bool) -> dict:
        """What tells the served model's weights from others behind the same name: the describing fields of its
        ``/v1/models`` ``entry`` and its answer to ``PROBE`` (one request), through the endpoint the run uses: the
        echoed log-probabilities (``measured``) where the server gives them, else the greedy reply (chat, with
        ``chat``)."""
        described = {key: entry[key] for key in MODEL_FIELDS if key in entry}
        if chat:
            return {"model": described, "reply": self.chat([{"role": "user", "content": PROBE}], 8).text}
        body = {"prompt": PROBE, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}
        try:
            tokens = self.post("/completions", body, parse_echo, COMPLETIONS_UNSUPPORTED)
        except BackendError:  # a server that does not echo: its greedy completion tells the weights apart
            return {"model": described, "reply": self.complete(PROBE, 8).text}
        return {"model": described, "tokens": [t for t, _ in tokens], "measured": [v for _, v in tokens if v is not None]}


@dataclass(frozen=True)
class ServerOptions:
    """``--model-args`` of a server, typed and in range: ``base_url`` (required, the server's /v1 root),
    ``num_concurrent`` (requests at once), ``max_retries`` (of a transient failure), ``timeout`` (seconds a
    request may take)."""

    base_url: str
    num_concurrent: int = 1
    max_retries: int = 5
    timeout: float = 300.0

    LIMITS = {"num_concurrent": (1, 1024), "max_retries": (0, 100), "timeout": (0.001, 86400.0)}

    @classmethod
    def parse(cls, model_args: dict) -> ServerOptions:
        """``--model-args`` (strings) as options; an unknown key, a value of the wrong type or out of range is one line.

        >>> ServerOptions.parse({"base_url": "http://127.0.0.1:8000/v1", "num_concurrent": "8"}).num_concurrent
        8
        >>> ServerOptions.parse({"base_url": "http://127.0.0.1:8000/v1", "timeout": "nan"})
        Traceback (most recent call last):
        ...
        physprobe.errors.BackendError: --model-args timeout='nan': expected a number from 0.001 to 86400.0
        """
        known = {f.name: f.type for f in dataclasses.fields(cls)}
        typed = {}
        for key, value in model_args.items():
            if key not in known:
                raise BackendError(f"--model-args {key}=... does not apply to --backend openai; its keys: {', '.join(known)}")
            typed[key] = value if key == "base_url" else cls._number(key, value)
        if "base_url" not in typed:
            raise BackendError(
                "--backend openai needs --model-args base_url=... (the server's /v1 root, e.g. http://127.0.0.1:8000/v1)"
            )
        parts = urlsplit(typed["base_url"])
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise BackendError(f"--model-args base_url={scrub(typed['base_url'], [])!r} is not an http(s) URL; give one such as "
                               "http://127.0.0.1:8000/v1")  # fmt: skip
        return cls(**{**typed, "base_url": typed["base_url"].rstrip("/")})

    @classmethod
    def _number(cls, key: str, value) -> int | float:
        low, high = cls.LIMITS[key]
        whole = key != "timeout"
        try:
            number = int(value) if whole else float(value)
        except (TypeError, ValueError):
            number = None
        if number is None or not math.isfinite(number) or not low <= number <= high:
            kind = "a whole number" if whole else "a number"
            raise BackendError(f"--model-args {key}={value!r}: expected {kind} from {low} to {high}")
        return number


def sampled(decoding: Decoding, seed: int) -> dict:
    """The request fields of an answer sampled as ``decoding`` says with ``seed``: temperature, top_p, the OpenAI API's
    ``seed`` (best effort: a server may ignore it), and top_k where it cuts (not an OpenAI API field; vLLM and
    llama.cpp's server take it).

    >>> sampled(Decoding.sampling("demo", top_p=0.5), 7)
    {'temperature': 1.0, 'top_p': 0.5, 'seed': 7}
    """
    return {
        "temperature": decoding.temperature,
        "top_p": decoding.top_p,
        "seed": seed,
        **({"top_k": decoding.top_k} if decoding.top_k else {}),
    }
