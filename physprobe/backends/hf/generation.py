"""Generation-based scoring: the greedy (or seeded sampled) answer to each prompt, cut at the first stop string.

A causal model's answers come from one continuous batch (``continuous``): prompts in token order are prefilled in
groups (each run of prompts sharing a token prefix, a chat template's system turn or NEWTON's attribute question
or context, runs it once: ``prefill``) into the slots finished answers leave, so every decoding step runs as many rows
as the budget holds (on CUDA as many as the free memory holds with their caches: ``batching.batch_limits``; on a
CPU as many as ``cpu_tokens`` hold) until the last prompts. A row's answer is done when its stop string has appeared (after the answer's leading blank lines,
as ``answers.cut`` reads it), or EOS, or its token budget; those are read on the host after every step on a CPU,
every ``stepping.SYNC_EVERY`` steps on an accelerator. A seq2seq batch runs its encoder once, then decodes a token
per row per step (``_greedy_seq2seq``), rows leaving the batch as their answers end. Models whose generation config
asks for logits processors (``argmax_decodes``), and models whose cache the decoding buffers cannot be built from
(``attention.cache_layers``: a sliding window narrower than the cache would grow), read padded prompts batch by batch
in ``model.generate``, which applies the processors and stops once every row of the batch is done; a beam search
runs one prompt at a time (``_beamed``). The answer text is returned as generated (special tokens dropped, cut before
the first stop string); a protocol's ``match`` turns it into an option, or None (``unparsed``). Progress moves step
by step: each row is one request, advanced by its share of decoding steps taken (its prompt's pass what it costs,
then one per answer token, of those plus its token budget) and completed when its answer ends (``stepping.Shares``).

>>> answer_budget(40, 128, 128, False)  # NEWTON's released max_length=128 counts a causal model's prompt
88
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from physprobe.backends.hf import continuous
from physprobe.backends.hf.batching import (
    batch_limits,
    cache_bytes,
    check_length,
    left_padded,
    max_positions,
    pad_right,
    run_batches,
    token_order_batches,
)
from physprobe.backends.hf.draws import SeededDraws
from physprobe.backends.hf.stepping import Shares, picker, sync_every
from physprobe.protocols import tokenized
from physprobe.protocols.answers import cut, stopped
from physprobe.protocols.decoding import Decoding
from physprobe.protocols.requests import unshared_lengths
from physprobe.protocols.results import Answer


class _Counted(StoppingCriteria):
    """``model.generate``'s per-step hook that reports its rows' answers so far to ``Shares`` (it stops nothing)."""

    def __init__(self, shares: Shares, rows: list[int], start: int):
        self.shares, self.rows, self.start = shares, rows, start

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        self.shares.seen([(row, input_ids.shape[1] - self.start, False) for row in self.rows])
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class _StopStrings(StoppingCriteria):
    """``model.generate``'s per-row criterion: the row's answer (tokens from column ``start``) has ``stopped``."""

    def __init__(self, tokenizer, stops: list[Sequence[str]], start: int):
        self.tokenizer, self.stops, self.start = tokenizer, stops, start

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        texts = self.tokenizer.batch_decode(input_ids[:, self.start :], skip_special_tokens=True)
        return torch.tensor([stopped(t, s) for t, s in zip(texts, self.stops, strict=True)], device=input_ids.device)


def argmax_decodes(model) -> bool:
    """Whether ``model.generate``'s greedy search takes each token as the argmax of the logits alone: the model's
    generation config turns on none of transformers' logits processors that act without sampling (penalties,
    n-gram bans, forced, suppressed or biased tokens, minimum lengths, guidance, watermarks) nor another search
    (DoLa, contrastive). Otherwise answers come from ``model.generate``, which applies them, as the released
    scripts' generate and pipeline calls do."""
    config = getattr(model, "generation_config", None)
    if config is None:
        return True
    active = [
        config.repetition_penalty not in (None, 1.0), config.encoder_repetition_penalty not in (None, 1.0),
        (config.no_repeat_ngram_size or 0) > 0, (config.encoder_no_repeat_ngram_size or 0) > 0,
        (config.min_length or 0) > 0, (config.min_new_tokens or 0) > 0, config.guidance_scale not in (None, 1),
        config.bad_words_ids is not None, config.sequence_bias is not None, config.forced_bos_token_id is not None,
        config.forced_eos_token_id is not None, config.suppress_tokens is not None, config.begin_suppress_tokens is not None,
        config.exponential_decay_length_penalty is not None, config.watermarking_config is not None,
        config.remove_invalid_values is True, config.dola_layers is not None,  # DoLa decoding
        config.penalty_alpha not in (None, 0) and (config.top_k or 0) > 1,  # contrastive search
        config.stop_strings is not None, bool(config.token_healing),  # generate's own handling (or its error)
    ]  # fmt: skip
    return not any(active)


