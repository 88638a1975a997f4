"""``RunPlan``: a ``physprobe score`` run resolved from its arguments before any data or weight loads.

``make`` checks every argument that needs neither data nor weights and resolves it once: the benchmark's
configs, the method and named protocol, the backend and its options (parsed by the backend itself), the chat
setting, the data source, the run folder and its owner, the number of processes. A bad argument is one line
here. The plan is frozen and passed as it is, also to data-parallel ranks (``physprobe.parallel``); the
protocol, when not named, is picked by ``protocol_for`` once the backend reports the model's family.

>>> plan = make("gpt2", "prost", limit=10)
>>> plan.configs, plan.out.as_posix(), plan.backend, plan.chat.mode
(None, 'runs/gpt2-prost', 'hf', 'off')
>>> plan.configs_for(plan.protocol_for("causal"))
('default',)
>>> make("gpt2", "prost", limit=0)
Traceback (most recent call last):
physprobe.errors.ProtocolError: --limit must be at least 1, got 0
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from physprobe import backends, hub_data, model_options, protocols, registry, run_record
from physprobe.backends.base import Settings
from physprobe.backends.chat import Chat
from physprobe.errors import ModelOptionError, PhysprobeError, ProtocolError
from physprobe.paths import Owner, check_folder_name


@dataclass(frozen=True)
class DataChoice:
    """Where a run reads its rows: a local build (``--data``), else the Hub dataset ``repo`` (default
    ``physprobe/<benchmark>``) at ``revision`` (default: its main branch, resolved to a commit on reading)."""

    folder: str | None = None
    repo: str | None = None
    revision: str | None = None

    def source(self, benchmark: str) -> hub_data.DataSource:
        if self.folder is not None:
            return hub_data.local(self.folder, benchmark)
        return hub_data.hub(benchmark, self.repo, self.revision)


@dataclass(frozen=True)
class RunPlan:
    """A resolved ``physprobe score`` run (``make`` builds one; every field is checked there)."""

    model: str
    benchmark: str
    configs: tuple[str, ...] | None  # --config; None: the protocol's (``Protocol.configs``), else the paper's
    out: Path
    data: DataChoice
    backend: str
    model_args: Mapping = field(default_factory=dict)  # typed by the backend's parse_model_args
    method: str | None = None  # --method (restricts the protocol and the model's family)
    protocol: str | None = None  # --protocol; None: the benchmark's default for the model (protocol_for)
    chat: Chat = Chat()
    limit: int | None = None
    device: str | None = None
    dtype: str | None = None
    batch_size: int | None = None  # None: a token budget, halved on out-of-memory
    gguf_file: str | None = None
    truncate: bool = False
    bootstrap_iters: int = 200
    processes: int = 1
    chunk: int = 256  # requests per engine call, cache commit and unit of data-parallel work (runner.run)
    command: tuple[str, ...] = ()
    label: str | None = None  # --label: the run's name in a report

    @property
    def local_model(self) -> bool:
        return model_options.looks_local(self.model)

    @property
    def owner(self) -> Owner:
        """Who the run folder belongs to: this model on this benchmark."""
        return run_record.owner(self.model, self.benchmark, self.local_model)

    def settings(self, protocol: protocols.Protocol | None = None) -> Settings:
        """What the backend is made with (``method``: ``--method``, or the named protocol's: it restricts the
        model's family); with the run's ``protocol``, a chat template applied where its released script read
        prompts through one (``Protocol.needs_chat``)."""
        method = self.method or (registry.evaluation(self.benchmark).protocol(self.protocol).method if self.protocol else None)
        chat = self.chat
        if protocol is not None and protocol.needs_chat and chat.mode == "off":
            chat = dataclasses.replace(chat, mode="on")
        return Settings(self.model, dict(self.model_args), method=method, device=self.device, dtype=self.dtype,
                        batch_size=self.batch_size, gguf_file=self.gguf_file, truncate=self.truncate, chat=chat)  # fmt: skip

    def configs_for(self, protocol: protocols.Protocol) -> tuple[str, ...]:
        """The configs the run scores: ``--config``'s, else those the protocol's released script reads, else
        the paper's."""
        return self.configs or protocol.configs or tuple(registry.evaluation(self.benchmark).configs)

    def protocol_for(self, family: str) -> protocols.Protocol:
        """The run's protocol for a model of ``family``: the named one, else the benchmark's default for the
        model (its name, else its family, and ``--method``)."""
        evaluation = registry.evaluation(self.benchmark)
        if self.protocol is None:
            return self._without_a_second_system_message(evaluation.default(family, self.method, self.model))
        chosen = evaluation.protocol(self.protocol)
        if family not in chosen.families:
            raise ProtocolError(f"protocol {chosen.name!r} is for {', '.join(chosen.families)} models, not {family}")
        return self._without_a_second_system_message(chosen)

    def _without_a_second_system_message(self, protocol: protocols.Protocol) -> protocols.Protocol:
        if protocol.system_message and self.chat.system_instruction:
            raise ProtocolError(f"protocol {protocol.name!r} sends its released script's system message; leave out "
                                "--system-instruction, or name another protocol (`physprobe protocols`)")  # fmt: skip
        return protocol


def make(model: str, benchmark: str, *, out: str | os.PathLike | None = None, data: str | os.PathLike | None = None,
         dataset_repo: str | None = None, revision: str | None = None, configs: Sequence[str] | None = None,
         method: str | None = None, protocol: str | None = None, limit: int | None = None, backend: str | None = None,
         model_args: str | Mapping | None = None, device: str | None = None, dtype: str | None = None,
         batch_size: str | int | None = None, gguf_file: str | None = None, truncate: bool = False, chat: Chat | None = None,
         bootstrap_iters: int = 200, processes: int = 1, chunk: int = 256, command: Sequence[str] = (),
         label: str | None = None) -> RunPlan:  # fmt: skip
    """Check a run's arguments (the command line's, or a caller's) and resolve them into a ``RunPlan``.

    ``model_args``: ``--model-args`` text (``KEY=VALUE,...``) or a mapping of the same; the backend parses
    them (``hf``: ``from_pretrained`` options; a ``base_url`` implies the ``openai`` backend).
    ``batch_size``: ``"auto"``/None (a token budget) or sequences per batch.
    """
    evaluation = registry.evaluation(benchmark)
    if processes < 1:
        raise PhysprobeError(f"--num-processes must be at least 1, got {processes}")
    if data is not None and (revision or dataset_repo):
        raise PhysprobeError("--data reads a local build; --revision and --dataset-repo are for the Hub: give one or the other")
    if limit is not None and limit < 1:
        raise ProtocolError(f"--limit must be at least 1, got {limit}")
    if bootstrap_iters < 0:
        raise PhysprobeError(f"--bootstrap-iters must be 0 (no intervals) or more, got {bootstrap_iters}")
    if chunk < 1:
        raise PhysprobeError(f"chunk must be at least 1, got {chunk}")
    if run_record.label_fault(label):
        raise PhysprobeError(f"--label {label!r}: {run_record.label_fault(label)}, or leave it out (the model's name)")
    chosen_configs = _configs(benchmark, evaluation, configs)
    _method_and_protocol(benchmark, evaluation, method, protocol)
    text = model_args if model_args is None or isinstance(model_args, str) else ",".join(f"{k}={v}" for k, v in model_args.items())
    name = backends.resolve(backend, model_options.split_model_args(text))
    options = backends.backend_class(name).parse_model_args(text)
    if processes > 1 and not backends.REGISTRY[name].local:
        raise PhysprobeError(f"--num-processes {processes} splits a model's work over processes of this machine; --backend {name} "
                             "sends requests to a server, which runs them at once: drop --num-processes and give --model-args "
                             f"num_concurrent={processes} (or more)")  # fmt: skip
    folder = Path(out) if out is not None else run_record.default_folder(model, benchmark)
    check_folder_name(Path(os.path.abspath(folder)).name, "--out")
    if isinstance(batch_size, str) or batch_size is None:
        batch_size = model_options.parse_batch_size(batch_size)
    elif batch_size < 1:
        raise ModelOptionError(f"--batch-size {batch_size}: give a whole number of at least 1, or auto")
    return RunPlan(model=model, benchmark=benchmark, configs=chosen_configs, out=folder,
                   data=DataChoice(None if data is None else str(data), dataset_repo, revision), backend=name, model_args=options,
                   method=method, protocol=protocol, chat=chat or Chat(), limit=limit, device=device, dtype=dtype,
                   batch_size=batch_size, gguf_file=gguf_file, truncate=truncate, bootstrap_iters=bootstrap_iters,
                   processes=processes, chunk=chunk, command=tuple(command), label=label)  # fmt: skip


def _configs(benchmark: str, evaluation: protocols.Evaluation, configs: Sequence[str] | None) -> tuple[str, ...] | None:
    """The configs to score: those given (each known, holding questions, once); None when none are."""
    if configs is None:
        return None
    configs = list(configs)
    known = registry.config_names(benchmark)
    scorable = [c for c in known if evaluation.scorable is None or c in evaluation.scorable]
    if not configs or any(not c.strip() for c in configs):
        raise ProtocolError(f"--config has an empty entry ({','.join(configs)!r}); give comma-separated names "
                            f"such as {','.join(evaluation.configs)}")  # fmt: skip
    repeated = sorted({c for c in configs if configs.count(c) > 1})
    if repeated:
        raise ProtocolError(f"--config names {', '.join(repeated)} more than once; give each config once")
    for config in configs:
        if config not in known:
            raise ProtocolError(f"{benchmark} has no config {config!r}; known: {', '.join(scorable)}")
        if config not in scorable:
            raise ProtocolError(f"{benchmark} config {config!r} holds no questions to score; scorable: {', '.join(scorable)}")
    return tuple(configs)


def _method_and_protocol(benchmark: str, evaluation: protocols.Evaluation, method: str | None, protocol: str | None) -> None:
    """``--method`` and ``--protocol`` exist and go together."""
    if method is not None and method not in protocols.METHODS:
        raise ProtocolError(f"unknown method {method!r}; known: {', '.join(protocols.METHODS)}")
    chosen = evaluation.protocol(protocol) if protocol else None
    if chosen is not None and method is not None and chosen.method != method:
        raise ProtocolError(f"protocol {chosen.name!r} uses method {chosen.method!r}, not --method {method}")
    if method is not None and not any(p.method == method for p in evaluation.protocols):
        methods = sorted({p.method for p in evaluation.protocols})
        raise ProtocolError(f"{benchmark} cannot be scored with method {method!r}; use one of {methods}")
