"""Model backends: the registry of names ``--backend`` accepts, what each serves, and how a run's backend is chosen.

A backend is one module under ``physprobe/backends/`` holding a ``physprobe.backends.base.Backend`` subclass,
registered by one line in ``REGISTRY``: its name, where the class is (``"module:Class"``, imported only when the
backend is used, so ``physprobe --help`` imports none), the request types it serves (by name, so ``serving`` reads
them without importing any backend; the class's ``ENGINES`` serve the same, which a test checks), whether the model
runs in this process and whether ``--num-processes`` may split its work, and the libraries it needs (``pip install
'physprobe[score]'`` names them, and run.json records their versions). ``docs/adding_a_backend.md`` walks through one.

May import: ``physprobe.protocols``, ``physprobe.util``, ``physprobe.errors``; never ``record``, ``run``,
``report`` or ``publish`` (the import contracts in pyproject.toml). Imported by: ``record`` (a spec resolves its
backend), ``run``, ``exit_status``, ``cli``.

>>> resolve(None, {}), resolve("hf", {"revision": "main"})
('hf', 'hf')
>>> resolve("tpu", {})
Traceback (most recent call last):
physprobe.errors.BackendError: unknown --backend 'tpu'; known: hf, openai
>>> from physprobe.protocols.requests import Masked
>>> serving(Masked)
['hf']
"""

from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING, NamedTuple

from physprobe.backends.base import Backend, BackendError, Description, Settings

if TYPE_CHECKING:
    from physprobe.backends.chat import Chat
    from physprobe.protocols import Evaluation, Protocol


class Registered(NamedTuple):
    target: str  # "module:Class"
    serves: tuple[str, ...]  # the names of the request types (physprobe.protocols.requests) it answers: its class's ENGINES
    in_process: bool  # the model runs in this process (weights, device and dtype are the backend's to load)
    data_parallel: bool  # --num-processes may split its work over processes (a server's: num_concurrent)
    libraries: tuple[str, ...] = ()  # what it needs, as pip requirements: setup.py's score extra, and run.json's versions
    templated: tuple[str, ...] | None = None  # the request types whose prompts it reads through a chat template (None: all)
    decodes: tuple[str, ...] = ("greedy", "sampling", "beam")  # the decodings it can run (``Decoding.kind``)


REGISTRY = {
    "hf": Registered("physprobe.backends.hf:HFBackend",
                     ("Choice", "MeanTokens", "Masked", "MaskedPair", "Seq2Seq", "Entailment", "YesNo", "Generate", "GenerateEach"),
                     in_process=True, data_parallel=True, libraries=("torch>=2.4", "transformers>=5,<6", "accelerate>=1.2", "gguf>=0.17.1")),
    "openai": Registered("physprobe.backends.openai.backend:OpenAIBackend", ("Choice", "YesNo", "Generate", "GenerateEach"),
                         in_process=False, data_parallel=False, libraries=("httpx>=0.27",),
                         templated=("Generate", "GenerateEach"),  # a server templates chat messages, never an echoed prompt
                         decodes=("greedy", "sampling")),  # the OpenAI API has no beam search
}  # fmt: skip
SERVER_ARGS = ("base_url",)  # --model-args keys that name a server: they imply the server backend
SERVER_BACKEND = "openai"


def libraries() -> tuple[str, ...]:
    """The distributions every registered backend needs (their ``libraries`` without version bounds), each once, in
    registration order.

    >>> libraries()[:2]
    ('torch', 'transformers')
    """
    names = (
        re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]
        for registered in REGISTRY.values()
        for requirement in registered.libraries
    )
    return tuple(dict.fromkeys(names))


def resolve(name: str | None, model_args: dict) -> str:
    """The backend of a run: ``name`` (``--backend``), else ``openai`` when ``--model-args`` names a
    ``base_url``, else ``hf``; a name not in ``REGISTRY`` is a one-line error listing the known ones."""
    server = [key for key in SERVER_ARGS if key in model_args]
    chosen = name or (SERVER_BACKEND if server else "hf")
    if chosen not in REGISTRY:
        raise BackendError(f"unknown --backend {chosen!r}; known: {', '.join(REGISTRY)}")
    if server and REGISTRY[chosen].in_process:
        raise BackendError(f"--model-args {server[0]}=... names a server, which --backend {chosen} does not use; "
                           f"use --backend {SERVER_BACKEND}, or drop {server[0]}")  # fmt: skip
    return chosen


