"""The backend seam: what a model backend is given, what it says of a model before loading it, how it scores
requests, and how it names itself. ``docs/adding_a_backend.md`` walks through every member below.

A backend answers ``physprobe.protocols.requests`` objects. The runner uses these members, and no other:

- ``describe(settings)`` (a class method): what the model is, read without its weights (``Description``: the family
  its config names, whether it has a chat template, what identifies it); ``physprobe.record.spec.make`` resolves the run
  from it (family, protocol, request type, chat setting) before the backend is made;
- ``parse_model_args(text)`` (a static method): ``--model-args`` checked, one line for a bad one;
- ``Backend(settings, described)``: made once, with the run's final ``Settings`` (and the description, which it may
  reuse); it loads nothing heavy;
- ``score(requests, handle)``: one result per request (all of ONE type, one chunk of a protocol's requests), in
  order, of the type's result class (``physprobe.protocols.results``); ``handle.update(n)`` advances progress,
  ``handle.spare(n)`` says that ``n`` requests' worth of it was never spent (answers that ended before their token
  budget: a card's time left then paces the tokens truly generated) and ``handle.answered(i, result)`` hands a
  result over at once (the runner commits it to the resume cache);
- ``identity(request_type)``: a JSON-ready dict of all that changes a result besides the request (model revision,
  dtype, device type, a server's URL and served model, the chat setting applied and its template's sha256): the
  resume cache's key, and run.json's chat setting;
- ``prompts(requests)``: per request, the texts the model reads and their token counts where the backend has the
  tokenizer (predictions.parquet's ``prompts``, ``prompt_tokens``);
- ``chat_applied(request_type)``, ``offers_chat_template()``: whether prompts go through a chat template, and
  whether ``--apply-chat-template`` would find one (the hint of a run left mostly unparsed);
- ``info()``: its own section of run.json (``backend``), a dataclass; ``load_seconds``: its load time;
- ``tokenizer``: the model's tokenizer where the backend has one (None: data-parallel ranks balance their work by
  characters instead of tokens).

The request types a backend serves are its ``ENGINES`` keys, with each engine's version in ``ENGINE_VERSIONS`` (the
resume cache's key: bumped when the engine's numbers change), and its ``REGISTRY`` line (``physprobe.backends``)
names the same types (a test holds them equal); for a type it does not serve, ``physprobe.record.spec`` stops the run
before anything loads, naming the backends that serve it.

Chat templates. ``Settings.chat`` (``physprobe.backends.chat.Chat``) reaches the backend when it is made; the
backend alone applies it (``physprobe.backends.chat`` says when and how).
Numbers a backend measures of its model to tell its weights apart (a server's log-probabilities of a probe text)
go under ``measured`` in its identity: the resume cache reads them as the first stored measurement within a
tolerance (``result_cache.Cache.settled``), since they jitter in their last digits.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import ClassVar

from physprobe.backends.chat import Chat, prompt_text
from physprobe.errors import BackendError as BackendError  # a backend's one error type, imported from here by backends


@dataclass(frozen=True)
class Settings:
    """What ``physprobe score`` gives a backend: the model, ``--model-args`` as given (``KEY -> VALUE`` text: the
    backend types them), the model's ``family`` (None while the model is being described) and the options a
    backend may refuse (``device``, ``dtype``, ``batch_size``, ``gguf_file``: a server backend has none of these)."""

    model: str
    model_args: dict[str, str] = field(default_factory=dict)
    family: str | None = None
    device: str | None = None
    dtype: str | None = None
    batch_size: int | None = None
    gguf_file: str | None = None
    truncate: bool = False
    chat: Chat = Chat()


@dataclass(frozen=True)
class Description:
    """What a backend reads of a model without its weights (``Backend.describe``): the ``family`` its config names
    (None: it names none), what that was read from (``kind``, for error lines), whether the model has a chat template,
    and what identifies it (JSON-ready: a revision, a served model's entry). ``facts``: the backend's own reading,
    which it reuses when it is made in the same process (never written)."""

    family: str | None
    kind: str
    chat_template: bool = False
    identity: dict = field(default_factory=dict)
    facts: object = field(default=None, compare=False, repr=False)


class Backend(abc.ABC):
    """The base of every backend: subclasses set ``name`` (their ``REGISTRY`` key) and implement the methods below.

    Making one (``Backend(settings, described)``) checks every option, so a bad option fails before any weight
    loads. Weights load, or a connection opens, on the first ``score`` call; a fully cached run never makes one.
    """

    name: ClassVar[str]
    ENGINES: ClassVar[dict]  # request type -> how this backend serves it (``REGISTRY`` names the same types)
    # request type -> the version of its engine, in the resume cache's key: bumped when a change moves the results it
    # returns, so a run resumed after the change rescores rather than read the older engine's answers (the same keys)
    ENGINE_VERSIONS: ClassVar[dict]
    load_seconds: float = 0.0  # seconds spent loading the model (or connecting): run.json's timings
    tokenizer = None  # the model's tokenizer, where the backend has one

    @staticmethod
    @abc.abstractmethod
    def parse_model_args(text: str | None) -> dict:
        """``--model-args`` (``KEY=VALUE,...``) as this backend takes them: its keys checked and typed, a
        one-line error for any other (``physprobe.protocols.model_options.split_model_args`` does the syntax)."""

    @classmethod
    @abc.abstractmethod
    def describe(cls, settings: Settings) -> Description:
        """What the model is, read cheaply (a config, a tokenizer, a server's model list), never its weights."""

    def __init__(self, settings: Settings, described: Description | None = None):
        self.settings = settings

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
    def score(self, requests: list, handle=None) -> list:
        """One result per request (all of one type), in order, of the type's result class. ``handle``
        (``physprobe.run.runner.ResultHandle``, or None) advances per request (``update(n)``, as a tqdm bar); a backend
        whose results arrive one by one (a server's) also hands each over at once (``answered(i, result)``), and the
        runner commits it to the resume cache."""

    def prompts(self, requests: list) -> list[tuple[list[str], list[int] | None]]:
        """Per request (all of one type), the texts the model reads (``Request.rendered``: each prompt as this
        backend sends it) and their token counts, where the backend has the model's tokenizer (None here). A
        prompt without a template has the system instruction before it; one a server reads through its own chat
        template is the prompt as sent (the rendering is the server's)."""
        if not requests:
            return []
        templated = self.chat_applied(type(requests[0]))
        return [
            (r.rendered(lambda prompt, r=r: prompt_text(prompt, self.settings.chat, templated, r.system)), None) for r in requests
        ]

    @abc.abstractmethod
    def info(self):
        """This backend's section of run.json (a dataclass; JSON-ready fields): device, options, load state."""
