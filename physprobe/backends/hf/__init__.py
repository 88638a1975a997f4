"""The ``hf`` backend: Hugging Face models in this process, through ``transformers`` (a GGUF file too).

It serves every request type with physprobe's exact engines (``scoring``: causal log-likelihoods, each question's
shared prefix once, on the packed tree plan of ``packed`` or the cached plan; ``masked``, ``seq2seq``, ``nli``; and
``generation``: batched greedy decoding; their batching in ``batching``, what a model's attention takes in
``attention``), resolving what a request leaves to the tokenizer with ``physprobe.protocols.tokenized``. A chat template is applied here, and only here
(``physprobe.backends.chat.Templating``).

>>> HFBackend.name
'hf'
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
import warnings
from dataclasses import dataclass

from physprobe.backends.base import Backend, Description, Settings
from physprobe.backends.chat import Chat, Templating, template_hash
from physprobe.errors import ProtocolError
from physprobe.protocols.answers import yes_probability
from physprobe.protocols.decoding import part_seed
from physprobe.protocols.requests import (
    Choice,
    Entailment,
    Generate,
    GenerateEach,
    Masked,
    MaskedPair,
    MeanTokens,
    Seq2Seq,
    YesNo,
)
from physprobe.protocols.results import Answer, Answers, Result, Scores
from physprobe.protocols.tokenized import first_token_choices, lower_cased, mean_token_ids, seq2seq_targets
from physprobe.util import collector

# Entailment readings -> the engine's (softmax_across: raw logits, softmaxed across the request's pairs).
READINGS = {"three_way": "three_way", "vs_contradiction": "vs_contradiction", "softmax_across": "logit"}


def score_loaded(
    loaded, requests: list, chat: Chat | Templating | None = None, truncate: bool = False, progress=None
) -> list[Result]:
    """Results of requests of one type (``physprobe.protocols.requests`` says what each is) from a model already in
    memory (``physprobe.backends.hf.model.Loaded``), under a chat setting (None: ``Chat()``, raw prompts) or the
    ``Templating`` that decided it."""
    templating = chat if isinstance(chat, Templating) else Templating(loaded.tokenizer, chat or Chat())
    with cache_rename_quiet():
        return ENGINES[type(requests[0])](
            loaded, requests, templating, {"progress": progress, "truncate": truncate, **loaded.batching}
        )


RENAMED_CACHE_WARNING = r"`past_key_values` is deprecated and will be removed in version"  # FutureWarning, per forward
RENAMED_CACHE_LOG = "`past_key_values`/`cache_params` are deprecated. Use `cache` instead."  # transformers' logger, once


@contextlib.contextmanager
def cache_rename_quiet():
    """Silence, while physprobe calls the model, the two notices of transformers' renaming of a forward's
    ``past_key_values`` to ``cache`` (a FutureWarning on every forward since about 5.2x, and a logged warning):
    the engines pass ``past_key_values``, the name every transformers 5 accepts (5.0 knows no ``cache``), so the
    notices ask nothing a user can act on. Any other warning passes.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     with cache_rename_quiet():
    ...         warnings.warn("`past_key_values` is deprecated and will be removed in version 5.40.0 for `M.forward`.", FutureWarning)
    ...         warnings.warn("another notice", FutureWarning)
    >>> [str(w.message) for w in seen]
    ['another notice']
    """
    import logging

    def drop(record: logging.LogRecord) -> bool:
        return record.getMessage() != RENAMED_CACHE_LOG

    logger = logging.getLogger("transformers.utils.generic")
    logger.addFilter(drop)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=RENAMED_CACHE_WARNING, category=FutureWarning)
            yield
    finally:
        logger.removeFilter(drop)


def _scores(rows: list[list]) -> list[Scores]:
    return [Scores(tuple(row)) for row in rows]


def _choice(loaded, requests: list[Choice], templating: Templating, options: dict) -> list[Scores]:
    from physprobe.backends.hf import scoring

    texts = [[templating.render(r.context, Choice) + c for c in r.continuations] for r in requests]
    return _scores(
        scoring.sequence_logprobs(
            loaded.model, loaded.tokenizer, texts, loaded.device, bos=not templating.applied(Choice), **options
        )
    )


def _mean_tokens(loaded, requests: list[MeanTokens], templating: Templating, options: dict) -> list[Scores]:
    from physprobe.backends.hf import scoring

    templating.applied(MeanTokens)  # checks the setting asks nothing of token sequences
    ids = mean_token_ids(requests, loaded.tokenizer)
    return _scores(scoring.mean_token_logprobs(loaded.model, loaded.tokenizer, ids, loaded.device, **options))


def _masked(loaded, requests: list[Masked], templating: Templating, options: dict) -> list[Scores]:
    from physprobe.backends.hf import masked

    templating.applied(Masked)
    tokenizer = loaded.tokenizer
    sep = getattr(tokenizer, "sep_token", None) or getattr(tokenizer, "eos_token", None) or "[SEP]"
    texts = [r.text.replace("[SEP]", sep) for r in requests]
    return _scores(
        masked.masked_logprobs(loaded.model, tokenizer, texts, [r.candidates for r in requests], loaded.device, **options)
    )


def _masked_pair(loaded, requests: list[MaskedPair], templating: Templating, options: dict) -> list[Scores]:
    from physprobe.backends.hf import masked

    templating.applied(MaskedPair)
    tokenizer, first = loaded.tokenizer, requests[0]
    pairs = [(r.first, r.second, r.words) if not r.lower_case else
             (lower_cased(r.first, tokenizer), lower_cased(r.second, tokenizer).replace("[mask]", "[MASK]"), r.words)
             for r in requests]  # fmt: skip
    return _scores(masked.masked_pair_logprobs(loaded.model, tokenizer, pairs, loaded.device, token_type_ids=first.token_type_ids,
                                               unknown_as_unk=first.unknown_as_unk, **options))  # fmt: skip


def _seq2seq(loaded, requests: list[Seq2Seq], templating: Templating, options: dict) -> list[Scores]:
    from physprobe.backends.hf import seq2seq

    templating.applied(Seq2Seq)
    questions = list(zip([r.source for r in requests], seq2seq_targets(requests, loaded.tokenizer), strict=True))
    return _scores(seq2seq.seq2seq_logprobs(loaded.model, loaded.tokenizer, questions, loaded.device, **options))


class Shares:
    """A progress counter of requests fed by an engine that counts its own items (a request's prompts or sentence
    pairs, or shares of them): items done, as the share of the requests they make up, so that a chunk's count moves
    with its batches (and a generating engine's tokens).

    >>> class Counter:
    ...     n = 0
    ...     def update(self, k): self.n += k
    >>> counter = Counter(); shares = Shares(counter, items=30, requests=2)
    >>> shares.update(15); counter.n, shares.update(15), counter.n
    (1.0, None, 2.0)
    """

    def __init__(self, progress, items: int, requests: int):
        self.progress, self.items, self.requests, self.done, self.shown = progress, items, requests, 0, 0

    def update(self, n: float) -> None:
        self.done += n
        now = self.done * self.requests / self.items if self.items else self.requests
        if now != self.shown:
            self.progress.update(now - self.shown)
            self.shown = now

    def spare(self, n: float) -> None:
        """``n`` items' worth never spent (``stepping.Shares``: answers that ended before their budget), as the share
        of the requests it makes up."""
        if self.items:
            self.progress.spare(n * self.requests / self.items)

    @classmethod
    def of(cls, progress, items: int, requests: int):
        """The counter for the engine, None without one."""
        return None if progress is None else cls(progress, items, requests)


def _split(values: list, widths: list[int]) -> list[list]:
    rows, at = [], 0
    for width in widths:
        rows.append(values[at : at + width])
        at += width
    return rows


def _entailment(loaded, requests: list[Entailment], templating: Templating, options: dict) -> list[Scores]:
    import torch

    from physprobe.backends.hf import nli

    templating.applied(Entailment)
    options.pop("truncate")  # the NLI engine takes pairs whole
    reading = requests[0].reading
    flat = [pair for r in requests for pair in r.pairs]
    options["progress"] = Shares.of(options["progress"], len(flat), len(requests))
    values = nli.entailment_probs(loaded.model, loaded.tokenizer, flat, loaded.device, reading=READINGS[reading], **options)
    rows = _split(values, [len(r.pairs) for r in requests])
    if reading == "softmax_across":
        rows = [torch.softmax(torch.tensor(row), dim=0).tolist() for row in rows]
    return _scores(rows)


def _yes_no(loaded, requests: list[YesNo], templating: Templating, options: dict) -> list[Scores]:
    from physprobe.backends.hf import scoring, seq2seq

    options.pop("truncate")  # the YES/NO engine reads prompts whole
    flat = [templating.render(p, YesNo) for r in requests for p in r.prompts]
    options["progress"] = Shares.of(options["progress"], len(flat), len(requests))
    if loaded.family == "seq2seq":  # the answer is the target
        pairs = seq2seq.seq2seq_logprobs(
            loaded.model, loaded.tokenizer, [(p, ["YES", "NO"]) for p in flat], loaded.device, **options
        )
    else:  # the answer follows the prompt after a space (BOS first unless a template opens the text)
        pairs = scoring.sequence_logprobs(loaded.model, loaded.tokenizer, [[f"{p} YES", f"{p} NO"] for p in flat], loaded.device,
                                          bos=not templating.applied(YesNo), **options)  # fmt: skip
    values = [yes_probability(yes, no) for yes, no in pairs]
    return _scores(_split(values, [len(r.prompts) for r in requests]))


def _generate(loaded, requests: list[Generate], templating: Templating, options: dict) -> list[Answer]:
    from physprobe.backends.hf import generation

    asks = [{"prompt": templating.render(r.prompt, Generate, r.system), "max_new_tokens": r.max_new_tokens, "stop": list(r.stop),
             "max_length": r.max_length, "decoding": r.decoding, "seed": r.seed} for r in requests]  # fmt: skip
    answers = generation.generate(loaded.model, loaded.tokenizer, asks, loaded.device, seq2seq=loaded.family == "seq2seq",
                                  chat=templating.applied(Generate), **options)  # fmt: skip
    resolved = iter(first_token_choices([r for r in requests if r.first_token_choices], loaded.tokenizer))
    return [dataclasses.replace(answer, choices=tuple(next(resolved))) if r.first_token_choices else answer
            for answer, r in zip(answers, requests, strict=True)]  # fmt: skip


def _generate_each(loaded, requests: list[GenerateEach], templating: Templating, options: dict) -> list[Answers]:
    from physprobe.backends.hf import generation

    asks = [{"prompt": templating.render(p, GenerateEach, r.system), "max_new_tokens": r.max_new_tokens, "stop": list(r.stop),
             "decoding": r.decoding, "seed": None if r.seed is None else part_seed(r.seed, j)}
            for r in requests for j, p in enumerate(r.prompts)]  # fmt: skip
    options["progress"] = Shares.of(options["progress"], len(asks), len(requests))
    answers = generation.generate(loaded.model, loaded.tokenizer, asks, loaded.device, seq2seq=loaded.family == "seq2seq",
                                  chat=templating.applied(GenerateEach), **options)  # fmt: skip
    return [Answers(tuple(row)) for row in _split(answers, [len(r.prompts) for r in requests])]


# The engine of each request type this backend serves (``physprobe.backends.REGISTRY`` names the same types).
ENGINES = {Choice: _choice, MeanTokens: _mean_tokens, Masked: _masked, MaskedPair: _masked_pair, Seq2Seq: _seq2seq,
           Entailment: _entailment, YesNo: _yes_no, Generate: _generate, GenerateEach: _generate_each}  # fmt: skip
# Each engine's version, in the resume cache's key: bumped when a change to the engine (or to code it runs: batching,
# packing, attention, generation) moves the numbers it returns, so a resumed run never reads the older engine's answers.
ENGINE_VERSIONS = {Choice: 1, MeanTokens: 1, Masked: 1, MaskedPair: 1, Seq2Seq: 1, Entailment: 1, YesNo: 1, Generate: 1,
                   GenerateEach: 1}  # fmt: skip


def computed_dtype(model) -> str:
    """The dtype a loaded model computes in (its parameters'; no engine autocasts), as ``--dtype`` names it: what
    ``--dtype auto`` resolved to, recorded in run.json.

    >>> import torch
    >>> computed_dtype(torch.nn.Linear(2, 2).to(torch.bfloat16))
    'bfloat16'
    """
    return str(getattr(model, "dtype", None) or next(model.parameters()).dtype).removeprefix("torch.")


def recorded_args(kwargs: dict) -> dict:
    """The ``from_pretrained`` options that change a score, as the cache key and run.json hold them
    (``load_in_8bit``/``4bit`` by their quantization config's settings).

    >>> recorded_args({"revision": "main", "subfolder": "v2"})
    {'revision': 'main', 'subfolder': 'v2'}
    """
    recorded = {k: v for k, v in kwargs.items() if k != "quantization_config"}
    if "quantization_config" in kwargs:
        recorded["quantization_config"] = kwargs["quantization_config"].to_dict()
    return recorded


@dataclass(frozen=True)
class HFInfo:
    """What run.json records of an in-process model (its ``backend`` section)."""

    family: str
    device: str
    model_loaded: bool
    model_revision: str
    gguf_file: str | None
    model_args: dict
    truncate: bool
    dtype: str
    batch_size: int | str  # sequences per batch, or "auto"


class HFBackend(Backend):
    """Models loaded in this process with ``transformers`` (``AutoModelFor*`` of the model's family)."""

    name = "hf"
    ENGINES = ENGINES
    ENGINE_VERSIONS = ENGINE_VERSIONS

    @staticmethod
    def parse_model_args(text: str | None) -> dict:
        from physprobe.protocols import model_options

        return model_options.parse_model_args(text)

    @classmethod
    def describe(cls, settings: Settings) -> Description:
        """The model's config and tokenizer read (its weights not): the family its architectures name, whether the
        tokenizer has a chat template, its revision (a Hub commit, or a hash of the local folder's files)."""
        from physprobe.backends.hf import model
        from physprobe.protocols import model_options

        facts = model.describe_model(settings.model, settings.device, settings.gguf_file, model_options.typed_model_args(settings.model_args),
                                 settings.dtype, settings.batch_size)  # fmt: skip
        facts.tokenizer = model.load_tokenizer(facts)
        if facts.local:  # the tokenizer builds the cache keys: read from the files the revision was hashed from
            model.unchanged_since_described(facts)
        collector.settle()  # torch's and transformers' modules, imported by now: the collector walks them no more
        template = Templating(facts.tokenizer, Chat(), settings.model).template
        return Description(facts.detected, facts.kind, template is not None,
                           {"revision": facts.revision, "gguf_file": facts.kwargs.get("gguf_file")}, facts)  # fmt: skip

    def __init__(self, settings: Settings, described: Description | None = None):
        super().__init__(settings)
        facts = (described or self.describe(settings)).facts
        family = settings.family or facts.detected
        if family is None:
            raise ProtocolError(f"cannot tell the family of {settings.model!r} from {facts.kind}; pass --method")
        if (
            family == "nli"
        ):  # every NLI protocol reads the entailment label: a model without one is refused before its weights load
            from physprobe.backends.hf.nli import entailment_label

            entailment_label(facts.config)
        self.facts = dataclasses.replace(facts, family=family)
        self.family = family
        self.tokenizer = facts.tokenizer  # the model's tokenizer: enough to build cache keys without the weights
        self._loaded = None
        if settings.chat.mode == "on":  # a template asked of a model without one: refused before any weight loads
            self.templating.require()

    @functools.cached_property
    def templating(self) -> Templating:
        return Templating(self.tokenizer, self.settings.chat, self.settings.model)

    def chat_applied(self, request_type: type) -> bool:
        return self.templating.applied(request_type)

    def offers_chat_template(self) -> bool:
        return self.templating.template is not None

    def identity(self, request_type: type) -> dict:
        chat = self.settings.chat
        applied = self.chat_applied(request_type)
        return {"backend": self.name, "model": self.facts.revision, "gguf_file": self.facts.kwargs.get("gguf_file"),
                "dtype": self.facts.dtype, "device": self.facts.device.type, "truncate": self.settings.truncate,
                "model_args": recorded_args(self.facts.kwargs),
                "chat": {"applied": applied, "template": chat.template if applied else None,
                         "template_sha256": template_hash(self.templating.template) if applied else None,
                         "system_instruction": chat.system_instruction}}  # fmt: skip

    def prompts(self, requests: list) -> list[tuple[list[str], list[int]]]:
        """Per request, the texts the model reads (each prompt through ``Templating.render``) and their token
        counts as the tokenizer encodes them (its special tokens added, unless the chat template wrote them),
        encoded in one batch."""
        if not requests:
            return []
        kind = type(requests[0])
        texts = [r.rendered(lambda prompt, r=r: self.templating.render(prompt, kind, r.system)) for r in requests]
        flat = [text for row in texts for text in row]
        special = not self.templating.applied(kind)
        # The ids alone (their lengths): no attention masks nor segment ids built for tens of thousands of texts.
        ids = (
            self.tokenizer(flat, add_special_tokens=special, return_attention_mask=False, return_token_type_ids=False)
            if flat
            else {}
        )
        counts = iter(map(len, ids.get("input_ids", [])))
        return [(row, [next(counts) for _ in row]) for row in texts]

    def info(self) -> HFInfo:
        loaded = self._loaded
        return HFInfo(self.family, str(loaded.device if loaded else self.facts.device), loaded is not None, self.facts.revision,
                      self.facts.kwargs.get("gguf_file"), recorded_args(self.facts.kwargs), self.settings.truncate,
                      computed_dtype(loaded.model) if loaded else self.facts.dtype, self.facts.batch_size or "auto")  # fmt: skip

    def loaded(self):
        """The model, loaded on first use (a fully cached run never loads it)."""
        if self._loaded is None:
            from physprobe.backends.hf import model

            started = time.perf_counter()
            self._loaded = model.load(self.facts, self.tokenizer)
            self.load_seconds = time.perf_counter() - started
            collector.settle()  # torch's, transformers' and the model's objects: the collector walks them no more
        return self._loaded

    def score(self, requests: list, handle=None) -> list[Result]:
        return score_loaded(self.loaded(), requests, self.templating, self.settings.truncate, handle)
