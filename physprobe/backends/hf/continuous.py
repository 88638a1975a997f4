"""Continuous batching for a causal model's greedy (or seeded sampled) answers: a decoding batch of a fixed number of
slots, each holding one answer; when answers end, the next prompts (in token order) are prefilled as a group into the
slots they leave, so that every step runs as full a batch as the budget allows until the last prompts have come in.

Each slot's keys and values sit in one buffer per layer (slots x heads x columns x head size): the slot's prompt cache
from column 0 (as its prefill group left it: shared prefix, padding, own tokens, masked where padding), then its
answer, a column per token. A step feeds every slot its last token at its own position id and writes its key and
value at its own column (``SlotLayer``); the attention mask (1 at a slot's real tokens) spans the columns up to the
farthest slot's, so each row attends exactly its own prompt and answer, as it would alone. Prompts come in through
``prefill.prompt_caches`` (each group's shared prefixes once, own tokens in groups of near-equal length), the first
group filling every slot, each later one as soon as a quarter of the slots are free (``ADMIT_SHARE``: a group's
prefill passes cost a pass each, a free slot a row of every step); once no prompt waits, finished rows leave the
batch whenever a quarter of its slots are free (the buffers copied once for the rows that stay).

Answers are read on the host as ``stepping.sync_every`` says (after every step on a CPU), a row ending at EOS, at
its token budget or when ``done(row, tokens)`` says so; a row whose end is not yet read decodes on, its later tokens
dropped, so the answers are those of a read after every step.

>>> from transformers import GPT2Config, GPT2LMHeadModel
>>> model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=20)).eval()
>>> prompts = [[1, 2, 3], [1, 2, 4, 5], [6], [7, 8]]  # four prompts through two slots
>>> answers = decode(model, prompts, [3, 1, 2, 4], lambda row, tokens: False, None, torch.device("cpu"), rows=2)
>>> [len(answer) for answer in answers]
[3, 1, 2, 4]
"""

from __future__ import annotations

from collections import deque

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

from physprobe.backends.hf.attention import positions_follow_ids
from physprobe.backends.hf.batching import forward, pass_tokens
from physprobe.backends.hf.draws import SeededDraws
from physprobe.backends.hf.prefill import PromptPlan, prompt_caches
from physprobe.backends.hf.stepping import Shares, picker, step_mask, sync_every

# A waiting group is prefilled once this share of the slots is free (1/4): each group's passes cost about a pass's
# overhead each (32 tokens on the 2-core CPU), each free slot a row of every step until then.
ADMIT_SHARE = 4


class SlotLayer(DynamicLayer):
    """A cache layer over ``slots``' buffers of layer ``index``, where a step writes each slot's key and value at that
    slot's own column (``_Slots.columns``), every slot in one indexed write."""

    def __init__(self, slots: _Slots, index: int):
        super().__init__()
        self.slots, self.index = slots, index
        self.dtype, self.device, self.is_initialized = slots.keys[index].dtype, slots.keys[index].device, True

    def get_seq_length(self, *args, **kwargs) -> int:
        return self.slots.span - 1  # the step's token is the last of ``span`` columns

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values, slots = self.slots.keys[self.index], self.slots.values[self.index], self.slots
        keys[slots.every_slot, :, slots.columns] = key_states[:, :, -1]
        values[slots.every_slot, :, slots.columns] = value_states[:, :, -1]
        self.keys, self.values = keys[:, :, : slots.span], values[:, :, : slots.span]
        return self.keys, self.values


