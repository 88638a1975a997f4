"""Generation-based scoring: batched greedy decoding of each prompt's answer, cut at the first stop string.

Prompts are encoded as the tokenizer encodes them (its special tokens, and no others). Causal models
read them left-padded (so every prompt ends at the same column and the new tokens follow it); seq2seq
models read the prompt in the encoder. The answer text is returned as generated
(special tokens dropped, cut before the first stop string); a protocol's ``match`` turns it into an
option, or None (``unparsed``).

>>> cut("(B) ball\\nQuestion: next", ["\\n"])
'(B) ball'
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from physprobe.scoring import _autocast, _check_length, positions, run_batches


def cut(text: str, stop: Sequence[str]) -> str:
    """``text`` up to (not including) the earliest of the ``stop`` strings after its leading whitespace: an
    answer that opens with a blank line, as completion models' answers often do, is not cut to nothing.

    >>> cut("yes. And more", [".", "\\n"]), cut("no stop here", []), cut("\\n\\nA box.\\nQ: next", ["\\n"])
    ('yes', 'no stop here', '\\n\\nA box.')
    """
    start = len(text) - len(text.lstrip())
    ends = [end for end in (text.find(s, start) for s in stop if s) if end >= 0]
    return text[: min(ends)] if ends else text


def _left_padded(sequences: Sequence[Sequence[int]], pad: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        if sequence:
            ids[row, width - len(sequence) :] = torch.tensor(sequence, dtype=torch.long)
            mask[row, width - len(sequence) :] = 1
    return ids.to(device), mask.to(device)


def generate(model, tokenizer, requests: Sequence[dict], device: torch.device, seq2seq: bool = False,
             batch_tokens: int = 8192, max_batch: int = 32, truncate: bool = False, progress=None) -> list[str]:  # fmt: skip
    """The greedy answer to each request (``{"prompt", "max_new_tokens", "stop"}``), in request order.

    Requests are batched by length (and by ``max_new_tokens``); on CUDA out-of-memory the batch halves.
    """
    # Prompts are encoded as the tokenizer encodes them, special tokens included (a BOS only where the
    # tokenizer adds one), as the released scripts' pipelines and generate calls do (issue 20, item 3).
    limit = (tokenizer.model_max_length if tokenizer.model_max_length < 1e9 else None) if seq2seq else positions(model)
    encoded = [tokenizer(r["prompt"])["input_ids"] for r in requests]
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
            ids, attention = _left_padded([encoded[i] for i in chosen], pad, device)
            out = model.generate(input_ids=ids, attention_mask=attention, max_new_tokens=budget, do_sample=False,
                                 num_beams=1, pad_token_id=pad, eos_token_id=eos)  # fmt: skip
            new = out if seq2seq else out[:, ids.shape[1] :]
            decoded = tokenizer.batch_decode(new, skip_special_tokens=True)
            return [cut(text, requests[i]["stop"]) for text, i in zip(decoded, chosen)]

        with torch.inference_mode(), _autocast(device):
            answers = run_batches(len(members), [len(encoded[i]) + budget for i in members], step,
                                  batch_tokens, max_batch, progress)  # fmt: skip
        for index, answer in zip(members, answers):
            texts[index] = answer
    return texts
