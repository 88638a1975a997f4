"""Generation-based scoring: batched greedy decoding of each prompt's answer, cut at the first stop string.

A causal model's batch of prompts runs its shared token prefix once (a chat template's system turn), then
the prompts' own tokens in groups of near-equal length (padding within a tenth of their tokens: fewer passes);
their key/value caches join one decoding batch, left-padded (masked), in buffers each step writes in place,
and each row leaves the batch as soon as its answer is done: its stop string has appeared (after the answer's leading blank lines, as ``cut``
reads it), or EOS, or its token budget. Seq2seq models (and causal models whose cache is not a plain
``DynamicCache``) read left-padded prompts in ``model.generate``, which stops once every row of the batch is
done. The answer text is returned as generated (special tokens dropped, cut before the first stop string);
a protocol's ``match`` turns it into an option, or None (``unparsed``).

>>> cut("(B) ball\\nQuestion: next", ["\\n"])
'(B) ball'
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from transformers import StoppingCriteria, StoppingCriteriaList

from physprobe.backends.hf.scoring import (
    _as_tensor,
    _autocast,
    _cache_layers,
    _check_length,
    _forward,
    filled_cache,
    max_positions,
    run_batches,
    shared_length,
)


def cut(text: str, stop: Sequence[str]) -> str:
    """``text`` up to (not including) the earliest of the ``stop`` strings after its leading whitespace: an
    answer that opens with a blank line, as completion models' answers often do, is not cut to nothing.

    >>> cut("yes. And more", [".", "\\n"]), cut("no stop here", []), cut("\\n\\nA box.\\nQ: next", ["\\n"])
    ('yes', 'no stop here', '\\n\\nA box.')
    """
    start = len(text) - len(text.lstrip())
    ends = [end for end in (text.find(s, start) for s in stop if s) if end >= 0]
    return text[: min(ends)] if ends else text


def stopped(text: str, stop: Sequence[str]) -> bool:
    """Whether ``text`` holds one of the ``stop`` strings where ``cut`` looks for them (so more tokens
    cannot change the cut answer).

    >>> stopped("\\n\\nA box", ["\\n"]), stopped("\\n\\nA box.\\n", ["\\n"]), stopped("A box", [])
    (False, True, False)
    """
    return len(cut(text, stop)) < len(text)


class _StopStrings(StoppingCriteria):
    """``model.generate``'s per-row criterion: the row's answer (tokens from column ``start``) has ``stopped``."""

    def __init__(self, tokenizer, stops: list[Sequence[str]], start: int):
        self.tokenizer, self.stops, self.start = tokenizer, stops, start

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        texts = self.tokenizer.batch_decode(input_ids[:, self.start :], skip_special_tokens=True)
        return torch.tensor([stopped(t, s) for t, s in zip(texts, self.stops)], device=input_ids.device)


def _left_padded(sequences: Sequence[Sequence[int]], pad: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        if sequence:
            ids[row, width - len(sequence) :] = torch.tensor(sequence, dtype=torch.long)
            mask[row, width - len(sequence) :] = 1
    return ids.to(device), mask.to(device)


def prompt_groups(lengths: Sequence[int], slack: float = 0.1) -> list[list[int]]:
    """Rows by decreasing length, cut into groups that each run as one pass: a group takes the next (shorter)
    prompt while the padding its shorter rows need stays within ``slack`` of its own tokens (one pass of a few
    padded rows costs less than a pass per length; padding ``slack`` = 0: one group per exact length).

    >>> prompt_groups([30, 10, 29, 31, 12]), prompt_groups([30, 29], slack=0)
    ([[3, 0, 2], [4, 1]], [[0], [1]])
    """
    groups: list[list[int]] = []
    tokens = padding = 0
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if groups:
            extra = lengths[groups[-1][0]] - lengths[index]
            if padding + extra <= slack * (tokens + lengths[index]):
                groups[-1].append(index)
                tokens, padding = tokens + lengths[index], padding + extra
                continue
        groups.append([index])
        tokens, padding = lengths[index], 0
    return groups


def _prompt_caches(model, prompts: list[list[int]], device: torch.device):
    """Yield each group of prompts (``prompt_groups``) as its rows, their keys/values per layer (left-padded
    to the group's longest prompt), which of those positions are real (1) or padding (0), and each row's first
    answer token. The prompts' shared token prefix (a chat template's system turn, an instruction) runs
    once, each group's own tokens on copies of its cache. Yields ``(rows, None, None, None)`` and stops when
    the model's cache is not a plain ``DynamicCache``."""
    shared = shared_length(prompts) if len(prompts) > 1 else 0
    prefix: list[tuple[torch.Tensor, torch.Tensor]] | None = []
    if shared:
        prefix = _cache_layers(_forward(model, 1, input_ids=_as_tensor([prompts[0][:shared]], device), use_cache=True).past_key_values)
    for rows in prompt_groups([len(p) - shared for p in prompts]):
        if prefix is None:
            yield rows, None, None, None
            return
        own, real = _left_padded([prompts[r][shared:] for r in rows], 0, device)
        padded = not bool(real.all())
        width = own.shape[1]
        positions = shared + (torch.arange(width, device=device)[None] - (width - real.sum(1, keepdim=True))).clamp(min=0)
        real = torch.cat([real.new_ones((len(rows), shared)), real], dim=1)
        cache = filled_cache(*_repeated(prefix, len(rows), width), shared) if prefix else None
        out = _forward(model, 1, input_ids=own, past_key_values=cache, use_cache=True,
                       position_ids=positions if prefix or padded else None, attention_mask=real if padded else None)  # fmt: skip
        layers = _cache_layers(out.past_key_values) if cache is None else [(layer.keys, layer.values) for layer in cache.layers]
        yield rows, layers, real, out.logits[:, -1].argmax(-1)