class _Answers:
    """The answer tokens of a decoding batch's rows (``alive``: the request row of each batch row). Each step's tokens
    stay on the device until ``every`` steps have run (or the budget is reached); then they are copied to the host at
    once and read step by step: a row ends at EOS, at its budget or when ``done(row, tokens)``, its later tokens
    dropped, so the answers are those of a copy after every step. ``shares`` hears of every row read."""

    def __init__(self, n: int, budget: int, done, eos: int | None, every: int, shares: Shares | None = None):
        self.tokens: list[list[int]] = [[] for _ in range(n)]
        self.alive, self.ended = list(range(n)), [False] * n
        self.budget, self.done, self.eos, self.every, self.shares = budget, done, eos, every, shares
        self.pending: list[torch.Tensor] = []
        self.steps = 0

    def add(self, tokens: torch.Tensor) -> list[int] | None:
        """Take a step's tokens (one per alive row); None while they stay on the device, else the batch rows that go on."""
        self.pending.append(tokens)
        self.steps += 1
        if len(self.pending) < self.every and self.steps < self.budget:
            return None
        chunk = torch.stack(self.pending, dim=1).tolist()
        self.pending = []
        for row, new in zip(self.alive, chunk, strict=True):
            for token in new:
                if self.ended[row]:
                    break
                self.tokens[row].append(token)
                answer = self.tokens[row]
                self.ended[row] = token == self.eos or len(answer) >= self.budget or self.done(row, answer)
        if self.shares is not None:
            self.shares.seen([(row, len(self.tokens[row]), self.ended[row]) for row in self.alive])
        return [j for j, row in enumerate(self.alive) if not self.ended[row]]

    def leave(self, keep: list[int]) -> None:
        """Keep only the batch rows ``keep``."""
        self.alive = [self.alive[j] for j in keep]


def _greedy_seq2seq(model, prompts: list[list[int]], budget: int, done, eos: int | None, pad: int,
                    device: torch.device, shares: Shares | None = None, draws: SeededDraws | None = None) -> list[list[int]] | None:  # fmt: skip
    """The greedy answer tokens of seq2seq ``prompts`` (up to EOS), or with ``draws`` each row's seeded sample; None
    when the model's cache is not a plain ``EncoderDecoderCache`` of ``DynamicCache`` s.

    The encoder runs once over the batch (prompts right-padded, masked);
    then one decoder token per row per step on its self- and cross-attention caches, rows leaving the batch once
    ``done(row, tokens)`` or EOS or ``budget`` ends them.
    """
    config = model.generation_config
    start = config.decoder_start_token_id if config.decoder_start_token_id is not None else config.bos_token_id
    if not isinstance(start, int):  # none, or one per row: generate's own handling
        return None
    ids, attention = pad_right(prompts, pad, device)  # right: a learned position table (BART) counts from the first token
    encoded = model.get_encoder()(input_ids=ids, attention_mask=attention).last_hidden_state
    if shares is not None:
        shares.seen([(row, 0, False) for row in range(len(prompts))])  # the prompts have run
    tokens = torch.full((len(prompts),), start, dtype=torch.long, device=device)
    cache = None
    answers = _Answers(len(prompts), budget, done, eos, sync_every(device), shares)
    pick = picker(draws)
    while True:
        out = model(encoder_outputs=(encoded,), attention_mask=attention, decoder_input_ids=tokens[:, None],
                    past_key_values=cache, use_cache=True)  # fmt: skip
        cache = out.past_key_values
        if not isinstance(cache, EncoderDecoderCache) or not all(
            type(part) is DynamicCache for part in (cache.self_attention_cache, cache.cross_attention_cache)
        ):
            return None
        tokens = pick(out.logits[:, -1], answers.alive)
        keep = answers.add(tokens)  # None: the tokens stay on the device
        if keep is not None and not keep:
            return answers.tokens
        if keep is not None and len(keep) < len(answers.alive):  # finished rows leave the batch
            select = torch.tensor(keep, device=device)
            cache.batch_select_indices(select)
            encoded, attention, tokens = encoded[select], attention[select], tokens[select]
            answers.leave(keep)


