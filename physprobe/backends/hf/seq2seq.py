"""The seq2seq engine: log-probability of each target (text or token ids) given its question's input (T5-style).

Questions run in groups of near-equal input length (right-padded, masked; padded only where a pass costs more than
the padding, ``batching.length_groups``), within a token budget: the encoder runs once per question, then every
target of the batch in one decoder pass on its question's encoder output, right-padded (a causal decoder's real
positions never see the padding after them), its padded positions left out of the sums. The sums are gathered on the
device and moved to the host once per batch.
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
    token_logprobs,
)
from physprobe.protocols import tokenized


def seq2seq_logprobs(model, tokenizer, questions: Sequence[tuple[str, Sequence[str | list[int]]]], device: torch.device,
                     batch_tokens: int | None = None, max_batch: int | None = None, truncate: bool = False,
                     progress=None) -> list[list[float]]:  # fmt: skip
    """Log-probability of each target (text, or token ids) given the question's input."""
    limit = length_limit(model, tokenizer)
    texts = [text for text, _ in questions]
    inputs = [check_length(ids, limit, truncate, f"input {text[:60]!r}")
              for text, ids in zip(texts, tokenizer(texts)["input_ids"] if texts else [], strict=True)]  # fmt: skip
    # A target is text, or token ids when a protocol fixes them (e.g. PROST's T5 span: sentinel, option's first token).
    texts = iter(
        tokenized.encoded(tokenizer, [t for _, options in questions for t in options if not isinstance(t, list)], special=True)
    )
    targets = [[t if isinstance(t, list) else next(texts) for t in options] for _, options in questions]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    start = model.config.decoder_start_token_id if model.config.decoder_start_token_id is not None else pad
    lengths = [len(ids) + sum(map(len, options)) for ids, options in zip(inputs, targets, strict=True)]
    batch_tokens, max_batch = batch_limits(model, device, batch_tokens, max_batch, (8192, 64))

    def step(batch: list[int]) -> list[list[float]]:
        ids, attention = pad_right([inputs[i] for i in batch], pad, device)
        encoded = model.get_encoder()(input_ids=ids, attention_mask=attention).last_hidden_state
        flat = [(row, target) for row, i in enumerate(batch) for target in targets[i]]
        labels, real = pad_right([target for _, target in flat], pad, device)
        decoder_input = torch.cat([labels.new_full((len(flat), 1), start), labels[:, :-1]], dim=1)
        index = torch.tensor([row for row, _ in flat], device=device)
        logits = model(encoder_outputs=(encoded[index],), attention_mask=attention[index], decoder_input_ids=decoder_input).logits
        sums = iter((token_logprobs(logits, labels) * real).sum(-1).tolist())
        return [[next(sums) for _ in targets[i]] for i in batch]

    with torch.inference_mode():
        return run_batches(len(questions), lengths, step, batch_tokens, max_batch, progress,
                           batches=grouped_batches([len(ids) for ids in inputs], pass_tokens(model, device), batch_tokens, max_batch))  # fmt: skip
