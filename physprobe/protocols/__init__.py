"""Evaluation protocols as data: what a model reads, how its answer is scored and decided, per benchmark.

A benchmark declares, in ``dataset_scripts/<bench>/evaluation.py``, one ``Evaluation``: the configs
scored by default, its ``Protocol`` s and the metric wiring that turns predictions into the paper's
figures. The scorer (``physprobe.run.runner``) reads only these declarations and names no benchmark.

A protocol declares the request type it asks (``asks``, ``physprobe.protocols.requests``) and builds one such request per
row from the row alone (``request(row, config)``); a backend returns that type's result (``physprobe.protocols.results``),
which the protocol reads into an outcome (``Protocol.outcome``). The request type fixes the rest: the model families that can answer
it and the protocol's ``method``, the word the papers' tables and ``--method`` group protocols by:

- ``causal``: ``Choice`` (context and continuations, summed log-probability) or ``MeanTokens``
  (mean token log-probability of token sequences);
- ``mlm``: ``Masked`` (candidates at the mask) or ``MaskedPair`` (a sentence pair's mask);
- ``seq2seq``: ``Seq2Seq`` (log-probability of each target);
- ``nli``: ``Entailment`` (a score per premise-hypothesis pair);
- ``yes_no``: ``YesNo`` (P(YES) of each prompt); with a ``match`` rule, sent as ``GenerateEach``: each
  prompt's greedy answer, which ``match(text, YES_NO)`` reads as 1 (YES) or 0 (NO), the prompt's score;
- ``generate``: ``Generate``: a greedy answer, which the protocol's ``match(text, choices)`` maps to
  an option (None: unparsed, predicted as ``UNPARSED``, an answer that names no option and so is wrong).

The first four are a model family's own way of scoring options; the last two ask a generative model (causal
or seq2seq) an answer of another format (``answer``: ``"scores"``, ``"yes_no"``, ``"text"``).

The subpackage holds, beside these declarations, ``requests`` and ``results`` (the typed requests a protocol
builds and the typed results a backend returns), ``decoding`` (how each released script decoded an answer),
``answers`` (reading generated answers), ``tokenized`` (what a
request leaves to the tokenizer), ``model_options`` (``--model-args`` and friends), ``metric_modules`` (the evaluate
metrics, loaded by path) and ``inputs`` (checks on what can give no number). May import: ``physprobe.util``,
``physprobe.errors``. Imported by: every stage from ``data`` up (the benchmarks' ``evaluation.py`` declare protocols).

>>> from physprobe.protocols.requests import Choice
>>> p = Protocol("demo", Choice, lambda row, config: Choice(row["q"], tuple(f" {o}" for o in row["options"])),
...              source="demo paper §1", summary="whole sentences", default_for=("causal",))
>>> p.build({"q": "Ice is", "options": ["cold", "hot"]}, "default")
Choice(context='Ice is', continuations=(' cold', ' hot'))
>>> p.decide([-3.0, -5.0]), p.families, p.method, p.answer
(0, ('causal',), 'causal', 'scores')
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from physprobe.errors import ProtocolError
from physprobe.protocols.decoding import GREEDY, Decoding, Released
from physprobe.protocols.figures import Kind
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
from physprobe.protocols.results import Answer, Answers, Scores
from physprobe.protocols.units import Unit

FAMILIES = ("causal", "mlm", "seq2seq", "nli")
# The method of each request type a protocol may declare: the family whose own scores it reads, else the format
# of the answer it asks of a generative model.
METHOD_OF = {Choice: "causal", MeanTokens: "causal", Masked: "mlm", MaskedPair: "mlm", Seq2Seq: "seq2seq",
             Entailment: "nli", YesNo: "yes_no", Generate: "generate"}  # fmt: skip
METHODS = ("causal", "mlm", "seq2seq", "nli", "yes_no", "generate")
ANSWERS = {"yes_no": "yes_no", "generate": "text"}  # a method's answer format; every other method's: "scores"
GENERATIVE = ("causal", "seq2seq")  # families that can answer YES/NO or generate
UNPARSED = -2  # the prediction of a generated answer that names no option: counted wrong, reported as unparsed
UNDECIDED = -1  # predictions.parquet's code for a question no option won (a missing score; the metrics' None)
YES_NO = ("NO", "YES")  # the choices a generating yes_no protocol's match reads an answer against


class Outcome(NamedTuple):
    """What a protocol reads in one result: the per-option ``scores`` the metrics take, the ``prediction`` (an
    option, None: undecided, ``UNPARSED``), how many ``options`` the question offered, whether the protocol's
    fallback rule decided it, and the generated text(s) and token count(s) where the model generated."""

    scores: list
    prediction: int | None
    options: int
    fell_back: bool = False
    generated: str | list[str] | None = None
    generated_tokens: int | list[int | None] | None = None


def argmax(scores: Sequence[float | None]) -> int | None:
    """The index of the highest score (the first on ties); None when a score is missing.

    >>> argmax([0.1, 0.5, 0.5]), argmax([0.1, None])
    (1, None)
    """
    if not scores or any(s is None for s in scores):
        return None
    return max(range(len(scores)), key=lambda i: scores[i])


@dataclass(frozen=True)
class Protocol:
    """One way of evaluating a benchmark with a model family, named after the paper or code it follows.

    ``asks``: the request type (``physprobe.protocols.requests``) that ``request(row, config)`` returns for a row;
    ``decide(scores)`` the predicted option (None: undecided). A ``Generate`` protocol's request gets the protocol's
    ``max_new_tokens``, ``stop`` and ``max_length``, and ``match(text, choices)`` gives the
    option the generated text names (None: unparsed); ``fallback(text, choices)`` is True where ``match``
    decided by its fallback rule rather than a plain answer (CConS: the answer names both objects and the one
    named first is taken, as an echoed question does), counted as ``fallback`` and said by ``fallback_reason``.
    ``skip(row)`` marks rows the protocol leaves out (reported as ``excluded``); ``source`` is the paper section and upstream file:line it follows;
    ``answers``: how many answers ``decide`` chooses among where they are not one per score (CConS's masked-LM
    rule reads four words into two answers); ``reported_apart``: the paper reports it outside its averages (PROST Table 5's UnifiedQA);
    ``metric_options``: keyword arguments of the benchmark's metric wiring under this protocol (e.g.
    Text2Afford's tie rule). A ``YesNo`` protocol with a ``match`` rule generates each prompt's answer
    (``max_new_tokens``, ``stop``) and scores it ``match(text, YES_NO)`` (1 YES, 0 NO). ``needs_chat``: the
    released script sent its prompts through a chat API or chat template, with ``system_message`` as the
    system turn (``system(config)``); the prompt a request holds is then the user turn. ``configs``: the
    configs a run scores without ``--config`` (empty: the evaluation's), where the released script reads other
    rows than the benchmark's default (Text2Afford's LLaMA-3 script, ``data_high_agreement.tsv``). ``released``: how
    the released script decoded a generated answer (``physprobe.protocols.decoding.Released``), which
    ``--decoding released`` uses; every answer is decoded greedily otherwise.
    """

    name: str
    asks: type
    request: Callable[[dict, str], object]
    source: str
    summary: str
    default_for: tuple[str, ...] = ()
    default_for_models: tuple[str, ...] = ()  # regexes on the model name, checked before families
    families: tuple[str, ...] = ()  # default: the method's family, or causal and seq2seq
    decide: Callable[[Sequence[float | None]], int | None] = argmax
    match: Callable[[str, list[str]], int | None] | None = None
    max_new_tokens: int = 16
    max_length: int | None = None  # a Generate's budget with its prompt counted (requests.Generate), None: none
    stop: tuple[str, ...] = ()
    skip: Callable[[dict], bool] | None = None
    skip_reason: str = ""
    fallback: Callable[[str, list[str]], bool] | None = None
    fallback_reason: str = ""
    answers: int | None = None  # answers ``decide`` chooses among, where not one per score (None: one per score)
    reported_apart: bool = False
    metric_options: dict = field(default_factory=dict, compare=False)
    # The system turn the released script sends with the prompt through a chat API or template: one for every
    # config, or config -> message where the scripts differ (NEWTON's gpt_track3.py); ``system(config)`` reads it.
    system_message: str | dict[str, str] | None = field(default=None, compare=False)
    needs_chat: bool = False  # the released script sent the prompt through a chat API or template: a run applies one
    configs: tuple[str, ...] = ()  # the configs scored without --config, where the released script reads other rows
    released: Released | None = field(default=None, compare=False)  # the released script's decoding (--decoding released)
    # The protocol's version, in the resume cache's key: bumped when a change to how it builds its requests changes the
    # answers they get while their texts stay the same (a request's own key holds its texts and options).
    version: int = 1

    def __post_init__(self):
        if self.asks not in METHOD_OF:
            known = ", ".join(kind.__name__ for kind in METHOD_OF)
            raise ValueError(
                f"protocol {self.name!r}: asks {getattr(self.asks, '__name__', self.asks)!r}, not a request type a protocol declares ({known})"
            )
        if not self.families:
            object.__setattr__(self, "families", (self.method,) if self.method in FAMILIES else GENERATIVE)
        if self.asks is Generate and self.match is None:
            raise ValueError(f"protocol {self.name!r}: a Generate protocol needs a match rule")
        if (self.system_message or self.needs_chat) and not self.generates:
            raise ValueError(f"protocol {self.name!r}: a system message or chat template is for protocols that generate")
        if self.released is not None and not self.generates:
            raise ValueError(f"protocol {self.name!r}: a released decoding is for protocols that generate")
        if self.fallback is not None and (self.asks is not Generate or not self.fallback_reason):
            raise ValueError(f"protocol {self.name!r}: a fallback rule belongs to a Generate protocol, with its fallback_reason")

    @property
    def method(self) -> str:
        """The method the papers' tables and ``--method`` know the protocol by (``METHOD_OF`` its request type)."""
        return METHOD_OF[self.asks]

    @property
    def answer(self) -> str:
        """The format of the answer the protocol reads: ``"scores"`` (a model family's own scores of the options),
        ``"yes_no"`` (P(YES) of each prompt, or a generated YES/NO) or ``"text"`` (a generated answer)."""
        return ANSWERS.get(self.method, "scores")

    @property
    def sends(self) -> type:
        """The request type a backend is sent (``build``'s): ``asks``, but ``GenerateEach`` for a ``YesNo`` protocol
        that generates its answers."""
        return GenerateEach if self.asks is YesNo and self.generates else self.asks

    def system(self, config: str) -> str | None:
        """The system message of ``config``'s prompts (None: the released script sends none).

        >>> Protocol("demo", Generate, dict, "", "", match=lambda text, choices: None,
        ...          system_message={"track3": "Be brief."}).system("track3")
        'Be brief.'
        """
        if isinstance(self.system_message, dict):
            return self.system_message.get(config)
        return self.system_message

    @property
    def generates(self) -> bool:
        """Whether the model answers in generated text (a ``Generate`` protocol, or a ``YesNo`` one with a match rule)."""
        return self.match is not None

    def decoding(self, choice: str, model: str) -> Decoding:
        """How a run decodes the protocol's answers: ``greedy`` (``--decoding``'s default) or ``released``, the
        released script's decoding of ``model`` (``Released.of``); a protocol that generates no answer, or declares
        no released decoding, refuses ``released`` in one line.

        >>> demo = Protocol("demo", Generate, dict, "", "", match=lambda text, choices: None,
        ...                 released=Released(Decoding.sampling("demo.py:3", top_p=0.5)))
        >>> demo.decoding("released", "gpt2").describe(), demo.decoding("greedy", "gpt2").kind
        ('sampling, temperature=1.0, top_p=0.5, top_k=0', 'greedy')
        """
        if choice == "greedy":
            return GREEDY
        if choice != "released":
            raise ProtocolError(f"--decoding {choice}: give greedy (the default) or released")
        if self.released is None:
            what = "generates no answer" if not self.generates else "declares no released decoding"
            raise ProtocolError(f"protocol {self.name!r} {what}: --decoding released is for the generating protocols of "
                                "`physprobe protocols`; leave it out")  # fmt: skip
        return self.released.of(model)

    def build(self, row: dict, config: str):
        """The typed request of one row of ``config`` (``sends``): a ``Generate`` gets the protocol's bounds, and a
        generating ``YesNo`` becomes a ``GenerateEach`` of its prompts. A request of another type than the
        protocol declares is a ``ProtocolError``."""
        request = self.request(row, config)
        if type(request) is not self.asks:
            raise ProtocolError(f"protocol {self.name!r} declares {self.asks.__name__} requests but built a "
                                f"{type(request).__name__} of a row of {config}; fix its declaration")  # fmt: skip
        if isinstance(request, Generate):
            request = dataclasses.replace(
                request,
                max_new_tokens=self.max_new_tokens,
                stop=tuple(self.stop),
                max_length=self.max_length,
                system=self.system(config),
            )
        elif isinstance(request, YesNo) and self.generates:
            request = GenerateEach(request.prompts, self.max_new_tokens, tuple(self.stop), system=self.system(config))
        return request

    def predict(self, result, request) -> int | None:
        """The predicted option of a request's result (``read``'s): None where undecided, ``UNPARSED`` where a
        generated answer names no option.

        >>> Protocol("demo", Choice, dict, "", "").predict(Scores((-3.0, -1.0)), Choice("Ice is", (" hot", " cold")))
        1
        """
        return self.outcome(result, request).prediction

    def outcome(self, result, request) -> Outcome:
        """What the protocol makes of a request's result: a generated answer matched to the options it names
        (``UNPARSED`` where it names none); each generated YES/NO answer scored 1 or 0 by ``match``; else the scores
        themselves, decided by ``decide``.

        >>> demo = Protocol("demo", Generate, dict, "", "", match=lambda text, choices: 0 if "ice" in text else None)
        >>> demo.outcome(Answer("ice, surely", 3), Generate("Which is cold?", ("ice", "fire")))
        Outcome(scores=[], prediction=0, options=2, fell_back=False, generated='ice, surely', generated_tokens=3)
        """
        match result:
            case Answer():
                choices = list(result.choices or request.choices)
                choice = self.match(result.text, choices)
                fell_back = choice is not None and self.fallback is not None and self.fallback(result.text, choices)
                return Outcome([], UNPARSED if choice is None else choice, self.answers or len(choices), fell_back,
                               result.text, result.tokens)  # fmt: skip
            case Answers():
                scores = [float(self.match(text, YES_NO)) for text in result.texts]
                return Outcome(scores, self.decide(scores), self.answers or len(scores), False, list(result.texts),
                               [a.tokens for a in result.answers])  # fmt: skip
            case Scores():
                scores = list(result.values)
                return Outcome(scores, self.decide(scores), self.answers or len(scores))
        raise TypeError(f"protocol {self.name!r}: no outcome of a {type(result).__name__}")


def _reference(row: dict) -> list[int]:
    return [int(row["label"])]


@dataclass(frozen=True)
class Evaluation:
    """A benchmark's evaluation: configs scored by default, protocols, and metric wiring.

    ``metrics(config, rows, predictions, scores)`` returns the paper's breakdowns for one config
    (``predictions`` hold None for undecided rows); ``reference(row)`` the gold answer as a list;
    ``pooled`` names figures the paper computes over several configs at once (key -> configs),
    written beside the configs' own when all of them were scored; ``scorable`` the configs that hold
    questions (None: all; NEWTON's attribute table and Text2Afford's one-class configs hold none);
    ``headline`` the figure the paper leads with, read by run.json, the command's summary and the lm-eval export;
    ``classes``: where a row's gold is a set of classes rather than one option, how many classes there are;
    ``groups(row, config)``: the groups of the paper's breakdowns a row counts in (PROST's concept, NEWTON's
    attribute or scenario, Text2Afford's positive classes), so that a ``--limit`` run holds a row of each before it
    spreads the rest (``physprobe.data.sampling``); None: the benchmark's figures have no such groups;
    ``skipped_reason``: why the metric wiring leaves some rows out of every figure, counted in ``skipped``
    (Text2Afford's rows with nothing to rank); ``unit``: the unit its questions share (``units.Unit``), which a
    comparison of two runs resamples and swaps whole; ``figures``: the kind of each figure its wiring writes (by key).
    """

    benchmark: str
    configs: tuple[str, ...]
    protocols: tuple[Protocol, ...]
    metrics: Callable[[str, list[dict], list, list], dict]
    reference: Callable[[dict], list[int]] = _reference
    pooled: dict[str, tuple[str, ...]] = field(default_factory=dict)
    scorable: tuple[str, ...] | None = None  # configs that hold questions (None: every config)
    headline: tuple[str, ...] = ("accuracy",)  # the figure the paper leads with: metrics keys (dot paths), first held
    classes: int | None = None  # a row's gold is a set of this many classes (``reference``: the positive ones); None: one option
    groups: Callable[[dict, str], tuple[str, ...]] | None = None  # the breakdowns' groups a row counts in (--limit covers each)
    skipped_reason: str | None = None  # why the metric wiring leaves a row out of every figure (metrics.json ``skipped``)
    unit: Unit | None = None  # the unit its questions share, resampled whole by a comparison (None: each question alone)
    figures: dict[str, Kind] = field(default_factory=dict)

    def figure_kinds(self) -> dict[str, Kind]:
        """The kind of every figure a run of the benchmark writes: its wiring's and the counts of every run."""
        return {**RUN_FIGURES, **self.figures}

    def headline_of(self, metrics: dict) -> tuple[str, float] | None:
        """The headline figure of one config's ``metrics``: the first of ``headline`` it holds, as (key, value);
        None when it holds none (every question undecided).

        >>> demo = Evaluation("demo", ("default",), (), metrics=dict, headline=("macro_accuracy", "pairwise.accuracy"))
        >>> demo.headline_of({"accuracy": 0.5, "pairwise": {"accuracy": 0.25}}), demo.headline_of({"n": 3})
        (('pairwise.accuracy', 0.25), None)
        """
        for key in self.headline:
            node = metrics
            for part in key.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, (int, float)) and not isinstance(node, bool):
                return key, float(node)
        return None

    def pooled_metrics(self, outcomes: dict[str, tuple[list, list, list]], **options) -> dict:
        """The ``pooled`` figures whose configs are all in ``outcomes`` (config -> rows, predictions, scores);
        ``options``: the protocol's ``metric_options``."""
        out = {}
        for name, members in self.pooled.items():
            if all(m in outcomes for m in members):
                rows, predictions, scores = ([x for m in members for x in outcomes[m][k]] for k in range(3))
                out[name] = self.metrics(name, rows, predictions, scores, **options)
        return out

    def protocol(self, name: str) -> Protocol:
        """The protocol called ``name``; a ``ProtocolError`` lists the known ones."""
        for protocol in self.protocols:
            if protocol.name == name:
                return protocol
        raise ProtocolError(f"{self.benchmark} has no protocol {name!r}; known: {', '.join(p.name for p in self.protocols)}")

    def default(self, family: str, method: str | None = None, model_name: str = "") -> Protocol:
        """The protocol a model gets without ``--protocol``: one matching its name, else its family's default.

        With ``method``, only protocols of that method are considered (the first, if none is a default).
        """
        usable = [p for p in self.protocols if family in p.families and (method is None or p.method == method)]
        for protocol in usable:
            if any(re.search(pattern, model_name, re.IGNORECASE) for pattern in protocol.default_for_models):
                return protocol
        for protocol in usable:
            if family in protocol.default_for:
                return protocol
        if usable and method is not None:
            return usable[0]
        what = f"method {method!r} with a {family} model" if method else f"a {family} model"
        known = sorted({m for p in self.protocols if family in p.families for m in [p.method]})
        hint = f"; methods for {family} models: {', '.join(known)}" if known else ""
        raise ProtocolError(f"{self.benchmark} has no protocol for {what}{hint}")