def _generated(model, tokenizer, prompts: list[list[int]], budget: int, stops: list[Sequence[str]], pad: int, eos: int | None,
               seq2seq: bool, one_length: bool, shares: Shares | None = None, draws: SeededDraws | None = None) -> list[list[int]]:  # fmt: skip
    """Answer tokens from ``model.generate``: a causal batch left-padded, a seq2seq batch right-padded (a learned
    position table counts from the first token), or with ``one_length`` prompts of one length per call, so that no
    logits processor (an n-gram ban, a repetition penalty) sees padding, as one prompt at a time would not. With
    ``draws``, each row's token is its seeded draw after the model's own processors (``SeededDraws.processor``)."""
    by_length: dict[int, list[int]] = {}
    for index, prompt in enumerate(prompts):
        by_length.setdefault(len(prompt) if one_length else 0, []).append(index)
    answers: list[list[int]] = [[] for _ in prompts]
    for rows in by_length.values():
        ids, attention = (pad_right if seq2seq else left_padded)([prompts[r] for r in rows], pad, model.device)
        start = 1 if seq2seq else ids.shape[1]  # the answer's tokens: after the decoder's start token, or the prompt
        out = model.generate(input_ids=ids, attention_mask=attention, max_new_tokens=budget, do_sample=False, num_beams=1,
                             pad_token_id=pad, eos_token_id=eos,
                             logits_processor=LogitsProcessorList([draws.processor(rows)] if draws is not None else []),
                             stopping_criteria=StoppingCriteriaList([_StopStrings(tokenizer, [stops[r] for r in rows], start),
                                                                     *([_Counted(shares, rows, start)] if shares is not None else [])]))  # fmt: skip
        for r, row in zip(rows, out[:, start:].tolist(), strict=True):
            answers[r] = row
    return answers


def answer_budget(prompt_tokens: int, max_new_tokens: int, max_length: int | None, seq2seq: bool) -> int:
    """New tokens a prompt may get: ``max_new_tokens``, and with ``max_length`` no more than a released
    pipeline's ``generate(max_length=...)`` gives: a causal model's prompt counts (at least one new token, as
    transformers 4 generated one, with a warning, for a prompt already that long), a seq2seq model's decoder
    start token counts.

    >>> [answer_budget(40, 128, 128, False), answer_budget(40, 128, 128, True), answer_budget(200, 128, 128, False)]
    [88, 127, 1]
    >>> answer_budget(40, 32, None, False)
    32
    """
    if max_length is None:
        return max_new_tokens
    return min(max_new_tokens, max(1, max_length - (1 if seq2seq else prompt_tokens)))


def _encoded(
    model, tokenizer, requests: Sequence[dict], seq2seq: bool, truncate: bool, chat: bool
) -> tuple[list[list[int]], list[int]]:
    """Each request's prompt as token ids, and its answer budget (``answer_budget``).

    Prompts are encoded as the tokenizer encodes them, its special tokens included (a BOS only where the tokenizer
    adds one), as the released scripts' pipelines and generate calls do; a prompt a chat template rendered carries
    its special tokens already, so none are added to it. A causal model's prompt leaves room for the answer.
    """
    limit = (tokenizer.model_max_length if tokenizer.model_max_length < 1e9 else None) if seq2seq else max_positions(model)
    encoded = tokenized.encoded(tokenizer, [r["prompt"] for r in requests], special=not chat)  # one call for all prompts
    budgets = [
        answer_budget(len(ids), r["max_new_tokens"], r.get("max_length"), seq2seq)
        for ids, r in zip(encoded, requests, strict=True)
    ]
    encoded = [check_length(ids, limit if seq2seq or limit is None else limit - room, truncate, f"prompt {r['prompt'][:60]!r}")
               for ids, r, room in zip(encoded, requests, budgets, strict=True)]  # fmt: skip
    return encoded, budgets


