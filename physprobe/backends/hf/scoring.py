"""Causal log-likelihood engines: per-option scores from a causal LM, each question's shared token prefix run once.

- ``sequence_logprobs``: log-probability of each option's full text, counted from the first token where the options
  differ. The shared part adds the same constant to every option's total, so the ranking is that of the whole
  sentence's log-probability (PROST's "highest total probability").
- ``mean_token_logprobs``: mean log-probability of the tokens of token-id sequences (each token after the first
  predicted), as PROST's released GPT code averages token losses.

Two plans give the same scores as running every sequence whole (tests check ≤ 1e-4 in float32). Where the model
takes a tree-shaped attention mask (``packed.fits``), the packed plan: each question's prefix and its options' own
tokens in one row, many questions per batch, one forward pass per batch (``packed``). Elsewhere (ALiBi models,
sliding windows narrower than a sequence, models outside transformers' attention interface) the cached plan: the
prefixes run first, in groups of near-equal length (``batching.length_groups``, left-padded where a pass costs
more than the padding), with the head at their last position (it predicts every option's first own token); then
the options' remaining tokens, grouped by exact length across the batch, run on their question's prefix cache
(left-padded in the *keys* only, masked), each written in place (``attention.FilledLayer``); a model whose cache
cannot be rearranged scores every sequence whole. Both apply the vocabulary head only at scored positions. A model
computes in the dtype it was loaded in (no autocast), so what ``run.json`` records is what computed.

>>> common_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]), common_prefix([[1, 2], [3, 4]])
(2, 1)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from physprobe.backends.hf import packed
from physprobe.backends.hf.attention import cache_layers, filled_cache
from physprobe.backends.hf.batching import (
    as_tensor,
    batch_limits,
    check_length,
    exact_batches,
    forward,
    left_padded,
    length_groups,
    max_positions,
    padded_positions,
    pass_tokens,
    run_batches,
    shared_length,
    token_logprobs,
)
from physprobe.errors import ScoringError
from physprobe.protocols import tokenized


def tokenize_options(tokenizer, texts: Sequence[str], bos: bool = True) -> list[list[int]]:
    """Token ids of each text (``tokenized.encoded``: one tokenizer call over the distinct texts), with the model's BOS token first when it has one
    (so the first word is scored) and ``bos`` asks for it (a chat-templated text carries its own)."""
    bos = [tokenizer.bos_token_id] if bos and tokenizer.bos_token_id is not None else []
    return [bos + ids for ids in tokenized.encoded(tokenizer, texts)]


def common_prefix(sequences: Sequence[Sequence[int]]) -> int:
    """``shared_length``, at least 1: the prefix the cached plan's first pass runs."""
    return max(shared_length(sequences), 1)


def sequence_logprobs(model, tokenizer, questions: Sequence[Sequence[str]], device: torch.device,
                      batch_tokens: int | None = None, max_batch: int | None = None, truncate: bool = False,
                      progress=None, bos: bool = True) -> list[list[float]]:  # fmt: skip
    """Total log-probability of every option text of every question (tokens after the first)."""
    limit = max_positions(model)
    flat = tokenize_options(tokenizer, [text for texts in questions for text in texts], bos)
    tokenized, at = [], 0
    for texts in questions:
        tokenized.append([check_length(ids, limit, truncate, f"option text {text[:60]!r}")
                          for ids, text in zip(flat[at : at + len(texts)], texts, strict=True)])  # fmt: skip
        at += len(texts)
    return option_totals(model, tokenized, device, batch_tokens, max_batch, progress, count_prefix=False)


def option_totals(model, tokenized: list[list[list[int]]], device: torch.device, batch_tokens: int | None,
                  max_batch: int | None, progress, count_prefix: bool) -> list[list[float]]:  # fmt: skip
    """Summed log-probabilities of every option's tokens from its first own token on (``count_prefix``: from its
    second token on, the shared prefix's tokens included), each question's prefix run once: the packed plan where
    the model takes it, else the cached plan."""
    batch_tokens, max_batch = batch_limits(model, device, batch_tokens, max_batch, (8192, 64))
    with torch.inference_mode():
        if packed.fits(model, tokenized):
            return packed.totals(model, tokenized, device, batch_tokens, max_batch, progress, count_prefix)
        return cached_totals(model, tokenized, device, batch_tokens, max_batch, progress, count_prefix)


