"""What a request leaves to the model's tokenizer, resolved with any tokenizer that encodes as ``transformers``'
do (``tokenizer(text, add_special_tokens=False)["input_ids"]``): PROST's released token-level inputs, its
T5 first-token targets and UnifiedQA's first-token choices, Text2Afford's lower-cased pairs. No torch.

>>> class Words:  # a tokenizer of whole words, ids by first letter, BOS 1 and EOS 2
...     bos_token_id, eos_token_id = 1, 2
...     def __call__(self, text, add_special_tokens=False):
...         return {"input_ids": [ord(w[0]) for w in text.split()]}
>>> from physprobe.protocols.requests import MeanTokens
>>> mean_token_ids(MeanTokens(options=(("A", " coin", " falls."),)), Words())
[[1, 65, 99, 102, 2]]
"""

from __future__ import annotations

import unicodedata

from physprobe.errors import BackendError
from physprobe.protocols.requests import Generate, MeanTokens, Seq2Seq


def ids(tokenizer, text: str) -> list[int]:
    """``text``'s token ids without special tokens (none for an empty text)."""
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []


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


def mean_token_ids(request: MeanTokens, tokenizer) -> list[list[int]]:
    """The token ids of each option of a ``MeanTokens`` request.

    ``specials="bos_eos"``: the segments encoded apart without special tokens, concatenated, framed by the
    tokenizer's BOS and EOS where it has them. ``"gpt_names"``: that for a tokenizer whose name starts with
    ``gpt`` (``gpt_named``); any other encodes the option's text whole as it does, its own special tokens
    included, with its pad token standing for the middle segment, whose own tokens (encoded without special
    tokens) then replace the pad (PROST's released ``input_pipeline.py:88-110``)."""
    if request.specials not in ("bos_eos", "gpt_names"):
        raise BackendError(f"MeanTokens specials {request.specials!r} is not one physprobe knows (bos_eos, gpt_names)")
    if request.specials == "gpt_names" and not gpt_named(tokenizer.name_or_path):
        if tokenizer.pad_token_id is None:
            raise BackendError(f"tokenizer {tokenizer.name_or_path!r} has no pad (or end-of-sequence) token to stand for the "
                               "option while the text is encoded whole; choose a protocol that frames it with BOS and EOS")  # fmt: skip
        spliced = []
        for before, option, after in request.options:
            whole = tokenizer(f"{before}{tokenizer.pad_token}{after}")["input_ids"]
            at = whole.index(tokenizer.pad_token_id, 1)
            spliced.append(whole[:at] + ids(tokenizer, option) + whole[at + 1 :])
        return spliced
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    return [bos + [i for segment in option for i in ids(tokenizer, segment)] + eos for option in request.options]


def seq2seq_targets(request: Seq2Seq, tokenizer) -> list:
    """A ``Seq2Seq`` request's targets as an engine takes them: the texts, or with ``first_token_after``
    the token ids ``[that token, the target's first token]`` (PROST's released T5 code)."""
    if request.first_token_after is None:
        return list(request.targets)
    start = tokenizer.convert_tokens_to_ids(request.first_token_after)
    return [[start, ids(tokenizer, target)[0]] for target in request.targets]


def first_token_choices(request: Generate, tokenizer) -> list[str]:
    """The choices of a ``Generate`` request with ``first_token_choices``: the first token of each
    ``" choice"``, decoded together and split on spaces (PROST's released ``zs_runner.py:161``)."""
    return tokenizer.decode([ids(tokenizer, f" {choice}")[0] for choice in request.choices]).split()


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
