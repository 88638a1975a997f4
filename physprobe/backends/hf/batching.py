"""Batching shared by the hf engines: length-sorted batches, padded rows, the pass-cost plan and the budgets.

A forward pass costs more than its tokens: on the 2-core CPU a one-token pass of SmolLM2-135M takes 53 ms, a token
in a batched pass 1.1-1.3 ms. ``pass_tokens`` says how many tokens a pass costs beyond its own (a measured table
on CPU; on an accelerator measured once per model, ``calibrate``), and ``length_groups`` cuts rows into padded
passes on that cost. ``batch_limits`` sizes batches: on CUDA to the card's free memory, elsewhere to fixed defaults.

>>> length_groups([30, 10, 29, 31, 12], 32)
[[3, 0, 2], [4, 1]]
"""

from __future__ import annotations

import math
import statistics
import time
import weakref
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

from physprobe.errors import ScoringError

# What a forward pass costs beyond its tokens, in tokens, where measured once for every model: on the 2-core CPU
# (one-token passes of SmolLM2-135M and GPT-2-small take 53 and 35 ms, a token in a batched pass 1.1-1.3 ms).
PASS_TOKENS = {"cpu": 32}
_CALIBRATED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {device: pass cost}


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on CPU), so that a clock reads the work's end."""
    if device.type != "cpu":
        torch.accelerator.synchronize(device)


def calibrate(model, device: torch.device, rows: int = 16, width: int = 256, repeats: int = 5) -> int:
    """What one forward pass of ``model`` costs on ``device`` beyond its tokens, in tokens, measured on its trunk (an
    encoder-decoder's encoder): the median time of a one-token pass over the median time per token of a dense
    ``rows`` x ``width`` pass, rounded to a power of two (so that the plans it shapes do not change with the clock's
    noise between runs).

    >>> from transformers import GPT2Config, GPT2LMHeadModel
    >>> cost = calibrate(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50)).eval(), torch.device("cpu"), rows=2, width=8)
    >>> cost >= 1 and cost & (cost - 1) == 0
    True
    """

    trunk = model.get_encoder() if model.config.is_encoder_decoder else model.base_model

    def seconds(shape: tuple[int, int]) -> float:
        ids = torch.zeros(shape, dtype=torch.long, device=device)
        times = []
        with torch.inference_mode():
            for attempt in range(repeats + 1):
                synchronize(device)
                start = time.perf_counter()
                trunk(input_ids=ids)
                synchronize(device)
                if attempt:  # the first is a warm-up
                    times.append(time.perf_counter() - start)
        return statistics.median(times)

    per_token = seconds((rows, width)) / (rows * width)
    return 2 ** max(0, round(math.log2(max(seconds((1, 1)) / per_token, 1.0))))


def pass_tokens(model, device: torch.device) -> int:
    """What a forward pass costs beyond its tokens: ``PASS_TOKENS`` of the device's type, else measured once per
    model and device (``calibrate``)."""
    if device.type in PASS_TOKENS:
        return PASS_TOKENS[device.type]
    measured = _CALIBRATED.setdefault(model, {})
    if str(device) not in measured:
        measured[str(device)] = calibrate(model, device)
    return measured[str(device)]