def cached_totals(model, tokenized: list[list[list[int]]], device: torch.device, batch_tokens: int, max_batch: int,
                  progress, count_prefix: bool) -> list[list[float]]:  # fmt: skip
    """``option_totals`` by the cached plan: prefixes first, then the options' own tokens on their prefix's cache."""
    prefixes = [common_prefix(ids) for ids in tokenized]
    costs = [n + sum(len(ids) - n - 1 for ids in options) for n, options in zip(prefixes, tokenized, strict=True)]
    batches = _prefix_sorted_batches(prefixes, costs, batch_tokens, max_batch)
    pass_cost = pass_tokens(model, device)

    def step(batch: list[int]) -> list[list[float]]:
        apart = [i for i in batch if not shared_length(tokenized[i])]  # options sharing no token: each run whole
        together = [i for i in batch if i not in apart]
        scores = dict(zip(apart, _whole_sequences(model, [tokenized[i] for i in apart], [1] * len(apart), device, batch_tokens,
                                                  count_prefix), strict=True))  # fmt: skip
        if together:
            scores.update(zip(together, _shared_prefix_batch(model, [tokenized[i] for i in together], [prefixes[i] for i in together],
                                                             device, batch_tokens, count_prefix, pass_cost), strict=True))  # fmt: skip
        return [scores[i] for i in batch]

    return run_batches(len(tokenized), costs, step, batch_tokens, max_batch, progress, batches=batches)


def _prefix_sorted_batches(prefixes: Sequence[int], costs: Sequence[int], batch_tokens: int, max_batch: int) -> list[list[int]]:
    """Questions in order of prefix length, cut into batches of at most ``max_batch`` and ``batch_tokens`` fed tokens.

    >>> _prefix_sorted_batches([5, 3, 5, 4], [9, 4, 8, 6], batch_tokens=15, max_batch=8)
    [[0], [2, 3], [1]]
    """
    batches: list[list[int]] = []
    used = 0
    for index in sorted(range(len(prefixes)), key=lambda i: -prefixes[i]):
        if batches and len(batches[-1]) < max_batch and used + costs[index] <= batch_tokens:
            batches[-1].append(index)
            used += costs[index]
        else:
            batches.append([index])
            used = costs[index]
    return batches