def _repeated(prefix: list[tuple[torch.Tensor, torch.Tensor]], rows: int, room: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per layer, key and value buffers of ``rows`` rows, each starting with the one-row ``prefix``'s
    keys/values, with ``room`` positions after it."""
    buffers: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])
    for layer in prefix:
        for tensor, out in zip(layer, buffers):
            buffer = tensor.new_empty((rows, tensor.shape[1], tensor.shape[2] + room, tensor.shape[3]))
            buffer[:, :, : tensor.shape[2]] = tensor
            out.append(buffer)
    return buffers


def _greedy(model, prompts: list[list[int]], budget: int, done, eos: int | None, device: torch.device) -> list[list[int]] | None:
    """The greedy answer tokens of causal ``prompts`` (up to EOS); None when the model's cache is not a
    plain ``DynamicCache`` (this layout cannot be built from it).

    Prompts run in groups of near-equal length (``prompt_groups``; their shared prefix once); their caches go,
    left-padded, into one table per layer with room for ``budget`` more tokens, where each decoding step
    writes its keys and values in place (``filled_cache``); a token per row per step, rows leaving the batch
    once ``done(row, tokens)`` or EOS or ``budget`` ends them.
    """
    lengths = [len(p) for p in prompts]
    width, n = max(lengths), len(prompts)
    keys: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    tokens = torch.zeros(n, dtype=torch.long, device=device)
    mask = torch.ones((n, width + budget), dtype=torch.long, device=device)  # the answer's columns: 1
    mask[:, :width] = 0
    for rows, layers, real, first in _prompt_caches(model, prompts, device):
        if layers is None:
            return None
        if not keys:
            keys = [k.new_zeros((n, k.shape[1], width + budget, k.shape[3])) for k, _ in layers]
            values = [v.new_zeros((n, v.shape[1], width + budget, v.shape[3])) for _, v in layers]
        where = torch.tensor(rows, device=device)
        start = width - real.shape[1]
        for layer, (k, v) in enumerate(layers):
            keys[layer][where, :, start:width] = k
            values[layer][where, :, start:width] = v
        mask[where, start:width] = real
        tokens[where] = first
    cache = filled_cache(keys, values, width)
    position = torch.tensor(lengths, device=device)
    answers: list[list[int]] = [[] for _ in prompts]
    alive = list(range(n))  # the request row of each batch row
    while True:
        for row, token in zip(alive, tokens.tolist()):
            answers[row].append(token)
        keep = [j for j, row in enumerate(alive)
                if answers[row][-1] != eos and len(answers[row]) < budget and not done(row, answers[row])]  # fmt: skip
        if not keep:
            break
        if len(keep) < len(alive):  # finished rows leave the batch
            select = torch.tensor(keep, device=device)
            cache.batch_select_indices(select)
            tokens, position, mask = tokens[select], position[select], mask[select]
            alive = [alive[j] for j in keep]
        seen = cache.get_seq_length() + 1
        logits = _forward(model, 1, input_ids=tokens[:, None], attention_mask=mask[:, :seen], position_ids=position[:, None],
                          past_key_values=cache).logits  # fmt: skip
        tokens = logits[:, -1].argmax(-1)
        position = position + 1
    return answers


def generate(model, tokenizer, requests: Sequence[dict], device: torch.device, seq2seq: bool = False,
             batch_tokens: int = 8192, max_batch: int = 128, truncate: bool = False, progress=None,
             chat: bool = False) -> list[str]:  # fmt: skip
    """The greedy answer to each request (``{"prompt", "max_new_tokens", "stop"}``), in request order.

    A prompt is encoded as the tokenizer encodes it (its special tokens included), unless ``chat``: a prompt
    rendered by a chat template carries its own.

    Requests are batched by length (and by ``max_new_tokens``); on CUDA out-of-memory the batch halves.
    """
    # Prompts are encoded as the tokenizer encodes them, its special tokens included (a BOS only where the
    # tokenizer adds one), as the released scripts' pipelines and generate calls do; a prompt a chat template
    # rendered carries its special tokens already, so none are added to it.
    limit = (tokenizer.model_max_length if tokenizer.model_max_length < 1e9 else None) if seq2seq else max_positions(model)
    encoded = [tokenizer(r["prompt"], add_special_tokens=not chat)["input_ids"] for r in requests]
    encoded = [  # a causal model's prompt leaves room for the answer
        _check_length(ids, limit if seq2seq or limit is None else limit - r["max_new_tokens"], truncate, f"prompt {r['prompt'][:60]!r}")
        for ids, r in zip(encoded, requests)
    ]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    eos = tokenizer.eos_token_id
    texts: list[str] = [""] * len(requests)
    by_budget: dict[int, list[int]] = {}
    for index, request in enumerate(requests):
        by_budget.setdefault(request["max_new_tokens"], []).append(index)

    for budget, members in sorted(by_budget.items()):

        def step(batch: list[int], budget=budget, members=members) -> list[str]:
            chosen = [members[i] for i in batch]
            stops = [requests[i]["stop"] for i in chosen]

            def done(row: int, tokens: list[int]) -> bool:
                return bool(stops[row]) and stopped(tokenizer.decode(tokens, skip_special_tokens=True), stops[row])

            answers = None if seq2seq else _greedy(model, [encoded[i] for i in chosen], budget, done, eos, device)
            if answers is None:
                ids, attention = _left_padded([encoded[i] for i in chosen], pad, device)
                start = 0 if seq2seq else ids.shape[1]
                out = model.generate(input_ids=ids, attention_mask=attention, max_new_tokens=budget, do_sample=False,
                                     num_beams=1, pad_token_id=pad, eos_token_id=eos,
                                     stopping_criteria=StoppingCriteriaList([_StopStrings(tokenizer, stops, start)]))  # fmt: skip
                answers = out[:, start:]
            decoded = tokenizer.batch_decode(answers, skip_special_tokens=True)
            return [cut(text, stop) for text, stop in zip(decoded, stops)]

        with torch.inference_mode(), _autocast(device):
            answers = run_batches(len(members), [len(encoded[i]) + budget for i in members], step,
                                  batch_tokens, max_batch, progress)  # fmt: skip
        for index, answer in zip(members, answers):
            texts[index] = answer
    return texts
