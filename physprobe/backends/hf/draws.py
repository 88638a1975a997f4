"""Seeded sampling: each answer's next token drawn from its own random generator, so that a row's random numbers depend
on its seed alone, never on the batch it shares, the order of the batches or the global random state. The logits they
are compared with may still differ in their last bits between batch shapes, which moves a draw that falls near the
boundary between two tokens: a sampled answer depends on the batch size too (docs/scoring.md).

A decoding batch's logits go through transformers' own warpers (temperature, then top-k, then top-p, as
``model.generate(do_sample=True)`` applies them); each row then draws one uniform number from its generator (a CPU
``torch.Generator`` seeded with the row's seed, ``physprobe.protocols.decoding.sample_seed``) and takes the token where
the cumulative probability passes it. A row draws one number per step of its own answer, whatever else runs beside
it. ``SeededDraws.processor`` is the same draw as a logits processor for ``model.generate`` (greedy search then takes
the drawn token), where a model's generation config needs ``generate``'s own processors.

>>> import torch
>>> from physprobe.protocols.decoding import Decoding
>>> draws = SeededDraws(Decoding.sampling("demo", top_k=2), seeds=[7, 8])
>>> logits = torch.tensor([[0.0, 1.0, 2.0, -9.0], [0.0, 1.0, 2.0, -9.0]])
>>> tokens = draws.pick(logits, [0, 1])
>>> [t in (1, 2) for t in tokens.tolist()]  # top-k 2 leaves tokens 1 and 2
[True, True]
>>> again = SeededDraws(Decoding.sampling("demo", top_k=2), seeds=[7, 8])
>>> again.pick(logits[1:], [1]).tolist() == tokens[1:].tolist()  # row 1 alone draws what it drew beside row 0
True
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor, LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from physprobe.protocols.decoding import Decoding


class SeededDraws:
    """The sampled next tokens of a batch's rows, row ``i`` drawing from a generator seeded with ``seeds[i]``."""

    def __init__(self, decoding: Decoding, seeds: list[int]):
        self.decoding, self.seeds = decoding, seeds
        warpers = []
        if decoding.temperature != 1.0:
            warpers.append(TemperatureLogitsWarper(decoding.temperature))
        if decoding.top_k > 0:
            warpers.append(TopKLogitsWarper(decoding.top_k))
        if decoding.top_p < 1.0:
            warpers.append(TopPLogitsWarper(decoding.top_p))
        self.warpers = LogitsProcessorList(warpers)
        self.generators = [torch.Generator().manual_seed(seed) for seed in seeds]

    def pick(self, logits: torch.Tensor, rows: list[int]) -> torch.Tensor:
        """One token per row of ``logits`` (rows x vocabulary; batch row ``j`` is row ``rows[j]``), drawn from the
        warped distribution with that row's generator."""
        scores = self.warpers(None, logits.float())
        probabilities = torch.softmax(scores, dim=-1)
        cumulative = probabilities.cumsum(dim=-1)
        uniform = torch.stack([torch.rand((), generator=self.generators[row], dtype=torch.float64) for row in rows])
        threshold = (uniform.to(cumulative.device) * cumulative[:, -1].double()).to(cumulative.dtype)
        tokens = torch.searchsorted(cumulative, threshold[:, None], right=True)[:, 0]
        # A threshold at the very top (rounding) lands past the last token: take the last one still possible.
        last = (probabilities > 0).cumsum(dim=-1).argmax(dim=-1)
        return torch.minimum(tokens, last)

    def processor(self, rows: list[int]) -> LogitsProcessor:
        """A ``model.generate`` logits processor drawing for batch rows ``rows``: every token but the drawn one -inf."""
        return _Drawn(self, rows)


class _Drawn(LogitsProcessor):
    def __init__(self, draws: SeededDraws, rows: list[int]):
        self.draws, self.rows = draws, rows

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        tokens = self.draws.pick(scores, self.rows)
        out = torch.full_like(scores, -float("inf"))
        out.scatter_(1, tokens[:, None], 0.0)
        return out