class _Slots:
    """The decoding batch: per slot its request row (None: free), the column its next token is written at, its next
    position id and token; the mask of real columns; per layer the key and value buffers, and a cache over them."""

    def __init__(self, size: int, device: torch.device):
        self.size, self.device = size, device
        self.row_of: list[int | None] = [None] * size
        self.at: list[int] = [0] * size  # the columns, on the host
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.mask = torch.zeros((size, 0), dtype=torch.long, device=device)
        self.columns, self.positions, self.tokens, self.live = (
            torch.zeros(size, dtype=torch.long, device=device) for _ in range(4)
        )
        self.every_slot = torch.arange(size, device=device)
        self.span, self.cache = 1, None

    def free(self) -> list[int]:
        return [s for s, row in enumerate(self.row_of) if row is None]

    def busy(self) -> int:
        return self.size - len(self.free())

    def _room(self, layers: list[tuple[torch.Tensor, torch.Tensor]], columns: int) -> None:
        """Buffers of at least ``columns`` columns (made at the first group, from its layers' shapes; grown when a
        group needs more)."""
        if not self.keys:
            self.keys = [k.new_zeros((self.size, k.shape[1], columns, k.shape[3])) for k, _ in layers]
            self.values = [v.new_zeros((self.size, v.shape[1], columns, v.shape[3])) for _, v in layers]
            self.cache = DynamicCache()
            self.cache.layers = [SlotLayer(self, index) for index in range(len(layers))]
        more = columns - self.mask.shape[1]
        if more > 0:
            grown = lambda t: torch.cat([t, t.new_zeros((*t.shape[:2], more, t.shape[3]))], dim=2)  # noqa: E731
            self.keys, self.values = [grown(k) for k in self.keys], [grown(v) for v in self.values]
            self.mask = torch.cat([self.mask, self.mask.new_zeros((self.size, more))], dim=1)

    def place(self, slots: list[int], rows: list[int], layers, real: torch.Tensor, first: torch.Tensor, lengths: list[int],
              columns: int) -> None:  # fmt: skip
        """Put a prefilled group (``rows``, their prompt caches ``layers`` and mask ``real``, first answer tokens, prompt
        lengths) into free ``slots``, in buffers of at least ``columns`` columns."""
        width = real.shape[1]
        self._room(layers, columns)
        where = torch.tensor(slots, device=self.device)
        for keys, values, (k, v) in zip(self.keys, self.values, layers, strict=True):
            keys[where, :, :width], values[where, :, :width] = k, v
        self.mask[where] = 0
        self.mask[where, :width] = real
        self.columns[where], self.tokens[where], self.live[where] = width, first, 1
        self.positions[where] = torch.tensor(lengths, device=self.device)
        for slot, row in zip(slots, rows, strict=True):
            self.row_of[slot], self.at[slot] = row, width

    def leave(self, rows: list[int]) -> None:
        """Free the slots of ``rows`` (their answers ended): they stop advancing, their rows' tokens unread."""
        ended = set(rows)
        slots = [s for s, row in enumerate(self.row_of) if row in ended]
        if slots:
            self.live[torch.tensor(slots, device=self.device)] = 0
            for slot in slots:
                self.row_of[slot] = None

    def compact(self) -> None:
        """Keep only the busy slots (the buffers copied once)."""
        keep = [s for s, row in enumerate(self.row_of) if row is not None]
        select = torch.tensor(keep, device=self.device)
        self.keys = [k.index_select(0, select) for k in self.keys]
        self.values = [v.index_select(0, select) for v in self.values]
        self.mask, self.columns, self.positions, self.tokens, self.live = (
            t.index_select(0, select) for t in (self.mask, self.columns, self.positions, self.tokens, self.live)
        )
        self.row_of, self.at, self.size = [self.row_of[s] for s in keep], [self.at[s] for s in keep], len(keep)
        self.every_slot = torch.arange(self.size, device=self.device)

    def step(self, model, pick) -> torch.Tensor:
        """One decoding step of every slot; returns each slot's next token (a free slot's is never read)."""
        self.mask[self.every_slot, self.columns] = 1
        self.span = max(self.at) + 1
        logits = forward(model, 1, input_ids=self.tokens[:, None], position_ids=self.positions[:, None],
                         attention_mask=step_mask(self.mask[:, : self.span], model), past_key_values=self.cache).logits[:, -1]  # fmt: skip
        busy = [s for s, row in enumerate(self.row_of) if row is not None]
        if len(busy) == self.size:
            self.tokens = pick(logits, self.row_of)
        else:  # the free slots' rows draw nothing
            where = torch.tensor(busy, device=self.device)
            self.tokens = self.tokens.clone()
            self.tokens[where] = pick(logits[where], [self.row_of[s] for s in busy])
        self.columns, self.positions = self.columns + self.live, self.positions + self.live
        self.at = [at + (row is not None) for at, row in zip(self.at, self.row_of, strict=True)]
        return self.tokens


