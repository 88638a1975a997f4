"""Scoring engines: turn model forward passes into per-option scores, as fast as the hardware allows.

- ``sequence_logprobs``: log-probability of each option's full text under a causal LM, counted from the
  first token where the options differ. The options of a question share a token prefix; it is run once
  and its key/value cache reused for every option, which equals scoring each full sequence separately
  (tests check ≤ 1e-4 in float32). The shared part adds the same constant to every option's total, so
  the ranking is that of the whole sentence's log-probability (PROST's "highest total probability").
- ``masked_logprobs``: log-probabilities of candidate words at the mask, one forward pass per text, the
  vocabulary projection applied at the mask position only.
- ``masked_pair_logprobs``: the same at the ``[MASK]`` of a sentence pair, each word one vocabulary entry
  (Text2Afford's released probing).
- ``seq2seq_logprobs``: log-probability of each target (text or token ids) given its input (T5-style),
  the encoder once per question.
- ``mean_token_logprobs``: mean log-probability of the tokens of token-id sequences (each token after the
  first predicted), as PROST's released GPT code averages token losses; the shared prefix runs once too.
- ``entailment_probs``: NLI entailment probability of (premise, hypothesis) pairs.

All run under ``torch.inference_mode``, with bf16 autocast on CUDA, and halve a batch on out-of-memory.
The masked-LM, seq2seq and NLI engines feed no padding (batches hold sequences of one length), the causal ones
pad only where a pass would cost more than the padding (``length_groups``); all apply the vocabulary head only at
scored positions; ``benchmarks/score_vs_lm_eval.py`` compares them with the
token-minimal limit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

from physprobe.errors import ScoringError


def _autocast(device: torch.device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def batched(lengths: Sequence[int], batch_tokens: int, max_batch: int) -> Iterator[list[int]]:
    """Indices grouped into batches of similar length (longest first), bounded by a token budget.

    >>> list(batched([3, 10, 4, 9], batch_tokens=20, max_batch=8))
    [[1, 3], [2, 0]]
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batch: list[int] = []
    for index in order:
        width = lengths[batch[0]] if batch else lengths[index]
        if batch and (len(batch) + 1) * width > batch_tokens or len(batch) == max_batch:
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch


def exact_batches(lengths: Sequence[int], batch_tokens: int, max_batch: int) -> list[list[int]]:
    """Indices grouped into batches of one length each (no padding at all), longest first, within a token budget.

    >>> exact_batches([3, 5, 3, 5, 3], batch_tokens=6, max_batch=8)
    [[1], [3], [0, 2], [4]]
    """
    batches: list[list[int]] = []
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        last = batches[-1] if batches else None
        if last and lengths[last[0]] == lengths[index] and len(last) < max_batch and (len(last) + 1) * lengths[index] <= batch_tokens:
            last.append(index)
        else:
            batches.append([index])
    return batches


# What a forward pass costs beyond its tokens, in tokens: measured on the 2-core CPU (one-token passes of
# SmolLM2-135M and GPT-2-small take 53 and 35 ms, a token in a batched pass 1.1-1.3 ms). On CUDA a pass is kernel
# launches while tokens are nearly free up to thousands; 512 is an estimate (no GPU was lent to measure it).
PASS_TOKENS = {"cpu": 32, "cuda": 512}


def pass_tokens(device: torch.device) -> int:
    """``PASS_TOKENS`` of the device's type (a CUDA-like accelerator's otherwise)."""
    return PASS_TOKENS.get(device.type, PASS_TOKENS["cuda"])


