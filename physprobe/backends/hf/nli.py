"""The NLI engine: entailment probabilities of (premise, hypothesis) pairs from a sequence-classification model.

Pairs run in groups of near-equal length (right-padded, masked; padded only where a pass costs more than the
padding, ``batching.length_groups``) within a token budget, each batch's probabilities moved to the host once.

>>> class Config:
...     id2label = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
>>> entailment_label(Config())
2
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from physprobe.backends.hf.batching import batch_limits, grouped_batches, pad_right, pass_tokens, run_batches
from physprobe.errors import ScoringError


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
                     batch_tokens: int | None = None, max_batch: int | None = None, progress=None,
                     reading: str = "three_way") -> list[float]:  # fmt: skip
    """P(entailment) of each (premise, hypothesis) pair over the model's labels (``"three_way"``); over
    entailment and contradiction only (``"vs_contradiction"``: transformers' zero-shot pipeline with
    ``multi_label=True``); or the raw entailment logit (``"logit"``, for a softmax across candidates)."""
    entail = entailment_label(model.config)
    columns = [_label(model.config, "contra", "contradiction"), entail] if reading == "vs_contradiction" else None
    encoded = tokenizer([p for p, _ in pairs], [h for _, h in pairs])["input_ids"] if pairs else []
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    lengths = [len(e) for e in encoded]
    batch_tokens, max_batch = batch_limits(model, device, batch_tokens, max_batch, (16384, 128), logits=False)

    def step(batch: list[int]) -> list[float]:
        ids, attention = pad_right([encoded[i] for i in batch], pad, device)
        logits = model(input_ids=ids, attention_mask=attention).logits.float()
        if reading == "logit":
            return logits[:, entail].tolist()
        if columns is not None:
            return torch.softmax(logits[:, columns], dim=-1)[:, 1].tolist()
        return torch.softmax(logits, dim=-1)[:, entail].tolist()

    with torch.inference_mode():
        return run_batches(len(pairs), lengths, step, batch_tokens, max_batch, progress,
                           batches=grouped_batches(lengths, pass_tokens(model, device), batch_tokens, max_batch))  # fmt: skip
