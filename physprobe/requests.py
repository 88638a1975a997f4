"""The typed requests a protocol asks of a model, built from a benchmark row alone (no tokenizer).

A protocol (``physprobe.protocols``) turns a row into one request; a backend (``physprobe.backends``)
answers a list of requests of one type with one result per request. What each type means, and what
its result is, is written in ``physprobe.backends.base``; the types hold plain data (strings, tuples of
strings, a few flags), so a request is its own cache key (``key``) and reads the same to every backend.

Where a protocol's input depends on the model's tokenizer (PROST's released GPT and T5 code works on
token ids), the request says so declaratively (``MeanTokens.specials``, ``Seq2Seq.first_token_after``,
``Generate.first_token_choices``) and the backend resolves it.

>>> request = Choice("Which is heavier? Answer:", (" a brick", " a leaf"))
>>> key(request)
['Choice', {'context': 'Which is heavier? Answer:', 'continuations': [' a brick', ' a leaf']}]
>>> texts(request)
['Which is heavier? Answer: a brick', 'Which is heavier? Answer: a leaf']
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Choice:
    """Multiple-choice log-likelihood: each continuation scored after the shared context (lm-eval's
    ``loglikelihood``). An empty ``context`` scores whole texts (the model's BOS, where it has one, first)."""

    context: str
    continuations: tuple[str, ...]


@dataclass(frozen=True)
class MeanTokens:
    """Mean token log-probability of each option's token sequence (PROST's released GPT code).

    Each option is a tuple of text segments, each encoded apart without special tokens and concatenated
    (the released code splits the text where it puts a special token). ``specials`` says which special
    tokens frame the sequence: ``"bos_eos"``, the tokenizer's BOS first and EOS last, each where the
    tokenizer has one.
    """

    options: tuple[tuple[str, ...], ...]
    specials: str = "bos_eos"


@dataclass(frozen=True)
class Masked:
    """Candidate words at the one ``[MASK]`` of a text, each encoded as ``" word"``; a ``[SEP]`` in the
    text stands for the tokenizer's separator token (its sep token, else its EOS)."""

    text: str
    candidates: tuple[str, ...]


@dataclass(frozen=True)
class MaskedPair:
    """Candidate words at the ``[MASK]`` of a sentence pair encoded as one (``tokenizer(first, second)``),
    each word looked up as one vocabulary entry (Text2Afford's released ``src/probing.py``);
    ``token_type_ids``: the pair's segment ids are fed to the model; ``unknown_as_unk``: a word outside the
    vocabulary is scored as the unknown token it converts to (else it has no score); ``lower_case``: the
    pair is read as a tokenizer loaded with ``do_lower_case=True`` reads it (lower-cased, accents stripped,
    where the tokenizer is a cased one that takes the option)."""

    first: str
    second: str
    words: tuple[str, ...]
    token_type_ids: bool = True
    unknown_as_unk: bool = False
    lower_case: bool = False


@dataclass(frozen=True)
class Seq2Seq:
    """Log-probability of each target given the source (encoder-decoder models).

    A target is encoded as the tokenizer encodes it (its EOS included); with ``first_token_after`` (a
    special token, e.g. T5's ``<extra_id_0>``), the decoder reads that token, then the first token of the
    target encoded without special tokens, and only those two are scored (PROST's released T5 code).
    """

    source: str
    targets: tuple[str, ...]
    first_token_after: str | None = None


@dataclass(frozen=True)
class Entailment:
    """NLI: one score per (premise, hypothesis) pair, read as ``reading`` says.

    ``"three_way"``: P(entailment) over the model's labels; ``"vs_contradiction"``: over entailment and
    contradiction only (the zero-shot pipeline with ``multi_label=True``); ``"softmax_across"``: the
    entailment logits softmaxed across the request's pairs (the pipeline with ``multi_label=False``).
    """

    pairs: tuple[tuple[str, str], ...]
    reading: str = "three_way"


@dataclass(frozen=True)
class YesNo:
    """One YES/NO question per prompt; the score of each is P(YES) / (P(YES) + P(NO)) of the answer
    right after the prompt (``" YES"`` / ``" NO"`` for a causal model, the target for a seq2seq one)."""

    prompts: tuple[str, ...]


@dataclass(frozen=True)
class Generate:
    """A greedy answer to ``prompt``, at most ``max_new_tokens`` tokens, cut before the first ``stop``
    string. ``choices`` are what the protocol's ``match`` reads in the answer (the backend does not);
    with ``first_token_choices`` they are instead the first tokens of ``" choice"`` decoded together and
    split on spaces (PROST's released UnifiedQA code), which the backend resolves. ``max_length``: a
    budget that counts the prompt as the released pipelines' ``max_length`` does (a causal model's prompt
    and answer together, at least one new token; a seq2seq model's decoder tokens with its start token),
    where a backend can count them; ``max_new_tokens`` bounds the answer either way."""

    prompt: str
    choices: tuple[str, ...]
    max_new_tokens: int = 16
    stop: tuple[str, ...] = ()
    first_token_choices: bool = False
    max_length: int | None = None


@dataclass(frozen=True)
class GenerateEach:
    """A greedy answer to each of ``prompts`` (at most ``max_new_tokens`` tokens, cut before the first
    ``stop`` string), which the protocol reads itself (e.g. Text2Afford's released YES/NO rule,
    ``'yes' in answer.lower()``)."""

    prompts: tuple[str, ...]
    max_new_tokens: int = 16
    stop: tuple[str, ...] = ()


TYPES = (Choice, MeanTokens, Masked, MaskedPair, Seq2Seq, Entailment, YesNo, Generate, GenerateEach)


def key(request) -> list:
    """The request as JSON-ready data: its type's name and fields (tuples as lists), for cache keys.

    >>> key(Masked("A [MASK] one.", ("big", "small")))
    ['Masked', {'text': 'A [MASK] one.', 'candidates': ['big', 'small']}]
    """
    fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(request)}
    defaults = {f.name: f.default for f in dataclasses.fields(request)}
    plain = {name: _plain(value) for name, value in fields.items() if value != defaults[name]}
    return [type(request).__name__, plain]


def _plain(value):
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    return value


def texts(request) -> list[str]:
    """Every text a request makes the model read, once per sequence fed (for token counts and exports).

    >>> texts(MeanTokens(options=(("A", " coin", " falls."),)))
    ['A coin falls.']
    >>> texts(Entailment((("He rode it.", "It can be ridden."),)))
    ['He rode it.', 'It can be ridden.']
    """
    if isinstance(request, Choice):
        return [request.context + c for c in request.continuations]
    if isinstance(request, MeanTokens):
        return ["".join(parts) for parts in request.options]
    if isinstance(request, Masked):
        return [request.text]
    if isinstance(request, MaskedPair):
        return [request.first, request.second]
    if isinstance(request, Seq2Seq):
        return [request.source, *request.targets]
    if isinstance(request, Entailment):
        return [text for pair in request.pairs for text in pair]
    if isinstance(request, (YesNo, GenerateEach)):
        return list(request.prompts)
    return [request.prompt]
