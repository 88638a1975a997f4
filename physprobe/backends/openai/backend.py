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
naming the server, the request and what was wrong. The served model is fingerprinted (``Client.fingerprint``) into
the cache key, and probed again every ``PROBE_EVERY`` answers and after the last: other weights behind the same name
stop the run in one line (``ServedModelChanged``), the answers before the last matching probe kept. The API key is
read from ``OPENAI_API_KEY``, checked, and never printed or stored: every error line passes through
``physprobe.util.redact.scrub``, and every answer, before it is cached or written, through ``known_secrets`` (the key
and the credentials a ``base_url`` carries, which run.json and the cache key never hold either, hidden; the rest of
the answer as the model wrote it).

>>> OpenAIBackend.name
'openai'
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from physprobe.backends.base import Backend, BackendError, Description, Settings
from physprobe.backends.chat import messages, prompt_text
from physprobe.backends.openai.client import MODEL_FIELDS, Client, ItemFailed, ServerOptions, sampled
from physprobe.errors import RequestError, ServedModelChanged
from physprobe.protocols.answers import cut, yes_probability
from physprobe.protocols.decoding import part_seed
from physprobe.protocols.requests import Choice, Generate, GenerateEach, YesNo
from physprobe.protocols.results import MEASURE_TOLERANCE, Answer, Answers, Result, Scores
from physprobe.util.redact import printable, scrub

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
            and all(abs(a - b) <= MEASURE_TOLERANCE for a, b in zip(first_values, now_values, strict=True)))  # fmt: skip


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


@dataclass(frozen=True)
class ServerInfo:
    """What run.json records of a served model (its ``backend`` section)."""

    base_url: str
    served_model: str
    options: dict
    requests_sent: int


