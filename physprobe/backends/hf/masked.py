"""Masked-LM engines: log-probabilities of candidate words at the one ``[MASK]`` of each text or sentence pair.

One forward pass per text whatever the number of candidates, the vocabulary projection at the mask position only
where the model's head is one module. Texts run in groups of near-equal length (right-padded, masked; padded only
where a pass costs more than the padding, ``batching.length_groups``), within a token budget; the candidates'
log-probabilities are gathered on the device and moved to the host once per batch.

>>> _mask_window([0, 5, 6, 7, 99, 8, 9, 2], 4, 5, True, {0, 2}, "x")
[0, 7, 99, 8, 2]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from physprobe.backends.hf.batching import (
    batch_limits,
    check_length,
    grouped_batches,
    length_limit,
    pad_right,
    pass_tokens,
    run_batches,
)
from physprobe.errors import ScoringError


def _mlm_head(model):
    """The masked LM's prediction head (applied to the mask positions only), or None if it is not one module."""
    children = [module for name, module in model.named_children() if module is not model.base_model]
    return children[0] if len(children) == 1 else None


def _mask_window(ids: list[int], mask_at: int, limit: int | None, truncate: bool, special: set[int], what: str) -> list[int]:
    """``ids`` cut to ``limit`` tokens around the ``[MASK]`` at ``mask_at`` (leading/trailing special tokens
    kept): truncation never cuts the mask away."""
    if limit is None or len(ids) <= limit:
        return ids
    if not truncate:
        raise ScoringError(f"{what} is {len(ids)} tokens, over the model's maximum of {limit}; "
                           f"pass --truncate to keep {limit} tokens around [MASK]")  # fmt: skip
    head = 1 if ids[0] in special else 0
    tail = 1 if ids[-1] in special else 0
    width = limit - head - tail
    if width < 1:
        raise ScoringError(f"{what}: a maximum of {limit} tokens leaves no room around [MASK]")
    start = min(max(head, mask_at - width // 2), len(ids) - tail - width)
    return ids[:head] + ids[start : start + width] + (ids[-tail:] if tail else [])


def _at_mask(model, encoded: list[list[int]], masks: list[int], candidates: list[list[int | None]], pad: int,
             device: torch.device, batch_tokens: int | None, max_batch: int | None, progress, types=None,
             head=None) -> list[list[float | None]]:  # fmt: skip
    """Log-probability of each text's candidate ids (None: no score) at its mask position, in padded groups."""
    lengths = [len(e) for e in encoded]
    batch_tokens, max_batch = batch_limits(model, device, batch_tokens, max_batch, (16384, 128), logits=False)

    def step(batch: list[int]) -> list[list[float | None]]:
        ids, attention = pad_right([encoded[i] for i in batch], pad, device)
        extra = {} if types is None else {"token_type_ids": pad_right([types[i] for i in batch], 0, device)[0]}
        rows = torch.arange(len(batch), device=device)
        where = torch.tensor([masks[i] for i in batch], device=device)
        if head is not None:
            hidden = model.base_model(input_ids=ids, attention_mask=attention, **extra).last_hidden_state
            logits = head(hidden[rows, where])
        else:
            logits = model(input_ids=ids, attention_mask=attention, **extra).logits[rows, where]
        wanted = [(row, c) for row, i in enumerate(batch) for c in candidates[i] if c is not None]
        scores = iter([])
        if wanted:
            index = torch.tensor(wanted, device=device)
            scores = iter(torch.log_softmax(logits.float(), dim=-1)[index[:, 0], index[:, 1]].tolist())
        return [[None if c is None else next(scores) for c in candidates[i]] for i in batch]

    with torch.inference_mode():
        return run_batches(len(encoded), lengths, step, batch_tokens, max_batch, progress,
                           batches=grouped_batches(lengths, pass_tokens(model, device), batch_tokens, max_batch))  # fmt: skip


def masked_logprobs(model, tokenizer, texts: Sequence[str], candidates: Sequence[Sequence[str]], device: torch.device,
                    batch_tokens: int | None = None, max_batch: int | None = None, truncate: bool = False,
                    progress=None) -> list[list[float | None]]:  # fmt: skip
    """Log-probability of each candidate word at the one ``[MASK]`` of each text (None: not a single token).

    One forward pass per text, whatever the number of candidates; the vocabulary projection is applied
    at the mask position only. A candidate of several tokens gets None (the caller reports it).
    """
    if tokenizer.mask_token is None:
        raise ScoringError(f"tokenizer {tokenizer.name_or_path!r} has no mask token: it cannot score a masked-LM method")
    limit = length_limit(model, tokenizer)
    special = set(tokenizer.all_special_ids) - {tokenizer.mask_token_id}
    for text in texts:
        if text.count("[MASK]") != 1:
            raise ScoringError(f"masked-LM input must hold exactly one [MASK]: {text[:80]!r}")
    encoded, masks = [], []
    for text, whole in zip(
        texts, tokenizer([t.replace("[MASK]", tokenizer.mask_token) for t in texts])["input_ids"] if texts else [], strict=True
    ):
        ids = _mask_window(whole, whole.index(tokenizer.mask_token_id), limit, truncate, special, f"input {text[:60]!r}")
        encoded.append(ids)
        masks.append(ids.index(tokenizer.mask_token_id))
    words = sorted({w for ws in candidates for w in ws})
    word_ids = dict(
        zip(words, tokenizer([" " + w for w in words], add_special_tokens=False)["input_ids"] if words else [], strict=True)
    )
    single = [[word_ids[w][0] if len(word_ids[w]) == 1 else None for w in ws] for ws in candidates]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return _at_mask(model, encoded, masks, single, pad, device, batch_tokens, max_batch, progress, head=_mlm_head(model))


def masked_pair_logprobs(model, tokenizer, requests: Sequence[tuple[str, str, Sequence[str]]], device: torch.device,
                         batch_tokens: int | None = None, max_batch: int | None = None, truncate: bool = False,
                         progress=None, token_type_ids: bool = True, unknown_as_unk: bool = False) -> list[list[float | None]]:  # fmt: skip
    """Log-probability of candidate tokens at the ``[MASK]`` of a sentence pair ``(first, second, words)``.

    The pair is encoded as one, ``tokenizer(first, second)`` (its segment ids fed to the model when
    ``token_type_ids``), and each word is looked up as one vocabulary entry, ``convert_tokens_to_ids(word)``
    — as Text2Afford's released ``src/probing.py`` does. A word outside the vocabulary gets None, or with
    ``unknown_as_unk`` the score of the unknown token it converts to (``src/probing.py:151``).
    """
    if tokenizer.mask_token is None:
        raise ScoringError(f"tokenizer {tokenizer.name_or_path!r} has no mask token: it cannot score a masked-LM method")
    limit = tokenizer.model_max_length if tokenizer.model_max_length < 1e9 else None
    unknown = None if unknown_as_unk else tokenizer.unk_token_id
    for _, second, _ in requests:
        if second.count("[MASK]") != 1:
            raise ScoringError(f"masked-LM input must hold exactly one [MASK]: {second[:80]!r}")
    # Every pair in one tokenizer call, every distinct word looked up in one.
    pairs = tokenizer([first for first, _, _ in requests], [second.replace("[MASK]", tokenizer.mask_token) for _, second, _ in requests],
                      return_token_type_ids=True) if requests else {"input_ids": []}  # fmt: skip
    words = list(dict.fromkeys(w for _, _, ws in requests for w in ws))
    word_ids = dict(zip(words, tokenizer.convert_tokens_to_ids(words), strict=True)) if words else {}
    encoded, types, masks, cand = [], [], [], []
    for row, (first, _, words) in enumerate(requests):
        ids = check_length(pairs["input_ids"][row], limit, False, f"input {first[:60]!r}")
        encoded.append(ids)
        types.append(pairs["token_type_ids"][row] if token_type_ids and "token_type_ids" in pairs else None)
        masks.append(ids.index(tokenizer.mask_token_id))
        cand.append([None if c is None or c == unknown else c for c in (word_ids[w] for w in words)])
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    segments = types if types and types[0] is not None else None
    return _at_mask(model, encoded, masks, cand, pad, device, batch_tokens, max_batch, progress, types=segments)