def _beamed(model, prompts: list[list[int]], limits: list[int], decoding: Decoding, pad: int, eos: int | None, seq2seq: bool,
            shares: Shares) -> list[list[int]]:  # fmt: skip
    """Beam-search answer tokens, one prompt per ``model.generate(num_beams=...)`` call, as the released script ran
    them (NEWTON's alpaca class: no other prompt's padding beside it), each up to its budget in ``limits``."""
    answers = []
    for row, (prompt, limit) in enumerate(zip(prompts, limits, strict=True)):
        ids = torch.tensor([prompt], device=model.device)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=limit, do_sample=False,
                             num_beams=decoding.num_beams, length_penalty=decoding.length_penalty,
                             early_stopping=decoding.early_stopping, pad_token_id=pad, eos_token_id=eos)  # fmt: skip
        answers.append(out[0, 1 if seq2seq else ids.shape[1] :].tolist())
        shares.seen([(row, len(answers[-1]), True)])
    return answers


def _stopper(tokenizer, stops: list[Sequence[str]], limits: list[int]):
    """Whether a row's answer so far (its token ids) is done: at its budget in ``limits``, or its stop string shown."""

    def done(row: int, tokens: list[int]) -> bool:
        return len(tokens) >= limits[row] or (
            bool(stops[row]) and stopped(tokenizer.decode(tokens, skip_special_tokens=True), stops[row])
        )

    return done


class _Refused(Exception):
    """The continuous loop cannot build its cache from the model's (``attention.cache_layers``)."""


def _answer_batch(model, tokenizer, prompts: list[list[int]], stops: list[Sequence[str]], limits: list[int], device: torch.device,
                  seq2seq: bool, plain: bool, progress, decoding: Decoding | None = None, seeds: Sequence[int | None] = (),
                  slots: int | None = None) -> list[Answer]:  # fmt: skip
    """The answers of ``prompts`` (token ids), each row stopping at its stop strings or its token budget in ``limits``:
    with ``slots``, a causal model's greedy answers (or, where ``decoding`` samples, each row's draw seeded with its
    ``seeds``: ``draws.SeededDraws``) decoded continuously, ``slots`` rows at a time (``continuous.decode``;
    ``_Refused`` where the model's cache does not allow it); else one decoding batch: a seq2seq model's own loop where
    ``plain`` (``argmax_decodes``) and its cache allow it, else ``model.generate``; a beam search one prompt at a
    time (``_beamed``). Progress moves by each row's share of steps (``stepping.Shares``), taken back on
    out-of-memory."""
    done = _stopper(tokenizer, stops, limits)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    eos = tokenizer.eos_token_id
    answers = None
    shares = Shares(progress, limits, unshared_lengths(prompts))
    draws = SeededDraws(decoding, list(seeds)) if decoding is not None and decoding.samples else None
    try:
        if decoding is not None and decoding.kind == "beam":
            answers = _beamed(model, prompts, limits, decoding, pad, eos, seq2seq, shares)
        elif slots is not None:
            answers = continuous.decode(model, prompts, limits, done, eos, device, slots, shares, draws)
            if answers is None:
                shares.rewind()
                raise _Refused
        elif plain and seq2seq:
            answers = _greedy_seq2seq(model, prompts, max(limits), done, eos, pad, device, shares, draws)
        if answers is None:  # model.generate runs every row to the batch's budget, so cut to each row's
            shares.rewind()
            answers = _generated(model, tokenizer, prompts, max(limits), stops, pad, eos, seq2seq, one_length=not plain,
                                 shares=shares, draws=draws and SeededDraws(draws.decoding, draws.seeds))  # fmt: skip
    except torch.OutOfMemoryError:
        shares.rewind()  # the batch runs again, halved
        raise
    shares.finish()
    kept = [a[:limit] for a, limit in zip(answers, limits, strict=True)]
    decoded = tokenizer.batch_decode(kept, skip_special_tokens=True)
    return [Answer(cut(text, stop), len(tokens)) for text, stop, tokens in zip(decoded, stops, kept, strict=True)]