def _askers(needs: list[list[int]]) -> dict[int, list[int]]:
    """Per ask, the requests that need its answer (each once), from each request's asks.

    >>> _askers([[0, 1], [1, 1]])
    {0: [0], 1: [0, 1]}
    """
    askers: dict[int, list[int]] = {}
    for index, need in enumerate(needs):
        for ask in dict.fromkeys(need):
            askers.setdefault(ask, []).append(index)
    return askers


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
        """``--model-args`` of a server (``ServerOptions``), typed and in range.

        >>> OpenAIBackend.parse_model_args("base_url=http://127.0.0.1:8000/v1,num_concurrent=4,timeout=60")
        {'base_url': 'http://127.0.0.1:8000/v1', 'num_concurrent': 4, 'max_retries': 5, 'timeout': 60.0}
        """
        from physprobe.protocols.model_options import split_model_args

        return dataclasses.asdict(ServerOptions.parse(split_model_args(text)))

    @staticmethod
    def _options(settings: Settings) -> ServerOptions:
        """The server's options; a one-line error for a setting that does not apply to a served model."""
        for option, flag in (
            ("device", "--device"),
            ("dtype", "--dtype"),
            ("batch_size", "--batch-size"),
            ("gguf_file", "--gguf-file"),
        ):
            if getattr(settings, option) is not None:
                raise BackendError(f"{flag} does not apply to --backend openai: the server decides where and how its model runs")
        if settings.chat.mode == "on" and settings.chat.template is not None:
            raise BackendError(f"--apply-chat-template {settings.chat.template}: a server applies its own chat template; "
                               "give --apply-chat-template without a name")  # fmt: skip
        return ServerOptions.parse(settings.model_args)

    @classmethod
    def describe(cls, settings: Settings) -> Description:
        """The served model as the server's ``/v1/models`` lists it (the server reached, the key accepted, the model
        served): a causal model, read through the server's chat template where a run applies one."""
        options = cls._options(settings)
        started = time.perf_counter()
        client = Client(options, settings.model)
        entry = client.check()
        described = {key: entry[key] for key in MODEL_FIELDS if key in entry}
        return Description("causal", f"a model served at {scrub(options.base_url, [])}", True, {"served_model": described},
                           (client, entry, time.perf_counter() - started))  # fmt: skip

    def __init__(self, settings: Settings, described: Description | None = None):
        super().__init__(settings)
        self.options = self._options(settings)
        self.base_url = scrub(self.options.base_url, [])  # as run.json and the cache key hold it: no credential
        self.family = "causal"
        self.client: Client | None = None
        self._entry: dict = {}  # the served model's /v1/models entry
        if described is not None:  # connected while the run was resolved
            self.client, self._entry, self.load_seconds = described.facts
        self._fingerprints: dict[bool, dict] = {}  # per chat setting applied
        self._said_unreproducible = False  # the run's warning that a server's samples are not reproducible, given once

    def chat_applied(self, request_type: type) -> bool:
        return self.settings.chat.applies(request_type)

    def offers_chat_template(self) -> bool:
        return True  # a server's chat endpoint reads messages through its template (or a default one)

    def identity(self, request_type: type) -> dict:
        """The served model's identity, its fingerprint included (``Client.fingerprint``: asked of the server once per
        run, so other weights behind the same name never reuse cached answers)."""
        self.settings.chat.check(request_type)
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

    def score(self, requests: list, handle=None) -> list[Result]:
        """Each request's result; ``handle.answered(i, result)`` gets each one as soon as the server's answers to it
        are in, so the runner commits it at once (a run killed at any point resends only what is missing). Every
        ``PROBE_EVERY`` answers and after the last, the fingerprint is asked again (``_unchanged``); other weights raise
        ``ServedModelChanged`` naming the requests answered since the last probe that matched."""
        if not requests:
            return []
        kind = type(requests[0])
        self.identity(kind)  # the fingerprint every later probe is compared with (asked once per run)
        if getattr(requests[0], "seed", None) is not None:
            self._say_unreproducible()
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

        asks, needs, assemble, send = self.ENGINES[kind](self, requests)
        askers = _askers(needs)
        asked = [len(set(need)) for need in needs]
        waiting = list(asked)
        answers: dict[int, object] = {}
        results: list = [None] * len(requests)

        def arrived(ask: int, answer) -> None:
            answers[ask] = answer
            for index in askers[ask]:
                waiting[index] -= 1
                if handle is not None:  # each answer is its share of the request (one of YES/NO's 15 prompts)
                    handle.update(1 / asked[index])
                if waiting[index]:
                    continue
                try:
                    results[index] = assemble(index, [answers[a] for a in needs[index]])
                except BackendError as error:
                    raise RequestError(str(error), index) from None
                if handle is not None:
                    handle.answered(index, results[index])
                unconfirmed.append(index)
            if next(sent) % PROBE_EVERY == 0:
                confirm()

        try:
            client.map(send, asks, arrived)
        except ItemFailed as error:
            raise RequestError(str(error), askers[error.index][0]) from None
        confirm()
        return results

    def _say_unreproducible(self) -> None:
        """The run's warning, once, that a server draws its sampled answers (physprobe's seeds best effort)."""
        if not self._said_unreproducible:
            self._said_unreproducible = True
            print(f"physprobe: warning: the sampled answers are drawn by the server at {self.base_url}, sent with physprobe's "
                  "seed of each answer (the OpenAI API's seed, best effort; a server may ignore it): they are not "
                  "reproducible as the hf backend's are", file=sys.stderr)  # fmt: skip

    def _unchanged(self, applied: bool) -> bool:
        """Whether the server still answers the fingerprint probe as at the run's start (``same_weights``); a reply that
        differs is asked once more, so a greedy reply's rare flip on a busy server is no change of weights."""
        first = self._fingerprints[applied]
        return any(same_weights(first, self.client.fingerprint(self._entry, chat=applied)) for _ in range(2))

    # What to send for a list of requests of each type this backend serves (``REGISTRY`` names the same types): the
    # distinct asks, each request's asks (indices), how a request's result is made from its asks' answers, and how
    # one ask is sent.
    def _generate_asks(self, requests: list[Generate]) -> tuple[list, list[list[int]], Callable, Callable]:
        return requests, [[i] for i in range(len(requests))], lambda index, answers: answers[0], self._generate

    def _generate_each_asks(self, requests: list[GenerateEach]) -> tuple[list, list[list[int]], Callable, Callable]:
        asks = [Generate(p, (), r.max_new_tokens, r.stop, system=r.system, decoding=r.decoding,
                         seed=None if r.seed is None else part_seed(r.seed, j))
                for r in requests for j, p in enumerate(r.prompts)]  # each prompt, sampled with its own seed  # fmt: skip
        needs, at = [], 0
        for r in requests:
            needs.append(list(range(at, at + len(r.prompts))))
            at += len(r.prompts)
        return asks, needs, lambda index, answers: Answers(tuple(answers)), self._generate

    def _choice_asks(self, requests: list[Choice]) -> tuple[list, list[list[int]], Callable, Callable]:
        chat = self.settings.chat
        return self._echo_asks([[(prompt_text(r.context, chat, templated=False), r.continuations)] for r in requests],
                               lambda totals: Scores(tuple(totals[0])))  # fmt: skip

    def _yes_no_asks(self, requests: list[YesNo]) -> tuple[list, list[list[int]], Callable, Callable]:
        chat = self.settings.chat  # each prompt the Choice of " YES" and " NO"
        return self._echo_asks([[(prompt_text(p, chat, templated=False), (" YES", " NO")) for p in r.prompts] for r in requests],
                               lambda totals: Scores(tuple(yes_probability(yes, no) for yes, no in totals)))  # fmt: skip

    def _echo_asks(
        self, questions: list[list[tuple[str, tuple[str, ...]]]], result: Callable
    ) -> tuple[list, list[list[int]], Callable, Callable]:
        """Each request's (context, options) questions, asked as one echo per distinct text; ``result`` makes the
        request's result of its questions' totals (``after_shared_prefix``)."""
        texts = list(dict.fromkeys(context + c for qs in questions for context, options in qs for c in options))  # each once
        where = {text: i for i, text in enumerate(texts)}
        needs = [[where[context + c] for context, options in qs for c in options] for qs in questions]

        def assemble(index: int, echoed: list) -> Scores:
            totals, at = [], 0
            for _, options in questions[index]:
                totals.append(after_shared_prefix(echoed[at : at + len(options)]))
                at += len(options)
            bad = next((t for option in totals for t in option if not math.isfinite(t)), None)
            if bad is not None:  # each log-probability finite (parse_echo), their sum not: e.g. -1e308 twice
                raise BackendError(f"{self.base_url}/completions gave log-probabilities whose sum is {bad} (each one finite, "
                                   "but beyond a float's range together): the server's scores are unusable; check the model "
                                   "it serves")  # fmt: skip
            return result(totals)

        return texts, needs, assemble, self.client.echo

    ENGINES = {Generate: _generate_asks, GenerateEach: _generate_each_asks, Choice: _choice_asks, YesNo: _yes_no_asks}
    # Each engine's version (the resume cache's key): bumped when a change moves the results it builds of the answers.
    ENGINE_VERSIONS = {Generate: 1, GenerateEach: 1, Choice: 1, YesNo: 1}

    def _generate(self, request: Generate) -> Answer:
        if request.first_token_choices:
            raise BackendError("this protocol matches answers to the options' first tokens, which needs the model's tokenizer: "
                               "use --backend hf")  # fmt: skip
        chat = self.settings.chat
        sampling = sampled(request.decoding, request.seed) if request.seed is not None else None
        if self.chat_applied(type(request)):
            reply = self.client.chat(messages(request.prompt, chat, request.system), request.max_new_tokens, sampling)
        else:
            reply = self.client.complete(
                prompt_text(request.prompt, chat, templated=False, system=request.system), request.max_new_tokens, sampling
            )
        return Answer(cut(reply.text, request.stop), reply.tokens)
