"""Continuous batching for a causal model's greedy (or seeded sampled) answers: a decoding batch of a fixed number of
slots, each holding one answer; when answers end, the next prompts (in token order) are prefilled as a group into the
slots they leave, so that every step runs as full a batch as the budget allows until the last prompts have come in.

Each slot's keys and values sit in one buffer per layer (slots x heads x columns x head size): the slot's prompt cache
from column 0 (as its prefill group left it: shared prefix, padding, own tokens, masked where padding), then its
answer, a column per token. A step feeds every busy slot its last token at its own position id and writes its key and
value at its own column (``SlotLayer``); the attention mask (1 at a slot's real tokens) spans the columns up to the
farthest slot's, so each row attends exactly its own prompt and answer, as it would alone. The busy slots are the
first ones: when an answer ends, the last busy slot moves into the slot it leaves (its columns copied, a slot's
worth), so a step runs the busy slots alone, on views of the buffers, and a free slot costs no step anything. The
buffers are made once with columns for the longest prompt and its answer (grown, by a quarter at least, only for
a group whose padding needs more). Prompts come in through ``prefill.prompt_caches`` (each group's shared prefixes
once, own tokens in groups of near-equal length), the first group filling every slot, each later one as soon as a
quarter of the slots are free (``ADMIT_SHARE``: a group's prefill passes cost a pass each, a free slot a row fewer
in every step until then).

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
# overhead each (32 tokens on the 2-core CPU), each free slot a row fewer in every step until then.
ADMIT_SHARE = 4


class SlotLayer(DynamicLayer):
    """A cache layer over ``slots``' buffers of layer ``index``, where a step writes each busy slot's key and value at
    that slot's own column (``_Slots.columns``), every slot in one indexed write, and attends over the busy slots'
    rows of the buffers (the first ``_Slots.busy()``: a view, no copy)."""

    def __init__(self, slots: _Slots, index: int):
        super().__init__()
        self.slots, self.index = slots, index
        self.dtype, self.device, self.is_initialized = slots.keys[index].dtype, slots.keys[index].device, True

    def get_seq_length(self, *args, **kwargs) -> int:
        return self.slots.span - 1  # the step's token is the last of ``span`` columns

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values, slots = self.slots.keys[self.index], self.slots.values[self.index], self.slots
        n, columns = slots.n, slots.columns[: slots.n]
        keys[slots.every_slot[:n], :, columns] = key_states[:, :, -1]
        values[slots.every_slot[:n], :, columns] = value_states[:, :, -1]
        self.keys, self.values = keys[:n, :, : slots.span], values[:n, :, : slots.span]
        return self.keys, self.values


class _Slots:
    """The decoding batch: per slot its request row, the column its next token is written at, its next position id
    and token; the mask of real columns; per layer the key and value buffers, and a cache over them. The busy slots
    are the first ``n``: a row whose answer ends leaves its slot to the last busy one (its columns copied), so a step
    runs the busy slots alone and a free slot costs nothing."""

    def __init__(self, size: int, device: torch.device, room: int = 0):
        self.size, self.device, self.n, self.room = size, device, 0, room
        self.row_of: list[int | None] = [None] * size
        self.at: list[int] = [0] * size  # the columns, on the host
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.mask = torch.zeros((size, 0), dtype=torch.long, device=device)
        self.columns, self.positions, self.tokens = (torch.zeros(size, dtype=torch.long, device=device) for _ in range(3))
        self.every_slot = torch.arange(size, device=device)
        self.span, self.cache = 1, None

    def free(self) -> list[int]:
        return list(range(self.n, self.size))

    def busy(self) -> int:
        return self.n

    def _room(self, layers: list[tuple[torch.Tensor, torch.Tensor]], columns: int) -> None:
        """Buffers of at least ``columns`` columns (made at the first group, from its layers' shapes, with ``room``
        columns at least; grown by a quarter at least when a group needs more, so that few groups copy them)."""
        if not self.keys:
            columns = max(columns, self.room)
            self.keys = [k.new_zeros((self.size, k.shape[1], columns, k.shape[3])) for k, _ in layers]
            self.values = [v.new_zeros((self.size, v.shape[1], columns, v.shape[3])) for _, v in layers]
            self.mask = self.mask.new_zeros((self.size, columns))
            self.cache = DynamicCache()
            self.cache.layers = [SlotLayer(self, index) for index in range(len(layers))]
        more = columns - self.mask.shape[1]
        if more > 0:
            more = max(more, self.mask.shape[1] // 4)
            grown = lambda t: torch.cat([t, t.new_zeros((*t.shape[:2], more, t.shape[3]))], dim=2)  # noqa: E731
            self.keys, self.values = [grown(k) for k in self.keys], [grown(v) for v in self.values]
            self.mask = torch.cat([self.mask, self.mask.new_zeros((self.size, more))], dim=1)

    def place(self, rows: list[int], layers, real: torch.Tensor, first: torch.Tensor, lengths: list[int], columns: int) -> None:
        """Put a prefilled group (``rows``, their prompt caches ``layers`` and mask ``real``, first answer tokens, prompt
        lengths) into the first free slots, in buffers of at least ``columns`` columns."""
        width, slots = real.shape[1], list(range(self.n, self.n + len(rows)))
        self._room(layers, columns)
        where = slice(self.n, self.n + len(rows))
        for keys, values, (k, v) in zip(self.keys, self.values, layers, strict=True):
            keys[where, :, :width], values[where, :, :width] = k, v
        self.mask[where] = 0
        self.mask[where, :width] = real
        self.columns[where], self.tokens[where] = width, first
        self.positions[where] = torch.tensor(lengths, device=self.device)
        for slot, row in zip(slots, rows, strict=True):
            self.row_of[slot], self.at[slot] = row, width
        self.n += len(rows)

    def leave(self, rows: list[int]) -> None:
        """Free the slots of ``rows`` (their answers ended), the last busy slots moving into those that are left
        among the first ones (their columns up to the widest of them copied), so that the busy slots stay first."""
        ended = set(rows)
        holes = [s for s in range(self.n) if self.row_of[s] in ended]
        if not holes:
            return
        for slot in holes:
            self.row_of[slot] = None
        n = self.n - len(holes)
        movers = [s for s in range(n, self.n) if self.row_of[s] is not None]
        targets = [s for s in holes if s < n]
        if movers:
            source, target = torch.tensor(movers, device=self.device), torch.tensor(targets, device=self.device)
            width = max(self.at[s] for s in movers)
            for buffer in (*self.keys, *self.values):
                buffer[target, :, :width] = buffer[source, :, :width]
            for tensor in (self.mask, self.columns, self.positions, self.tokens):
                tensor[target] = tensor[source]
            for slot, mover in zip(targets, movers, strict=True):
                self.row_of[slot], self.at[slot], self.row_of[mover] = self.row_of[mover], self.at[mover], None
        self.n = n

    def step(self, model, pick) -> torch.Tensor:
        """One decoding step of the busy slots; returns each one's next token."""
        n = self.n
        self.mask[self.every_slot[:n], self.columns[:n]] = 1
        self.span = max(self.at[:n]) + 1
        logits = forward(model, 1, input_ids=self.tokens[:n, None], position_ids=self.positions[:n, None],
                         attention_mask=step_mask(self.mask[:n, : self.span], model), past_key_values=self.cache).logits[:, -1]  # fmt: skip
        tokens = pick(logits, self.row_of[:n])
        self.tokens[:n] = tokens
        self.columns[:n] += 1
        self.positions[:n] += 1
        self.at[:n] = [at + 1 for at in self.at[:n]]
        return tokens


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
    for members, layers, real, first in prompt_caches(model, own, plan, device, span, local):
        if layers is None:
            return False
        rows = [group[r] for r in members]
        # Columns for the longest answer, and for the steps a row decodes past its end before it is read
        slots.place(rows, layers, real, first, [len(prompts[row]) for row in rows], span + ledger.every)
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
    ledger = _Ledger(limits, done, eos, sync_every(device), shares)
    # Buffer columns for the longest prompt with its answer (what the slots were sized by): most groups fit in them
    room = max(len(prompt) + limit for prompt, limit in zip(prompts, limits, strict=True)) + ledger.every
    slots = _Slots(min(rows, len(prompts)), device, room)
    pick = picker(draws)
    while waiting or slots.busy():
        free = slots.free()
        if waiting and (len(free) >= max(1, slots.size // ADMIT_SHARE) or not slots.busy()):
            group = [waiting.popleft() for _ in range(min(len(free), len(waiting)))]
            if not _admit(model, slots, ledger, group, prompts, limits, device, draws and draws.pick):
                return None
        if not ledger.due() and slots.busy():
            ledger.add(slots.row_of[: slots.busy()], slots.step(model, pick))
        if ledger.pending and (ledger.due() or not slots.busy()):
            slots.leave(ledger.read())
    return ledger.tokens
