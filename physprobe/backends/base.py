"""The backend seam: what a model backend is given, how it scores requests, and how it names itself.

A backend answers ``physprobe.requests`` objects. ``score(requests, progress)`` takes a list of requests
of ONE type (one chunk of a protocol's requests) and returns one result per request, in order, each the
JSON-ready list that the request type's docstring describes (``Choice``: a log-likelihood per continuation,
``Generate``: the answer text, ...). The request types a backend serves are named on its ``REGISTRY`` line
(``physprobe.backends``); for a type it does not serve, the runner stops before scoring with a one-line error
naming the protocol, the backend and the backends that serve it.

Chat templates. ``Settings.chat`` (``physprobe.backends.chat.Chat``) reaches the backend when it is made; the
backend alone applies it (``physprobe.backends.chat`` says when and how).

Identity. ``identity(request_type)`` is a JSON-ready dict of all that changes a result besides the
request (model revision, dtype, device type, a server's URL and served model id, the chat setting
applied and its template's sha256); the runner puts it in the cache key and the chat setting in run.json.
``read(requests)`` gives the texts the model reads for each request (the run's predictions.parquet keeps them).
Numbers a backend measures of its model to tell its weights apart (a server's log-probabilities of a probe
text) go under ``measured``: the resume cache reads them as the first stored measurement within a tolerance
(``result_cache.Cache.settled``), since they jitter in their last digits.
``info()`` is the backend's own section of run.json (``backend``): a dataclass of what it records of
itself (device, options, load state), beside the ``name`` the runner adds.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import ClassVar

from physprobe.backends.chat import Chat, prompt_text
from physprobe.errors import BackendError


@dataclass(frozen=True)
class Settings:
    """What ``physprobe score`` gives a backend: the model, ``--model-args``, ``method`` (``--method``, or
    the named protocol's: it restricts the model's family) and the options a backend may refuse
    (``device``, ``dtype``, ``batch_size``, ``gguf_file``: a server backend has none of these)."""

    model: str
    model_args: dict = field(default_factory=dict)
    method: str | None = None
    device: str | None = None
    dtype: str | None = None
    batch_size: int | None = None
    gguf_file: str | None = None
    truncate: bool = False
    chat: Chat = Chat()


class Backend(abc.ABC):
    """The base of every backend: subclasses set ``name`` (their ``REGISTRY`` key) and implement the methods below.

    Making one (``Backend(settings)``) checks every option and reads what is cheap (a config, a server's
    model list), so a bad option fails before any weight loads; ``family`` is then the model's family
    (``causal``, ``mlm``, ``seq2seq``, ``nli``: what picks the paper's protocol). Weights load, or a
    connection opens, on the first ``score`` call; a fully cached run never makes one.
    """

    name: ClassVar[str]
    load_seconds: float = 0.0  # seconds spent loading the model (or connecting): run.json's timings

    @staticmethod
    @abc.abstractmethod
    def parse_model_args(text: str | None) -> dict:
        """``--model-args`` (``KEY=VALUE,...``) as this backend takes them: its keys checked and typed, a
        one-line error for any other (``physprobe.model_options.split_model_args`` does the syntax)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.family: str = "causal"

    @abc.abstractmethod
    def chat_applied(self, request_type: type) -> bool:
        """Whether this backend reads ``request_type``'s prompts through a chat template."""

    def offers_chat_template(self) -> bool:
        """Whether ``--apply-chat-template`` would find a template (the hint of a run left mostly unparsed)."""
        return False

    @abc.abstractmethod
    def identity(self, request_type: type) -> dict:
        """All that changes a result of ``request_type`` besides the request itself (JSON-ready), the chat
        setting included: ``{"applied": bool, "template": name, "template_sha256": ..., "system_instruction": ...}``."""

    @abc.abstractmethod
    def score(self, requests: list, progress=None) -> list[list]:
        """One result per request (all of one type), in order. ``progress`` (``physprobe.runner.Progress``, or None)
        advances per request (``update(n)``, as a tqdm bar); a backend whose results arrive one by one (a server's)
        also hands each over at once (``answered(i, result)``), and the runner commits it to the resume cache."""

    def read(self, requests: list) -> list[tuple[list[str], list[int] | None]]:
        """Per request (all of one type), the texts the model reads (``Request.rendered``: each prompt as this
        backend sends it) and their token counts, where the backend has the model's tokenizer (None here). A
        prompt without a template has the system instruction before it; one a server reads through its own chat
        template is the prompt as sent (the rendering is the server's)."""
        if not requests:
            return []
        templated = self.chat_applied(type(requests[0]))
        return [(r.rendered(lambda prompt, r=r: prompt_text(prompt, self.settings.chat, templated, r.system)), None) for r in requests]

    @abc.abstractmethod
    def info(self):
        """This backend's section of run.json (a dataclass; JSON-ready fields): device, options, load state."""
