"""Prompt passes before greedy decoding: how a causal batch's prompts run and fill their key/value caches.

A batch's prompts are planned (``PromptPlan``): runs of prompts sharing a token prefix (a chat template's system
turn, NEWTON's attribute question or context) run that prefix once, the prefixes together in groups of near-equal
length, then the prompts' own tokens in groups of near-equal length on their run's prefix, padded where a pass
would cost more than the padding; the cheapest of a few such plans is taken. ``prompt_caches`` runs a plan and
yields each group's keys/values, mask and first answer tokens, from which ``generation`` decodes.

>>> plan = PromptPlan.of([[5, 6, 7, 1], [5, 6, 7, 2, 3], [9]], pass_cost=4)
>>> plan.clusters, plan.shared  # prompts 0 and 1 share 3 tokens, run once
([(3, [0, 1]), (0, [2])], [3, 3, 0])
>>> plan.groups  # then the prompts' own tokens (1, 2 and 1 of them) in one pass
[[1, 0, 2]]
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from physprobe.backends.hf.attention import cache_layers, filled_cache
from physprobe.backends.hf.batching import forward, left_padded, length_groups, padded_positions, prefix_clusters, shared_length


def _padded_pass(model, rows: list[list[int]], device: torch.device, span: int, before: tuple | None = None):
    """One forward pass over token ``rows``, left-padded to the longest, each after its filled cache in ``before``
    (``(keys, values, mask, lengths)``: per-layer buffers of the rows' earlier positions, real where ``mask`` is 1,
    ``lengths`` real ones per row). Returns the keys/values per layer of all positions (None when the model's
    cache is not one ``attention.cache_layers`` takes for a cache of ``span`` positions), their mask, and each row's
    logits of its next token."""
    ids, real = left_padded(rows, 0, device)
    positions = padded_positions(real, before[3] if before else 0)
    mask = torch.cat([before[2], real], dim=1) if before else real
    cache = filled_cache(before[0], before[1], before[2].shape[1]) if before else None
    masked = not bool(mask.all())
    out = forward(model, 1, input_ids=ids, past_key_values=cache, use_cache=True,
                   position_ids=positions if before or masked else None, attention_mask=mask if masked else None)  # fmt: skip
    layers = cache_layers(out.past_key_values, span) if cache is None else [(layer.keys, layer.values) for layer in cache.layers]
    return layers, mask, out.logits[:, -1]


class PromptPlan(NamedTuple):
    """How a batch of prompts runs: runs of prompts sharing a token prefix (``prefix_clusters``), each prompt's run
    and shared length, the groups of run prefixes and of prompts' own tokens that each run as one pass
    (``length_groups``)."""

    clusters: list[tuple[int, list[int]]]
    cluster_of: list[int]
    shared: list[int]
    prefix_groups: list[list[int]]  # indices into the runs that share
    groups: list[list[int]]

    @classmethod
    def of(cls, prompts: list[list[int]], pass_cost: int) -> PromptPlan:
        """The cheapest of a few plans (a pass costing ``pass_cost`` tokens more than it feeds): the runs saving the
        most tokens, those saving more than a pass each, one run of the whole batch, and no sharing."""
        candidates = [prefix_clusters(prompts), prefix_clusters(prompts, pass_cost), [(0, list(range(len(prompts))))]]
        if len(prompts) > 1 and shared_length(prompts):
            candidates.append([(shared_length(prompts), list(range(len(prompts))))])
        plans = [cls._of(prompts, clusters, pass_cost) for clusters in candidates]
        return min(plans, key=lambda plan: plan.cost(prompts, pass_cost))

    @classmethod
    def _of(cls, prompts: list[list[int]], clusters: list[tuple[int, list[int]]], pass_cost: int) -> PromptPlan:
        cluster_of, shared = [0] * len(prompts), [0] * len(prompts)
        for c, (length, rows) in enumerate(clusters):
            for r in rows:
                cluster_of[r], shared[r] = c, length
        heads = [length for length, _ in clusters if length]
        own = [len(prompt) - shared[r] for r, prompt in enumerate(prompts)]
        return cls(clusters, cluster_of, shared, length_groups(heads, pass_cost), length_groups(own, pass_cost))

    def cost(self, prompts: list[list[int]], pass_cost: int) -> int:
        """Passes (``pass_cost`` tokens each) and tokens fed, padding included."""
        heads = [length for length, _ in self.clusters if length]
        own = [len(prompt) - self.shared[r] for r, prompt in enumerate(prompts)]
        return sum(pass_cost + len(g) * max(heads[i] for i in g) for g in self.prefix_groups) + sum(
            pass_cost + len(g) * max(own[i] for i in g) for g in self.groups
        )

    def width(self, prompts: list[list[int]]) -> int:
        """The positions a group's cache spans at most: its longest shared prefix, then its longest own tokens."""
        return max(
            max(self.shared[r] for r in rows) + max(len(prompts[r]) - self.shared[r] for r in rows) for rows in self.groups
        )