def backend_class(name: str) -> type[Backend]:
    """The class registered as ``name`` (imported now)."""
    module, _, attribute = REGISTRY[name].target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def describe(name: str, settings: Settings) -> Description:
    """What the backend ``name`` reads of the model of ``settings`` without its weights (``Backend.describe``)."""
    return backend_class(name).describe(settings)


def create(name: str, settings: Settings, described: Description | None = None) -> Backend:
    """The backend ``name`` made with ``settings`` (options checked; no weights loaded, no request sent), reusing
    what ``describe`` read where it is given."""
    return backend_class(name)(settings, described)


def serves(name: str, request_type: type) -> bool:
    """Whether the backend registered as ``name`` answers ``request_type``."""
    return request_type.__name__ in REGISTRY[name].serves


def templates(name: str, request_type: type) -> bool:
    """Whether the backend registered as ``name`` can read ``request_type``'s prompts through a chat template.

    >>> from physprobe.protocols.requests import Choice, Generate
    >>> templates("hf", Choice), templates("openai", Choice), templates("openai", Generate)
    (True, False, True)
    """
    templated = REGISTRY[name].templated
    return templated is None or request_type.__name__ in templated


def serving(request_type: type) -> list[str]:
    """The registered backends that serve ``request_type`` (no backend imported)."""
    return [name for name in REGISTRY if serves(name, request_type)]


def check_named(name: str, evaluation: Evaluation, method: str | None, protocol: str | None, chat: Chat) -> None:
    """A one-line error, before the model is described, when the named ``protocol``, or every protocol of ``--method``,
    asks requests the backend ``name`` does not serve, or reads them through a chat template where it cannot."""
    if protocol is not None:
        asked, what = {evaluation.protocol(protocol).sends}, f"protocol {protocol!r}"
    elif method is not None:
        asked, what = (
            {p.sends for p in evaluation.protocols if p.method == method},
            f"--method {method} of {evaluation.benchmark}",
        )
    else:
        return
    if any(serves(name, kind) for kind in asked):
        _check_templated(name, asked, chat)
        return
    others = sorted({other for kind in asked for other in serving(kind)})
    raise BackendError(f"{what} asks for {' or '.join(sorted(k.asked_for for k in asked))}, which --backend {name} "
                       f"cannot serve; use --backend {' or '.join(others)}")  # fmt: skip


def check_protocol(name: str, protocol: Protocol, family_protocols: list[Protocol], chat: Chat) -> None:
    """A one-line error when the backend ``name`` does not serve the protocol's request type, naming the backends that
    do and the protocols of the model's family (``family_protocols``) whose requests it serves; or when it cannot read
    them through the chat template the run applies."""
    if not serves(name, protocol.sends):
        others = [other for other in serving(protocol.sends) if other != name]
        alternatives = [p.name for p in family_protocols if serves(name, p.sends)]
        fixes = [f"--backend {' or '.join(others)}"] if others else []
        if alternatives:
            fixes.append(f"--protocol {alternatives[0]}" + (f" (or {', '.join(alternatives[1:])})" if alternatives[1:] else ""))
        hint = f"; use {', or '.join(fixes)}" if fixes else ""
        raise BackendError(f"protocol {protocol.name!r} asks for {protocol.sends.asked_for}, which --backend {name} "
                           f"cannot serve{hint}")  # fmt: skip
    _check_templated(name, {protocol.sends}, chat)


def _check_templated(name: str, asked: set[type], chat: Chat) -> None:
    """A one-line error when a chat template applies to every request type ``asked`` and the backend ``name`` can read
    none of their prompts through one (a server templates chat messages, never a prompt it scores by echo)."""
    if not all(chat.applies(kind) and not templates(name, kind) for kind in asked):
        return
    others = [other for other in REGISTRY if all(templates(other, kind) for kind in asked)]
    raise BackendError(f"--apply-chat-template with a log-likelihood protocol needs --backend {' or '.join(others)}: --backend "
                       f"{name} applies its chat template to generation only; drop --apply-chat-template or score with "
                       "--method generate")  # fmt: skip