class _Ledger:
    """The answers as the host reads them: each step's (or prefill's) tokens wait on the device, beside the request
    row of each (None: a free slot), until ``every`` of them are due; then one copy, read in order, a row ending at
    EOS, its budget in ``limits`` or ``done(row, tokens)``, its later tokens dropped. ``shares`` hears of every row read."""

    def __init__(self, limits: list[int], done, eos: int | None, every: int, shares: Shares | None):
        self.tokens: list[list[int]] = [[] for _ in limits]
        self.ended = [False] * len(limits)
        self.limits, self.done, self.eos, self.every, self.shares = limits, done, eos, every, shares
        self.pending: list[tuple[list[int | None], torch.Tensor]] = []

    def add(self, rows: list[int | None], tokens: torch.Tensor) -> None:
        self.pending.append((list(rows), tokens))

    def due(self) -> bool:
        return len(self.pending) >= self.every

    def read(self) -> list[int]:
        """Read what waits; returns the rows whose answers ended."""
        values = torch.cat([tokens for _, tokens in self.pending]).tolist()
        rows = [row for entry, _ in self.pending for row in entry]
        self.pending, ended, read = [], [], {}
        for row, token in zip(rows, values, strict=True):
            if row is None or self.ended[row]:
                continue
            answer = self.tokens[row]
            answer.append(token)
            read[row] = None
            if token == self.eos or len(answer) >= self.limits[row] or self.done(row, answer):
                self.ended[row] = True
                ended.append(row)
        if self.shares is not None:
            self.shares.seen([(row, len(self.tokens[row]), self.ended[row]) for row in read])
        return ended


def _admit(model, slots: _Slots, ledger: _Ledger, group: list[int], prompts: list[list[int]], limits: list[int],
           device: torch.device, pick) -> bool:  # fmt: skip
    """Prefill the prompts of request rows ``group`` as one plan (``prefill.PromptPlan``) into free slots; False when
    ``attention.cache_layers`` refuses the model's cache."""
    own = [prompts[row] for row in group]
    # Padding between a row's prefix and its own tokens is harmless where positions come from position_ids; a model
    # biasing attention by cache slot (ALiBi: MPT, Bloom) gets groups of exact length (padding only before the prefix).
    plan = PromptPlan.of(own, pass_tokens(model, device) if positions_follow_ids(model) else 0)
    span = plan.width(own) + max(limits[row] for row in group)
    local = None if pick is None else lambda logits, rows: pick(logits, [group[r] for r in rows])
    free = slots.free()
    for members, layers, real, first in prompt_caches(model, own, plan, device, span, local):
        if layers is None:
            return False
        rows = [group[r] for r in members]
        # Columns for the longest answer, and for the steps a row decodes past its end before it is read
        slots.place(free[: len(rows)], rows, layers, real, first, [len(prompts[row]) for row in rows], span + ledger.every)
        free = free[len(rows) :]
        ledger.add(rows, first)
    if ledger.shares is not None:
        ledger.shares.seen([(row, 0, False) for row in group])  # these prompts have run
    return True


def decode(model, prompts: list[list[int]], limits: list[int], done, eos: int | None, device: torch.device, rows: int,
           shares: Shares | None = None, draws: SeededDraws | None = None) -> list[list[int]] | None:  # fmt: skip
    """The greedy answer tokens of causal ``prompts`` (each up to EOS, its budget in ``limits`` or ``done(row,
    tokens)``), or with ``draws`` each row's seeded sample, decoded ``rows`` slots at a time; None when
    ``attention.cache_layers`` refuses the model's cache (this layout cannot be built from it)."""
    waiting = deque(sorted(range(len(prompts)), key=lambda row: prompts[row]))  # token order: shared prefixes together
    slots = _Slots(min(rows, len(prompts)), device)
    ledger = _Ledger(limits, done, eos, sync_every(device), shares)
    pick = picker(draws)
    while waiting or slots.busy():
        free = slots.free()
        if waiting and (len(free) >= max(1, slots.size // ADMIT_SHARE) or not slots.busy()):
            group = [waiting.popleft() for _ in range(min(len(free), len(waiting)))]
            if not _admit(model, slots, ledger, group, prompts, limits, device, draws and draws.pick):
                return None
        elif not waiting and free and len(free) >= max(1, slots.size // ADMIT_SHARE):
            slots.compact()
        if not ledger.due() and slots.busy():
            ledger.add(slots.row_of, slots.step(model, pick))
        if ledger.pending and (ledger.due() or not slots.busy()):
            slots.leave(ledger.read())
    return ledger.tokens
