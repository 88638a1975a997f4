"""Generation-based scoring: batched greedy decoding of each prompt's answer, cut at the first stop string.

A causal model's batch holds prompts in token order; each run of prompts sharing a token prefix (a chat
template's system turn, NEWTON's attribute question or context) runs that prefix once, then the prompts' own
tokens run in groups of near-equal length (padded where a pass would cost more than the padding: ``prefill``);
their key/value caches join one decoding batch, left-padded (masked), in buffers each step writes in place,
and each row leaves the batch as soon as its answer is done: its stop string has appeared (after the answer's leading blank lines, as ``answers.cut``
reads it), or EOS, or its token budget. Those are read on the host: on a CPU after every step; on an accelerator the
steps' tokens stay on the device and are copied every ``SYNC_EVERY`` steps (``_Answers``), the device never waiting
for the host in between. A step's mask goes in as a 4D mask where the model reads one (``step_mask``), so that
transformers builds none. On CUDA a decoding batch holds as many rows as the free memory holds with their caches
(``batching.batch_limits``). A seq2seq batch runs its encoder once, then decodes the same way, rows
leaving as their answers end. Models whose generation config asks for logits processors (``argmax_decodes``), and
models whose cache this layout cannot be built from (``attention.cache_layers``: a sliding window narrower than the
cache would grow), read padded prompts in ``model.generate``, which applies the processors and stops once every
row of the batch is done. The answer text is returned as generated (special tokens dropped, cut before the first stop string);
a protocol's ``match`` turns it into an option, or None (``unparsed``). Progress moves step by step: each row is
one request, advanced by its share of decoding steps taken (its prompt's pass what it costs, then one per answer
token, of those plus its token budget) and completed when its answer ends (``_Shares``).

"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from physprobe.backends.hf.attention import custom_mask, filled_cache, positions_follow_ids, takes_custom_masks
from physprobe.backends.hf.batching import (
    batch_limits,
    check_length,
    forward,
    left_padded,
    max_positions,
    pad_right,
    pass_tokens,
    run_batches,
    token_order_batches,
)
from physprobe.backends.hf.draws import SeededDraws
from physprobe.backends.hf.prefill import PromptPlan, prompt_caches
from physprobe.protocols import tokenized
from physprobe.protocols.answers import cut, stopped
from physprobe.protocols.decoding import Decoding
from physprobe.protocols.requests import prompt_steps
from physprobe.protocols.results import Answer


class _Shares:
    """A decoding batch's progress at the grain of its steps: each row is one request (``update(1)`` in all), of which
    its prompt's pass counts as the steps it costs (``prompt_steps``: one, and a quarter of one a token, as
    a card's time left weighs it) and each answer token as one more, out of those and its token budget; a row is
    complete when its answer ends. So a count moves once the prompts have run, by what their pass cost, and then
    with every step, in proportion to the steps left (what takes the time), not once per batch of answers.
    ``progress`` is the engine's counter (``update(n)``), or None.

    >>> class Counter:
    ...     n = 0.0
    ...     def update(self, k): self.n += k
    >>> counter = Counter(); shares = _Shares(counter, limits=[4, 2], prompts=[12, 4])  # prompts of 4 and 1 steps
    >>> shares.seen([(0, 0, False)]); counter.n  # row 0's prompt has run: 4 of its 8 steps
    0.5
    >>> shares.seen([(0, 2, False), (1, 1, True)]); round(counter.n, 6)  # 6 of 8; row 1 ended
    1.75
    >>> shares.finish(); counter.n
    2.0
    """

    def __init__(self, progress, limits: list[int], prompts: list[int]):
        self.progress, self.limits = progress, limits
        self.prompts = [prompt_steps(tokens) for tokens in prompts]
        self.shown = [0.0] * len(limits)

    def seen(self, rows: list[tuple[int, int, bool]]) -> None:
        """Rows whose prompts have run, with their answers so far: (row, answer tokens, ended)."""
        moved = 0.0
        for row, tokens, ended in rows:
            read = self.prompts[row]
            share = 1.0 if ended else min((read + tokens) / (read + self.limits[row]), 1.0)
            moved += share - self.shown[row]
            self.shown[row] = share
        if moved and self.progress is not None:
            self.progress.update(moved)

    def finish(self) -> None:
        """Every row answered."""
        self.seen([(row, 0, True) for row in range(len(self.limits))])

    def rewind(self) -> None:
        """Take back what the batch reported (it runs again, halved, after running out of memory)."""
        if self.progress is not None and any(self.shown):
            self.progress.update(-sum(self.shown))
        self.shown = [0.0] * len(self.limits)


class _Counted(StoppingCriteria):
    """``model.generate``'s per-step hook that reports its rows' answers so far to ``_Shares`` (it stops nothing)."""

    def __init__(self, shares: _Shares, rows: list[int], start: int):
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
        return torch.tensor([stopped(t, s) for t, s in zip(texts, self.stops)], device=input_ids.device)


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


class _Answers:
    """The answer tokens of a decoding batch's rows (``alive``: the request row of each batch row). Each step's tokens
    stay on the device until ``every`` steps have run (or the budget is reached); then they are copied to the host at
    once and read step by step: a row ends at EOS, at its budget or when ``done(row, tokens)``, its later tokens
    dropped, so the answers are those of a copy after every step. ``shares`` hears of every row read."""

    def __init__(self, n: int, budget: int, done, eos: int | None, every: int, shares: _Shares | None = None):
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
        for row, new in zip(self.alive, chunk):
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


def _pick(draws: SeededDraws | None):
    """How a decoding step takes each row's token from its logits: the argmax, or the row's seeded draw."""
    return draws.pick if draws is not None else lambda logits, rows: logits.argmax(-1)


def _greedy(model, prompts: list[list[int]], budget: int, done, eos: int | None, device: torch.device,
            shares: _Shares | None = None, draws: SeededDraws | None = None) -> list[list[int]] | None:  # fmt: skip
    """The greedy answer tokens of causal ``prompts`` (up to EOS), or with ``draws`` each row's seeded sample; None
    when ``attention.cache_layers`` refuses the model's cache (this layout cannot be built from it).

    Prompts run as ``prompt_caches`` plans them (shared prefixes once, own tokens in groups of near-equal length);
    their caches go, left-padded, into one table per layer with room for ``budget`` more tokens, where each decoding step
    writes its keys and values in place (``filled_cache``); a token per row per step, rows leaving the batch
    once ``done(row, tokens)`` or EOS or ``budget`` ends them.
    """
    lengths = [len(p) for p in prompts]
    # Padding between a row's prefix and its own tokens is harmless where positions come from position_ids; a model
    # biasing attention by cache slot (ALiBi: MPT, Bloom) gets groups of exact length (padding only before the prefix).
    plan = PromptPlan.of(prompts, pass_tokens(model, device) if positions_follow_ids(model) else 0)
    width, n = plan.width(prompts), len(prompts)
    keys: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    tokens = torch.zeros(n, dtype=torch.long, device=device)
    mask = torch.ones((n, width + budget), dtype=torch.long, device=device)  # the answer's columns: 1
    mask[:, :width] = 0
    pick = _pick(draws)
    for rows, layers, real, first in prompt_caches(model, prompts, plan, device, width + budget, draws and draws.pick):
        if layers is None:
            return None
        if not keys:
            keys = [k.new_zeros((n, k.shape[1], width + budget, k.shape[3])) for k, _ in layers]
            values = [v.new_zeros((n, v.shape[1], width + budget, v.shape[3])) for _, v in layers]
        where = torch.tensor(rows, device=device)
        start = width - real.shape[1]
        for layer, (k, v) in enumerate(layers):
            keys[layer][where, :, start:width] = k
            values[layer][where, :, start:width] = v
        mask[where, start:width] = real
        tokens[where] = first
        if shares is not None:
            shares.seen([(row, 0, False) for row in rows])  # these prompts have run
    cache = filled_cache(keys, values, width)
    position = torch.tensor(lengths, device=device)
    answers = _Answers(n, budget, done, eos, sync_every(device), shares)
    while True:
        keep = answers.add(tokens)  # None: the tokens stay on the device
        if keep is not None and not keep:
            break
        if keep is not None and len(keep) < len(answers.alive):  # finished rows leave the batch
            select = torch.tensor(keep, device=device)
            cache.batch_select_indices(select)
            tokens, position, mask = tokens[select], position[select], mask[select]
            answers.leave(keep)
        seen = cache.get_seq_length() + 1
        logits = forward(model, 1, input_ids=tokens[:, None], attention_mask=step_mask(mask[:, :seen], model),
                         position_ids=position[:, None], past_key_values=cache).logits  # fmt: skip
        tokens = pick(logits[:, -1], answers.alive)
        position = position + 1
    return answers.tokens


def _greedy_seq2seq(model, prompts: list[list[int]], budget: int, done, eos: int | None, pad: int,
                    device: torch.device, shares: _Shares | None = None, draws: SeededDraws | None = None) -> list[list[int]] | None:  # fmt: skip
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
    pick = _pick(draws)
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
               seq2seq: bool, one_length: bool, shares: _Shares | None = None, draws: SeededDraws | None = None) -> list[list[int]]:  # fmt: skip
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
        for r, row in zip(rows, out[:, start:].tolist()):
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
    budgets = [answer_budget(len(ids), r["max_new_tokens"], r.get("max_length"), seq2seq) for ids, r in zip(encoded, requests)]
    encoded = [check_length(ids, limit if seq2seq or limit is None else limit - room, truncate, f"prompt {r['prompt'][:60]!r}")
               for ids, r, room in zip(encoded, requests, budgets)]  # fmt: skip
    return encoded, budgets


def _beamed(model, prompts: list[list[int]], limits: list[int], decoding: Decoding, pad: int, eos: int | None, seq2seq: bool,
            shares: _Shares) -> list[list[int]]:  # fmt: skip
    """Beam-search answer tokens, one prompt per ``model.generate(num_beams=...)`` call, as the released script ran
    them (NEWTON's alpaca class: no other prompt's padding beside it), each up to its budget in ``limits``."""
    answers = []
    for row, (prompt, limit) in enumerate(zip(prompts, limits)):
        ids = torch.tensor([prompt], device=model.device)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=limit, do_sample=False,
                             num_beams=decoding.num_beams, length_penalty=decoding.length_penalty,
                             early_stopping=decoding.early_stopping, pad_token_id=pad, eos_token_id=eos)  # fmt: skip
        answers.append(out[0, 1 if seq2seq else ids.shape[1] :].tolist())
        shares.seen([(row, 0, True)])
    return answers


def _answer_batch(model, tokenizer, prompts: list[list[int]], stops: list[Sequence[str]], limits: list[int], device: torch.device,
                  seq2seq: bool, plain: bool, progress, decoding: Decoding | None = None, seeds: Sequence[int | None] = ()) -> list[Answer]:  # fmt: skip
    """The answers of one decoding batch: ``prompts`` (token ids), each row stopping at its stop strings or its
    token budget in ``limits``; greedy decoding (or, where ``decoding`` samples, each row's draw seeded with its
    ``seeds``: ``draws.SeededDraws``) where ``plain`` (``argmax_decodes``) and the model's cache allows it, else
    ``model.generate``; a beam search one prompt at a time (``_beamed``). Progress moves by each row's share of
    steps (``_Shares``), taken back on out-of-memory."""

    def done(row: int, tokens: list[int]) -> bool:
        return len(tokens) >= limits[row] or (
            bool(stops[row]) and stopped(tokenizer.decode(tokens, skip_special_tokens=True), stops[row])
        )

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    eos = tokenizer.eos_token_id
    answers = None
    shares = _Shares(progress, limits, [len(prompt) for prompt in prompts])
    draws = SeededDraws(decoding, list(seeds)) if decoding is not None and decoding.samples else None
    try:
        if decoding is not None and decoding.kind == "beam":
            answers = _beamed(model, prompts, limits, decoding, pad, eos, seq2seq, shares)
        elif plain:
            answers = (_greedy_seq2seq(model, prompts, max(limits), done, eos, pad, device, shares, draws) if seq2seq
                       else _greedy(model, prompts, max(limits), done, eos, device, shares, draws))  # fmt: skip
        if answers is None:  # model.generate runs every row to the batch's budget, so cut to each row's
            shares.rewind()
            answers = _generated(model, tokenizer, prompts, max(limits), stops, pad, eos, seq2seq, one_length=not plain,
                                 shares=shares, draws=draws and SeededDraws(draws.decoding, draws.seeds))  # fmt: skip
    except torch.OutOfMemoryError:
        shares.rewind()  # the batch runs again, halved
        raise
    shares.finish()
    kept = [a[:limit] for a, limit in zip(answers, limits)]
    decoded = tokenizer.batch_decode(kept, skip_special_tokens=True)
    return [Answer(cut(text, stop), len(tokens)) for text, stop, tokens in zip(decoded, stops, kept)]


def generate(model, tokenizer, requests: Sequence[dict], device: torch.device, seq2seq: bool = False,
             batch_tokens: int | None = None, max_batch: int | None = None, truncate: bool = False, progress=None,
             chat: bool = False) -> list[Answer]:  # fmt: skip
    """The greedy answer to each request (``{"prompt", "max_new_tokens", "stop"}``, optionally ``"max_length"``:
    ``answer_budget``'s; ``"decoding"`` and ``"seed"``: a released sampling or beam search, ``_answer_batch``), in
    request order: its text and the number of tokens generated (before the cut).

    A prompt is encoded as the tokenizer encodes it (its special tokens included), unless ``chat``: a prompt
    rendered by a chat template carries its own.

    Requests are batched by length (and by ``max_new_tokens``), each row stopping at its ``answer_budget``; on
    CUDA out-of-memory the batch halves.
    """
    encoded, budgets = _encoded(model, tokenizer, requests, seq2seq, truncate, chat)
    plain = argmax_decodes(model)
    # Rows of a decoding batch: on CUDA as many as the free memory holds with their caches (hundreds), else 128.
    batch_tokens, max_batch = batch_limits(model, device, batch_tokens, max_batch, (8192, 128), logits=False, cached=True)
    texts: list[Answer] = [Answer("")] * len(requests)
    # Requests batch by their bound (max_new_tokens); within a batch each row stops at its own budget (a prompt
    # counted in max_length leaves its row fewer tokens), so prompts of many lengths still share a batch.
    # Requests batch by their decoding too (a batch decodes one way).
    by_bound: dict[tuple, list[int]] = {}
    for index, request in enumerate(requests):
        decoding = request.get("decoding")
        by_bound.setdefault((request["max_new_tokens"], repr(decoding)), []).append(index)

    for members in (by_bound[bound] for bound in sorted(by_bound)):

        def step(batch: list[int], members=members) -> list[Answer]:
            chosen = [members[i] for i in batch]
            return _answer_batch(model, tokenizer, [encoded[i] for i in chosen], [requests[i]["stop"] for i in chosen],
                                 [budgets[i] for i in chosen], device, seq2seq, plain, progress,
                                 requests[members[0]].get("decoding"), [requests[i].get("seed") for i in chosen])  # fmt: skip

        with torch.inference_mode():
            # A causal batch holds prompts in token order (shared prefixes together); a seq2seq batch similar lengths.
            most = max(budgets[i] for i in members)
            order = None if seq2seq else token_order_batches([encoded[i] for i in members], most, batch_tokens, max_batch)
            answers = run_batches(len(members), [len(encoded[i]) + budgets[i] for i in members], step,
                                  batch_tokens, max_batch, batches=order)  # fmt: skip
        for index, answer in zip(members, answers):
            texts[index] = answer
    return texts