def prompt_caches(model, prompts: list[list[int]], plan: PromptPlan, device: torch.device, span: int, pick=None):
    """Yield each group of prompts as its rows, their keys/values per layer, which of those positions are real (1)
    or padding (0), and each row's first answer token (``span``: the longest cache decoding will build), the argmax
    of its logits or ``pick(logits, rows)`` (a seeded draw, ``draws.SeededDraws.pick``). Each run
    of ``prefix_clusters`` runs its shared prefix once (the prefixes together, in groups of near-equal length);
    then each group's own tokens, each row on its run's prefix (prefixes left-padded to the group's longest).
    Yields ``(rows, None, None, None)`` and stops when ``attention.cache_layers`` refuses the model's cache."""
    width = max(length for length, _ in plan.clusters)
    table: list[tuple[torch.Tensor, torch.Tensor]] = []  # per layer, every run's prefix right-aligned (zeros: none)
    table_mask = torch.zeros((len(plan.clusters), width), dtype=torch.long, device=device)
    with_prefix = [c for c, (length, _) in enumerate(plan.clusters) if length]
    for group in plan.prefix_groups:
        members = [with_prefix[g] for g in group]
        layers, real, _ = _padded_pass(
            model, [prompts[plan.clusters[c][1][0]][: plan.clusters[c][0]] for c in members], device, span
        )
        if layers is None:
            yield [], None, None, None
            return
        if not table:
            table = [(k.new_zeros((len(plan.clusters), k.shape[1], width, k.shape[3])),
                      v.new_zeros((len(plan.clusters), v.shape[1], width, v.shape[3]))) for k, v in layers]  # fmt: skip
        where = torch.tensor(members, device=device)
        for (keys, values), (k, v) in zip(table, layers, strict=True):
            keys[where, :, width - k.shape[2] :] = k
            values[where, :, width - v.shape[2] :] = v
        table_mask[where, width - real.shape[1] :] = real
    for rows in plan.groups:
        own = [prompts[r][plan.shared[r] :] for r in rows]
        longest = max(plan.shared[r] for r in rows)
        before = None
        if longest:
            select = torch.tensor([plan.cluster_of[r] for r in rows], device=device)
            room = longest + max(map(len, own))
            keys = [_with_room(k[:, :, width - longest :], select, room) for k, _ in table]
            values = [_with_room(v[:, :, width - longest :], select, room) for _, v in table]
            lengths = torch.tensor([plan.shared[r] for r in rows], device=device)
            before = (keys, values, table_mask[select, width - longest :], lengths)
        layers, real, last = _padded_pass(model, own, device, span, before)
        yield rows, layers, real, last.argmax(-1) if pick is None else pick(last, rows)
        if layers is None:
            return


def _with_room(table: torch.Tensor, select: torch.Tensor, room: int) -> torch.Tensor:
    """A buffer of ``room`` positions per selected row of ``table``, whose first ones are that row's."""
    buffer = table.new_empty((len(select), table.shape[1], room, table.shape[3]))
    buffer[:, :, : table.shape[2]] = table[select]
    return buffer
