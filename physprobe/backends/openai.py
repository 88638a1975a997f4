"""The ``openai`` backend: any OpenAI-compatible server (vLLM, TGI, llama.cpp, OpenAI) scored over HTTP.

Log-likelihood requests go to ``/v1/completions`` with ``echo`` and ``logprobs``: the server returns the prompt's
tokens with their log-probabilities, and each option of a ``Choice`` scores the sum over its tokens after those all
its options share, as the ``hf`` backend sums them (one request per distinct text: the API scores one sequence per
prompt, and llama.cpp's server takes one prompt per request). Generation
goes to ``/v1/chat/completions`` (chat messages) or ``/v1/completions`` (raw prompt), greedy, and is cut at the
protocol's stop strings here, as the ``hf`` backend cuts its answers. Requests run in a bounded pool of
``num_concurrent`` threads; 429, 5xx, timeouts and dropped connections are retried with exponential backoff; every
other failure is one line naming the server and the fix. The API key is read from ``OPENAI_API_KEY`` and never
printed or stored.

>>> Client(ServerOptions("http://127.0.0.1:8000/v1", num_concurrent=4), "my-model").base_url
'http://127.0.0.1:8000/v1'
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

from physprobe.answers import cut, yes_probability
from physprobe.backends.base import Backend, BackendError, Settings, messages, prompt_text
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


def _reason(response) -> str:
    """The server's own error message, on one line."""
    try:
        body = response.json()
        message = body.get("error", body.get("detail", body)) if isinstance(body, dict) else body
        if isinstance(message, dict):
            message = message.get("message", message)
    except ValueError:
        message = response.text
    text = " ".join(str(message).split())
    return text[:300] or response.reason_phrase


