"""The packed (tree) plan for causal log-likelihoods: one forward pass per batch, no cache, no copies.

Each question becomes a tree of tokens: its options' shared prefix once, then each option's own tokens (all but its
last, which is only predicted) after it. The tree's tokens lie side by side in a row, under a tree-shaped attention
mask (a token sees its question's prefix and its own option's earlier tokens, never a sibling option nor another
question) with per-token position ids (an option's tokens continue from the prefix's length), so each token computes
what it computes in its own sequence run whole. Trees of near-equal length form a batch (``tree_batches``: padding
against passes, on the pass cost), packed into rows as wide as its widest tree (the roomiest row first), within a
token budget; every batch is one forward pass whose vocabulary head runs only at scored positions (a pre-hook on the
output embeddings selects them), and whose per-option sums are gathered on the device; all batches' sums are copied
to the host once, at the end. Where the device has a core of its own (an accelerator, or a CPU whose cores torch does
not all compute on) a thread builds the next batch's trees and lays them out (in pinned memory on an accelerator,
copied without waiting) while the device runs this one, so the device waits less for the host (on a CPU, building
trees still takes the interpreter's lock from the thread that runs the model between its operations).

Exact where the model reads a 4D mask and position ids as given (``attention.takes_custom_masks``) and no sequence
is longer than its narrowest attention window (``attention.window``); ``fits`` says so, and ``scoring`` runs the
cached-prefix plan elsewhere.

>>> tree = Tree.of([[1, 2, 3, 4], [1, 2, 5]], count_prefix=False)
>>> tree.ids, tree.positions, tree.branches
([1, 2, 3], [0, 1, 2], [0, 0, 1])
>>> tree.heads  # (token in the tree, target, option): the prefix's last token predicts each option's first own
[(1, 3, 0), (1, 5, 1), (2, 4, 0)]
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain, repeat
from typing import NamedTuple

import numpy as np
import torch

from physprobe.backends.hf import threads
from physprobe.backends.hf.attention import custom_mask, takes_custom_masks, window
from physprobe.backends.hf.batching import pass_tokens, run_batches, shared_length


def fits(model, tokenized: Sequence[Sequence[Sequence[int]]]) -> bool:
    """Whether the tree plan scores these option sequences exactly on ``model``: it takes custom masks and position
    ids, and no sequence is longer than its narrowest attention window."""
    span = window(model)
    return takes_custom_masks(model) and (
        span is None or max((len(s) for options in tokenized for s in options), default=0) <= span
    )


class Tree(NamedTuple):
    """One question's tokens as a tree: ``ids``, ``positions`` and ``branches`` (0: the shared prefix, o + 1: option
    o's own tokens) per token, and ``heads``: (token, target, option) for every scored token, option -1 standing for
    the prefix's own tokens (scored once, added to every option)."""

    ids: list[int]
    positions: list[int]
    branches: list[int]
    heads: list[tuple[int, int, int]]

    @staticmethod
    def length(options: Sequence[Sequence[int]]) -> int:
        """How many tokens ``Tree.of(options, ...)`` holds, without building it: what the batches are planned on.

        >>> Tree.length([[1, 2, 3, 4], [1, 2, 5]]), Tree.length([[7], [8]])
        (3, 1)
        """
        n = shared_length(options)
        return max(1, n + sum(max(0, len(option) - n - 1) for option in options))

    @classmethod
    def of(cls, options: Sequence[Sequence[int]], count_prefix: bool) -> Tree:
        """The tree of one question's option sequences: each option's tokens from its first own token on are scored
        (``count_prefix``: from its second token on, the shared prefix's tokens included)."""
        n = shared_length(options)
        ids, positions, branches = list(options[0][:n]), list(range(n)), [0] * n
        heads = list(zip(range(n - 1), options[0][1:n], repeat(-1))) if count_prefix else []
        if n:
            heads += zip(repeat(n - 1), (option[n] for option in options), range(len(options)))
        for o, option in enumerate(options):
            own = option[n:-1]
            heads += zip(range(len(ids), len(ids) + len(own)), option[n + 1 :], repeat(o))
            ids += own
            positions += range(n, n + len(own))
            branches += [o + 1] * len(own)
        if not ids:  # one token per option, none shared: nothing to score, one token to feed
            return cls([options[0][0]], [0], [0], [])
        return cls(ids, positions, branches, heads)