def length_groups(lengths: Sequence[int], pass_cost: int) -> list[list[int]]:
    """Rows by decreasing length, cut into groups that each run as one pass, padded to their longest: the cut of
    least cost, each pass costing ``pass_cost`` tokens more than the tokens it feeds (fewer passes against
    more padding; ``pass_cost`` 0: one group per exact length).

    >>> length_groups([30, 10, 29, 31, 12], 32), length_groups([30, 29], 0)
    ([[3, 0, 2], [4, 1]], [[0], [1]])
    """
    # By hand: a dynamic programme over the cut points of the sorted lengths (each group padded to its first).
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    cost = [0] + [None] * len(order)
    start_of = [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        for start in range(end):
            total = cost[start] + pass_cost + (end - start) * lengths[order[start]]
            if cost[end] is None or total < cost[end]:
                cost[end], start_of[end] = total, start
    groups, end = [], len(order)
    while end:
        groups.append(order[start_of[end] : end])
        end = start_of[end]
    return groups[::-1]


def left_padded(sequences: Sequence[Sequence[int]], pad: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids and the mask of real (1) and padding (0) positions of token sequences."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        if sequence:
            ids[row, width - len(sequence) :] = torch.tensor(sequence, dtype=torch.long)
            mask[row, width - len(sequence) :] = 1
    return ids.to(device), mask.to(device)


def padded_positions(real: torch.Tensor, start: torch.Tensor | int = 0) -> torch.Tensor:
    """Position ids of left-padded rows (``real``: 1 at a token, 0 at padding), counted from ``start`` per row at each
    row's first token (padding takes that first position; it is masked).

    >>> padded_positions(torch.tensor([[0, 1, 1], [1, 1, 1]]), torch.tensor([5, 0])).tolist()
    [[5, 5, 6], [0, 1, 2]]
    """
    width = real.shape[1]
    offset = torch.as_tensor(start, device=real.device).reshape(-1, 1)
    return offset + (torch.arange(width, device=real.device)[None] - (width - real.sum(1, keepdim=True))).clamp(min=0)


def run_batches(n_items: int, lengths: Sequence[int], step: Callable[[list[int]], list], batch_tokens: int,
                max_batch: int, progress=None, batches: list[list[int]] | None = None) -> list:  # fmt: skip
    """Apply ``step`` to length-sorted batches (or the ``batches`` given); on CUDA out-of-memory halve a
    batch and retry."""
    results: list = [None] * n_items
    pending = list(batched(lengths, batch_tokens, max_batch)) if batches is None else list(batches)
    while pending:
        batch = pending.pop(0)
        try:
            for index, value in zip(batch, step(batch)):
                results[index] = value
            if progress is not None:
                progress.update(len(batch))
        except torch.OutOfMemoryError:
            if len(batch) == 1:
                raise
            torch.cuda.empty_cache()
            half = len(batch) // 2
            pending[:0] = [batch[:half], batch[half:]]
    return results


def _pad_right(sequences: Sequence[Sequence[int]], pad: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and attention mask of token sequences."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
        mask[row, : len(sequence)] = 1
    return ids.to(device), mask.to(device)


def _check_length(ids: Sequence[int], limit: int | None, truncate: bool, what: str) -> list[int]:
    if limit is None or len(ids) <= limit:
        return list(ids)
    if not truncate:
        raise ScoringError(f"{what} is {len(ids)} tokens, over the model's maximum of {limit}; pass --truncate to keep the last {limit}")
    return list(ids)[-limit:]


def max_positions(model) -> int | None:
    """The length of the model's position table (``max_position_embeddings`` or GPT-2's ``n_positions``), if any."""
    return getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)


def length_limit(model, tokenizer) -> int | None:
    """The longest input the model takes: the tokenizer's ``model_max_length`` and the model config's
    position table (less RoBERTa-style position offsets), whichever is smaller; None when neither says."""
    limits = [tokenizer.model_max_length] if tokenizer.model_max_length < 1e9 else []
    table = max_positions(model)
    if table:
        offset = getattr(getattr(model.base_model, "embeddings", None), "padding_idx", None)  # RoBERTa counts from pad + 1
        limits.append(table - (offset + 1 if isinstance(offset, int) else 0))
    return min(limits) if limits else None


def _mask_window(ids: list[int], mask_at: int, limit: int | None, truncate: bool, special: set[int], what: str) -> list[int]:
    """``ids`` cut to ``limit`` tokens around the ``[MASK]`` at ``mask_at`` (leading/trailing special tokens
    kept): truncation never cuts the mask away.

    >>> _mask_window([0, 5, 6, 7, 99, 8, 9, 2], 4, 5, True, {0, 2}, "x")
    [0, 7, 99, 8, 2]
    """
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


# --- causal LM: shared-prefix sequence log-probabilities ------------------------------------
def tokenize_options(tokenizer, texts: Sequence[str], bos: bool = True) -> list[list[int]]:
    """Token ids of each text (one batched tokenizer call), with the model's BOS token first when it has one
    (so the first word is scored) and ``bos`` asks for it (a chat-templated text carries its own)."""
    bos = [tokenizer.bos_token_id] if bos and tokenizer.bos_token_id is not None else []
    return [bos + ids for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]] if texts else []


def shared_length(sequences: Sequence[Sequence[int]]) -> int:
    """Length of the longest token prefix all sequences share, leaving each at least one token of its own.

    >>> shared_length([[1, 2, 3, 4], [1, 2, 5]]), shared_length([[1, 2], [1, 2]]), shared_length([[1], [2, 3]])
    (2, 1, 0)
    """
    shortest = min(len(s) for s in sequences) - 1
    n = 0
    while n < shortest and all(s[n] == sequences[0][n] for s in sequences):
        n += 1
    return n


def common_prefix(sequences: Sequence[Sequence[int]]) -> int:
    """``shared_length``, at least 1: the prefix an option group's first pass runs.

    >>> common_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]), common_prefix([[1, 2], [3, 4]])
    (2, 1)
    """
    return max(shared_length(sequences), 1)


def _token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits)[targets] without materialising the log-softmax over the vocabulary."""
    logits = logits.float()
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def _as_tensor(rows: Sequence[Sequence[int]], device: torch.device) -> torch.Tensor:
    """Equal-length token rows as one tensor (one numpy conversion, no tensor per row)."""
    return torch.from_numpy(np.asarray(rows, dtype=np.int64)).to(device)


def sequence_logprobs(model, tokenizer, questions: Sequence[Sequence[str]], device: torch.device,
                      batch_tokens: int = 8192, max_batch: int = 64, truncate: bool = False,
                      progress=None, bos: bool = True) -> list[list[float]]:  # fmt: skip
    """Total log-probability of every option text of every question (tokens after the first).

    The vocabulary head runs at scored positions only: each question's shared prefix runs once, in groups of
    near-equal length (``length_groups``, left-padded where a pass costs more than the padding), with the head
    at its last position (it predicts every option's first own token); then the options' remaining tokens,
    grouped by exact length across the batch, run on their question's prefix cache (left-padded in the *keys*
    only, masked), with the head at every fed position, each of which predicts a scored token.
    """
    limit = max_positions(model)
    flat = tokenize_options(tokenizer, [text for texts in questions for text in texts], bos)
    tokenized, at = [], 0
    for texts in questions:
        tokenized.append([_check_length(ids, limit, truncate, f"option text {text[:60]!r}")
                          for ids, text in zip(flat[at : at + len(texts)], texts)])  # fmt: skip
        at += len(texts)
    return _prefix_shared_totals(model, tokenized, device, batch_tokens, max_batch, progress, count_prefix=False)


def _prefix_shared_totals(model, tokenized: list[list[list[int]]], device: torch.device, batch_tokens: int, max_batch: int,
                          progress, count_prefix: bool) -> list[list[float]]:  # fmt: skip
    """Summed log-probabilities of every option's tokens from its first own token on (``count_prefix``:
    from its second token on, the shared prefix's tokens included), each question's prefix run once."""
    prefixes = [common_prefix(ids) for ids in tokenized]
    costs = [n + sum(len(ids) - n - 1 for ids in options) for n, options in zip(prefixes, tokenized)]
    batches = _prefix_sorted_batches(prefixes, costs, batch_tokens, max_batch)

    def step(batch: list[int]) -> list[list[float]]:
        return _shared_prefix_batch(model, [tokenized[i] for i in batch], [prefixes[i] for i in batch], device, batch_tokens,
                                    count_prefix)  # fmt: skip

    with torch.inference_mode(), _autocast(device):
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
                         batch_tokens: int, count_prefix: bool) -> list[list[float]]:  # fmt: skip
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
    for rows in length_groups(prefixes, pass_tokens(device) // (2 if count_prefix else 1)):
        ids, real = left_padded([groups[q][0][: prefixes[q]] for q in rows], 0, device)
        n = ids.shape[1]
        padded = not bool(real.all())
        positions = padded_positions(real) if padded else None
        # The head at the last prefix position (it predicts each option's first own token), or at every
        # prefix position when the prefix's own tokens after the first are scored too.
        out = _forward(model, n if count_prefix else 1, input_ids=ids, use_cache=True, attention_mask=real if padded else None,
                       position_ids=positions)  # fmt: skip
        layers = _cache_layers(out.past_key_values, room)
        if layers is None:  # a cache this engine cannot rearrange: score each option whole instead
            return _whole_sequences(model, groups, prefixes, device, batch_tokens, count_prefix)
        first_next = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
        if count_prefix:  # tokens predicted from a real position (padding comes first, so its target is real too)
            predicted = _token_logprobs(out.logits[:, :-1], ids[:, 1:])
            shared = torch.where(real[:, :-1].bool(), predicted, 0.0).sum(-1).tolist()
        else:
            shared = [0.0] * len(rows)
        for row, q in enumerate(rows):
            totals[q] = [shared[row] + value for value in first_next[row, [options[prefixes[q]] for options in groups[q]]].tolist()]
        if keys is None:
            keys = [k.new_zeros((n_questions, k.shape[1], room, k.shape[3])) for k, _ in layers]
            values = [v.new_zeros((n_questions, v.shape[1], room, v.shape[3])) for _, v in layers]
        where = torch.tensor(rows, device=device)
        for layer, (k, v) in enumerate(layers):
            keys[layer][where, :, width - n : width] = k
            values[layer][where, :, width - n : width] = v
    # 2. Every option's tokens after its first, grouped by exact count across the batch (no padded queries).
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
        ids = _as_tensor([suffix[:-1] for _, _, suffix in items], device)
        targets = _as_tensor([suffix[1:] for _, _, suffix in items], device)
        logits = model(input_ids=ids, attention_mask=torch.cat([key_mask, key_mask.new_ones((len(items), m))], dim=1),
                       position_ids=start[:, None] + torch.arange(m, device=device), past_key_values=cache).logits  # fmt: skip
        extra = _token_logprobs(logits, targets).sum(-1).tolist()
        for (q, o, _), value in zip(items, extra):
            totals[q][o] += value
    return totals


def _cache_layers(cache, span: int) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """(keys, values) per layer of a transformers ``DynamicCache`` of plain layers, or of sliding-window layers
    (Gemma, Mistral) whose window is wider than ``span``, the longest cache the engine will build: nothing is
    dropped from them, and a plain buffer under the model's sliding mask attends as they do. None for any other cache."""
    if type(cache) is not DynamicCache:
        return None
    for layer in cache.layers:
        if type(layer) is not DynamicLayer and not (type(layer) is DynamicSlidingWindowLayer and span < layer.sliding_window):
            return None
    return [(layer.keys, layer.values) for layer in cache.layers]


