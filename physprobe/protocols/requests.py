"""The typed requests a protocol asks of a model, built from a benchmark row alone (no tokenizer).

A protocol (``physprobe.protocols``) turns a row into one request; a backend (``physprobe.backends``)
answers a list of requests of one type with one result per request, of the type's ``result`` class
(``physprobe.protocols.results``: ``Scores``, ``Answer`` or ``Answers``). Each type below says what it asks and what its
result holds; the types hold plain data
(strings, tuples of strings, a few flags), so a request is its own cache key (``key``) and reads the same to
every backend.

Where a protocol's input depends on the model's tokenizer (PROST's released GPT and T5 code works on
token ids), the request says so declaratively (``MeanTokens.specials``, ``Seq2Seq.first_token_after``,
``Generate.first_token_choices``) and the backend resolves it (``physprobe.protocols.tokenized``).

Adding a type is a class here (its fields, ``result`` and ``texts``) and an engine in each backend that serves it
(the backend's ``ENGINES``, which ``physprobe.backends.REGISTRY`` names).

>>> request = Choice("Which is heavier? Answer:", (" a brick", " a leaf"))
>>> request.key()
['Choice', {'context': 'Which is heavier? Answer:', 'continuations': [' a brick', ' a leaf']}]
>>> request.texts()
['Which is heavier? Answer: a brick', 'Which is heavier? Answer: a leaf']
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from physprobe.protocols.decoding import Decoding
from physprobe.protocols.results import Answer, Answers, Scores

# What a request's work costs, in decode steps (one token generated for one sequence): each sequence fed costs one step
# and its tokens a quarter of one each (a prompt's tokens are read together, in one pass), a token counted as
# CHARS_PER_TOKEN characters where only the text is known; each token of a generation's budget costs one.
# Measured with SmolLM2-135M on the 2-core machine, the quick start's card (2026-11-28, quiet): a CConS generation
# (80 characters, up to 20 tokens) 0.075 s, a NEWTON one (154, up to 128) 0.73 s, a PROST option (158) 0.05 s, a
# Text2Afford one (224, up to 20) 0.13 s: 2.9 to 5.2 ms a step by this count, where counting a prompt as 25 steps
# whatever its length gave 1.7 to 4.7 ms (NEWTON's generations read as 3.4 times CConS's; they took 9.7 times).
PROMPT_TOKENS_PER_STEP = 4
CHARS_PER_TOKEN = 4


def prompt_steps(tokens: float) -> float:
    """What reading a sequence of ``tokens`` tokens costs, in decode steps (``Request.cost`` counts each text it
    feeds so, and a generating engine's progress each prompt's pass).

    >>> prompt_steps(56)
    15.0
    """
    return 1 + tokens / PROMPT_TOKENS_PER_STEP


def cost_of(requests: list[Request]) -> float:
    """What reading and answering ``requests`` together costs, in decode steps: each text fed its ``prompt_steps``,
    counting only the characters beyond the prefix it shares with the text before it in sorted order (the engines
    read a shared prefix once), and each token of a generation's budget one, the budget as the engine holds it
    (``max_length`` counts the prompt: a causal model's answer gets what the prompt leaves). So a time left reads one
    benchmark's generations of up to 128 tokens after short prompts at the pace of another's of up to 20 after long
    prompts that share their context (progress's ``Tally``).

    >>> cost_of([Choice("Ice is", (" cold", " hot"))]), cost_of([Generate("Ice is", ("cold",), max_new_tokens=20)])
    (2.875, 21.375)
    >>> cost_of([Generate("x" * 400, ("cold",), max_new_tokens=128, max_length=128)])  # 100 prompt tokens, 28 left
    54.0
    """
    texts = [text for request in requests for text in request.texts()]
    read = sum(prompt_steps(unshared / CHARS_PER_TOKEN) for unshared in unshared_lengths(texts))
    return read + sum(request.work() * _budget(request) for request in requests)


def unshared_lengths(sequences: list) -> list[int]:
    """Each sequence's length beyond the prefix it shares with the one before it in sorted order (texts, or prompts'
    token ids): what an engine that reads a shared prefix once reads of each.

    >>> unshared_lengths([[1, 2, 3, 4], [1, 2, 5], [6]]), unshared_lengths(["Ice is hot", "Ice is cold"])
    ([4, 1, 1], [3, 11])
    """
    lengths, before = [0] * len(sequences), sequences[:0]
    for place in sorted(range(len(sequences)), key=lambda place: sequences[place]):
        sequence = sequences[place]
        shared = next(
            (i for i, (a, b) in enumerate(zip(sequence, before, strict=False)) if a != b), min(len(sequence), len(before))
        )
        lengths[place], before = len(sequence) - shared, sequence
    return lengths


def _budget(request: Request) -> int:
    """The tokens a request's generation may take each (none for a request that generates nothing)."""
    budget = getattr(request, "max_new_tokens", 0)
    length = getattr(request, "max_length", None)
    if length is None:
        return budget
    return min(budget, max(1, length - round(len(request.texts()[0]) / CHARS_PER_TOKEN)))


class Request:
    """What every request type shares: its cache key and the texts it makes the model read."""

    system: str | None = None  # the system turn sent with the prompts (``Generate``'s); None: the run's instruction, if any
    asked_for: ClassVar[str]  # what the model is asked for, as a user-facing message names it (never the class's name)
    result: ClassVar[type] = Scores  # what a backend returns for one request (``physprobe.protocols.results``)
    unit: ClassVar[str] = "options"  # what the engine does for it, as progress counts it (``work``)
    counted: ClassVar[str | None] = None  # the field holding one item of that work each (None: the request is one)

    def key(self) -> list:
        """The request as JSON-ready data: its type's name and the fields that differ from their defaults
        (tuples as lists), for cache keys.

        >>> Masked("A [MASK] one.", ("big", "small")).key()
        ['Masked', {'text': 'A [MASK] one.', 'candidates': ['big', 'small']}]
        """
        values = ((name, getattr(self, name), default) for name, default in _defaults(type(self)))
        return [type(self).__name__, {name: _plain(value) for name, value, default in values if value != default}]

    def work(self) -> int:
        """The items of work the engine does for the request, in ``unit`` (progress counts these, not questions):
        a scored option each, a generation each, a prompt or a sentence pair each.

        >>> Choice("Ice is", (" cold", " hot", " wet")).work(), Generate("Ice is", ("cold",)).work()
        (3, 1)
        >>> GenerateEach(("Can you sit on it?", "Can you eat it?")).work(), GenerateEach.unit
        (2, 'generations')
        """
        return len(getattr(self, self.counted)) if self.counted else 1

    def texts(self) -> list[str]:
        """Every text the request makes the model read, once per sequence fed (token counts, exports)."""
        raise NotImplementedError

    def rendered(self, render: Callable[[str], str]) -> list[str]:
        """``texts()`` with each prompt (what a chat template or system instruction applies to: a context, a
        prompt) passed through ``render``; a request that reads no prompt, its texts as they are.

        >>> Choice("Ice is", (" cold", " hot")).rendered(str.upper), Masked("A [MASK] one.", ("big",)).rendered(str.upper)
        (['ICE IS cold', 'ICE IS hot'], ['A [MASK] one.'])
        """
        return self.texts()


@functools.cache
def _defaults(request_type: type) -> tuple[tuple[str, object], ...]:
    """(name, default) of each field of a request type, read once per type (a config's keys ask it per request)."""
    return tuple((f.name, f.default) for f in dataclasses.fields(request_type))


def _plain(value):
    if isinstance(value, Decoding):
        return value.key()
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    return value


@dataclass(frozen=True)
class Choice(Request):
    """Multiple-choice log-likelihood: each continuation scored after the shared context (lm-eval's
    ``loglikelihood``). An empty ``context`` scores whole texts (the model's BOS, where it has one, first).

    Result: ``Scores``, one per continuation, log P(continuation | context) up to a constant shared by the
    request's continuations (only the ranking and differences mean anything). The ``hf`` backend encodes each
    ``context + continuation`` whole and sums the log-probabilities of the tokens after the options' shared
    token prefix; a server backend echoes each text and sums the same tokens' log-probabilities."""

    asked_for: ClassVar[str] = "log-likelihoods of options after a shared context"
    counted: ClassVar[str] = "continuations"
    context: str
    continuations: tuple[str, ...]

    def texts(self) -> list[str]:
        return self.rendered(str)

    def rendered(self, render: Callable[[str], str]) -> list[str]:
        return [render(self.context) + c for c in self.continuations]


@dataclass(frozen=True)
class MeanTokens(Request):
    """Mean token log-probability of each option's token sequence (PROST's released GPT code).

    Each option is a tuple of text segments, each encoded apart without special tokens and concatenated
    (the released code splits the text where it puts a special token). ``specials`` says which special
    tokens frame the sequence: ``"bos_eos"``, the tokenizer's BOS first and EOS last, each where the
    tokenizer has one.

    Result: ``Scores``, one per option, the mean log-probability of tokens 2..n of its token sequence.

    >>> MeanTokens(options=(("A", " coin", " falls."),)).texts()
    ['A coin falls.']
    """

    asked_for: ClassVar[str] = "mean log-probabilities of the options' tokens"
    counted: ClassVar[str] = "options"
    options: tuple[tuple[str, ...], ...]
    specials: str = "bos_eos"

    def texts(self) -> list[str]:
        return ["".join(parts) for parts in self.options]


@dataclass(frozen=True)
class Masked(Request):
    """Candidate words at the one ``[MASK]`` of a text, each encoded as ``" word"``; a ``[SEP]`` in the
    text stands for the tokenizer's separator token (its sep token, else its EOS).

    Result: ``Scores``, one (or None) per candidate, log P(candidate) at the mask; None when ``" candidate"`` is not
    one token of the vocabulary."""

    asked_for: ClassVar[str] = "candidate words at a mask"
    counted: ClassVar[str] = "candidates"
    text: str
    candidates: tuple[str, ...]

    def texts(self) -> list[str]:
        return [self.text]


@dataclass(frozen=True)
class MaskedPair(Request):
    """Candidate words at the ``[MASK]`` of a sentence pair encoded as one (``tokenizer(first, second)``),
    each word looked up as one vocabulary entry (Text2Afford's released ``src/probing.py``);
    ``token_type_ids``: the pair's segment ids are fed to the model; ``unknown_as_unk``: a word outside the
    vocabulary is scored as the unknown token it converts to (else it has no score); ``lower_case``: the
    pair is read as a tokenizer loaded with ``do_lower_case=True`` reads it (lower-cased, accents stripped,
    where the tokenizer is a cased one that takes the option).

    Result: ``Scores``, one (or None) per word, log P(word) at the mask; None when the word has no score."""

    asked_for: ClassVar[str] = "candidate words at a mask in a sentence pair"
    counted: ClassVar[str] = "words"
    first: str
    second: str
    words: tuple[str, ...]
    token_type_ids: bool = True
    unknown_as_unk: bool = False
    lower_case: bool = False

    def texts(self) -> list[str]:
        return [self.first, self.second]


@dataclass(frozen=True)
class Seq2Seq(Request):
    """Log-probability of each target given the source (encoder-decoder models).

    A target is encoded as the tokenizer encodes it (its EOS included); with ``first_token_after`` (a
    special token, e.g. T5's ``<extra_id_0>``), the decoder reads that token, then the first token of the
    target encoded without special tokens, and only those two are scored (PROST's released T5 code).

    Result: ``Scores``, one per target, its summed log-probability.
    """

    asked_for: ClassVar[str] = "log-probabilities of targets given a source (encoder-decoder)"
    counted: ClassVar[str] = "targets"
    source: str
    targets: tuple[str, ...]
    first_token_after: str | None = None

    def texts(self) -> list[str]:
        return [self.source, *self.targets]


@dataclass(frozen=True)
class Entailment(Request):
    """NLI: one score per (premise, hypothesis) pair, read as ``reading`` says.

    ``"three_way"``: P(entailment) over the model's labels; ``"vs_contradiction"``: over entailment and
    contradiction only (the zero-shot pipeline with ``multi_label=True``); ``"softmax_across"``: the
    entailment logits softmaxed across the request's pairs (the pipeline with ``multi_label=False``).

    Result: ``Scores``, one per pair.

    >>> Entailment((("He rode it.", "It can be ridden."),)).texts()
    ['He rode it.', 'It can be ridden.']
    """

    asked_for: ClassVar[str] = "entailment of sentence pairs (NLI)"
    unit: ClassVar[str] = "sentence pairs"
    counted: ClassVar[str] = "pairs"
    pairs: tuple[tuple[str, str], ...]
    reading: str = "three_way"

    def texts(self) -> list[str]:
        return [text for pair in self.pairs for text in pair]


@dataclass(frozen=True)
class YesNo(Request):
    """One YES/NO question per prompt; the score of each is P(YES) / (P(YES) + P(NO)) of the answer
    right after the prompt (``" YES"`` / ``" NO"`` for a causal model, the target for a seq2seq one).

    Result: ``Scores``, one per prompt, P(YES) / (P(YES) + P(NO)) (``physprobe.protocols.answers.yes_probability``)."""

    asked_for: ClassVar[str] = "YES/NO probabilities"
    unit: ClassVar[str] = "prompts"
    counted: ClassVar[str] = "prompts"
    prompts: tuple[str, ...]

    def texts(self) -> list[str]:
        return list(self.prompts)

    def rendered(self, render: Callable[[str], str]) -> list[str]:
        return [render(p) for p in self.prompts]


@dataclass(frozen=True)
class Generate(Request):
    """A greedy answer to ``prompt``, at most ``max_new_tokens`` tokens, cut before the first ``stop``
    string. ``choices`` are what the protocol's ``match`` reads in the answer (the backend does not);
    with ``first_token_choices`` they are instead the first tokens of ``" choice"`` decoded together and
    split on spaces (PROST's released UnifiedQA code), which the backend resolves. ``max_length``: a
    budget that counts the prompt as the released pipelines' ``max_length`` does (a causal model's prompt
    and answer together, at least one new token; a seq2seq model's decoder tokens with its start token),
    where a backend can count them; ``max_new_tokens`` bounds the answer either way. ``system``: the system
    turn the released script sent with the prompt (a protocol's ``system_message``), read through the chat
    template or chat API; None: the run's ``--system-instruction``, if any. ``decoding``: how the answer is decoded
    where not greedily (``physprobe.protocols.decoding``: the released sampling or beam search, ``decoded``), with
    ``seed`` the sampled answer's own seed.

    Result: an ``Answer``, the greedy answer cut before the first stop string (``physprobe.protocols.answers.cut``), its
    token count and, with ``first_token_choices``, the choices as the backend resolved them."""

    asked_for: ClassVar[str] = "a generated answer"
    result: ClassVar[type] = Answer
    unit: ClassVar[str] = "generations"
    prompt: str
    choices: tuple[str, ...]
    max_new_tokens: int = 16
    stop: tuple[str, ...] = ()
    first_token_choices: bool = False
    max_length: int | None = None
    system: str | None = None
    decoding: Decoding | None = None
    seed: int | None = None

    def texts(self) -> list[str]:
        return [self.prompt]

    def rendered(self, render: Callable[[str], str]) -> list[str]:
        return [render(self.prompt)]


@dataclass(frozen=True)
class GenerateEach(Request):
    """A greedy answer to each of ``prompts`` (at most ``max_new_tokens`` tokens, cut before the first
    ``stop`` string), which the protocol reads itself (e.g. Text2Afford's released YES/NO rule,
    ``'yes' in answer.lower()``); ``system``, ``decoding`` and ``seed`` as ``Generate``'s (each prompt samples with
    its own seed, ``decoding.part_seed``).

    Result: ``Answers``, each prompt's answer cut as ``Generate``'s is."""

    asked_for: ClassVar[str] = "a generated answer to each of several prompts"
    result: ClassVar[type] = Answers
    unit: ClassVar[str] = "generations"
    counted: ClassVar[str] = "prompts"
    prompts: tuple[str, ...]
    max_new_tokens: int = 16
    stop: tuple[str, ...] = ()
    system: str | None = None
    decoding: Decoding | None = None
    seed: int | None = None

    def texts(self) -> list[str]:
        return list(self.prompts)

    def rendered(self, render: Callable[[str], str]) -> list[str]:
        return [render(p) for p in self.prompts]


def decoded(request: Generate | GenerateEach, decoding: Decoding, seed: int | None) -> Generate | GenerateEach:
    """``request`` decoded with ``decoding``: as it is where that is greedy within the protocol's budget (its cache key
    unchanged), else carrying the decoding, the ``seed`` where it samples, and the decoding's budget where it sets one.

    >>> ask = Generate("Which is heavier?", ("a brick", "a leaf"), max_new_tokens=8)
    >>> decoded(ask, Decoding.greedy("demo"), None) is ask
    True
    >>> top_p = decoded(ask, Decoding.sampling("demo", top_p=0.5), 42)
    >>> top_p.seed, top_p.max_new_tokens, top_p.key()[1]["decoding"]
    (42, 8, {'kind': 'sampling', 'temperature': 1.0, 'top_p': 0.5, 'top_k': 0})
    """
    if decoding.kind == "greedy" and decoding.max_new_tokens is None:
        return request
    budget = {}
    if decoding.max_new_tokens is not None:
        budget = {
            "max_new_tokens": decoding.max_new_tokens,
            **({"max_length": decoding.max_length} if isinstance(request, Generate) else {}),
        }
    return dataclasses.replace(request, decoding=decoding, seed=seed if decoding.samples else None, **budget)