def _answer_members(model, tokenizer, requests: Sequence[dict], encoded: list[list[int]], budgets: list[int], members: list[int],
                    device: torch.device, seq2seq: bool, plain: bool, progress, limits: tuple[int, int], flowing: bool) -> list[Answer]:  # fmt: skip
    """The answers of requests ``members`` (one bound, one decoding): with ``flowing``, all of them through one
    continuous batch of as many slots as ``limits`` (tokens, rows) hold with the longest prompt and budget; else in
    batches, a causal batch's prompts in token order (shared prefixes together), a seq2seq batch's of similar length.
    On out-of-memory a batch (the continuous one too) runs again as two halves (``batching.run_batches``)."""
    batch_tokens, max_batch = limits

    def step(batch: list[int]) -> list[Answer]:
        chosen = [members[i] for i in batch]
        slots = None
        if flowing:
            longest = max(len(encoded[i]) + budgets[i] for i in chosen)
            slots = min(max_batch, max(1, batch_tokens // longest), len(chosen))
        return _answer_batch(model, tokenizer, [encoded[i] for i in chosen], [requests[i]["stop"] for i in chosen],
                             [budgets[i] for i in chosen], device, seq2seq, plain, progress, requests[members[0]].get("decoding"),
                             [requests[i].get("seed") for i in chosen], slots)  # fmt: skip

    most = max(budgets[i] for i in members)
    if flowing:
        order = [list(range(len(members)))]
    else:
        order = None if seq2seq else token_order_batches([encoded[i] for i in members], most, batch_tokens, max_batch)
    return run_batches(len(members), [len(encoded[i]) + budgets[i] for i in members], step, batch_tokens, max_batch,
                       batches=order)  # fmt: skip


# Tokens of a decoding batch on a CPU (where none are given): the wider where that many tokens' cache fits in
# CPU_CACHE_BYTES (SmolLM2-135M, TinyLlama-1.1B, Gemma-3-270M in float32), else the narrower. A step reads every weight
# once whatever its rows, so a row costs less in a wider batch, and a free slot costs a continuous batch nothing.
CPU_TOKENS = (8192, 16384)
CPU_CACHE_BYTES = 1 << 30


def cpu_tokens(model) -> int:
    """Tokens of a decoding batch on a CPU: ``CPU_TOKENS``' wider where their key/value cache
    (``batching.cache_bytes``) fits in ``CPU_CACHE_BYTES``, else the narrower.

    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> cpu_tokens(LlamaForCausalLM(LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
    ...                                         vocab_size=50)))
    16384
    """
    return CPU_TOKENS[1] if CPU_TOKENS[1] * cache_bytes(model) <= CPU_CACHE_BYTES else CPU_TOKENS[0]


def generate(model, tokenizer, requests: Sequence[dict], device: torch.device, seq2seq: bool = False,
             batch_tokens: int | None = None, max_batch: int | None = None, truncate: bool = False, progress=None,
             chat: bool = False) -> list[Answer]:  # fmt: skip
    """The greedy answer to each request (``{"prompt", "max_new_tokens", "stop"}``, optionally ``"max_length"``:
    ``answer_budget``'s; ``"decoding"`` and ``"seed"``: a released sampling or beam search, ``_answer_batch``), in
    request order: its text and the number of tokens generated (before the cut).

    A prompt is encoded as the tokenizer encodes it (its special tokens included), unless ``chat``: a prompt
    rendered by a chat template carries its own.

    Requests go by their bound (``max_new_tokens``) and decoding, each row stopping at its ``answer_budget``: a
    causal model's greedy or sampled answers through one continuous batch (``continuous``), else in batches
    (``_answer_members``); on CUDA out-of-memory a batch halves.
    """
    encoded, budgets = _encoded(model, tokenizer, requests, seq2seq, truncate, chat)
    plain = argmax_decodes(model)
    # Rows of a decoding batch: on CUDA as many as the free memory holds with their caches (hundreds), else 128 within
    # ``cpu_tokens``.
    limits = batch_limits(model, device, batch_tokens, max_batch, (cpu_tokens(model), 128), logits=False, cached=True)
    texts: list[Answer] = [Answer("")] * len(requests)
    # Requests go by their bound (max_new_tokens); within it each row stops at its own budget (a prompt counted in
    # max_length leaves its row fewer tokens), so prompts of many lengths still share a batch. By their decoding too
    # (a batch decodes one way).
    by_bound: dict[tuple, list[int]] = {}
    for index, request in enumerate(requests):
        decoding = request.get("decoding")
        by_bound.setdefault((request["max_new_tokens"], repr(decoding)), []).append(index)
    for members in (by_bound[bound] for bound in sorted(by_bound)):
        decoding = requests[members[0]].get("decoding")
        flowing = plain and not seq2seq and (decoding is None or decoding.kind != "beam")
        arguments = (model, tokenizer, requests, encoded, budgets, members, device, seq2seq, plain, progress, limits)
        with torch.inference_mode():
            try:
                answers = _answer_members(*arguments, flowing)
            except _Refused:  # a cache the continuous batch cannot take: model.generate, batch by batch
                answers = _answer_members(*arguments, False)
        for index, answer in zip(members, answers, strict=True):
            texts[index] = answer
    return texts
