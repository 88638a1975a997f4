"""What a request leaves to the model's tokenizer, resolved with any tokenizer that encodes as ``transformers``'
do (``tokenizer(texts, add_special_tokens=False)["input_ids"]``): PROST's released token-level inputs, its
T5 first-token targets and UnifiedQA's first-token choices, Text2Afford's lower-cased pairs. Each resolves a
list of requests in bulk: every distinct text in one tokenizer call (``encoded``), the segments spliced after,
so a config costs a few calls whatever its rows (a slow tokenizer takes the same lists, text by text). No torch.

>>> class Words:  # a tokenizer of whole words, ids by first letter, BOS 1 and EOS 2
...     bos_token_id, eos_token_id = 1, 2
...     def __call__(self, texts, add_special_tokens=False):
...         return {"input_ids": [[ord(w[0]) for w in text.split()] for text in texts]}
>>> from physprobe.protocols.requests import MeanTokens
>>> mean_token_ids([MeanTokens(options=(("A", " coin", " falls."),))], Words())
[[[1, 65, 99, 102, 2]]]
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from physprobe.errors import BackendError
from physprobe.protocols.requests import Generate, MeanTokens, Seq2Seq


def encoded(tokenizer, texts: Sequence[str], special: bool = False) -> list[list[int]]:
    """Each text's token ids (``special``: with the tokenizer's special tokens; without, none for an empty text),
    from one tokenizer call over the distinct texts. Equal texts share one list: read it, never change it.

    >>> class Letters:
    ...     calls = 0
    ...     def __call__(self, texts, add_special_tokens=False):
    ...         Letters.calls += 1
    ...         return {"input_ids": [[ord(c) for c in text] for text in texts]}
    >>> encoded(Letters(), ["ab", "", "ab", "c"]), Letters.calls
    ([[97, 98], [], [97, 98], [99]], 1)
    """
    distinct = list(dict.fromkeys(text for text in texts if text or special))
    found = dict(zip(distinct, tokenizer(distinct, add_special_tokens=special)["input_ids"], strict=True)) if distinct else {}
    return [found[text] if text or special else [] for text in texts]


def gpt_named(name: str) -> bool:
    """Whether a tokenizer's name starts with ``gpt``, read on the last part of its path (the Hub's
    ``openai-community/gpt2`` and a local ``models/gpt2`` as ``gpt2``), as PROST's released
    ``input_pipeline.py:88`` tests ``tokenizer.name_or_path.startswith('gpt')``.

    >>> gpt_named("gpt2-medium"), gpt_named("openai-community/gpt2"), gpt_named("openai-gpt"), gpt_named("./models/gpt2")
    (True, True, False, True)
    >>> gpt_named("HuggingFaceTB/SmolLM2-135M-Instruct")
    False
    """
    return name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].startswith("gpt")


def mean_token_ids(requests: Sequence[MeanTokens], tokenizer) -> list[list[list[int]]]:
    """The token ids of each option of each ``MeanTokens`` request.

    ``specials="bos_eos"``: the segments encoded apart without special tokens, concatenated, framed by the
    tokenizer's BOS and EOS where it has them. ``"gpt_names"``: that for a tokenizer whose name starts with
    ``gpt`` (``gpt_named``); any other encodes the option's text whole as it does, its own special tokens
    included, with its pad token standing for the middle segment, whose own tokens (encoded without special
    tokens) then replace the pad (PROST's released ``input_pipeline.py:88-110``). Two tokenizer calls in all:
    the whole texts, and every segment."""
    for request in requests:
        if request.specials not in ("bos_eos", "gpt_names"):
            raise BackendError(f"MeanTokens specials {request.specials!r} is not one physprobe knows (bos_eos, gpt_names)")
    named = any(request.specials == "gpt_names" for request in requests) and gpt_named(tokenizer.name_or_path)
    spliced = [request.specials == "gpt_names" and not named for request in requests]
    if any(spliced) and tokenizer.pad_token_id is None:
        raise BackendError(f"tokenizer {tokenizer.name_or_path!r} has no pad (or end-of-sequence) token to stand for the "
                           "option while the text is encoded whole; choose a protocol that frames it with BOS and EOS")  # fmt: skip
    # read once (a tokenizer's attributes are slow to get), where a pad stands for an option
    pad, pad_id = (tokenizer.pad_token, tokenizer.pad_token_id) if any(spliced) else (None, None)
    texts = [f"{before}{pad}{after}" for request, apart in zip(requests, spliced, strict=True) if apart
             for before, _, after in request.options]  # fmt: skip
    wholes = iter(encoded(tokenizer, texts, special=True))
    segments = iter(encoded(tokenizer, [segment for request, apart in zip(requests, spliced, strict=True)
                                        for option in request.options for segment in (option[1:2] if apart else option)]))  # fmt: skip
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    resolved = []
    for request, apart in zip(requests, spliced, strict=True):
        if apart:
            rows = []
            for _ in request.options:
                ids = next(wholes)
                at = ids.index(pad_id, 1)
                rows.append(ids[:at] + next(segments) + ids[at + 1 :])
        else:
            rows = [bos + [i for _ in option for i in next(segments)] + eos for option in request.options]
        resolved.append(rows)
    return resolved


def seq2seq_targets(requests: Sequence[Seq2Seq], tokenizer) -> list[list]:
    """Each ``Seq2Seq`` request's targets as an engine takes them: the texts, or with ``first_token_after``
    the token ids ``[that token, the target's first token]`` (PROST's released T5 code), the targets of all
    requests encoded in one call."""
    firsts = iter(encoded(tokenizer, [t for r in requests if r.first_token_after is not None for t in r.targets]))
    resolved = []
    for request in requests:
        if request.first_token_after is None:
            resolved.append(list(request.targets))
            continue
        start = tokenizer.convert_tokens_to_ids(request.first_token_after)
        resolved.append([[start, next(firsts)[0]] for _ in request.targets])
    return resolved


def first_token_choices(requests: Sequence[Generate], tokenizer) -> list[list[str]]:
    """The choices of each ``Generate`` request (all with ``first_token_choices``): the first token of each
    ``" choice"``, decoded together and split on spaces (PROST's released ``zs_runner.py:161``), every
    request's choices encoded in one call."""
    firsts = iter(encoded(tokenizer, [f" {choice}" for r in requests for choice in r.choices]))
    return [text.split() for text in tokenizer.batch_decode([[next(firsts)[0] for _ in r.choices] for r in requests])]


def lower_cased(text: str, tokenizer) -> str:
    """``text`` as a tokenizer loaded with ``do_lower_case=True`` reads it: lower-cased and accents stripped
    (BERT's normaliser) by a cased tokenizer that takes the option; as it is otherwise (an uncased tokenizer
    lower-cases it anyway; BPE tokenizers ignore the option).

    >>> class Cased:
    ...     do_lower_case = False
    >>> lower_cased("Café Kittens", Cased()), lower_cased("Café Kittens", object())
    ('cafe kittens', 'Café Kittens')
    """
    if getattr(tokenizer, "do_lower_case", None) is not False:
        return text
    decomposed = unicodedata.normalize("NFD", text.lower())
    return "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn")