def batch_limits(model, device: torch.device, batch_tokens: int | None, max_batch: int | None, cpu: tuple[int, int],
           logits: bool = True, cached: bool = False) -> tuple[int, int]:  # fmt: skip
    """Tokens and rows per batch: those given, else on CUDA the tokens whose activations (``activation_bytes``; with
    ``cached``, their key/value cache too: ``cache_bytes``) fit in half the card's free memory (at most 65,536 tokens
    of activations, rows unbounded), else ``cpu`` (tokens, rows)."""
    if device.type != "cuda":
        return batch_tokens or cpu[0], max_batch or cpu[1]
    if batch_tokens is None:
        free = torch.cuda.mem_get_info(device)[0] // 2
        per_token = activation_bytes(model, logits) + (cache_bytes(model) if cached else 0)
        batch_tokens = max(1024, min(free // per_token, 65536 if not cached else free) // 1024 * 1024)
    return batch_tokens, max_batch or 1 << 30


def activation_bytes(model, logits: bool = True) -> int:
    """Bytes a token's activations take at most in a forward pass of ``model`` in its dtype: its hidden states and MLP
    (a few copies alive at once) and, with ``logits``, a full row of vocabulary logits with its float32 copy.

    >>> from transformers import GPT2Config, GPT2LMHeadModel
    >>> activation_bytes(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50)))
    2904
    """
    config, element = model.config, model.dtype.itemsize
    hidden = getattr(config, "hidden_size", None) or getattr(config, "d_model", None) or 1024
    inner = (
        getattr(config, "intermediate_size", None)
        or getattr(config, "d_ff", None)
        or getattr(config, "n_inner", None)
        or 4 * hidden
    )
    return element * (6 * hidden + 3 * inner) + ((element + 8) * getattr(config, "vocab_size", 0) if logits else 0)


def cache_bytes(model) -> int:
    """Bytes a token's keys and values take in ``model``'s cache (every layer, its key/value heads, its dtype).

    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> cache_bytes(LlamaForCausalLM(LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    ...                                          intermediate_size=64, vocab_size=50)))  # 2 x 2 layers x 2 heads x 8 x 4 bytes
    256
    """
    config = model.config
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", 1)
    head_dim = getattr(config, "head_dim", None) or (getattr(config, "hidden_size", None) or config.n_embd) // heads
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", 1)
    return 2 * layers * (getattr(config, "num_key_value_heads", None) or heads) * head_dim * model.dtype.itemsize


def batched(lengths: Sequence[int], batch_tokens: int, max_batch: int) -> Iterator[list[int]]:
    """Indices grouped into batches of similar length (longest first), bounded by a token budget.

    >>> list(batched([3, 10, 4, 9], batch_tokens=20, max_batch=8))
    [[1, 3], [2, 0]]
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batch: list[int] = []
    for index in order:
        width = lengths[batch[0]] if batch else lengths[index]
        if batch and (len(batch) + 1) * width > batch_tokens or len(batch) == max_batch:
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch


def exact_batches(lengths: Sequence[int], batch_tokens: int, max_batch: int) -> list[list[int]]:
    """Indices grouped into batches of one length each (no padding at all), longest first, within a token budget.

    >>> exact_batches([3, 5, 3, 5, 3], batch_tokens=6, max_batch=8)
    [[1], [3], [0, 2], [4]]
    """
    batches: list[list[int]] = []
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        last = batches[-1] if batches else None
        if (
            last
            and lengths[last[0]] == lengths[index]
            and len(last) < max_batch
            and (len(last) + 1) * lengths[index] <= batch_tokens
        ):
            last.append(index)
        else:
            batches.append([index])
    return batches


def length_groups(lengths: Sequence[int], pass_cost: int) -> list[list[int]]:
    """Rows by decreasing length, cut into groups that each run as one pass, padded to their longest: the cut of
    least cost, each pass costing ``pass_cost`` tokens more than the tokens it feeds (fewer passes against
    more padding; ``pass_cost`` 0: one group per exact length).

    >>> length_groups([30, 10, 29, 31, 12], 32), length_groups([30, 29], 0)
    ([[3, 0, 2], [4, 1]], [[0], [1]])
    """
    # By hand: a dynamic programme over the cut points of the sorted lengths (each group padded to its first).
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    cost = [0] + [None] * len(order)
    start_of = [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        for start in range(end):
            total = cost[start] + pass_cost + (end - start) * lengths[order[start]]
            if cost[end] is None or total < cost[end]:
                cost[end], start_of[end] = total, start
    groups, end = [], len(order)
    while end:
        groups.append(order[start_of[end] : end])
        end = start_of[end]
    return groups[::-1]


def grouped_batches(lengths: Sequence[int], pass_cost: int, batch_tokens: int, max_batch: int) -> list[list[int]]:
    """``length_groups`` of the rows, each cut further where its padded tokens or rows pass the budget: the batches
    a padded engine (masked LM, NLI, seq2seq) runs, one pass each.

    >>> grouped_batches([30, 10, 29, 31, 12], 32, batch_tokens=62, max_batch=8)
    [[3, 0], [2], [4, 1]]
    """
    batches = []
    for group in length_groups(lengths, pass_cost):
        per_batch = max(1, min(max_batch, batch_tokens // max(lengths[group[0]], 1)))
        batches += [group[start : start + per_batch] for start in range(0, len(group), per_batch)]
    return batches


def left_padded(sequences: Sequence[Sequence[int]], pad: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids and the mask of real (1) and padding (0) positions of token sequences."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        if sequence:
            ids[row, width - len(sequence) :] = torch.tensor(sequence, dtype=torch.long)
            mask[row, width - len(sequence) :] = 1
    return ids.to(device), mask.to(device)


def pad_right(sequences: Sequence[Sequence[int]], pad: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and attention mask of token sequences."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
        mask[row, : len(sequence)] = 1
    return ids.to(device), mask.to(device)


def padded_positions(real: torch.Tensor, start: torch.Tensor | int = 0) -> torch.Tensor:
    """Position ids of left-padded rows (``real``: 1 at a token, 0 at padding), counted from ``start`` per row at each
    row's first token (padding takes that first position; it is masked).

    >>> padded_positions(torch.tensor([[0, 1, 1], [1, 1, 1]]), torch.tensor([5, 0])).tolist()
    [[5, 5, 6], [0, 1, 2]]
    """
    width = real.shape[1]
    offset = torch.as_tensor(start, device=real.device).reshape(-1, 1)
    return offset + (torch.arange(width, device=real.device)[None] - (width - real.sum(1, keepdim=True))).clamp(min=0)


def as_tensor(rows: Sequence[Sequence[int]], device: torch.device) -> torch.Tensor:
    """Equal-length token rows as one tensor (one numpy conversion, no tensor per row)."""
    return torch.from_numpy(np.asarray(rows, dtype=np.int64)).to(device)


def run_batches(n_items: int, lengths: Sequence[int], step: Callable[[list[int]], list], batch_tokens: int,
                max_batch: int, progress=None, batches: list[list[int]] | None = None) -> list:  # fmt: skip
    """Apply ``step`` to length-sorted batches (or the ``batches`` given); on CUDA out-of-memory halve a
    batch and retry."""
    results: list = [None] * n_items
    pending = list(batched(lengths, batch_tokens, max_batch)) if batches is None else list(batches)
    while pending:
        batch = pending.pop(0)
        try:
            for index, value in zip(batch, step(batch), strict=True):
                results[index] = value
            if progress is not None:
                progress.update(len(batch))
        except torch.OutOfMemoryError:
            if len(batch) == 1:
                raise
            torch.cuda.empty_cache()
            half = len(batch) // 2
            pending[:0] = [batch[:half], batch[half:]]
    return results


def shared_length(sequences: Sequence[Sequence[int]]) -> int:
    """Length of the longest token prefix all sequences share, leaving each at least one token of its own.

    >>> shared_length([[1, 2, 3, 4], [1, 2, 5]]), shared_length([[1, 2], [1, 2]]), shared_length([[1], [2, 3]])
    (2, 1, 0)
    """
    shortest = min(map(len, sequences)) - 1
    n = 0
    for a, b in zip(min(sequences), max(sequences), strict=False):  # what the first and last in token order share, all share
        if n == shortest or a != b:
            break
        n += 1
    return n


def check_length(ids: Sequence[int], limit: int | None, truncate: bool, what: str) -> list[int]:
    """``ids``, or with ``truncate`` their last ``limit``; longer than ``limit`` without it is an error naming ``what``."""
    if limit is None or len(ids) <= limit:
        return list(ids)
    if not truncate:
        raise ScoringError(
            f"{what} is {len(ids)} tokens, over the model's maximum of {limit}; pass --truncate to keep the last {limit}"
        )
    return list(ids)[-limit:]


def max_positions(model) -> int | None:
    """The length of the model's position table (``max_position_embeddings`` or GPT-2's ``n_positions``), if any."""
    return getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)


def length_limit(model, tokenizer) -> int | None:
    """The longest input the model takes: the tokenizer's ``model_max_length`` and the model config's
    position table (less RoBERTa-style position offsets), whichever is smaller; None when neither says."""
    limits = [tokenizer.model_max_length] if tokenizer.model_max_length < 1e9 else []
    table = max_positions(model)
    if table:
        offset = getattr(getattr(model.base_model, "embeddings", None), "padding_idx", None)  # RoBERTa counts from pad + 1
        limits.append(table - (offset + 1 if isinstance(offset, int) else 0))
    return min(limits) if limits else None


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits)[targets] without materialising the log-softmax over the vocabulary (in float32)."""
    logits = logits.float()
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def forward(model, keep: int, **inputs):
    """A forward pass computing vocabulary logits for the last ``keep`` positions only, where the model allows."""
    try:
        out = model(**inputs, logits_to_keep=keep)
    except TypeError:  # architectures without logits_to_keep compute them all
        out = model(**inputs)
    if out.logits.shape[1] != keep:  # the model ignored logits_to_keep
        out.logits = out.logits[:, -keep:]
    return out


def prefix_clusters(prompts: Sequence[Sequence[int]], run_cost: int = 0) -> list[tuple[int, list[int]]]:
    """Prompts cut into runs whose shared token prefix runs once for the whole run: the cut that saves the most
    tokens, (members - 1) x shared length - ``run_cost`` summed over the runs that share. ``(shared, rows)`` per
    run, runs and rows in token order; a run of one shares nothing, and every member keeps at least one token of
    its own.

    A prefix tree would share nested prefixes too; one level keeps every prompt's cache a single copy of its
    run's prefix plus its own tokens, and on NEWTON's prompts (instruction, attribute or context first)
    saves most of what the tree would.

    >>> prefix_clusters([[1, 2, 3, 4], [5, 6], [1, 2, 3, 9], [1, 2, 7]])
    [(2, [0, 2, 3]), (0, [1])]
    >>> prefix_clusters([[0, 0], [0, 0, 1, 0], [0, 1], [0, 0, 1, 0]])  # [0, 0] shares one token at most: it runs with [0, 1]
    [(1, [0, 2]), (3, [1, 3])]
    """
    # By hand: a dynamic programme over the prefix tree of what each prompt may share (all its tokens but its
    # last); no library partitions prompts this way. A run's members meet at a node of the tree and share its
    # depth. A node either runs everything its subtree leaves to it (each member saves the node's depth, more
    # than any node above could give it) or leaves all of it to its parent, so a subtree's table maps how many
    # prompts it leaves upward to the most it saves. Chains without a branch are one node (the deepest gains most).
    keys = [tuple(prompt[:-1]) for prompt in prompts]
    order = sorted(range(len(prompts)), key=lambda r: (keys[r], r))
    root = _prefix_tree(keys, order, 0) if prompts else {"depth": 0, "rows": [], "children": {}}
    _, runs, rest = max(_best_runs(root, run_cost).values(), key=lambda entry: entry[0])
    runs = [sorted(rows, key=lambda r: (prompts[r], r)) for rows in _flattened(runs)] + [[row] for row in _flattened(rest)]
    runs.sort(key=lambda rows: (prompts[rows[0]], rows[0]))
    return [(shared_length([prompts[r] for r in rows]) if len(rows) > 1 else 0, rows) for rows in runs]


def _prefix_tree(keys: list[tuple], rows: list[int], depth: int) -> dict:
    """``prefix_clusters``' node of ``rows`` (in key order, sharing ``depth`` tokens): at the depth all of them share."""
    while all(len(keys[r]) > depth for r in rows) and len({keys[r][depth] for r in rows}) == 1:
        depth += 1
    node = {"depth": depth, "rows": [r for r in rows if len(keys[r]) == depth], "children": {}}
    for r in rows:
        if len(keys[r]) > depth:
            node["children"].setdefault(keys[r][depth], []).append(r)
    node["children"] = {token: _prefix_tree(keys, members, depth + 1) for token, members in node["children"].items()}
    return node


def _best_runs(node: dict, run_cost: int) -> dict[int, tuple[int, tuple, tuple]]:
    """``prefix_clusters``' table of a node: left upward -> (tokens saved, the runs formed below, the rows left
    upward); runs and rows are kept as pairs (joined in constant time, flattened once at the end)."""
    table = {len(node["rows"]): (0, (), tuple(node["rows"]))}
    for token in sorted(node["children"]):
        child, merged = _best_runs(node["children"][token], run_cost), {}
        for left, (saved, runs, rows) in table.items():
            for more, (child_saved, child_runs, child_rows) in child.items():
                if left + more not in merged or saved + child_saved > merged[left + more][0]:
                    merged[left + more] = (saved + child_saved, (runs, child_runs), (rows, child_rows))
        table = merged
    gains = [(saved + (left - 1) * node["depth"] - run_cost, (runs, ("run", rows)), ()) for left, (saved, runs, rows) in table.items()
             if left >= 2 and node["depth"] and (left - 1) * node["depth"] > run_cost]  # fmt: skip
    best = max(gains, key=lambda entry: entry[0], default=None)
    if best is not None and (0 not in table or best[0] > table[0][0]):
        table[0] = best
    return table


def _flattened(pairs) -> list:
    """The rows (ints) or runs (``("run", rows)``) held in ``_best_runs``' nested pairs, in order."""
    out, stack = [], [pairs]
    while stack:
        item = stack.pop()
        if isinstance(item, int):
            out.append(item)
        elif item and item[0] == "run":
            out.append(_flattened(item[1]))
        else:
            stack.extend(reversed(item))
    return out


def token_order_batches(prompts: Sequence[Sequence[int]], budget: int, batch_tokens: int, max_batch: int) -> list[list[int]]:
    """Indices in token order (prompts that share a prefix side by side, for ``prefix_clusters``), cut into
    batches of at most ``max_batch`` rows whose rows x (longest prompt + ``budget``) stay within ``batch_tokens``.

    >>> token_order_batches([[5, 1], [1, 2, 3], [1, 2], [4]], budget=2, batch_tokens=10, max_batch=8)
    [[2, 1], [3, 0]]
    """
    batches: list[list[int]] = []
    longest = 0
    for index in sorted(range(len(prompts)), key=lambda i: prompts[i]):
        longest = max(longest, len(prompts[index])) if batches else len(prompts[index])
        if batches and len(batches[-1]) < max_batch and (len(batches[-1]) + 1) * (longest + budget) <= batch_tokens:
            batches[-1].append(index)
        else:
            batches.append([index])
            longest = len(prompts[index])
    return batches
