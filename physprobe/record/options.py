"""``ScoreOptions``: the options of a ``physprobe score`` run as one typed value, built once from the command line
(``from_namespace``) or a Python call (``of``) and passed whole to the spec (``physprobe.record.spec``), the card run
and, as its ``Settings``, the backend.

Each option is a field; each rule an option must keep is that field's validator and gives the one line it always
gave, before any data is read or model described. Fields are validated in order, so a rule reads the fields above
it (the benchmark's configs and protocols, the backend that ``--model-args`` implies). Where ``benchmark`` names a
card (``all``, or several), the benchmark's own rules wait for each benchmark's options (``for_benchmark``). A value of
the wrong type from a Python caller is one line too (``of``). Built on pydantic: typed fields, validators in order,
frozen values, and the same model is the JSON Schema other tools read.

>>> options = ScoreOptions.of(model="gpt2", benchmark="prost", limit=10)
>>> options.backend, options.out, options.configs, options.batch_size
('hf', 'runs/gpt2-prost', None, None)
>>> ScoreOptions.of(model="gpt2", benchmark="prost", limit=0)
Traceback (most recent call last):
physprobe.errors.ProtocolError: --limit must be at least 1, got 0
>>> ScoreOptions.of(model="gpt2", benchmark="prost", limit="ten")
Traceback (most recent call last):
physprobe.errors.PhysprobeError: --limit 'ten': give a whole number
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator, model_validator

from physprobe import backends, protocols
from physprobe.backends.base import Settings
from physprobe.backends.chat import Chat
from physprobe.data import hub_data, registry
from physprobe.errors import ModelOptionError, PhysprobeError, ProtocolError
from physprobe.protocols import model_options
from physprobe.protocols.decoding import CHOICES
from physprobe.record import run_folder
from physprobe.util.paths import check_folder_name

CARD = "all"  # --benchmark all: every registered benchmark (or several, comma-separated: ``physprobe.run.card_run``)
LABEL_LENGTH = 80
FLAGS = {"configs": "--config", "processes": "--num-processes", "chat": "--apply-chat-template"}  # where not --<field>
EXPECTED = {"int": "a whole number", "bool": "true or false", "string": "text", "tuple": "a list", "dict": "KEY=VALUE pairs"}


def names_a_card(benchmark: str) -> bool:
    """Whether ``--benchmark`` names several benchmarks (``all``, or a comma-separated list).

    >>> names_a_card("prost"), names_a_card("all"), names_a_card("prost,cccons")
    (False, True, True)
    """
    return benchmark == CARD or "," in benchmark


def label_fault(label) -> str | None:
    """What is wrong with a run's label (``--label``), or None when it is one printable line of at most
    ``LABEL_LENGTH`` characters, or absent.

    >>> label_fault("SmolLM2 chat"), label_fault(None), label_fault("two\\nlines")
    (None, None, 'give one printable line of at most 80 characters')
    """
    if label is None or (isinstance(label, str) and label.strip() == label and label and label.isprintable()
                         and len(label) <= LABEL_LENGTH):  # fmt: skip
        return None
    return f"give one printable line of at most {LABEL_LENGTH} characters"


def chat_setting(template: str | None, system_instruction: str | None) -> Chat:
    """The run's ``Chat`` from ``--apply-chat-template [NAME]`` (None: not given; "": the model's default template)
    and ``--system-instruction``: prompts are read raw, as the papers' released scripts read them, unless a template
    is asked for.

    >>> chat_setting("", None), chat_setting(None, "Answer briefly.").mode
    (Chat(mode='on', template=None, system_instruction=None), 'off')
    """
    if system_instruction is not None and not system_instruction.strip():
        raise PhysprobeError("--system-instruction is empty; give the instruction's text, or leave the option out")
    if template is None:
        return Chat("off", system_instruction=system_instruction)
    return Chat("on", template or None, system_instruction)


MAX_SAMPLES = 1000  # --samples: every sample's text and decision is cached and written per row (a 10,000-row config: 10M)


def _whole(flag: str, value, low: int, what: str, high: int | None = None) -> int:
    """``value`` if it is a whole number (not a flag) of at least ``low`` (and at most ``high``), else
    ``ProtocolError`` naming ``flag``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f"at least {low}" if high is None else f"from {low} to {high}"
        raise ProtocolError(f"{flag} {value}: give a whole number {bound}{what}")
    return value