# The counts a scored config's metrics hold beside its figures, never figures themselves (``decided``'s two; the
# runner adds unparsed, fallback and excluded; Text2Afford's wiring skipped; ``drawn``: the answers sampled per question).
COUNTS = ("n", "undecided", "unparsed", "fallback", "excluded", "skipped", "drawn")
RUN_FIGURES = {**dict.fromkeys(COUNTS, Kind.COUNT), "agreement": Kind.FRACTION}  # agreement: of sampled answers


def decided(rows: list[dict], predictions: list) -> tuple[dict, list[int]]:
    """The counts every multiple-choice config reports (``n``, ``undecided``) and the decided rows' indices.

    >>> decided([{}, {}, {}], [0, None, 2])
    ({'n': 3, 'undecided': 1}, [0, 2])
    """
    kept = [i for i, p in enumerate(predictions) if p is not None]
    return {"n": len(rows), "undecided": len(rows) - len(kept)}, kept


def scored_as_wrong(predictions: Sequence[int], references: Sequence[int], num_choices: int) -> list[int]:
    """``predictions`` with each ``UNPARSED`` answer replaced by an option other than its reference, so that
    accuracy (and every breakdown of it) counts the answer wrong and keeps it in the denominator.

    >>> scored_as_wrong([1, UNPARSED, UNPARSED], [1, 0, 3], 4)
    [1, 1, 0]
    """
    return [(ref + 1) % num_choices if p == UNPARSED else p for p, ref in zip(predictions, references, strict=True)]


