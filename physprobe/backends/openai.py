"""The ``openai`` backend: any OpenAI-compatible server (vLLM, TGI, llama.cpp, OpenAI) scored over HTTP.

Log-likelihood requests go to ``/v1/completions`` with ``echo`` and ``logprobs``: the server returns the prompt's
tokens with their log-probabilities, and each option of a ``Choice`` scores the sum over its tokens after those all
its options share, as the ``hf`` backend sums them (one request per distinct text: the API scores one sequence per
prompt, and llama.cpp's server takes one prompt per request). Generation
goes to ``/v1/chat/completions`` (chat messages) or ``/v1/completions`` (raw prompt), greedy, and is cut at the
protocol's stop strings here, as the ``hf`` backend cuts its answers. Requests run in a bounded pool of
``num_concurrent`` threads, each result handed to the runner as it arrives. Every answer passes its endpoint's
validating parser (``parse_echo``, ``parse_completion``, ``parse_chat``, ``parse_models``); 429, 5xx, timeouts,
dropped connections and bodies cut short are retried with exponential backoff; every other failure is one line
naming the server, the request and what was wrong. ``timeout`` bounds each whole request (connecting, the headers
and the body, as the OpenAI SDK's does), so a server that answers a byte at a time ends the run within
``timeout`` x (``max_retries`` + 1) seconds and the backoff. The served model is fingerprinted (``Client.fingerprint``)
into the cache key, and probed again every ``PROBE_EVERY`` answers and after the last: other weights behind the same
name stop the run in one line (``ServedModelChanged``), the answers before the last matching probe kept. The API key
is read from ``OPENAI_API_KEY``, checked, and never printed or stored: every error line,
and every answer before it is cached or written, passes through ``physprobe.redact.scrub`` (with the credentials a
``base_url`` carries, which run.json and the cache key never hold either).

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
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from urllib.parse import urlsplit

from physprobe.answers import cut, yes_probability
from physprobe.backends.base import Backend, BackendError, Settings, messages, prompt_text
from physprobe.errors import RequestError, ServedModelChanged
from physprobe.result_cache import MEASURE_TOLERANCE
from physprobe.redact import printable, scrub, url_secrets
from physprobe.retries import TRANSIENT_STATUS, backoff, retried
from physprobe.requests import Choice, Generate, GenerateEach, YesNo  # noqa: F401 (Choice: the doctest)

API_KEY_VARIABLE = "OPENAI_API_KEY"
COMPLETIONS_UNSUPPORTED = ("this server has no /v1/completions endpoint for raw prompts: score with --apply-chat-template "
                           "(its chat endpoint, which reads each prompt through the server's chat template)")
LOGLIKELIHOOD_UNSUPPORTED = ("this server cannot score log-likelihood protocols (they need /v1/completions with echo and "
                             "logprobs; a chat-only endpoint has none): score a generation protocol, --method generate")


def after_shared_prefix(echoed: Sequence[Sequence[tuple[str, float | None]]]) -> list[float]:
    """Each option's summed token log-probability after the tokens all options share (each keeps at least one),
    from the server's echoed ``(token, log-probability)`` lists: what the ``hf`` backend sums for a ``Choice``.

    The OpenAI API gives a prompt's first token no log-probability, so options that differ from their first token
    on (an empty context) are an error.

    >>> after_shared_prefix([[("A", None), (" coin", -1.0), (" fell", -2.0)], [("A", None), (" leaf", -3.0), (" fell", -0.5)]])
    [-3.0, -3.5]
    >>> after_shared_prefix([[("A", None), (" coin", -1.0)], [("The", None), (" leaf", -3.0)]])
    Traceback (most recent call last):
    ...
    physprobe.errors.BackendError: the server gives no log-probability to a prompt's first token ('A'), where these options differ: give them a shared context to score them over the API
    """
    shortest = min(len(tokens) for tokens in echoed) - 1
    shared = 0
    while shared < shortest and all(tokens[shared][0] == echoed[0][shared][0] for tokens in echoed):
        shared += 1
    totals = []
    for tokens in echoed:
        scored = tokens[shared:]
        if any(value is None for _, value in scored):
            raise BackendError(f"the server gives no log-probability to a prompt's first token ({tokens[0][0]!r}), where these "
                               "options differ: give them a shared context to score them over the API")  # fmt: skip
        totals.append(sum(value for _, value in scored))
    return totals


def _ascii(text: str) -> str:
    return text.encode("ascii", "ignore").decode()


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


class Malformed(Exception):
    """An answer the parsers cannot use: ``what`` was wrong, and whether another attempt may get a good one
    (``transient``: a body cut short or not JSON, an error object in place of the answer)."""

    def __init__(self, what: str, transient: bool = False):
        super().__init__(what)
        self.transient = transient


class ItemFailed(RequestError):
    """``Client.map``'s failure: ``index`` is the item's place in the items mapped."""


# --- parsing: one validating parser per endpoint ---------------------------------------------------------------


def parse_body(content: bytes) -> dict:
    """A 200 answer's JSON object; a body that is not UTF-8 JSON (cut short, an HTML page) or that holds an error
    object instead of the answer is ``Malformed`` and worth another attempt.

    >>> parse_body(b'{"error": {"message": "overloaded"}}')
    Traceback (most recent call last):
    physprobe.backends.openai.Malformed: an error object in place of the answer: overloaded
    """
    try:
        body = json.loads(content.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise Malformed(f"a body that is not UTF-8 (byte {error.start})", transient=True) from None
    except json.JSONDecodeError as error:
        raise Malformed(f"a body that is not JSON ({error.msg} at character {error.pos} of {len(content)})", transient=True) from None
    except RecursionError:  # e.g. 200,000 nested [: no answer of the API is nested more than a few levels
        raise Malformed(f"a body nested too deeply to be an answer ({len(content)} bytes)") from None
    if not isinstance(body, dict):
        raise Malformed(f"a JSON {type(body).__name__} where an object was expected")
    if "error" in body and "choices" not in body and "data" not in body:
        error = body["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise Malformed(f"an error object in place of the answer: {printable(str(message), 200)}", transient=True)
    return body


def _choice(body: dict) -> dict:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise Malformed(f"no choices (choices: {printable(json.dumps(choices), 60)})")
    if not isinstance(choices[0], dict):
        raise Malformed(f"choices[0] is {printable(json.dumps(choices[0]), 60)}, not an object")
    return choices[0]


def _text(value, field: str, allow_null: bool = False) -> str:
    if value is None and allow_null:
        return ""
    if not isinstance(value, str):
        raise Malformed(f"{field} is {printable(json.dumps(value), 60)}, not text")
    return value


def parse_echo(body: dict) -> list[tuple[str, float | None]]:
    """The echoed ``(token, log-probability)`` pairs of a ``/v1/completions`` answer with ``echo`` and ``logprobs``:
    a token list and a log-probability per token (only the first may be null), each a finite number at most 0,
    text offsets (where given) one per token and never decreasing.

    >>> parse_echo({"choices": [{"logprobs": {"tokens": ["A", " b"], "token_logprobs": [None, -0.5]}}]})
    [('A', None), (' b', -0.5)]
    >>> parse_echo({"choices": [{"logprobs": {"tokens": ["A", " b"], "token_logprobs": [None, 48.2]}}]})
    Traceback (most recent call last):
    physprobe.backends.openai.Malformed: token_logprobs[1] is 48.2, above 0 (a log-probability is at most 0)
    """
    logprobs = _choice(body).get("logprobs")
    if not isinstance(logprobs, dict):
        raise Malformed(f"choices[0].logprobs is {printable(json.dumps(logprobs), 60)}, not an object of tokens and log-probabilities")
    tokens, values, offsets = logprobs.get("tokens"), logprobs.get("token_logprobs"), logprobs.get("text_offset")
    if not isinstance(tokens, list) or not tokens or not isinstance(values, list):
        raise Malformed("logprobs without a list of tokens and a list of token_logprobs")
    if len(values) != len(tokens):
        raise Malformed(f"{len(tokens)} tokens but {len(values)} token_logprobs (one per token)")
    for i, (token, value) in enumerate(zip(tokens, values)):
        _text(token, f"tokens[{i}]")
        if value is None and i == 0:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Malformed(f"token_logprobs[{i}] is {printable(json.dumps(value), 40)}, not a number")
        if not math.isfinite(value):
            raise Malformed(f"token_logprobs[{i}] is {value}, not a finite number")
        if value > 0:
            raise Malformed(f"token_logprobs[{i}] is {value}, above 0 (a log-probability is at most 0)")
    if offsets is not None:
        if not isinstance(offsets, list) or len(offsets) != len(tokens):
            raise Malformed(f"text_offset is not a list of one offset per token ({len(tokens)} tokens)")
        for i, offset in enumerate(offsets):
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0 or (i and offset < offsets[i - 1]):
                raise Malformed(f"text_offset[{i}] is {printable(json.dumps(offset), 40)}, not a whole number at least the one before")
    return list(zip(tokens, values))


def parse_completion(body: dict) -> str:
    """The generated text of a ``/v1/completions`` answer.

    >>> parse_completion({"choices": [{"text": " a ball"}]})
    ' a ball'
    """
    return _text(_choice(body).get("text"), "choices[0].text")


def parse_chat(body: dict) -> str:
    """The reply of a ``/v1/chat/completions`` answer (a null ``content`` is an empty reply).

    >>> parse_chat({"choices": [{"message": {"role": "assistant"}}]})
    Traceback (most recent call last):
    physprobe.backends.openai.Malformed: choices[0].message has no content
    """
    message = _choice(body).get("message")
    if not isinstance(message, dict):
        raise Malformed(f"choices[0].message is {printable(json.dumps(message), 60)}, not an object")
    if "content" not in message:
        raise Malformed("choices[0].message has no content")
    return _text(message["content"], "choices[0].message.content", allow_null=True)


def parse_models(body: dict) -> dict[str, dict]:
    """The models a ``/v1/models`` answer lists: each id and its entry.

    >>> parse_models({"object": "list", "data": [{"id": "smollm2", "owned_by": "me"}]})
    {'smollm2': {'id': 'smollm2', 'owned_by': 'me'}}
    """
    data = body.get("data")
    if not isinstance(data, list) or not all(isinstance(e, dict) and isinstance(e.get("id"), str) for e in data):
        raise Malformed("no list of models with ids (data: [{\"id\": ...}, ...])")
    return {entry["id"]: entry for entry in data}


def prompt_tokens(tokens: list[tuple[str, float | None]], prompt: str) -> list[tuple[str, float | None]] | None:
    """The echoed tokens that hold ``prompt``: the shortest run from the first whose text ends with it, both read in
    ASCII (a BOS token the server echoes comes first; the one generated token comes after); None where none does.

    >>> prompt_tokens([("<s>", None), ("A", -1.0), (" b", -2.0), ("!", -3.0)], "A b")
    [('<s>', None), ('A', -1.0), (' b', -2.0)]
    """
    # Compared in ASCII: a server that decodes each token on its own drops the bytes of a character split over tokens.
    wanted, text = _ascii(prompt), ""
    for count, (token, _) in enumerate(tokens, 1):
        text += _ascii(token)
        if len(text) >= len(wanted) and text.endswith(wanted):
            return tokens[:count]
    return None


# The fingerprint: a fixed text whose log-probabilities tell one model's weights from another's, and the field of a
# /v1/models entry that names the model. Its other fields are the server's to change from one request to the next
# (``created``, ``permission``, a ``meta`` of load or counters): kept out, so a resume finds its cached answers.
PROBE = "The quick brown fox jumps over the lazy dog, and a heavy stone sinks in still water."
MODEL_FIELDS = ("id",)
PROBE_EVERY = 100  # answers between two fingerprint probes during a run (1% more requests; one more after the last)


def same_weights(first: dict, now: dict) -> bool:
    """Whether two fingerprints (``Client.fingerprint``) are of the same weights: the same model, tokens or reply, and
    each log-probability within ``MEASURE_TOLERANCE`` (a busy server's last digits jitter).

    >>> same_weights({"tokens": ["A"], "measured": [-1.0]}, {"tokens": ["A"], "measured": [-1.01]})
    True
    >>> same_weights({"tokens": ["A"], "measured": [-1.0]}, {"tokens": ["A"], "measured": [-1.5]})
    False
    """
    first_values, now_values = first.get("measured", []), now.get("measured", [])
    return ({k: v for k, v in first.items() if k != "measured"} == {k: v for k, v in now.items() if k != "measured"}
            and len(first_values) == len(now_values)
            and all(abs(a - b) <= MEASURE_TOLERANCE for a, b in zip(first_values, now_values)))  # fmt: skip


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
    ``physprobe.redact.scrub``: the key, and any credential a server quotes back, is never shown; an answer quoting
    one gets it scrubbed before it is returned (so before it is cached or written).
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
            raise self._error(f"{self.base_url}{path} dropped the connection ({reason}) {attempts}; see the server's log") from None
        except Malformed as error:
            tried = f" {attempts}" if error.transient else ""
            raise self._error(f"{self.base_url}{path} gave an answer physprobe cannot use: {error}{tried}; check that the "
                              "server is OpenAI-compatible and serves the model's completions") from None  # fmt: skip
        if not isinstance(answer, httpx.Response):
            return answer
        if answer.status_code == 401:
            state = f"${API_KEY_VARIABLE} is set" if self.key else f"${API_KEY_VARIABLE} is not set"
            raise self._error(f"{self.base_url} refused the API key (HTTP 401; {state}); export {API_KEY_VARIABLE} with a key it accepts")
        if answer.status_code in (400, 404, 405, 422) and unsupported:
            raise self._error(f"{self.base_url}{path} refused the request (HTTP {answer.status_code}: {_reason(answer, self.secrets)}): {unsupported}")
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

    def complete(self, prompt: str, max_tokens: int) -> str:
        """The greedy completion of a raw prompt (``/v1/completions``), any secret it quotes scrubbed."""
        text = self.post("/completions", {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}, parse_completion,
                         COMPLETIONS_UNSUPPORTED)  # fmt: skip
        return scrub(text, self.secrets)

    def chat(self, messages: list[dict], max_tokens: int) -> str:
        """The greedy reply to chat ``messages`` (``/v1/chat/completions``), any secret it quotes scrubbed."""
        reply = self.post("/chat/completions", {"messages": messages, "max_tokens": max_tokens, "temperature": 0}, parse_chat)
        return scrub(reply, self.secrets)

    def fingerprint(self, entry: dict, chat: bool) -> dict:
        """What tells the served model's weights from others behind the same name: the describing fields of its
        ``/v1/models`` ``entry`` and its answer to ``PROBE`` (one request), through the endpoint the run uses: the
        echoed log-probabilities (``measured``) where the server gives them, else the greedy reply (chat, with
        ``chat``)."""
        described = {key: entry[key] for key in MODEL_FIELDS if key in entry}
        if chat:
            return {"model": described, "reply": self.chat([{"role": "user", "content": PROBE}], 8)}
        body = {"prompt": PROBE, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}
        try:
            tokens = self.post("/completions", body, parse_echo, COMPLETIONS_UNSUPPORTED)
        except BackendError:  # a server that does not echo: its greedy completion tells the weights apart
            return {"model": described, "reply": self.complete(PROBE, 8)}
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
            raise BackendError("--backend openai needs --model-args base_url=... (the server's /v1 root, e.g. http://127.0.0.1:8000/v1)")
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


@dataclass(frozen=True)
class ServerInfo:
    """What run.json records of a served model (its ``backend`` section)."""

    base_url: str
    served_model: str
    options: dict
    requests_sent: int


class OpenAIBackend(Backend):
    """A model behind an OpenAI-compatible server: ``--backend openai --model SERVED_ID --model-args base_url=URL,...``.

    ``Choice`` and ``YesNo`` are scored through ``/v1/completions`` with ``echo`` and ``logprobs`` (one request per
    distinct text; a ``YesNo`` prompt is the ``Choice`` of ``" YES"`` and ``" NO"``), ``Generate`` (and each prompt of a ``GenerateEach``) through
    ``/v1/chat/completions`` when the chat setting applies (the server's own template) or ``/v1/completions``. The
    server is asked for its model list and fingerprinted (``identity``) before any cached answer is used: cached
    answers are reused only from the same weights, so every run needs the server up.

    >>> backend = OpenAIBackend(Settings("SmolLM2", {"base_url": "http://127.0.0.1:8000/v1"}))
    >>> backend.chat_applied(Generate), backend.chat_applied(Choice), backend.family
    (False, False, 'causal')
    >>> OpenAIBackend(Settings("SmolLM2", {"base_url": "http://127.0.0.1:8000/v1"}, device="cuda"))
    Traceback (most recent call last):
    ...
    physprobe.errors.BackendError: --device does not apply to --backend openai: the server decides where and how its model runs
    """

    name = "openai"

    @staticmethod
    def parse_model_args(text: str | None) -> dict:
        """``--model-args`` of a server (``ServerOptions``), as the plan holds them.

        >>> OpenAIBackend.parse_model_args("base_url=http://127.0.0.1:8000/v1,num_concurrent=4,timeout=60")
        {'base_url': 'http://127.0.0.1:8000/v1', 'num_concurrent': 4, 'max_retries': 5, 'timeout': 60.0}
        """
        from physprobe.model_options import split_model_args

        return dataclasses.asdict(ServerOptions.parse(split_model_args(text)))

    def __init__(self, settings: Settings):
        super().__init__(settings)
        if settings.method in ("mlm", "nli", "seq2seq"):
            raise BackendError(f"method {settings.method!r} (masked-LM, NLI and seq2seq scoring) needs the model in this process: "
                               "use --backend hf; a server serves a causal model's completions")  # fmt: skip
        for option, flag in (("device", "--device"), ("dtype", "--dtype"), ("batch_size", "--batch-size"), ("gguf_file", "--gguf-file")):
            if getattr(settings, option) is not None:
                raise BackendError(f"{flag} does not apply to --backend openai: the server decides where and how its model runs")
        if settings.chat.mode == "on" and settings.chat.template is not None:
            raise BackendError(f"--apply-chat-template {settings.chat.template}: a server applies its own chat template; "
                               "give --apply-chat-template without a name")  # fmt: skip
        self.options = ServerOptions.parse(settings.model_args)
        self.base_url = scrub(self.options.base_url, [])  # as run.json and the cache key hold it: no credential
        self.client: Client | None = None
        self._entry: dict = {}  # the served model's /v1/models entry
        self._fingerprints: dict[bool, dict] = {}  # per chat setting applied

    def chat_applied(self, request_type: type) -> bool:
        return self.settings.chat.applies(request_type)

    def offers_chat_template(self) -> bool:
        return True  # a server's chat endpoint reads messages through its template (or a default one)

    def servable(self, kind: type) -> None:
        """A one-line ``BackendError``, before any request is sent, for requests of ``kind`` this server cannot score
        as asked: a chat template on a log-likelihood protocol (a server applies its template to chat messages only)."""
        self.settings.chat.check(kind)
        if kind not in (Generate, GenerateEach) and self.chat_applied(kind):
            raise BackendError("--apply-chat-template with a log-likelihood protocol needs --backend hf: a server applies its "
                               "chat template to chat messages only; drop --apply-chat-template or score with --method generate")  # fmt: skip

    def identity(self, request_type: type) -> dict:
        """The served model's identity, its fingerprint included (``Client.fingerprint``: asked of the server once per
        run, so other weights behind the same name never reuse cached answers); what it cannot serve is refused first."""
        self.servable(request_type)
        chat, applied = self.settings.chat, self.chat_applied(request_type)
        if applied not in self._fingerprints:
            client = self._connect()
            self._fingerprints[applied] = client.fingerprint(self._entry, chat=applied)
        return {"backend": self.name, "base_url": self.base_url, "model": self.settings.model, **self._fingerprints[applied],
                "chat": {"applied": applied, "template": "server" if applied else None, "template_sha256": None,
                         "system_instruction": chat.system_instruction}}  # fmt: skip

    def info(self) -> ServerInfo:
        options = {k: v for k, v in dataclasses.asdict(self.options).items() if k != "base_url"}
        return ServerInfo(self.base_url, self.settings.model, options, self.client.requests_sent if self.client else 0)

    def _connect(self) -> Client:
        if self.client is None:
            started = time.perf_counter()
            client = Client(self.options, self.settings.model)
            self._entry = client.check()
            self.client, self.load_seconds = client, time.perf_counter() - started
        return self.client

    def score(self, requests: list, progress=None) -> list[list]:
        """Each request's result; ``progress.answered(i, result)`` gets each one as soon as the server's answers to it
        are in, so the runner commits it at once (a run killed at any point resends only what is missing). Every
        ``PROBE_EVERY`` answers and after the last, the fingerprint is asked again (``_unchanged``); other weights raise
        ``ServedModelChanged`` naming the requests answered since the last probe that matched."""
        if not requests:
            return []
        kind = type(requests[0])
        self.identity(kind)  # the fingerprint every later probe is compared with (asked once per run)
        applied = self.chat_applied(kind)
        client = self._connect()
        unconfirmed: list[int] = []  # requests answered since the last probe that found the same weights
        sent = itertools.count(1)

        def confirm() -> None:
            if not self._unchanged(applied):
                raise ServedModelChanged(
                    f"{self.base_url} began serving other weights as '{printable(self.settings.model, 80)}' during the run (its "
                    f"answer to the fingerprint probe changed): the {len(unconfirmed)} answers since the last probe that "
                    "matched were dropped, those before kept for the earlier weights; score again once the server serves "
                    "one model (the run resumes against the weights served then)", list(unconfirmed))  # fmt: skip
            unconfirmed.clear()
        asks, needs, assemble, send = self._plan(kind, requests)
        askers: dict[int, list[int]] = {}
        for index, need in enumerate(needs):
            for ask in dict.fromkeys(need):
                askers.setdefault(ask, []).append(index)
        waiting = [len(set(need)) for need in needs]
        answers: dict[int, object] = {}
        results: list = [None] * len(requests)

        def arrived(ask: int, answer) -> None:
            answers[ask] = answer
            for index in askers[ask]:
                waiting[index] -= 1
                if waiting[index]:
                    continue
                try:
                    results[index] = assemble(index, [answers[a] for a in needs[index]])
                except BackendError as error:
                    raise RequestError(str(error), index) from None
                if progress is not None:
                    progress.update(1)
                    progress.answered(index, results[index])
                unconfirmed.append(index)
            if next(sent) % PROBE_EVERY == 0:
                confirm()

        try:
            client.map(send, asks, arrived)
        except ItemFailed as error:
            raise RequestError(str(error), askers[error.index][0]) from None
        confirm()
        return results

    def _unchanged(self, applied: bool) -> bool:
        """Whether the server still answers the fingerprint probe as at the run's start (``same_weights``); a reply that
        differs is asked once more, so a greedy reply's rare flip on a busy server is no change of weights."""
        first = self._fingerprints[applied]
        return any(same_weights(first, self.client.fingerprint(self._entry, chat=applied)) for _ in range(2))

    def _plan(self, kind: type, requests: list) -> tuple[list, list[list[int]], Callable, Callable]:
        """What to send for ``requests`` of type ``kind``: the distinct asks, each request's asks (indices), how a
        request's result is made from its asks' answers, and how one ask is sent."""
        chat = self.settings.chat
        if kind is Generate:
            return requests, [[i] for i in range(len(requests))], lambda index, texts: [texts[0]], self._generate
        if kind is GenerateEach:  # one answer per prompt, each asked as a Generate
            asks = [Generate(p, (), r.max_new_tokens, r.stop, system=r.system) for r in requests for p in r.prompts]
            needs, at = [], 0
            for r in requests:
                needs.append(list(range(at, at + len(r.prompts))))
                at += len(r.prompts)
            return asks, needs, lambda index, texts: texts, self._generate
        if kind is YesNo:  # each prompt the Choice of " YES" and " NO"
            questions = [[(prompt_text(p, chat, templated=False), (" YES", " NO")) for p in r.prompts] for r in requests]
        else:
            questions = [[(prompt_text(r.context, chat, templated=False), r.continuations)] for r in requests]
        texts = list(dict.fromkeys(context + c for qs in questions for context, options in qs for c in options))  # each once
        where = {text: i for i, text in enumerate(texts)}
        needs = [[where[context + c] for context, options in qs for c in options] for qs in questions]

        def assemble(index: int, echoed: list) -> list:
            totals, at = [], 0
            for _, options in questions[index]:
                totals.append(after_shared_prefix(echoed[at : at + len(options)]))
                at += len(options)
            bad = next((t for option in totals for t in option if not math.isfinite(t)), None)
            if bad is not None:  # each log-probability finite (parse_echo), their sum not: e.g. -1e308 twice
                raise BackendError(f"{self.base_url}/completions gave log-probabilities whose sum is {bad} (each one finite, "
                                   "but beyond a float's range together): the server's scores are unusable; check the model "
                                   "it serves")  # fmt: skip
            return [yes_probability(yes, no) for yes, no in totals] if kind is YesNo else totals[0]

        return texts, needs, assemble, self.client.echo

    def _generate(self, request: Generate) -> str:
        if request.first_token_choices:
            raise BackendError("this protocol matches answers to the options' first tokens, which needs the model's tokenizer: "
                               "use --backend hf")  # fmt: skip
        chat = self.settings.chat
        if self.chat_applied(type(request)):
            text = self.client.chat(messages(request.prompt, chat, request.system), request.max_new_tokens)
        else:
            text = self.client.complete(prompt_text(request.prompt, chat, templated=False, system=request.system), request.max_new_tokens)
        return cut(text, request.stop)
