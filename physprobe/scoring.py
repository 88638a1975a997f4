"""Scoring engines: turn model forward passes into per-option scores, as fast as the hardware allows.

- ``sequence_logprobs``: log-probability of each option's full text under a causal LM, counted from the
  first token where the options differ. The options of a question share a token prefix; it is run once
  and its key/value cache reused for every option, which equals scoring each full sequence separately
  (tests check ≤ 1e-4 in float32). The shared part adds the same constant to every option's total, so
  the ranking is that of the whole sentence's log-probability (PROST's "highest total probability").
- ``masked_logprobs``: log-probabilities of candidate words at the mask, one forward pass per text, the
  vocabulary projection applied at the mask position only.
- ``seq2seq_logprobs``: log-probability of each target (text or token ids) given its input (T5-style).
- ``mean_token_logprobs``: mean log-probability of the tokens of whole token-id sequences (each
  token after the first predicted), as PROST's released GPT code averages token losses.
- ``entailment_probs``: NLI entailment probability of (premise, hypothesis) pairs.
- ``yes_probs``: P(YES) / (P(YES) + P(NO)) of the answer after a prompt.

All run under ``torch.inference_mode``, in length-sorted batches, with bf16 autocast on CUDA, and halve
the batch on out-of-memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch

from physprobe.errors import PhysprobeError


class ScoringError(PhysprobeError):
    """A model or tokenizer cannot do what the method needs (no mask token, input too long, ...)."""


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


def run_batches(n_items: int, lengths: Sequence[int], step: Callable[[list[int]], list], batch_tokens: int,
                max_batch: int, progress=None) -> list:  # fmt: skip
    """Apply ``step`` to length-sorted batches; on CUDA out-of-memory halve the budget and retry."""
    results: list = [None] * n_items
    pending = list(batched(lengths, batch_tokens, max_batch))
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


def length_limit(model, tokenizer) -> int | None:
    """The longest input the model takes: the tokenizer's ``model_max_length`` and the model config's
    position table (less RoBERTa-style position offsets), whichever is smaller; None when neither says."""
    limits = [tokenizer.model_max_length] if tokenizer.model_max_length < 1e9 else []
    positions = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    if positions:
        offset = getattr(getattr(model.base_model, "embeddings", None), "padding_idx", None)  # RoBERTa counts from pad + 1
        limits.append(positions - (offset + 1 if isinstance(offset, int) else 0))
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
def tokenize_options(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text, with the model's BOS token first when it has one (so the first word is scored)."""
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    return [bos + tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


def common_prefix(sequences: Sequence[Sequence[int]]) -> int:
    """Length of the longest token prefix all sequences share, leaving each at least one token.

    >>> common_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]])
    2
    """
    shortest = min(len(s) for s in sequences) - 1
    n = 0
    while n < shortest and all(s[n] == sequences[0][n] for s in sequences):
        n += 1
    return max(n, 1)


def sequence_logprobs(model, tokenizer, questions: Sequence[Sequence[str]], device: torch.device,
                      batch_tokens: int = 8192, max_batch: int = 64, truncate: bool = False,
                      progress=None) -> list[list[float]]:  # fmt: skip
    """Total log-probability of every option text of every question (tokens after the first)."""
    limit = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    tokenized = []
    for texts in questions:
        ids = [_check_length(s, limit, truncate, f"option text {t[:60]!r}") for s, t in zip(tokenize_options(tokenizer, texts), texts)]
        tokenized.append(ids)
    lengths = [max(len(s) for s in ids) * len(ids) for ids in tokenized]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def step(batch: list[int]) -> list[list[float]]:
        return _shared_prefix_batch(model, [tokenized[i] for i in batch], pad, device)

    with torch.inference_mode(), _autocast(device):
        return run_batches(len(questions), lengths, step, batch_tokens, max_batch, progress)


def _shared_prefix_batch(model, groups: list[list[list[int]]], pad: int, device: torch.device) -> list[list[float]]:
    prefix_lengths = [common_prefix(options) for options in groups]
    width = max(prefix_lengths)
    # Prefixes, left-padded so that every prefix ends at the same column.
    prefix_ids = torch.full((len(groups), width), pad, dtype=torch.long)
    prefix_mask = torch.zeros((len(groups), width), dtype=torch.long)
    for row, (options, n) in enumerate(zip(groups, prefix_lengths)):
        prefix_ids[row, width - n :] = torch.tensor(options[0][:n])
        prefix_mask[row, width - n :] = 1
    prefix_ids, prefix_mask = prefix_ids.to(device), prefix_mask.to(device)
    positions = (prefix_mask.cumsum(-1) - 1).clamp(min=0)
    out = _forward(model, 1, input_ids=prefix_ids, attention_mask=prefix_mask, position_ids=positions, use_cache=True)
    first_next = torch.log_softmax(out.logits[:, -1].float(), dim=-1)  # predicts each option's first own token
    counts = [len(options) for options in groups]
    # The question of every option row (questions may have different option counts).
    index = torch.repeat_interleave(torch.arange(len(groups), device=device), torch.tensor(counts, device=device))
    cache = out.past_key_values
    suffixes = [options_seq[n:] for options, n in zip(groups, prefix_lengths) for options_seq in options]
    # Each option's first own token is predicted by the prefix's last position: for one-token options
    # (e.g. " A" ... " D") no further pass is needed at all.
    first = torch.tensor([s[0] for s in suffixes], device=device)
    totals = first_next[index].gather(-1, first.unsqueeze(-1)).squeeze(-1)
    longer = [row for row, s in enumerate(suffixes) if len(s) > 1]
    if longer and len(set(counts)) == 1:
        # Same number of options everywhere (one config): run option k of every question on the shared
        # prefix cache, then crop the cache back — no copy of the prefix per option.
        k_options = counts[0]
        for k in range(k_options):
            rows = [q * k_options + k for q in range(len(groups))]
            if all(len(suffixes[r]) == 1 for r in rows):
                continue
            totals[torch.tensor(rows, device=device)] += _remaining(model, cache, [suffixes[r] for r in rows], prefix_mask,
                                                                     positions, pad, device)  # fmt: skip
            cache.crop(-(cache.get_seq_length() - width))
    elif longer:
        # Ragged option counts: repeat each question's cache for its longer options.
        selected = index[torch.tensor(longer, device=device)]
        cache.batch_select_indices(selected)
        totals[torch.tensor(longer, device=device)] += _remaining(model, cache, [suffixes[r] for r in longer],
                                                                  prefix_mask[selected], positions[selected], pad, device)  # fmt: skip
    totals = totals.tolist()
    scores, start = [], 0
    for count in counts:
        scores.append(totals[start : start + count])
        start += count
    return scores


def _remaining(model, cache, suffixes: list[list[int]], prefix_mask, positions, pad: int, device) -> torch.Tensor:
    """Log-probability of each suffix's tokens after its first, on top of ``cache`` (one row per suffix).

    All but the last suffix token are fed; a one-token suffix gets an empty, fully masked row.
    """
    width = max(len(s) - 1 for s in suffixes)
    ids = torch.full((len(suffixes), width), pad, dtype=torch.long)
    mask = torch.zeros((len(suffixes), width), dtype=torch.long)
    targets = torch.zeros((len(suffixes), width), dtype=torch.long)
    for row, suffix in enumerate(suffixes):
        n = len(suffix) - 1
        if n:
            ids[row, :n] = torch.tensor(suffix[:-1])
            mask[row, :n] = 1
            targets[row, :n] = torch.tensor(suffix[1:])
    ids, mask, targets = ids.to(device), mask.to(device), targets.to(device)
    full_mask = torch.cat([prefix_mask, mask], dim=1)
    logits = model(input_ids=ids, attention_mask=full_mask, position_ids=positions[:, -1:] + mask.cumsum(-1),
                   past_key_values=cache).logits  # fmt: skip
    logprobs = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (logprobs * mask).sum(-1)


def _forward(model, keep: int, **inputs):
    """A forward pass computing vocabulary logits for the last ``keep`` positions only, where the model allows."""
    try:
        return model(**inputs, logits_to_keep=keep)
    except TypeError:  # architectures without logits_to_keep compute them all
        return model(**inputs)


# --- causal LM: mean token log-probability of whole sequences --------------------------------
def mean_token_logprobs(model, tokenizer, questions: Sequence[Sequence[Sequence[int]]], device: torch.device,
                        batch_tokens: int = 8192, max_batch: int = 64, truncate: bool = False,
                        progress=None) -> list[list[float]]:  # fmt: skip
    """Mean log-probability of tokens 2..n of every option's token ids (special tokens as given).

    Kept apart from ``sequence_logprobs``: no shared prefix, every sequence runs whole, as the
    reference protocols that average a sequence's token losses do.
    """
    limit = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    flat = [_check_length(ids, limit, truncate, f"token sequence of {len(ids)} ids") for options in questions for ids in options]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def step(batch: list[int]) -> list[float]:
        ids, mask = _pad_right([flat[i] for i in batch], pad, device)
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        logprobs = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        predicted = mask[:, 1:]
        return ((logprobs * predicted).sum(-1) / predicted.sum(-1)).tolist()

    with torch.inference_mode(), _autocast(device):
        values = run_batches(len(flat), [len(s) for s in flat], step, batch_tokens, max_batch)
    if progress is not None:
        progress.update(len(questions))
    out, at = [], 0
    for options in questions:
        out.append(values[at : at + len(options)])
        at += len(options)
    return out


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
    encoded, masks, cand = [], [], []
    for text, words in zip(texts, candidates):
        if text.count("[MASK]") != 1:
            raise ScoringError(f"masked-LM input must hold exactly one [MASK]: {text[:80]!r}")
        ids = tokenizer(text.replace("[MASK]", tokenizer.mask_token))["input_ids"]
        ids = _mask_window(ids, ids.index(tokenizer.mask_token_id), limit, truncate, special, f"input {text[:60]!r}")
        encoded.append(ids)
        masks.append(ids.index(tokenizer.mask_token_id))
        cand.append([candidate_ids(tokenizer, w) for w in words])
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

    with torch.inference_mode(), _autocast(device):
        return run_batches(len(texts), [len(e) for e in encoded], step, batch_tokens, max_batch, progress)


def masked_pair_logprobs(model, tokenizer, requests: Sequence[tuple[str, str, Sequence[str]]], device: torch.device,
                         batch_tokens: int = 16384, max_batch: int = 128, truncate: bool = False,
                         progress=None) -> list[list[float | None]]:  # fmt: skip
    """Log-probability of candidate tokens at the ``[MASK]`` of a sentence pair ``(first, second, words)``.

    The pair is encoded as one, ``tokenizer(first, second)`` (segment ids included), and each word is
    looked up as one vocabulary entry, ``convert_tokens_to_ids(word)`` — as Text2Afford's released
    ``src/probing.py`` does; a word outside the vocabulary gets None.
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
        types.append(pair.get("token_type_ids"))
        masks.append(ids.index(tokenizer.mask_token_id))
        cand.append([tokenizer.convert_tokens_to_ids(w) for w in words])
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    unknown = tokenizer.unk_token_id

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

    with torch.inference_mode(), _autocast(device):
        return run_batches(len(requests), [len(e) for e in encoded], step, batch_tokens, max_batch, progress)


# --- seq2seq: log-probability of targets ----------------------------------------------------
def seq2seq_logprobs(model, tokenizer, questions: Sequence[tuple[str, Sequence[str]]], device: torch.device,
                     batch_tokens: int = 8192, max_batch: int = 64, truncate: bool = False,
                     progress=None) -> list[list[float]]:  # fmt: skip
    """Log-probability of each target text given the question's input; the encoder runs once per question."""
    limit = length_limit(model, tokenizer)
    inputs = [_check_length(tokenizer(text)["input_ids"], limit, truncate, f"input {text[:60]!r}") for text, _ in questions]
    # A target is text, or token ids when a protocol fixes them (e.g. PROST's T5 span: sentinel, option's first token).
    targets = [[t if isinstance(t, list) else tokenizer(t)["input_ids"] for t in options] for _, options in questions]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    start = model.config.decoder_start_token_id if model.config.decoder_start_token_id is not None else pad

    def step(batch: list[int]) -> list[list[float]]:
        ids, attention = _pad_right([inputs[i] for i in batch], pad, device)
        encoded = model.get_encoder()(input_ids=ids, attention_mask=attention).last_hidden_state
        counts = [len(targets[i]) for i in batch]
        index = torch.repeat_interleave(torch.arange(len(batch), device=device), torch.tensor(counts, device=device))
        flat = [t for i in batch for t in targets[i]]
        labels, t_mask = _pad_right(flat, pad, device)
        decoder_input = torch.cat([torch.full((len(flat), 1), start, device=device), labels[:, :-1]], dim=1)
        out = model(encoder_outputs=(encoded[index],), attention_mask=attention[index], decoder_input_ids=decoder_input)
        logprobs = torch.log_softmax(out.logits.float(), dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
        totals = (logprobs * t_mask).sum(-1).tolist()
        result, at = [], 0
        for count in counts:
            result.append(totals[at : at + count])
            at += count
        return result

    with torch.inference_mode(), _autocast(device):
        lengths = [len(inputs[i]) * len(targets[i]) for i in range(len(questions))]
        return run_batches(len(questions), lengths, step, batch_tokens, max_batch, progress)


# --- NLI cross-encoders and YES/NO ----------------------------------------------------------
def _label(config, prefix: str) -> int:
    found = [int(i) for i, name in config.id2label.items() if str(name).lower().startswith(prefix)]
    if len(found) != 1:
        raise ScoringError(f"cannot find a {prefix}... label in id2label={config.id2label}: this is not an NLI model")
    return found[0]


def entailment_label(config) -> int:
    """The index of the entailment label in ``config.id2label`` (case-insensitive, e.g. "ENTAILMENT")."""
    found = [int(i) for i, name in config.id2label.items() if str(name).lower().startswith("entail")]
    if len(found) != 1:
        raise ScoringError(f"cannot find the entailment label in id2label={config.id2label}: this is not an NLI model")
    return found[0]


def entailment_probs(model, tokenizer, pairs: Sequence[tuple[str, str]], device: torch.device,
                     batch_tokens: int = 16384, max_batch: int = 128, progress=None,
                     reading: str = "three_way") -> list[float]:  # fmt: skip
    """P(entailment) of each (premise, hypothesis) pair over the model's labels (``"three_way"``); over
    entailment and contradiction only (``"vs_contradiction"``: transformers' zero-shot pipeline with
    ``multi_label=True``); or the raw entailment logit (``"logit"``, for a softmax across candidates)."""
    entail = entailment_label(model.config)
    columns = [_label(model.config, "contra"), entail] if reading == "vs_contradiction" else None
    encoded = [tokenizer(p, h)["input_ids"] for p, h in pairs]
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
        return run_batches(len(pairs), [len(e) for e in encoded], step, batch_tokens, max_batch, progress)


def yes_probs(model, tokenizer, prompts: Sequence[str], device: torch.device, seq2seq: bool = False,
              batch_tokens: int = 16384, max_batch: int = 128, progress=None) -> list[float]:  # fmt: skip
    """P(YES) / (P(YES) + P(NO)) of the answer after each prompt, as a continuous score."""
    if seq2seq:
        scores = seq2seq_logprobs(model, tokenizer, [(p, ["YES", "NO"]) for p in prompts], device, batch_tokens=batch_tokens,
                                  max_batch=max_batch, progress=progress)  # fmt: skip
    else:
        scores = sequence_logprobs(model, tokenizer, [[f"{p} YES", f"{p} NO"] for p in prompts], device, batch_tokens=batch_tokens,
                                   max_batch=max_batch, progress=progress)  # fmt: skip
    return [float(torch.softmax(torch.tensor(pair), dim=0)[0]) for pair in scores]