def load_metric(name: str):
    """An evaluate module of physprobe, loaded from the installed package (see ``physprobe.protocols.metric_modules``)."""
    from physprobe.protocols import metric_modules

    return metric_modules.load(name)


def mentioned(text: str, choices: Sequence[str]) -> list[int]:
    """The choices the text names (whole words, case-insensitive), in the order it first names them.

    A choice inside a longer one ("key" in "key box") counts only where the longer one is not named.

    >>> mentioned("Is a key bigger than a key box?", ["key", "key box"]), mentioned("The key box.", ["key", "key box"])
    ([0, 1], [1])
    """
    found: list[tuple[int, int]] = []  # (start, choice), longer choices claim their span first
    taken: list[tuple[int, int]] = []
    for index in sorted(range(len(choices)), key=lambda i: -len(choices[i])):
        pattern = r"(?<!\w)" + re.escape(choices[index].strip()) + r"(?!\w)"
        for hit in re.finditer(pattern, text, re.IGNORECASE):
            if not any(start <= hit.start() < end for start, end in taken):
                found.append((hit.start(), index))
                taken.append((hit.start(), hit.end()))
    return list(dict.fromkeys(index for _, index in sorted(found)))


def first_mentioned(text: str, choices: Sequence[str]) -> int | None:
    """The choice the text names first (``mentioned``); None when it names none.

    >>> first_mentioned("The key box is bigger.", ["key", "key box"])
    1
    >>> first_mentioned("A key, not the box.", ["key", "key box"]), first_mentioned("Neither.", ["YES", "NO"])
    (0, None)
    """
    named = mentioned(text, choices)
    return named[0] if named else None


def several_mentioned(text: str, choices: Sequence[str]) -> bool:
    """Whether the text names more than one choice (``mentioned``): ``first_mentioned`` then decides by order
    alone, as it does on an echoed question.

    >>> several_mentioned("Which is bigger, a key or a key box?", ["key", "key box"]), several_mentioned("A key box.", ["key", "key box"])
    (True, False)
    """
    return len(mentioned(text, choices)) > 1