class FilledLayer(DynamicLayer):
    """A cache layer over preallocated key/value buffers whose first ``filled`` positions hold keys and values;
    a forward pass writes its tokens' keys/values in place after them.

    transformers' ``DynamicLayer`` concatenates on every update, copying the whole cache per pass (per
    decoding step, per suffix pass); none of its layers writes into a buffer that starts partly filled.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, filled: int):
        super().__init__()
        self.buffers, self.filled = (keys, values), filled
        self.keys, self.values = keys[..., :filled, :], values[..., :filled, :]
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self.buffers
        end = self.filled + key_states.shape[-2]
        if end > keys.shape[-2]:
            raise ScoringError(f"a cache buffer of {keys.shape[-2]} positions cannot take {end}")
        keys[..., self.filled : end, :] = key_states
        values[..., self.filled : end, :] = value_states
        self.filled, self.keys, self.values = end, keys[..., :end, :], values[..., :end, :]
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self.buffers = tuple(buffer.index_select(0, indices) for buffer in self.buffers)
        self.keys, self.values = (buffer[..., : self.filled, :] for buffer in self.buffers)


def filled_cache(keys: list[torch.Tensor], values: list[torch.Tensor], filled: int) -> DynamicCache:
    """A ``DynamicCache`` of ``FilledLayer`` s: per layer, a buffer whose first ``filled`` positions are set."""
    cache = DynamicCache()
    cache.layers = [FilledLayer(k, v, filled) for k, v in zip(keys, values)]
    return cache


def _whole_sequences(model, groups, prefixes, device, batch_tokens, count_prefix) -> list[list[float]]:
    """Fallback of ``_shared_prefix_batch``: every option sequence run whole (same-length rows together)."""
    flat = [(q, o, options) for q, group in enumerate(groups) for o, options in enumerate(group)]
    totals = [[0.0] * len(group) for group in groups]
    for rows in exact_batches([len(item[2]) for item in flat], batch_tokens, len(flat)):
        items = [flat[r] for r in rows]
        ids = _as_tensor([sequence for _, _, sequence in items], device)
        logprobs = _token_logprobs(model(input_ids=ids).logits[:, :-1], ids[:, 1:])
        for row, (q, o, _) in enumerate(items):
            totals[q][o] = logprobs[row, 0 if count_prefix else prefixes[q] - 1 :].sum().item()
    return totals


def _forward(model, keep: int, **inputs):
    """A forward pass computing vocabulary logits for the last ``keep`` positions only, where the model allows."""
    try:
        out = model(**inputs, logits_to_keep=keep)
    except TypeError:  # architectures without logits_to_keep compute them all
        out = model(**inputs)
    if out.logits.shape[1] != keep:  # the model ignored logits_to_keep
        out.logits = out.logits[:, -keep:]
    return out


# --- causal LM: mean token log-probability of whole sequences --------------------------------
def mean_token_logprobs(model, tokenizer, questions: Sequence[Sequence[Sequence[int]]], device: torch.device,
                        batch_tokens: int = 8192, max_batch: int = 64, truncate: bool = False,
                        progress=None) -> list[list[float]]:  # fmt: skip
    """Mean log-probability of tokens 2..n of every option's token ids (special tokens as given), as the
    reference protocols that average a sequence's token losses do.

    Equal to running each sequence whole (tests check ≤ 1e-4 in float32), but the options of a question
    share their token prefix, which runs once, its own tokens scored once, as ``sequence_logprobs`` does:
    the mean is (the prefix's tokens after the first + the option's own tokens) / (n - 1).
    """
    limit = max_positions(model)
    tokenized = [[_check_length(ids, limit, truncate, f"token sequence of {len(ids)} ids") for ids in options] for options in questions]
    for options in tokenized:
        for ids in options:
            if len(ids) < 2:
                raise ScoringError(f"token sequence {ids} has {len(ids)} id(s): a mean token log-probability needs at least 2")
    totals = _prefix_shared_totals(model, tokenized, device, batch_tokens, max_batch, progress, count_prefix=True)
    return [[total / (len(ids) - 1) for total, ids in zip(row, options)] for row, options in zip(totals, tokenized)]


# --- masked LM: candidates at the mask ------------------------------------------------------
def candidate_ids(tokenizer, word: str) -> list[int]:
    """Token ids of a candidate word as it would appear after a space."""
    return tokenizer(" " + word, add_special_tokens=False)["input_ids"]


def _mlm_head(model):
    """The masked LM's prediction head (applied to the mask positions only), or None if it is not one module."""
    children = [module for name, module in model.named_children() if module is not model.base_model]
    return children[0] if len(children) == 1 else None


