"""What every decoding loop of the hf engine shares: its progress at the grain of steps (``Shares``), how often the
steps' tokens are copied to the host (``sync_every``), a step's attention mask (``step_mask``) and how a step takes
each row's token (``picker``: the argmax, or a seeded draw).

>>> sync_every(torch.device("cpu")), sync_every(torch.device("cuda"))
(1, 8)
>>> picker(None)(torch.tensor([[0.0, 2.0, 1.0]]), [0]).tolist()
[1]
"""

from __future__ import annotations

import torch

from physprobe.backends.hf.attention import custom_mask, takes_custom_masks
from physprobe.backends.hf.draws import SeededDraws
from physprobe.protocols.requests import prompt_steps


class Shares:
    """A decoding run's progress at the grain of its steps: each row is one request (``update(1)`` in all), of which
    its prompt's pass counts as the steps it costs (``prompt_steps``: one, and a quarter of one a token, as
    a card's time left weighs it) and each answer token as one more, out of those and its token budget; a row is
    complete when its answer ends. So a count moves once the prompts have run, by what their pass cost, and then
    with every step, in proportion to the steps left (what takes the time), not once per batch of answers. A row
    that ends before its budget spares the share of it that its unused tokens make up (``spare``), so that a time
    left paces the tokens truly generated. ``progress`` is the engine's counter (``update(n)``, ``spare(n)``), or
    None.

    >>> class Counter:
    ...     n = spared = 0.0
    ...     def update(self, k): self.n += k
    ...     def spare(self, k): self.spared += k
    >>> counter = Counter(); shares = Shares(counter, limits=[4, 2], prompts=[12, 4])  # prompts of 4 and 2 steps
    >>> shares.seen([(0, 0, False)]); counter.n  # row 0's prompt has run: 4 of its 8 steps
    0.5
    >>> shares.seen([(0, 2, False), (1, 1, True)]); counter.n, counter.spared  # 6 of 8; row 1 ended, 1 of its 4 spared
    (1.75, 0.25)
    >>> shares.finish(); counter.n, counter.spared  # row 0 ends at its 2 tokens: 2 of its 8 steps spared
    (2.0, 0.5)
    """

    def __init__(self, progress, limits: list[int], prompts: list[int]):
        self.progress, self.limits = progress, limits
        self.prompts = [prompt_steps(tokens) for tokens in prompts]
        self.shown = [0.0] * len(limits)
        self.tokens = [0] * len(limits)  # each row's answer tokens so far
        self.spared = [0.0] * len(limits)  # each ended row's share spared
        self.ended = [False] * len(limits)

    def seen(self, rows: list[tuple[int, int, bool]]) -> None:
        """Rows whose prompts have run, with their answers so far: (row, answer tokens, ended)."""
        moved = spared = 0.0
        for row, tokens, ended in rows:
            if self.ended[row]:
                continue
            read, self.tokens[row] = self.prompts[row], max(tokens, self.tokens[row])
            taken = min((read + self.tokens[row]) / (read + self.limits[row]), 1.0)
            share = 1.0 if ended else taken
            moved += share - self.shown[row]
            self.shown[row], self.ended[row] = share, ended
            if ended:
                self.spared[row] = 1.0 - taken
                spared += self.spared[row]
        if self.progress is not None:
            if moved:
                self.progress.update(moved)
            if spared:
                self.progress.spare(spared)

    def finish(self) -> None:
        """Every row answered (at the tokens last seen of each row not yet ended)."""
        self.seen([(row, 0, True) for row in range(len(self.limits))])

    def rewind(self) -> None:
        """Take back what the run reported (it runs again: halved after running out of memory, or another way)."""
        if self.progress is not None and any(self.shown):
            self.progress.update(-sum(self.shown))
        if self.progress is not None and any(self.spared):
            self.progress.spare(-sum(self.spared))
        rows = len(self.limits)
        self.shown, self.tokens, self.spared, self.ended = [0.0] * rows, [0] * rows, [0.0] * rows, [False] * rows


# Decoding steps between two copies of the answers to the host (where EOS, budgets and stop strings are read): on a
# CPU a copy costs nothing, so rows leave at once; on an accelerator each copy waits for the queued steps, so 8 run
# between two (a finished row decodes at most 7 tokens more, dropped; not measured on a GPU).
SYNC_EVERY = {"cpu": 1}


def sync_every(device: torch.device) -> int:
    """Decoding steps per copy of the answers to the host on ``device`` (``SYNC_EVERY``; 8 on an accelerator)."""
    return SYNC_EVERY.get(device.type, 8)


def step_mask(real: torch.Tensor, model) -> torch.Tensor:
    """A decoding step's attention mask (``real``: 1 at a cached or fed token, 0 at padding): as a 4D mask where the
    model takes one (``attention.custom_mask``; transformers then builds none, and reads no tensor on the host to
    decide whether it can skip it), else as it is."""
    if takes_custom_masks(model):
        return custom_mask(real[:, None, :].bool(), model)
    return real


def picker(draws: SeededDraws | None):
    """How a decoding step takes each row's token from its logits (rows x vocabulary, batch row ``j`` being request
    row ``rows[j]``): the argmax, or the row's seeded draw (``draws.SeededDraws.pick``)."""
    return draws.pick if draws is not None else lambda logits, rows: logits.argmax(-1)