class Client:
    """An OpenAI-compatible server at ``base_url`` (ending in ``/v1``) serving ``model``.

    ``post`` retries transient failures (429, 5xx, timeouts, dropped connections) ``max_retries`` times with
    exponential backoff (1 s, 2 s, 4 s, ... at most 30 s); ``map`` runs a function over items in a pool of
    ``num_concurrent`` threads sharing one connection pool, results in item order.
    """

    def __init__(self, options: ServerOptions, model: str):
        import httpx

        self.base_url, self.model = options.base_url, model
        self.num_concurrent, self.max_retries = options.num_concurrent, options.max_retries
        num_concurrent, timeout = options.num_concurrent, options.timeout
        key = os.environ.get(API_KEY_VARIABLE)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.http = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout, connect=10.0),
                                 limits=httpx.Limits(max_connections=num_concurrent, max_keepalive_connections=num_concurrent))  # fmt: skip
        self.requests_sent = 0  # HTTP requests, retries included
        self._count = threading.Lock()

    def close(self) -> None:
        self.http.close()

    def _send(self, method: str, path: str, body: dict | None = None):
        import httpx

        def transient(error: BaseException) -> bool:
            if isinstance(error, httpx.HTTPStatusError):
                return error.response.status_code in TRANSIENT_STATUS
            return isinstance(error, (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError))

        def attempt():
            with self._count:
                self.requests_sent += 1
            response = self.http.request(method, f"{self.base_url}{path}", json=body)
            if response.status_code in TRANSIENT_STATUS:
                response.raise_for_status()
            return response

        try:
            return retried(attempt, transient, backoff(self.max_retries))
        except httpx.HTTPStatusError as error:
            raise BackendError(f"{self.base_url}{path} answered HTTP {error.response.status_code} "
                               f"({_reason(error.response)}) after {self.max_retries + 1} attempts") from None  # fmt: skip
        except httpx.TransportError as error:
            reason = " ".join(str(error).split()) or type(error).__name__
            raise BackendError(f"cannot reach the server at {self.base_url} ({reason}) after {self.max_retries + 1} "
                               "attempts; start it, or check --model-args base_url=...") from None  # fmt: skip

    def _refused(self, response, path: str) -> BackendError:
        if response.status_code == 401:
            state = f"${API_KEY_VARIABLE} is set" if os.environ.get(API_KEY_VARIABLE) else f"${API_KEY_VARIABLE} is not set"
            return BackendError(f"{self.base_url} refused the API key (HTTP 401; {state}); export {API_KEY_VARIABLE} with a key it accepts")
        return BackendError(f"{self.base_url}{path} answered HTTP {response.status_code}: {_reason(response)}")

    def served_models(self) -> list[str]:
        """The model ids the server lists at ``/v1/models``."""
        response = self._send("GET", "/models")
        if response.status_code != 200:
            raise self._refused(response, "/models")
        try:
            return [entry["id"] for entry in response.json()["data"]]
        except (ValueError, KeyError, TypeError):
            raise BackendError(f"{self.base_url}/models did not answer an OpenAI model list; is base_url the server's /v1 root?") from None

    def check(self) -> None:
        """Reachable, the key accepted and ``model`` served (a server may silently answer with another model)."""
        served = self.served_models()
        if self.model not in served:
            raise BackendError(f"{self.base_url} does not serve model {self.model!r}; it serves: {', '.join(served) or 'nothing'} "
                               "(pass one of them as --model)")  # fmt: skip

    def post(self, path: str, body: dict, unsupported: str = "") -> dict:
        """POST ``body`` (with the model's name) and return the JSON answer; any refusal is a ``BackendError``, which
        adds ``unsupported`` where the server refuses the request itself (HTTP 400, 404, 405, 422)."""
        response = self._send("POST", path, {"model": self.model, **body})
        if response.status_code in (400, 404, 405, 422) and unsupported:
            raise BackendError(f"{self.base_url}{path} refused the request (HTTP {response.status_code}: {_reason(response)}): {unsupported}")
        if response.status_code != 200:
            raise self._refused(response, path)
        return response.json()

    def map(self, function: Callable, items: Sequence, progress=None, step: float = 1) -> list:
        """``function(item)`` for every item, ``num_concurrent`` at a time, in item order; ``progress`` (tqdm)
        advances ``step`` per item."""

        def counted(item):
            result = function(item)
            if progress is not None:
                progress.update(step)
            return result

        if self.num_concurrent == 1:
            return [counted(item) for item in items]
        with ThreadPoolExecutor(self.num_concurrent) as pool:
            return list(pool.map(counted, items))

    def echo(self, prompt: str) -> list[tuple[str, float | None]]:
        """The prompt's tokens and their log-probabilities as the server scores them: ``/v1/completions`` with ``echo``
        and ``logprobs``. The prompt's tokens are the shortest run of echoed tokens whose text ends with the prompt, both
        read in ASCII (a BOS token the server echoes comes first; the one generated token comes after); a server whose echo does not
        hold the prompt (llama.cpp's own server returns the generated token only) is a one-line error."""
        body = {"prompt": prompt, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}
        answer = self.post("/completions", body, unsupported=LOGLIKELIHOOD_UNSUPPORTED)
        try:
            logprobs = answer["choices"][0]["logprobs"]
            tokens = list(zip(logprobs["tokens"], logprobs["token_logprobs"], strict=True))
        except (KeyError, IndexError, TypeError, ValueError):
            tokens = []
        # Compared in ASCII: a server that decodes each token on its own drops the bytes of a character split over tokens.
        wanted, text = _ascii(prompt), ""
        for count, (token, _) in enumerate(tokens, 1):
            text += _ascii(token)
            if len(text) >= len(wanted) and text.endswith(wanted):
                return tokens[:count]
        raise BackendError(f"{self.base_url}/completions does not echo the prompt's tokens with their log-probabilities "
                           f"(asked for {prompt[:40]!r}...): {LOGLIKELIHOOD_UNSUPPORTED}")  # fmt: skip

    def complete(self, prompt: str, max_tokens: int) -> str:
        """The greedy completion of a raw prompt (``/v1/completions``)."""
        answer = self.post("/completions", {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0},
                           unsupported=COMPLETIONS_UNSUPPORTED)
        return answer["choices"][0]["text"] or ""

    def chat(self, messages: list[dict], max_tokens: int) -> str:
        """The greedy reply to chat ``messages`` (``/v1/chat/completions``)."""
        answer = self.post("/chat/completions", {"messages": messages, "max_tokens": max_tokens, "temperature": 0})
        return answer["choices"][0]["message"]["content"] or ""


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
            raise BackendError(f"--model-args base_url={typed['base_url']!r} is not an http(s) URL; give one such as http://127.0.0.1:8000/v1")
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
    server is asked for its model list on the first ``score`` call, so a fully cached run needs no server.

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
        self.base_url = self.options.base_url
        self.client: Client | None = None

    def chat_applied(self, request_type: type) -> bool:
        return self.settings.chat.applies(request_type)

    def offers_chat_template(self) -> bool:
        return True  # a server's chat endpoint reads messages through its template (or a default one)

    def identity(self, request_type: type) -> dict:
        chat = self.settings.chat
        return {"backend": self.name, "base_url": self.base_url, "model": self.settings.model,
                "chat": {"applied": self.chat_applied(request_type), "template": "server" if self.chat_applied(request_type) else None,
                         "template_sha256": None, "system_instruction": chat.system_instruction}}  # fmt: skip

    def info(self) -> ServerInfo:
        options = {k: v for k, v in dataclasses.asdict(self.options).items() if k != "base_url"}
        return ServerInfo(self.base_url, self.settings.model, options, self.client.requests_sent if self.client else 0)

    def _connect(self) -> Client:
        if self.client is None:
            started = time.perf_counter()
            client = Client(self.options, self.settings.model)
            client.check()
            self.client, self.load_seconds = client, time.perf_counter() - started
        return self.client

    def score(self, requests: list, progress=None) -> list[list]:
        if not requests:
            return []
        kind = type(requests[0])
        self.settings.chat.check(kind)
        if kind not in (Generate, GenerateEach) and self.chat_applied(kind):
            raise BackendError("--apply-chat-template with a log-likelihood protocol needs --backend hf: a server applies its "
                               "chat template to chat messages only; drop --apply-chat-template or score with --method generate")  # fmt: skip
        client = self._connect()
        if kind is Generate:
            return client.map(self._generate, requests, progress)
        if kind is GenerateEach:  # one answer per prompt, each asked as a Generate
            asks = [Generate(p, (), r.max_new_tokens, r.stop, system=r.system) for r in requests for p in r.prompts]
            texts = iter(text for text, in client.map(self._generate, asks, progress, step=len(requests) / len(asks)))
            return [[next(texts) for _ in r.prompts] for r in requests]
        chat = self.settings.chat
        if kind is YesNo:
            questions = [(prompt_text(p, chat, templated=False), (" YES", " NO")) for r in requests for p in r.prompts]
        else:
            questions = [(prompt_text(r.context, chat, templated=False), r.continuations) for r in requests]
        texts = list(dict.fromkeys(context + c for context, options in questions for c in options))  # each distinct text once
        echoed = dict(zip(texts, client.map(client.echo, texts, progress, step=len(requests) / len(texts))))
        totals = [after_shared_prefix([echoed[context + c] for c in options]) for context, options in questions]
        if kind is YesNo:
            yes = iter([yes_probability(yes, no) for yes, no in totals])
            results = [[next(yes) for _ in r.prompts] for r in requests]
        else:
            results = totals
        return results

    def _generate(self, request: Generate) -> list:
        if request.first_token_choices:
            raise BackendError("this protocol matches answers to the options' first tokens, which needs the model's tokenizer: "
                               "use --backend hf")  # fmt: skip
        chat = self.settings.chat
        if self.chat_applied(type(request)):
            text = self.client.chat(messages(request.prompt, chat, request.system), request.max_new_tokens)
        else:
            text = self.client.complete(prompt_text(request.prompt, chat, templated=False, system=request.system), request.max_new_tokens)
        return [cut(text, request.stop)]