def _shared_prefix_batch(model, groups: list[list[list[int]]], prefixes: list[int], device: torch.device,
                         batch_tokens: int, count_prefix: bool, pass_cost: int) -> list[list[float]]:  # fmt: skip
    width = max(prefixes)
    n_questions = len(groups)
    keys: list[torch.Tensor] | None = None
    values: list[torch.Tensor] | None = None
    totals = [[0.0] * len(options) for options in groups]
    # Room after the prefixes for the longest suffix pass's own keys/values.
    room = width + max((len(options) - prefixes[q] - 1 for q, group in enumerate(groups) for options in group), default=0)
    # 1. Prefixes, in groups of near-equal length (``length_groups``: left-padded where a pass would cost more than
    #    the padding); their keys/values go, left-padded, into one table per layer.
    # Where every prefix position is scored, a padded position costs a head row as well as a trunk token.
    for rows in length_groups(prefixes, pass_cost // (2 if count_prefix else 1)):
        ids, real = left_padded([groups[q][0][: prefixes[q]] for q in rows], 0, device)
        n = ids.shape[1]
        padded = not bool(real.all())
        positions = padded_positions(real) if padded else None
        # The head at the last prefix position (it predicts each option's first own token), or at every
        # prefix position when the prefix's own tokens after the first are scored too.
        out = forward(model, n if count_prefix else 1, input_ids=ids, use_cache=True, attention_mask=real if padded else None,
                       position_ids=positions)  # fmt: skip
        layers = cache_layers(out.past_key_values, room)
        if layers is None:  # a cache this engine cannot rearrange: score each option whole instead
            return _whole_sequences(model, groups, prefixes, device, batch_tokens, count_prefix)
        first_next = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
        if count_prefix:  # tokens predicted from a real position (padding comes first, so its target is real too)
            predicted = token_logprobs(out.logits[:, :-1], ids[:, 1:])
            shared = torch.where(real[:, :-1].bool(), predicted, 0.0).sum(-1).tolist()
        else:
            shared = [0.0] * len(rows)
        for row, q in enumerate(rows):
            totals[q] = [
                shared[row] + value for value in first_next[row, [options[prefixes[q]] for options in groups[q]]].tolist()
            ]
        if keys is None:
            keys = [k.new_zeros((n_questions, k.shape[1], room, k.shape[3])) for k, _ in layers]
            values = [v.new_zeros((n_questions, v.shape[1], room, v.shape[3])) for _, v in layers]
        where = torch.tensor(rows, device=device)
        for layer, (k, v) in enumerate(layers):
            keys[layer][where, :, width - n : width] = k
            values[layer][where, :, width - n : width] = v
    # 2. Every option's tokens after its first, on its question's prefix in that table.
    _add_suffix_scores(model, keys, values, width, groups, prefixes, totals, device, batch_tokens)
    return totals


def _add_suffix_scores(model, keys: list[torch.Tensor], values: list[torch.Tensor], width: int, groups: list[list[list[int]]],
                       prefixes: list[int], totals: list[list[float]], device: torch.device, batch_tokens: int) -> None:  # fmt: skip
    """Add to ``totals`` the log-probabilities of every option's tokens after its first, each pass on its questions'
    prefix keys/values (``keys``/``values``: per layer, each question's prefix right-aligned before column ``width``)."""
    # Grouped by exact count across the batch (no padded queries).
    suffixes = [(q, o, options[prefixes[q] :]) for q, options in enumerate(groups) for o, options in enumerate(options)]
    longer = [item for item in suffixes if len(item[2]) > 1]
    for rows in exact_batches([len(item[2]) - 1 for item in longer], batch_tokens, len(longer)):
        items = [longer[r] for r in rows]
        m = len(items[0][2]) - 1
        questions = [q for q, _, _ in items]
        select = torch.tensor(questions, device=device)
        start = torch.tensor([prefixes[q] for q in questions], device=device)
        lead = max(prefixes[q] for q in questions)  # the table's columns before the pass's longest prefix: padding for all
        key_mask = (torch.arange(lead, device=device) >= (lead - start)[:, None]).long()
        cache = filled_cache([k[:, :, width - lead : width + m].index_select(0, select) for k in keys],
                             [v[:, :, width - lead : width + m].index_select(0, select) for v in values], lead)  # fmt: skip
        ids = as_tensor([suffix[:-1] for _, _, suffix in items], device)
        targets = as_tensor([suffix[1:] for _, _, suffix in items], device)
        logits = model(input_ids=ids, attention_mask=torch.cat([key_mask, key_mask.new_ones((len(items), m))], dim=1),
                       position_ids=start[:, None] + torch.arange(m, device=device), past_key_values=cache).logits  # fmt: skip
        extra = token_logprobs(logits, targets).sum(-1).tolist()
        for (q, o, _), value in zip(items, extra, strict=True):
            totals[q][o] += value


def _whole_sequences(model, groups, prefixes, device, batch_tokens, count_prefix) -> list[list[float]]:
    """Fallback of ``_shared_prefix_batch``: every option sequence run whole (same-length rows together)."""
    flat = [(q, o, options) for q, group in enumerate(groups) for o, options in enumerate(group)]
    totals = [[0.0] * len(group) for group in groups]
    for rows in exact_batches([len(item[2]) for item in flat], batch_tokens, len(flat)):
        items = [flat[r] for r in rows]
        ids = as_tensor([sequence for _, _, sequence in items], device)
        logprobs = token_logprobs(model(input_ids=ids).logits[:, :-1], ids[:, 1:])
        for row, (q, o, _) in enumerate(items):
            totals[q][o] = logprobs[row, 0 if count_prefix else prefixes[q] - 1 :].sum().item()
    return totals


def mean_token_logprobs(model, tokenizer, questions: Sequence[Sequence[Sequence[int]]], device: torch.device,
                        batch_tokens: int | None = None, max_batch: int | None = None, truncate: bool = False,
                        progress=None) -> list[list[float]]:  # fmt: skip
    """Mean log-probability of tokens 2..n of every option's token ids (special tokens as given), as the
    reference protocols that average a sequence's token losses do.

    Equal to running each sequence whole (tests check ≤ 1e-4 in float32), but the options of a question
    share their token prefix, which runs once, its own tokens scored once, as ``sequence_logprobs`` does:
    the mean is (the prefix's tokens after the first + the option's own tokens) / (n - 1).
    """
    limit = max_positions(model)
    tokenized = [
        [check_length(ids, limit, truncate, f"token sequence of {len(ids)} ids") for ids in options] for options in questions
    ]
    for options in tokenized:
        for ids in options:
            if len(ids) < 2:
                raise ScoringError(f"token sequence {ids} has {len(ids)} id(s): a mean token log-probability needs at least 2")
    totals = option_totals(model, tokenized, device, batch_tokens, max_batch, progress, count_prefix=True)
    return [
        [total / (len(ids) - 1) for total, ids in zip(row, options, strict=True)]
        for row, options in zip(totals, tokenized, strict=True)
    ]