def pack_rows(lengths: Sequence[int], width: int) -> list[list[int]]:
    """Trees (by their ``lengths``, longest first) packed into rows of ``width`` tokens, each into the roomiest row
    where it fits, else a new row.

    >>> pack_rows([6, 5, 3, 2, 2], width=6)
    [[0], [1], [2, 3], [4]]
    """
    rows: list[list[int]] = []
    room: list[tuple[int, int]] = []  # (-free tokens, row): the roomiest row first
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if room and -room[0][0] >= lengths[index]:
            free, row = heapq.heappop(room)
            rows[row].append(index)
            heapq.heappush(room, (free + lengths[index], row))
        else:
            rows.append([index])
            heapq.heappush(room, (lengths[index] - width, len(rows) - 1))
    return rows


def tree_batches(lengths: Sequence[int], batch_tokens: int, max_batch: int, pass_cost: int) -> list[list[int]]:
    """Trees by decreasing length, cut into groups of near-equal length, each cut into batches of at most ``max_batch``
    trees and ``batch_tokens`` tokens (a row per tree as wide as the group's widest; ``pack_rows`` may then put two in
    one): the cut of least cost, each pass costing ``pass_cost`` tokens beyond the tokens it feeds, padding included
    (``batching.length_groups``'s rule, over the trees' distinct lengths).

    >>> tree_batches([6, 5, 3, 2, 2], batch_tokens=12, max_batch=8, pass_cost=4)
    [[0, 1], [2, 3, 4]]
    >>> tree_batches([6, 5, 3, 2, 2], batch_tokens=12, max_batch=8, pass_cost=0)
    [[0], [1], [2], [3, 4]]
    """
    # By hand: a dynamic programme over cut points of the distinct lengths (a few hundred at most, whatever the trees).
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    distinct = sorted(set(lengths), reverse=True)
    before = np.searchsorted(-np.array([lengths[i] for i in order]), -np.array(distinct + [0]), side="left").tolist()
    cost, start_of = [0] + [None] * len(distinct), [0] * (len(distinct) + 1)
    for end in range(1, len(distinct) + 1):
        for start in range(end):
            trees, per_pass = before[end] - before[start], max(1, min(max_batch, batch_tokens // distinct[start]))
            total = cost[start] + -(-trees // per_pass) * pass_cost + trees * distinct[start]
            if cost[end] is None or total < cost[end]:
                cost[end], start_of[end] = total, start
    cuts, end = [], len(distinct)
    while end:
        cuts.append((start_of[end], end))
        end = start_of[end]
    batches = []
    for start, end in reversed(cuts):
        per_pass = max(1, min(max_batch, batch_tokens // distinct[start]))
        group = order[before[start] : before[end]]
        batches += [group[k : k + per_pass] for k in range(0, len(group), per_pass)]
    return batches


def _scored_logits(model, flat: torch.Tensor, **inputs) -> torch.Tensor:
    """The vocabulary logits at the flat positions ``flat`` (row x width + column) of one forward pass: a pre-hook on
    the output embeddings hands the head those positions' hidden states only (a model whose head is not that module
    computes every position's logits, and they are selected after)."""
    head = model.get_output_embeddings()
    fired = []

    def select(module, args):
        fired.append(True)
        hidden = args[0]
        return (hidden.reshape(-1, hidden.shape[-1]).index_select(0, flat.to(hidden.device))[None], *args[1:])

    handle = head.register_forward_pre_hook(select) if head is not None else None
    try:
        logits = model(**inputs, use_cache=False).logits
    finally:
        if handle is not None:
            handle.remove()
    return logits[0] if fired else logits.reshape(-1, logits.shape[-1]).index_select(0, flat.to(logits.device))


class Layout(NamedTuple):
    """One batch of trees laid out on the host for its forward pass (``layout``): token ids, positions, branches and
    owners (the tree of each token, -1 at padding) as rows x width; the scored rows (flat: row x width + column); per
    scored entry, its scored row, target and sum; where each tree's sums begin and how many sums there are."""

    ids: torch.Tensor
    positions: torch.Tensor
    branches: torch.Tensor
    owner: torch.Tensor
    head_rows: torch.Tensor
    entries: torch.Tensor  # 3 x scored entries: scored row, target, sum
    starts: list[int]
    n_sums: int


def layout(trees: list[Tree], n_options: list[int], pin: bool = False) -> Layout:
    """The host's share of a batch: its rows laid out with numpy, a few calls per batch, not per token; ``pin``: in
    page-locked memory, so that the copies to an accelerator do not wait for the host."""
    lengths = np.array([len(t.ids) for t in trees], dtype=np.int64)
    width = int(lengths.max())
    rows = pack_rows(lengths.tolist(), width)
    start = np.zeros(len(trees), dtype=np.int64)  # where each tree begins in the batch, flattened (row x width + column)
    for r, members in enumerate(rows):
        start[members] = r * width + np.concatenate([[0], np.cumsum(lengths[members])[:-1]])
    tokens = np.repeat(start - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
    ids, positions, branches = (np.zeros(len(rows) * width, dtype=np.int64) for _ in range(3))
    owner = np.full(len(rows) * width, -1, dtype=np.int64)  # the tree of each token, -1 at padding
    for flat, name in ((ids, "ids"), (positions, "positions"), (branches, "branches")):
        flat[tokens] = np.fromiter(chain.from_iterable(getattr(t, name) for t in trees), dtype=np.int64, count=len(tokens))
    owner[tokens] = np.repeat(np.arange(len(trees)), lengths)
    heads = np.fromiter(chain.from_iterable(chain.from_iterable(t.heads for t in trees)), dtype=np.int64).reshape(-1, 3)
    tree_of = np.repeat(np.arange(len(trees)), [len(t.heads) for t in trees])
    base = np.cumsum([0] + [n + 1 for n in n_options])  # per tree: its options' sums, then its prefix's
    head_rows, head_of = np.unique(start[tree_of] + heads[:, 0], return_inverse=True)  # a row scored for several targets once
    sum_of = base[tree_of] + np.where(heads[:, 2] >= 0, heads[:, 2], np.asarray(n_options, dtype=np.int64)[tree_of])
    arrays = [a.reshape(len(rows), width) for a in (ids, positions, branches, owner)]
    arrays += [head_rows, np.stack([head_of.reshape(-1), heads[:, 1], sum_of])]
    tensors = [torch.from_numpy(a) for a in arrays]
    if pin:
        tensors = [t.pin_memory() for t in tensors]
    return Layout(*tensors, base[:-1].tolist(), int(base[-1]))


def _batch_sums(model, laid: Layout, device: torch.device) -> torch.Tensor:
    """One forward pass over a laid-out batch: on the device, each option's summed log-probability and, after a tree's
    options, its prefix's own tokens' (when scored). Its inputs are copied without waiting (from pinned memory on an
    accelerator) and nothing is read back: no step here waits for the device."""
    sums = torch.zeros(laid.n_sums, dtype=torch.float32, device=device)
    if not laid.entries.shape[1]:
        return sums
    ids, positions, branch_t, owner_t, head_rows, entries = (
        t.to(device, non_blocking=True)
        for t in (laid.ids, laid.positions, laid.branches, laid.owner, laid.head_rows, laid.entries)
    )
    width = ids.shape[1]
    column = torch.arange(width, device=device)
    allowed = ((owner_t[:, :, None] == owner_t[:, None, :]) & (owner_t[:, None, :] >= 0) & (column[:, None] >= column[None, :])
               & ((branch_t[:, None, :] == 0) | (branch_t[:, :, None] == branch_t[:, None, :])))  # fmt: skip
    allowed |= torch.eye(width, dtype=torch.bool, device=device)  # padding attends itself (never read), not nothing
    logits = _scored_logits(model, head_rows, input_ids=ids, position_ids=positions, attention_mask=custom_mask(allowed, model))
    # On the head's device (accelerate may place it apart from the inputs).
    head, target, into = entries.to(logits.device)
    # logsumexp in float32 a slice of rows at a time: no float32 copy of every scored row's logits at once
    normaliser = torch.cat([torch.logsumexp(chunk.float(), dim=-1) for chunk in logits.split(1024)])
    picked = logits[head, target].float() - normaliser[head]
    return sums.index_add_(0, into.to(device), picked.to(device))


def lays_out_ahead(device: torch.device, torch_threads: int, cores: int) -> bool:
    """Whether the next batch is laid out on a thread while ``device`` runs this one: on an accelerator, or on a CPU
    whose ``cores`` torch does not all compute on (``threads.choose`` gives a small model one); on a CPU whose every
    core torch computes on, a thread would only take a core from it.

    >>> lays_out_ahead(torch.device("cuda", 1), 2, 2), lays_out_ahead(torch.device("cpu"), 1, 2)
    (True, True)
    >>> lays_out_ahead(torch.device("cpu"), 2, 2)
    False
    """
    return device.type != "cpu" or torch_threads < cores


def totals(model, tokenized: list[list[list[int]]], device: torch.device, batch_tokens: int, max_batch: int, progress,
           count_prefix: bool) -> list[list[float]]:  # fmt: skip
    """Summed log-probabilities of every option's tokens from its first own token on (``count_prefix``: from its
    second token on, the shared prefix's tokens included), one forward pass per batch of packed trees, planned on
    the trees' lengths (``Tree.length``). Where the device has a core of its own (``lays_out_ahead``) the next
    batch's trees are built and laid out (``layout``, in pinned memory on an accelerator) on a thread while the
    device runs this one; each batch's sums stay on the device, and all are copied to the host at once at the end:
    no batch waits for the one before it to reach the host."""
    lengths = [Tree.length(options) for options in tokenized]
    batches = tree_batches(lengths, batch_tokens, max_batch, pass_tokens(model, device))
    parts: list[torch.Tensor] = []
    filled = [0]  # sums held by the parts so far
    ahead = lays_out_ahead(device, torch.get_num_threads(), threads.cores())

    def laid_out(batch: list[int]) -> Layout:
        trees = [Tree.of(tokenized[i], count_prefix) for i in batch]
        return layout(trees, [len(tokenized[i]) for i in batch], pin=device.type == "cuda")

    with ThreadPoolExecutor(1) as pool:
        planned = {tuple(batch): index for index, batch in enumerate(batches)}
        prepared: dict[int, Future] = {}

        def step(batch: list[int]) -> list[tuple[int, int]]:
            index = planned.get(tuple(batch))  # None: half of a batch that ran out of memory
            laid = prepared.pop(index).result() if index in prepared else laid_out(batch)
            if ahead and index is not None and index + 1 < len(batches) and index + 1 not in prepared:
                prepared[index + 1] = pool.submit(laid_out, batches[index + 1])  # while the device runs this one
            sums = _batch_sums(model, laid, device)
            parts.append(sums)
            filled[0] += len(sums)
            return [(filled[0] - len(sums) + start, len(tokenized[i])) for start, i in zip(laid.starts, batch, strict=True)]

        located = run_batches(len(tokenized), lengths, step, batch_tokens, max_batch, progress, batches=batches)
    sums = torch.cat(parts).tolist() if parts else []
    return [[sums[at + o] + sums[at + n] for o in range(n)] for at, n in located]