def masked_logprobs(model, tokenizer, texts: Sequence[str], candidates: Sequence[Sequence[str]], device: torch.device,
                    batch_tokens: int = 16384, max_batch: int = 128, truncate: bool = False,
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
    for text, ids in zip(texts, tokenizer([t.replace("[MASK]", tokenizer.mask_token) for t in texts])["input_ids"] if texts else []):
        ids = _mask_window(ids, ids.index(tokenizer.mask_token_id), limit, truncate, special, f"input {text[:60]!r}")
        encoded.append(ids)
        masks.append(ids.index(tokenizer.mask_token_id))
    words = sorted({w for ws in candidates for w in ws})
    word_ids = dict(zip(words, tokenizer([" " + w for w in words], add_special_tokens=False)["input_ids"] if words else []))
    cand = [[word_ids[w] for w in ws] for ws in candidates]
    head = _mlm_head(model)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def step(batch: list[int]) -> list[list[float | None]]:
        ids, attention = _pad_right([encoded[i] for i in batch], pad, device)
        where = torch.tensor([masks[i] for i in batch], device=device)
        rows = torch.arange(len(batch), device=device)
        if head is not None:
            hidden = model.base_model(input_ids=ids, attention_mask=attention).last_hidden_state
            logits = head(hidden[rows, where])
        else:
            logits = model(input_ids=ids, attention_mask=attention).logits[rows, where]
        logprobs = torch.log_softmax(logits.float(), dim=-1).cpu()
        return [[logprobs[row, c[0]].item() if len(c) == 1 else None for c in cand[i]] for row, i in enumerate(batch)]

    lengths = [len(e) for e in encoded]
    with torch.inference_mode(), _autocast(device):
        return run_batches(len(texts), lengths, step, batch_tokens, max_batch, progress,
                           batches=exact_batches(lengths, batch_tokens, max_batch))  # fmt: skip


def masked_pair_logprobs(model, tokenizer, requests: Sequence[tuple[str, str, Sequence[str]]], device: torch.device,
                         batch_tokens: int = 16384, max_batch: int = 128, truncate: bool = False,
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
    encoded, types, masks, cand = [], [], [], []
    for first, second, words in requests:
        if second.count("[MASK]") != 1:
            raise ScoringError(f"masked-LM input must hold exactly one [MASK]: {second[:80]!r}")
        pair = tokenizer(first, second.replace("[MASK]", tokenizer.mask_token), return_token_type_ids=True)
        ids = _check_length(pair["input_ids"], limit, False, f"input {first[:60]!r}")
        encoded.append(ids)
        types.append(pair.get("token_type_ids") if token_type_ids else None)
        masks.append(ids.index(tokenizer.mask_token_id))
        cand.append([tokenizer.convert_tokens_to_ids(w) for w in words])
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    unknown = None if unknown_as_unk else tokenizer.unk_token_id

    def step(batch: list[int]) -> list[list[float | None]]:
        ids, attention = _pad_right([encoded[i] for i in batch], pad, device)
        extra = {}
        if types[batch[0]] is not None:
            extra["token_type_ids"] = _pad_right([types[i] for i in batch], 0, device)[0]
        rows = torch.arange(len(batch), device=device)
        where = torch.tensor([masks[i] for i in batch], device=device)
        logits = model(input_ids=ids, attention_mask=attention, **extra).logits[rows, where]
        logprobs = torch.log_softmax(logits.float(), dim=-1).cpu()
        return [[None if c is None or c == unknown else logprobs[row, c].item() for c in cand[i]]
                for row, i in enumerate(batch)]  # fmt: skip

    lengths = [len(e) for e in encoded]
    with torch.inference_mode(), _autocast(device):
        return run_batches(len(requests), lengths, step, batch_tokens, max_batch, progress,
                           batches=exact_batches(lengths, batch_tokens, max_batch))  # fmt: skip


# --- seq2seq: log-probability of targets ----------------------------------------------------
def seq2seq_logprobs(model, tokenizer, questions: Sequence[tuple[str, Sequence[str | list[int]]]], device: torch.device,
                     batch_tokens: int = 8192, max_batch: int = 64, truncate: bool = False,
                     progress=None) -> list[list[float]]:  # fmt: skip
    """Log-probability of each target (text, or token ids) given the question's input.

    No token is padding: questions are batched by the exact length of their input, whose encoder runs
    once; the targets of a batch, grouped by exact length, run through the decoder on their question's
    encoder output (indexed per target). Every decoder position then predicts a real target token, so the
    vocabulary head runs only where a score is read.
    """
    limit = length_limit(model, tokenizer)
    texts = [text for text, _ in questions]
    inputs = [_check_length(ids, limit, truncate, f"input {text[:60]!r}")
              for text, ids in zip(texts, tokenizer(texts)["input_ids"] if texts else [])]  # fmt: skip
    # A target is text, or token ids when a protocol fixes them (e.g. PROST's T5 span: sentinel, option's first token).
    targets = [[t if isinstance(t, list) else tokenizer(t)["input_ids"] for t in options] for _, options in questions]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    start = model.config.decoder_start_token_id if model.config.decoder_start_token_id is not None else pad

    def step(batch: list[int]) -> list[list[float]]:
        encoded = model.get_encoder()(input_ids=_as_tensor([inputs[i] for i in batch], device)).last_hidden_state
        flat = [(row, o, target) for row, i in enumerate(batch) for o, target in enumerate(targets[i])]
        totals = [[0.0] * len(targets[i]) for i in batch]
        for group in exact_batches([len(target) for _, _, target in flat], batch_tokens, len(flat)):
            items = [flat[g] for g in group]
            labels = _as_tensor([target for _, _, target in items], device)
            decoder_input = torch.cat([labels.new_full((len(items), 1), start), labels[:, :-1]], dim=1)
            index = torch.tensor([row for row, _, _ in items], device=device)
            logits = model(encoder_outputs=(encoded[index],), decoder_input_ids=decoder_input).logits
            for (row, o, _), value in zip(items, _token_logprobs(logits, labels).sum(-1).tolist()):
                totals[row][o] = value
        return totals

    lengths = [len(ids) for ids in inputs]
    with torch.inference_mode(), _autocast(device):
        return run_batches(len(questions), lengths, step, batch_tokens, max_batch, progress,
                           batches=exact_batches(lengths, batch_tokens, max_batch))  # fmt: skip


# --- NLI cross-encoders and YES/NO ----------------------------------------------------------
def _label(config, prefix: str, what: str) -> int:
    """The index of the one label of ``config.id2label`` starting with ``prefix`` (case-insensitive)."""
    found = [int(i) for i, name in config.id2label.items() if str(name).lower().startswith(prefix)]
    if len(found) != 1:
        raise ScoringError(f"cannot find the {what} label in id2label={config.id2label}: this is not an NLI model")
    return found[0]


def entailment_label(config) -> int:
    """The index of the entailment label in ``config.id2label`` (case-insensitive, e.g. "ENTAILMENT")."""
    return _label(config, "entail", "entailment")


def entailment_probs(model, tokenizer, pairs: Sequence[tuple[str, str]], device: torch.device,
                     batch_tokens: int = 16384, max_batch: int = 128, progress=None,
                     reading: str = "three_way") -> list[float]:  # fmt: skip
    """P(entailment) of each (premise, hypothesis) pair over the model's labels (``"three_way"``); over
    entailment and contradiction only (``"vs_contradiction"``: transformers' zero-shot pipeline with
    ``multi_label=True``); or the raw entailment logit (``"logit"``, for a softmax across candidates)."""
    entail = entailment_label(model.config)
    columns = [_label(model.config, "contra", "contradiction"), entail] if reading == "vs_contradiction" else None
    encoded = tokenizer([p for p, _ in pairs], [h for _, h in pairs])["input_ids"] if pairs else []
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def step(batch: list[int]) -> list[float]:
        ids, attention = _pad_right([encoded[i] for i in batch], pad, device)
        logits = model(input_ids=ids, attention_mask=attention).logits.float()
        if reading == "logit":
            return logits[:, entail].tolist()
        if columns is not None:
            return torch.softmax(logits[:, columns], dim=-1)[:, 1].tolist()
        return torch.softmax(logits, dim=-1)[:, entail].tolist()

    with torch.inference_mode(), _autocast(device):
        lengths = [len(e) for e in encoded]
        return run_batches(len(pairs), lengths, step, batch_tokens, max_batch, progress,
                           batches=exact_batches(lengths, batch_tokens, max_batch))  # fmt: skip