class ScoreOptions(BaseModel):
    """A run's options, each checked on its own (its validator) and in order: what ``spec.resolve`` starts from."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True, arbitrary_types_allowed=True)

    model: str
    benchmark: str
    data: str | None = None  # --data: a local build (else the Hub dataset)
    dataset_repo: str | None = None
    revision: str | None = None
    configs: tuple[str, ...] | None = None  # --config
    method: str | None = None
    protocol: str | None = None
    limit: int | None = None
    model_args: dict[str, str] = {}  # --model-args as given (KEY -> VALUE); the backend types them
    backend: str | None = None  # --backend, else the one --model-args implies (hf, or openai for a base_url)
    processes: int = 1  # --num-processes
    device: str | None = None
    dtype: str | None = None
    batch_size: int | None = None  # sequences per batch; None: auto, a token budget
    gguf_file: str | None = None
    truncate: bool = False
    chat: Chat = Chat()
    bootstrap_iters: int = 200
    chunk: int = 256  # requests per engine call, cache commit and unit of data-parallel work (runner)
    command: tuple[str, ...] = ()
    label: str | None = None
    decoding: str = "greedy"
    samples: int = 1
    seed: int = 0
    out: str | None = None  # the run folder (default runs/<model>-<benchmark>)

    @classmethod
    def of(cls, **options) -> ScoreOptions:
        """The options of a Python call (``spec.make``'s keywords), checked: a value of the wrong type is one line."""
        try:
            return cls(**options)
        except ValidationError as error:
            first = error.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else "options"
            if first["type"] == "extra_forbidden":
                raise PhysprobeError(
                    f"{field!r} is not an option of physprobe score; known: {', '.join(cls.model_fields)}"
                ) from None
            expected = next((text for kind, text in EXPECTED.items() if first["type"].startswith(kind)), first["msg"])
            raise PhysprobeError(
                f"{FLAGS.get(field, '--' + field.replace('_', '-'))} {first['input']!r}: give {expected}"
            ) from None

    @classmethod
    def from_namespace(cls, args, command: tuple[str, ...] = ()) -> ScoreOptions:
        """The options of ``physprobe score``'s parsed arguments (``argparse.Namespace``): each field read from the
        argument of the same name, the chat setting from its two (``chat_setting``); ``command``, the command line as
        run.json keeps it (``args.command`` is the subcommand's name)."""
        given = {name: getattr(args, name) for name in cls.model_fields if name in vars(args) and name not in ("chat", "command")}
        return cls.of(**given, chat=chat_setting(args.apply_chat_template, args.system_instruction), command=command)

    def for_benchmark(self, benchmark: str, out: Path) -> ScoreOptions:
        """These options for one benchmark of a card, scored into ``out`` (its rules checked now)."""
        return ScoreOptions.of(**{**dict(self), "benchmark": benchmark, "out": str(out)})

    @property
    def card(self) -> bool:
        return names_a_card(self.benchmark)

    def evaluation(self) -> protocols.Evaluation:
        return registry.evaluation(self.benchmark)

    def source(self) -> hub_data.DataSource:
        """Where the rows are read: the local build (``--data``), else the Hub dataset at its revision."""
        if self.data is not None:
            return hub_data.local(self.data, self.benchmark)
        return hub_data.hub(self.benchmark, self.dataset_repo, self.revision)

    def settings(self, family: str | None = None, chat: Chat | None = None) -> Settings:
        """What the backend is described or made with: the model's ``family`` once resolved, and ``chat``."""
        return Settings(self.model, dict(self.model_args), family=family, device=self.device, dtype=self.dtype,
                        batch_size=self.batch_size, gguf_file=self.gguf_file, truncate=self.truncate, chat=chat or self.chat)  # fmt: skip

    @field_validator("benchmark")
    @classmethod
    def _benchmark(cls, benchmark: str) -> str:
        if not names_a_card(benchmark):
            registry.evaluation(benchmark)  # a known one: one line listing them
        return benchmark

    @field_validator("data", mode="before")
    @classmethod
    def _path(cls, value):
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @field_validator("configs", mode="before")
    @classmethod
    def _configs(cls, configs, info: ValidationInfo):
        """The configs to score: those given (each known, holding questions, once); None when none are."""
        benchmark = info.data.get("benchmark")
        if configs is None or benchmark is None or names_a_card(benchmark):
            return None if configs is None else tuple(configs)
        configs = list(configs)
        evaluation = registry.evaluation(benchmark)
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

    @field_validator("method")
    @classmethod
    def _method(cls, method: str | None, info: ValidationInfo) -> str | None:
        """A known method, and one the benchmark has protocols of."""
        if method is not None and method not in protocols.METHODS:
            raise ProtocolError(f"unknown method {method!r}; known: {', '.join(protocols.METHODS)}")
        benchmark = info.data.get("benchmark")
        if method is not None and benchmark is not None and not names_a_card(benchmark):
            evaluation = registry.evaluation(benchmark)
            if not any(p.method == method for p in evaluation.protocols):
                methods = sorted({p.method for p in evaluation.protocols})
                raise ProtocolError(f"{benchmark} cannot be scored with method {method!r}; use one of {methods}")
        return method

    @field_validator("protocol")
    @classmethod
    def _protocol(cls, protocol: str | None, info: ValidationInfo) -> str | None:
        """A protocol of the benchmark, of ``--method`` where both are given."""
        benchmark, method = info.data.get("benchmark"), info.data.get("method")
        if protocol is None or benchmark is None or names_a_card(benchmark):
            return protocol
        chosen = registry.evaluation(benchmark).protocol(protocol)
        if method is not None and chosen.method != method:
            raise ProtocolError(f"protocol {chosen.name!r} uses method {chosen.method!r}, not --method {method}")
        return protocol

    @field_validator("limit")
    @classmethod
    def _limit(cls, limit: int | None) -> int | None:
        if limit is not None and limit < 1:
            raise ProtocolError(f"--limit must be at least 1, got {limit}")
        return limit

    @field_validator("model_args", mode="before")
    @classmethod
    def _model_args(cls, value) -> dict[str, str]:
        """``--model-args`` text (``KEY=VALUE,...``) or a mapping of the same, as its pairs (the syntax checked)."""
        if isinstance(value, Mapping):
            value = ",".join(f"{k}={v}" for k, v in value.items())
        return model_options.split_model_args(value)

    @field_validator("backend")
    @classmethod
    def _backend(cls, backend: str | None, info: ValidationInfo) -> str:
        """The backend (``--backend``, else the one ``--model-args`` implies), its ``--model-args`` checked by it."""
        pairs = info.data.get("model_args", {})
        name = backends.resolve(backend, pairs)
        backends.backend_class(name).parse_model_args(",".join(f"{k}={v}" for k, v in pairs.items()))
        return name

    @field_validator("processes")
    @classmethod
    def _processes(cls, processes: int, info: ValidationInfo) -> int:
        if processes < 1:
            raise PhysprobeError(f"--num-processes must be at least 1, got {processes}")
        name = info.data.get("backend")
        if processes > 1 and name is not None and not backends.REGISTRY[name].data_parallel:
            raise PhysprobeError(f"--num-processes {processes} splits a model's work over processes of this machine; --backend {name} "
                                 "sends requests to a server, which runs them at once: drop --num-processes and give --model-args "
                                 f"num_concurrent={processes} (or more)")  # fmt: skip
        return processes

    @field_validator("batch_size", mode="before")
    @classmethod
    def _batch_size(cls, batch_size):
        """``"auto"``/None (a token budget) or sequences per batch."""
        if isinstance(batch_size, str) or batch_size is None:
            return model_options.parse_batch_size(batch_size)
        if isinstance(batch_size, int) and not isinstance(batch_size, bool) and batch_size < 1:
            raise ModelOptionError(f"--batch-size {batch_size}: give a whole number of at least 1, or auto")
        return batch_size

    @field_validator("bootstrap_iters")
    @classmethod
    def _bootstrap_iters(cls, iterations: int) -> int:
        if iterations < 0:
            raise PhysprobeError(f"--bootstrap-iters must be 0 (no intervals) or more, got {iterations}")
        return iterations

    @field_validator("chunk")
    @classmethod
    def _chunk(cls, chunk: int) -> int:
        if chunk < 1:
            raise PhysprobeError(f"chunk must be at least 1, got {chunk}")
        return chunk

    @field_validator("label")
    @classmethod
    def _label(cls, label: str | None) -> str | None:
        if label_fault(label):
            raise PhysprobeError(f"--label {label!r}: {label_fault(label)}, or leave it out (the model's name)")
        return label

    @field_validator("decoding")
    @classmethod
    def _decoding(cls, decoding: str) -> str:
        if decoding not in CHOICES:
            raise ProtocolError(f"--decoding {decoding}: give {' or '.join(CHOICES)}")
        return decoding

    @field_validator("samples", mode="before")
    @classmethod
    def _samples(cls, samples):
        return _whole("--samples", samples, 1, " (answers drawn per prompt)", MAX_SAMPLES)

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, seed):
        return _whole("--seed", seed, 0, "")

    @field_validator("out", mode="before")
    @classmethod
    def _out(cls, out, info: ValidationInfo) -> str | None:
        """The run folder: ``--out``, else ``runs/<model>-<benchmark>``, a plain folder name at its end (a card's
        parent is its runs', each checked as its benchmark's options are made)."""
        benchmark, model = info.data.get("benchmark"), info.data.get("model")
        if benchmark is None or model is None or names_a_card(benchmark):
            return None if out is None else os.fspath(out)
        folder = Path(out) if out is not None else run_folder.default_folder(model, benchmark)
        check_folder_name(Path(os.path.abspath(folder)).name, "--out")
        return str(folder)

    @model_validator(mode="after")
    def _together(self) -> ScoreOptions:
        """The rules of options together: ``--data`` or the Hub's ``--revision`` / ``--dataset-repo``; a named protocol,
        or ``--method``, whose requests the backend serves."""
        if self.data is not None and (self.revision or self.dataset_repo):
            raise PhysprobeError(
                "--data reads a local build; --revision and --dataset-repo are for the Hub: give one or the other"
            )
        if not self.card:
            backends.check_named(self.backend, self.evaluation(), self.method, self.protocol, self.chat)
        return self
