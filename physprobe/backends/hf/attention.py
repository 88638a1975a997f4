"""What a causal model's attention takes, and the key/value buffers the hf engines write in place.

- ``positions_follow_ids``: the model places tokens by the ``position_ids`` it is given (not by cache slot: ALiBi).
- ``takes_custom_masks``: it also reads a 4D attention mask as given (``custom_mask`` builds one in the form its
  attention implementation takes), so a tree of sequences can share one row.
- ``window``: the narrowest window a layer attends over (sliding or chunked attention), if any.
- ``cache_layers`` / ``FilledLayer`` / ``filled_cache``: a transformers cache read as per-layer key/value tensors,
  and buffers whose first positions are filled, each pass writing its keys and values after them.

>>> from transformers import GPT2Config, GPT2LMHeadModel
>>> model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=20)).eval()
>>> positions_follow_ids(model), takes_custom_masks(model), window(model)
(True, True, None)
"""

from __future__ import annotations

import inspect

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

from physprobe.errors import ScoringError

# Attention implementations whose mask function returns a 4D mask unchanged (transformers' masking_utils): a
# boolean mask for SDPA, an additive one for eager. Flash attention takes none; flex attention would take the tree
# as a block mask, but with torch 2.13 a block mask reading a captured tensor fails to compile on CPU (inductor:
# "cur_kvSplitSize5 was not declared"), so flex attention models take the plans with transformers' own masks.
CUSTOM_MASK_ATTENTION = ("sdpa", "eager")


def positions_follow_ids(model) -> bool:
    """Whether the model places tokens by the ``position_ids`` it is given (rotary or learned positions), not by
    their slot in the cache (ALiBi: MPT, Bloom, ALiBi Falcon)."""
    return "position_ids" in inspect.signature(model.forward).parameters and not getattr(model.config, "alibi", False)


def takes_custom_masks(model) -> bool:
    """Whether the model reads a 4D attention mask and per-token position ids as given: its attention runs through
    transformers' attention interface (the class says ``_supports_attention_backend``; its mask functions pass a 4D
    mask through unchanged) in an implementation that takes one (``CUSTOM_MASK_ATTENTION``), and it places tokens by
    position ids. Not ALiBi models (MPT, Bloom, Falcon), remote code outside the interface, flash or flex attention."""
    return bool(getattr(model, "_supports_attention_backend", False)
                and getattr(model.config, "_attn_implementation", None) in CUSTOM_MASK_ATTENTION
                and positions_follow_ids(model))  # fmt: skip


def window(model) -> int | None:
    """The narrowest span a layer attends over (``sliding_window``, Llama-4's ``attention_chunk_size``), None when
    every layer attends over the whole sequence. A custom mask replaces the model's own sliding mask, so it is exact
    only for sequences no longer than this."""
    spans = [getattr(model.config, name, None) for name in ("sliding_window", "attention_chunk_size")]
    spans = [span for span in spans if isinstance(span, int) and span > 0]
    return min(spans) if spans else None


def custom_mask(allowed: torch.Tensor, model):
    """``allowed`` (batch, queries, keys; True where a query attends a key) as the model's attention implementation
    takes a 4D mask: boolean for SDPA, additive (0 or the dtype's minimum) for eager.
    Every query must attend at least one key (a padding query its own position), or SDPA returns NaN for it."""
    implementation = model.config._attn_implementation
    if implementation == "sdpa":
        return allowed[:, None]
    if implementation == "eager":
        dtype = model.dtype
        return torch.zeros(allowed[:, None].shape, dtype=dtype, device=allowed.device).masked_fill(
            ~allowed[:, None], torch.finfo(dtype).min
        )
    raise ScoringError(
        f"attention implementation {implementation!r} takes no custom mask (use one of {', '.join(CUSTOM_MASK_ATTENTION)})"
    )


def cache_layers(cache, span: int) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """(keys, values) per layer of a transformers ``DynamicCache`` of plain layers, or of sliding-window layers
    (Gemma, Mistral) whose window is wider than ``span``, the longest cache the engine will build: nothing is
    dropped from them, and a plain buffer under the model's sliding mask attends as they do. None for any other cache."""
    if type(cache) is not DynamicCache:
        return None
    for layer in cache.layers:
        if type(layer) is not DynamicLayer and not (type(layer) is DynamicSlidingWindowLayer and span < layer.sliding_window):
            return None
    return [(layer.keys, layer.values) for layer in cache.layers]


class FilledLayer(DynamicLayer):
    """A cache layer over preallocated key/value buffers whose first ``filled`` positions hold keys and values;
    a forward pass writes its tokens' keys/values in place after them.

    transformers' ``DynamicLayer`` concatenates on every update, copying the whole cache per pass (per
    decoding step, per suffix pass); none of its layers writes into a buffer that starts partly filled.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, filled: int):
        super().__init__()
        self.buffers, self.filled = (keys, values), filled
        self.keys, self.values = keys[..., :filled, :], values[..., :filled, :]
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self.buffers
        end = self.filled + key_states.shape[-2]
        if end > keys.shape[-2]:
            raise ScoringError(f"a cache buffer of {keys.shape[-2]} positions cannot take {end}")
        keys[..., self.filled : end, :] = key_states
        values[..., self.filled : end, :] = value_states
        self.filled, self.keys, self.values = end, keys[..., :end, :], values[..., :end, :]
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self.buffers = tuple(buffer.index_select(0, indices) for buffer in self.buffers)
        self.keys, self.values = (buffer[..., : self.filled, :] for buffer in self.buffers)


def filled_cache(keys: list[torch.Tensor], values: list[torch.Tensor], filled: int) -> DynamicCache:
    """A ``DynamicCache`` of ``FilledLayer`` s: per layer, a buffer whose first ``filled`` positions are set."""
    cache = DynamicCache()
    cache.layers = [FilledLayer(k, v, filled) for k, v in zip(keys, values, strict=True)]
    return cache
