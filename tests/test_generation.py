"""Greedy generation that stops per sequence: the same texts as ``model.generate`` over left-padded prompts for the
full token budget, cut afterwards (the path physprobe took before), on every generate protocol; little padding fed,
no token read past an answer's end, and a causal batch kept full (``continuous``) until the last prompts."""

import random

import datasets
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import processors
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedTokenizerFast

from physprobe.backends.hf import batching, continuous, generation, prefill, scoring, stepping
from physprobe.data import registry
from physprobe.protocols import answers
from physprobe.protocols.requests import unshared_lengths

# Every generate protocol that reads its prompt raw (a chat protocol's prompt is a user turn, read through a
# template): (benchmark, protocol, config, family).
PROTOCOLS = [(benchmark, protocol.name, evaluation.configs[0], family)
             for benchmark in registry.names() for evaluation in [registry.evaluation(benchmark)]
             for protocol in evaluation.protocols if protocol.method == "generate" and not protocol.needs_chat
             for family in protocol.families]  # fmt: skip


def _texts(answers) -> list[str]:
    """The texts of the generation engine's answers."""
    return [answer.text for answer in answers]


def _prompts(built_all) -> list[str]:
    rows = []
    for benchmark, _, config, _ in PROTOCOLS:
        rows += [str(r) for r in datasets.load_dataset(str(built_all / benchmark), config, split="test").select(range(50))]
    return rows


def _stops_often(model, token_ids: list[int], scale: float) -> None:
    """Scale the (tied) embedding rows of ``token_ids`` so that greedy answers end at varied steps."""
    with torch.no_grad():
        model.get_input_embeddings().weight[token_ids] *= scale


@pytest.fixture(scope="module")
def tiny(built_all, tiny_model):
    """A causal and a seq2seq tiny model whose answers end (EOS or a newline) after a few tokens, at different steps.
    The causal tokenizer adds BOS itself, so the prompt's ids are the same whether or not BOS is forced."""
    texts = _prompts(built_all)
    causal_dir = tiny_model("causal", texts, "gpt", seed=3)
    tokenizer = AutoTokenizer.from_pretrained(causal_dir)
    backend = tokenizer.backend_tokenizer
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", tokenizer.bos_token_id)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="<s>"
    )
    causal = AutoModelForCausalLM.from_pretrained(causal_dir).eval()
    newline = tokenizer("\n", add_special_tokens=False)["input_ids"]
    _stops_often(causal, [tokenizer.eos_token_id, *newline], 3.0)
    seq2seq_dir = tiny_model("seq2seq", texts, "t5", seed=3)
    t5_tokenizer = AutoTokenizer.from_pretrained(seq2seq_dir)
    t5 = AutoModelForSeq2SeqLM.from_pretrained(seq2seq_dir).eval()
    with torch.no_grad():  # sharper weights: this tiny T5's answers otherwise hardly depend on its input
        for name, weight in t5.named_parameters():
            if "layer_norm" not in name:
                weight.mul_(4.0)
    _stops_often(t5, [t5_tokenizer.eos_token_id, *t5_tokenizer("\n", add_special_tokens=False)["input_ids"]], 2.0)
    return {"causal": (causal, tokenizer), "seq2seq": (t5, t5_tokenizer)}


def _full_budget_then_cut(model, tokenizer, requests, seq2seq: bool) -> list[str]:
    """The previous path: left-padded prompts through ``model.generate`` for the whole budget, decoded, then cut."""
    texts = []
    for request in requests:  # one request per call: no batching effects in the reference
        ids = torch.tensor([tokenizer(request["prompt"])["input_ids"]])
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=request["max_new_tokens"],
                             do_sample=False, num_beams=1, pad_token_id=tokenizer.pad_token_id,
                             eos_token_id=tokenizer.eos_token_id)  # fmt: skip
        new = out if seq2seq else out[:, ids.shape[1] :]
        texts.append(answers.cut(tokenizer.decode(new[0], skip_special_tokens=True), request["stop"]))
    return texts


def _answer_lengths(model, tokenizer, requests, seq2seq: bool) -> list[int]:
    """Tokens each greedy answer needs: up to its EOS, its stop string, or its budget."""
    lengths = []
    for request in requests:
        ids = torch.tensor([tokenizer(request["prompt"])["input_ids"]])
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=request["max_new_tokens"],
                             do_sample=False, num_beams=1, pad_token_id=tokenizer.pad_token_id,
                             eos_token_id=tokenizer.eos_token_id)  # fmt: skip
        new = (out[0, 1:] if seq2seq else out[0, ids.shape[1] :]).tolist()
        n = next((k + 1 for k in range(len(new))
                  if new[k] == tokenizer.eos_token_id or answers.stopped(tokenizer.decode(new[: k + 1], skip_special_tokens=True), request["stop"])),
                 len(new))  # fmt: skip
        lengths.append(n)
    return lengths


def _requests(built_all, benchmark, protocol, config, tokenizer, n=12):
    evaluation = registry.evaluation(benchmark)
    rows = datasets.load_dataset(str(built_all / benchmark), config, split="test").select(range(0, 120, 120 // n))
    built = [evaluation.protocol(protocol).build(row, config) for row in rows]
    return [{"prompt": r.prompt, "max_new_tokens": r.max_new_tokens, "stop": list(r.stop)} for r in built]


@pytest.mark.parametrize("benchmark, protocol, config, family", PROTOCOLS)
def test_texts_equal_the_full_budget_path_cut_afterwards(tiny, built_all, benchmark, protocol, config, family):
    model, tokenizer = tiny[family]
    requests = _requests(built_all, benchmark, protocol, config, tokenizer)
    with torch.inference_mode():
        texts = _texts(
            generation.generate(model, tokenizer, requests, torch.device("cpu"), seq2seq=family == "seq2seq", max_batch=5)
        )
        expected = _full_budget_then_cut(model, tokenizer, requests, family == "seq2seq")
        needed = _answer_lengths(model, tokenizer, requests, family == "seq2seq")
    assert len(set(needed)) > 2 and min(needed) < requests[0]["max_new_tokens"]  # answers end at different steps
    assert texts == expected


def _is_step(kwargs) -> bool:
    """Whether a forward pass is a decoding step of the continuous batch (on its slots' cache)."""
    cache = kwargs.get("past_key_values")
    return cache is not None and bool(cache.layers) and isinstance(cache.layers[0], continuous.SlotLayer)


def test_the_batch_stays_full_until_the_last_prompts(tiny, built_all, monkeypatch):
    """48 prompts of NEWTON's four tracks through 8 slots: while prompts wait, every step runs at least 7 answers
    that go on (a group comes in once 2 slots are free), each group's prompts prefilled together; the steps stay
    within 1.3x of the fewest (the tokens needed after each first one, 8 a step, plus the longest answer); and the
    texts are each prompt's alone, cut afterwards."""
    model, tokenizer = tiny["causal"]
    requests = [r for config in ("track1", "track2_boolean", "track2_mc", "track3")
                for r in _requests(built_all, "newton", "released-generate", config, tokenizer, n=12)]  # fmt: skip
    stepped, admitted = [], []  # per step: answers going on, and prompts come in so far; per admission its group
    step, admit = continuous._Slots.step, continuous._admit
    monkeypatch.setattr(continuous._Slots, "step",
                        lambda self, *a: stepped.append((self.busy(), sum(map(len, admitted)))) or step(self, *a))  # fmt: skip
    monkeypatch.setattr(continuous, "_admit", lambda *a: admitted.append(list(a[3])) or admit(*a))
    with torch.inference_mode():
        texts = _texts(generation.generate(model, tokenizer, requests, torch.device("cpu"), max_batch=8))
        assert texts == _full_budget_then_cut(model, tokenizer, requests, seq2seq=False)
        needed = _answer_lengths(model, tokenizer, requests, seq2seq=False)
    assert sorted(row for group in admitted for row in group) == list(range(len(requests)))
    assert len(admitted) > 4 and len(admitted[0]) == 8 and all(len(group) >= 2 for group in admitted[1:-1])
    early = [busy for busy, come in stepped if come < len(requests)]  # the steps before the last group came in
    assert len(early) > len(stepped) / 2 and min(early) >= 7
    fewest = -(-sum(n - 1 for n in needed) // 8) + max(needed)
    assert len(stepped) <= 1.3 * fewest and len(set(needed)) > 2


@pytest.mark.parametrize("benchmark, protocol, config, template", [
    ("cccons", "question-generate", "ordinary", False), ("cccons", "question-generate", "ordinary", True),
    ("newton", "released-generate", "track3", False)])  # fmt: skip
def test_causal_decoding_feeds_shared_prefixes_once_little_padding_and_no_finished_row(tiny, built_all, benchmark, protocol,
                                                                                       config, template, monkeypatch):  # fmt: skip
    """One batch of 24 prompts (raw, or behind one instruction, as a chat template's system turn puts one): the
    tokens fed are each run's shared prefix once, each group's own tokens padded to its longest (padding within a
    tenth of the prompts' tokens), and one per answer token after the first, until the answer's end (no step feeds a
    row for a slot whose answer ended: the steps' rows are the busy slots alone); the texts are those of the
    full-budget path."""
    model, tokenizer = tiny["causal"]
    requests = _requests(built_all, benchmark, protocol, config, tokenizer, n=24)
    if template:
        requests = [{**r, "prompt": "Answer the question with one of the two objects. " + r["prompt"]} for r in requests]
    fed, stepped, rows = [], [], []  # tokens of each prompt pass; rows of each step whose answer goes on; rows it feeds
    hook = model.register_forward_pre_hook(lambda module, args, kwargs: (rows if _is_step(kwargs) else fed).append(kwargs["input_ids"].numel()),
                                           with_kwargs=True)  # fmt: skip
    step = continuous._Slots.step
    monkeypatch.setattr(continuous._Slots, "step", lambda self, *a: stepped.append(self.busy()) or step(self, *a))
    try:
        with torch.inference_mode():
            texts = _texts(generation.generate(model, tokenizer, requests, torch.device("cpu"), max_batch=24))
    finally:
        hook.remove()
    with torch.inference_mode():
        needed = _answer_lengths(model, tokenizer, requests, seq2seq=False)
        assert texts == _full_budget_then_cut(model, tokenizer, requests, seq2seq=False)
    prompts = [tokenizer(r["prompt"])["input_ids"] for r in requests]
    plan = prefill.PromptPlan.of(prompts, batching.pass_tokens(model, torch.device("cpu")))
    heads = [length for length, _ in plan.clusters if length]
    own = [len(p) - plan.shared[r] for r, p in enumerate(prompts)]
    prefix_fed = sum(len(g) * max(heads[i] for i in g) for g in plan.prefix_groups)
    own_fed = sum(len(g) * max(own[i] for i in g) for g in plan.groups)
    assert len(set(needed)) > 2 and len(plan.groups) < len(set(own))
    assert sum(fed) == prefix_fed + own_fed and sum(rows) == sum(stepped) == sum(n - 1 for n in needed)
    # The plan costs less than feeding every prompt whole in one pass per exact length, and what sharing saves is
    # real: every prompt behind the instruction shares it; NEWTON Track 3's prompts share their scenario's context.
    lengths = [len(p) for p in prompts]
    cost = batching.pass_tokens(model, torch.device("cpu")) * (len(plan.prefix_groups) + len(plan.groups)) + prefix_fed + own_fed
    assert cost < batching.pass_tokens(model, torch.device("cpu")) * len(set(lengths)) + sum(lengths)
    if template or benchmark == "newton":
        assert sum(heads) + sum(own) < 0.8 * sum(lengths) and prefix_fed + own_fed < 0.85 * sum(lengths)


def _partitions(items: list[int]):
    """Every partition of ``items`` into non-empty sets."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for partition in _partitions(rest):
        yield [[first], *partition]
        for k in range(len(partition)):
            yield [*partition[:k], [first, *partition[k]], *partition[k + 1 :]]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=5), min_size=1, max_size=6), st.integers(0, 3))
def test_prefix_clusters_save_as_many_tokens_as_the_best_partition(prompts, run_cost):
    """Runs cover every prompt once; a run's members share its prefix and keep a token of their own; and the tokens
    saved, (members - 1) x shared - ``run_cost`` over the runs that share, equal the best of every partition of the
    prompts (worked by brute force; a part of one, or one sharing nothing, saves nothing)."""
    runs = batching.prefix_clusters(prompts, run_cost)
    assert sorted(r for _, rows in runs for r in rows) == list(range(len(prompts)))

    def common(rows: list[int]) -> int:
        if len(rows) == 1:
            return 0
        n = 0
        while all(len(prompts[r]) > n + 1 for r in rows) and len({prompts[r][n] for r in rows}) == 1:
            n += 1
        return n

    def saved(part: list[int]) -> int:
        return (len(part) - 1) * common(part) - run_cost if common(part) else 0

    for length, rows in runs:
        assert length == common(rows)
    best = max(sum(saved(part) for part in partition) for partition in _partitions(list(range(len(prompts)))))
    assert sum(saved(rows) for _, rows in runs) == best


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=7), st.integers(0, 20))
def test_length_groups_cost_no_more_than_any_grouping(lengths, pass_cost):
    """Every row in one group; the cost (a pass each, padded to its longest) is the least over every partition."""
    groups = batching.length_groups(lengths, pass_cost)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))

    def cost(partition) -> int:
        return sum(pass_cost + len(part) * max(lengths[i] for i in part) for part in partition)

    assert cost(groups) == min(cost(partition) for partition in _partitions(list(range(len(lengths)))))


def test_stopped_reads_stop_strings_as_cut_does():
    assert not answers.stopped("\n\n", ["\n"])  # leading blank lines do not end an answer
    assert answers.stopped("\nA box\n", ["\n"]) and answers.cut("\nA box\n", ["\n"]) == "\nA box"
    assert not answers.stopped("A box", ["\n", "."]) and answers.stopped("A box.", ["\n", "."])


def test_seq2seq_decoding_spends_no_step_on_a_finished_answer(tiny, built_all):
    """A T5 batch: the encoder runs once over the batch, and the decoder is fed one token per answer token (each
    row up to its EOS or stop string), not the batch's longest answer for every row; the texts are the full-budget
    path's."""
    model, tokenizer = tiny["seq2seq"]
    requests = _requests(built_all, "newton", "released-generate", "track2_mc", tokenizer, n=12)
    decoder_tokens, encoder_rows = [], []
    hooks = [model.register_forward_pre_hook(lambda m, a, k: decoder_tokens.append(k["decoder_input_ids"].numel()), with_kwargs=True),
             model.get_encoder().register_forward_pre_hook(lambda m, a, k: encoder_rows.append(k["input_ids"].shape[0]), with_kwargs=True)]  # fmt: skip
    try:
        with torch.inference_mode():
            texts = _texts(generation.generate(model, tokenizer, requests, torch.device("cpu"), seq2seq=True, max_batch=12))
    finally:
        for hook in hooks:
            hook.remove()
    with torch.inference_mode():
        needed = _answer_lengths(model, tokenizer, requests, seq2seq=True)
        assert texts == _full_budget_then_cut(model, tokenizer, requests, seq2seq=True)
    assert len(set(needed)) > 2 and encoder_rows == [12]
    assert sum(decoder_tokens) == sum(needed) < len(requests) * max(needed)


@pytest.mark.parametrize("family", ["causal", "seq2seq"])
def test_a_generation_config_with_logits_processors_decodes_through_generate(tiny, built_all, family):
    """A model whose generation config sets a repetition penalty and an n-gram ban answers as ``model.generate``
    answers with them (the released scripts' generate and pipeline calls apply them), not as plain argmax."""
    model, tokenizer = tiny[family]
    requests = _requests(built_all, "newton", "released-generate", "track1", tokenizer, n=12)
    requests = [{**r, "max_new_tokens": 12, "stop": []} for r in requests]  # long answers, where the penalty shows
    config = model.generation_config
    with torch.inference_mode():
        plain = _texts(generation.generate(model, tokenizer, requests, torch.device("cpu"), seq2seq=family == "seq2seq"))
        try:
            config.repetition_penalty, config.no_repeat_ngram_size = 5.0, 2
            assert not generation.argmax_decodes(model)
            penalised = _texts(generation.generate(model, tokenizer, requests, torch.device("cpu"), seq2seq=family == "seq2seq"))
            expected = _full_budget_then_cut(model, tokenizer, requests, family == "seq2seq")
        finally:
            config.repetition_penalty, config.no_repeat_ngram_size = None, None
    assert generation.argmax_decodes(model)
    assert penalised == expected and penalised != plain


def _one_at_a_time(model, prompts: list[list[int]], budget: int, seq2seq: bool = False) -> list[list[int]]:
    """Greedy answer tokens of each prompt alone through ``model.generate`` (no padding anywhere)."""
    answers = []
    for prompt in prompts:
        ids = torch.tensor([prompt])
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=budget, do_sample=False,
                             num_beams=1, pad_token_id=0, eos_token_id=None)  # fmt: skip
        answers.append(out[0, 1 if seq2seq else len(prompt) :].tolist())
    return answers


def _decoded(model, prompts: list[list[int]], budget: int, rows: int | None = None) -> list[list[int]] | None:
    """Greedy answer tokens of causal ``prompts`` through the continuous batch (``rows`` slots: all by default), each
    running to ``budget`` (no EOS, no stop string)."""
    return continuous.decode(model, prompts, [budget] * len(prompts), lambda row, tokens: False, None, torch.device("cpu"),
                             rows or len(prompts))  # fmt: skip


def test_alibi_models_get_no_padding_between_prefix_and_own_tokens(monkeypatch):
    """MPT biases attention by cache slot, not by position_ids: its prompts sharing a prefix but of different own
    lengths run in exact-length groups, and the answers are each prompt's alone (padded together, they are not)."""
    from transformers import MptConfig, MptForCausalLM

    torch.manual_seed(0)
    config = MptConfig(vocab_size=100, d_model=32, n_layers=2, n_heads=2, max_seq_len=128, initializer_range=0.3, eos_token_id=99)
    model = MptForCausalLM(config).eval()
    rng = random.Random(0)
    trials = []
    for _ in range(12):
        shared = [rng.randrange(1, 98) for _ in range(80)]
        trials.append([shared + [rng.randrange(1, 98)], shared + [rng.randrange(1, 98) for _ in range(8)]])
    prompts = [prompt for trial in trials for prompt in trial]
    assert not continuous.positions_follow_ids(model)
    with torch.inference_mode():
        expected = _one_at_a_time(model, prompts, 6)
        assert _decoded(model, prompts, 6, rows=4) == expected  # four slots: the pairs come in as groups
        monkeypatch.setattr(continuous, "positions_follow_ids", lambda model: True)  # padded as for a rotary model
        assert _decoded(model, prompts, 6, rows=4) != expected


def test_seq2seq_prompts_are_right_padded_for_learned_positions():
    """BART's encoder counts positions from the first token: a batch of prompts of different lengths answers as
    each prompt alone."""
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(0)
    config = BartConfig(vocab_size=100, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                        init_std=0.3, forced_eos_token_id=None, forced_bos_token_id=None)  # fmt: skip
    model = BartForConditionalGeneration(config).eval()
    rng = random.Random(0)
    prompts = [[rng.randrange(3, 98) for _ in range(n)] for n in (8, 3, 2, 11, 5)]
    assert generation.argmax_decodes(model)
    with torch.inference_mode():
        answers = generation._greedy_seq2seq(
            model, prompts, 6, lambda r, t: False, None, config.pad_token_id, torch.device("cpu")
        )
        assert answers == _one_at_a_time(model, prompts, 6, seq2seq=True)


def test_logits_processors_never_see_padding():
    """With an n-gram ban in the generation config and a pad id that is a real token (GPT-2 has no pad token),
    ``model.generate`` reads prompts of one length at a time: a batch answers as each prompt alone."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(1)
    model = GPT2LMHeadModel(
        GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=256, initializer_range=0.3)
    ).eval()
    model.generation_config.no_repeat_ngram_size = 2

    class Digits:  # a tokenizer of space-separated ids, without a pad token
        pad_token_id = eos_token_id = None
        model_max_length = int(1e30)

        def __call__(self, texts, add_special_tokens=True):  # a list of texts, as the engine encodes its prompts at once
            return {"input_ids": [[int(x) for x in text.split()] for text in texts]}

        def decode(self, ids, skip_special_tokens=True):
            return " ".join(map(str, ids))

        def batch_decode(self, rows, skip_special_tokens=True):
            return [self.decode(row) for row in rows]

    prompts = [[41, 74, 31, 38, 0], [5, 6, 7, 8, 9, 10, 11, 12], [3, 4]]
    requests = [{"prompt": " ".join(map(str, p)), "max_new_tokens": 4, "stop": []} for p in prompts]
    with torch.inference_mode():
        texts = _texts(generation.generate(model, Digits(), requests, torch.device("cpu")))
        assert texts == [" ".join(map(str, answer)) for answer in _one_at_a_time(model, prompts, 4)]


def _tiny_gemma3(window: int):
    """A random Gemma-3 text model (its layers sliding-window but every sixth) with a ``window``-token window."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    config = Gemma3TextConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=6, num_attention_heads=2,
                              num_key_value_heads=1, head_dim=16, sliding_window=window, max_position_embeddings=256,
                              initializer_range=0.3, eos_token_id=99, pad_token_id=0, bos_token_id=1)  # fmt: skip
    return Gemma3ForCausalLM(config).eval()


@pytest.mark.parametrize("window, fast", [(64, True), (12, False)])
def test_sliding_window_models_take_the_fast_path_where_the_window_holds_everything(window, fast, monkeypatch):
    """Gemma-3's sliding-window layers: while every cache fits in the window, generation runs physprobe's loop
    (prefix runs, rows leaving) and scoring shares prefixes; past it, ``model.generate`` and whole sequences. Both
    equal each prompt alone (generation) and each sequence whole (scoring, 1e-4)."""
    model = _tiny_gemma3(window)
    rng = random.Random(0)
    shared = [rng.randrange(2, 98) for _ in range(6)]
    prompts = [[1, *shared, *[rng.randrange(2, 98) for _ in range(n)]] for n in (1, 3, 4, 9)]
    fell_back = []
    original = generation._generated
    monkeypatch.setattr(generation, "_generated", lambda *a, **k: fell_back.append(1) or original(*a, **k))
    with torch.inference_mode():
        answers = _decoded(model, prompts, 6, rows=2)
        assert (answers is not None) == fast
        if answers is not None:
            assert answers == _one_at_a_time(model, prompts, 6)
        questions = [[p, p[:-1] + [rng.randrange(2, 98), rng.randrange(2, 98)]] for p in prompts]
        fed = []
        hook = model.register_forward_pre_hook(lambda m, a, k: fed.append(k["input_ids"].numel()), with_kwargs=True)
        totals = scoring.mean_token_logprobs(model, None, questions, torch.device("cpu"))
        hook.remove()
        whole = [[torch.log_softmax(model(torch.tensor([s])).logits[0, :-1].float(), -1).gather(-1, torch.tensor(s[1:])[:, None])
                  .mean().item() for s in options] for options in questions]  # fmt: skip
    assert max(abs(a - b) for t, w in zip(totals, whole) for a, b in zip(t, w)) <= 1e-4
    # Shared prefixes fed once on the fast path; every sequence whole on the other.
    assert (sum(fed) < sum(len(s) for options in questions for s in options)) == fast


@pytest.mark.parametrize("every", [3, 8])
def test_seq2seq_answers_copied_to_the_host_every_few_steps_are_the_same(tiny, built_all, every, monkeypatch):
    """Seq2seq decoding with the answers copied to the host every ``every`` steps (as on an accelerator): the same
    texts as a copy after every step; a finished row decodes at most ``every`` - 1 tokens more before it leaves; a copy
    every ``every`` steps (or at the budget), not one per step."""
    model, tokenizer = tiny["seq2seq"]
    requests = _requests(built_all, "newton", "released-generate", "track2_mc", tokenizer, n=12)
    with torch.inference_mode():
        expected = _texts(generation.generate(model, tokenizer, requests, torch.device("cpu"), seq2seq=True, max_batch=12))
        needed = _answer_lengths(model, tokenizer, requests, seq2seq=True)
    calls = []  # per decoding step: its rows, and whether the answers were copied to the host after it
    add = generation._Answers.add

    def counted(self, tokens):
        keep = add(self, tokens)
        calls.append((len(tokens), keep is not None))
        return keep

    monkeypatch.setattr(stepping, "SYNC_EVERY", {"cpu": every})
    monkeypatch.setattr(generation._Answers, "add", counted)
    with torch.inference_mode():
        texts = _texts(generation.generate(model, tokenizer, requests, torch.device("cpu"), seq2seq=True, max_batch=12))
    assert texts == expected and len(set(needed)) > 2
    slots = sum(rows for rows, _ in calls)  # tokens generated: a row per step
    assert sum(needed) < slots <= sum(needed) + (every - 1) * len(requests)
    copies = [k for k, (_, copied) in enumerate(calls) if copied]
    assert all(later - earlier == every for earlier, later in zip([-1, *copies], copies[:-1]))  # the last: at the end
    assert len(copies) == -(-len(calls) // every) < len(calls)


@pytest.mark.parametrize("every", [3, 8])
def test_causal_answers_read_every_few_steps_are_the_same(tiny, built_all, every, monkeypatch):
    """The continuous batch with its answers read on the host every ``every`` steps or prefills (as on an
    accelerator), 12 prompts through 5 slots: the same texts as a read after every step; a row whose answer ended
    decodes at most ``every`` - 1 tokens more before its slot is freed; every read but the last takes ``every``."""
    model, tokenizer = tiny["causal"]
    requests = _requests(built_all, "newton", "released-generate", "track2_mc", tokenizer, n=12)
    with torch.inference_mode():
        expected = _texts(generation.generate(model, tokenizer, requests, torch.device("cpu"), max_batch=5))
        needed = _answer_lengths(model, tokenizer, requests, seq2seq=False)
    fed, reads = [], []  # per step the rows whose end is not yet read; per read the entries it took
    step, read = continuous._Slots.step, continuous._Ledger.read
    monkeypatch.setattr(continuous._Slots, "step", lambda self, *a: fed.append(self.busy()) or step(self, *a))
    monkeypatch.setattr(continuous._Ledger, "read", lambda self: reads.append(len(self.pending)) or read(self))
    monkeypatch.setattr(stepping, "SYNC_EVERY", {"cpu": every})
    with torch.inference_mode():
        texts = _texts(generation.generate(model, tokenizer, requests, torch.device("cpu"), max_batch=5))
    assert texts == expected and len(set(needed)) > 2
    # Each answer's first token comes from its prompt's pass, each other from a step.
    assert sum(needed) - len(requests) < sum(fed) <= sum(needed) - len(requests) + (every - 1) * len(requests)
    assert set(reads[:-1]) == {every} and len(reads) < len(fed)


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_decoding_steps_take_a_4d_mask_in_the_attention_implementations_form(implementation, monkeypatch):
    """Prompts of several lengths (left-padded in one decoding batch) on a Llama in SDPA or eager attention: each step's
    mask goes in as a 4D mask (boolean, or additive), and the answers are each prompt's alone."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, initializer_range=0.3, attn_implementation=implementation)  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    rng = random.Random(1)
    prompts = [[1, *[rng.randrange(2, 98) for _ in range(n)]] for n in (2, 9, 5, 14)]
    masks = []
    original = continuous.step_mask
    monkeypatch.setattr(continuous, "step_mask", lambda real, model: masks.append(original(real, model)) or masks[-1])
    with torch.inference_mode():
        answers = _decoded(model, prompts, 6)
        assert answers == _one_at_a_time(model, prompts, 6)
    assert masks and all(m.dim() == 4 for m in masks)
    assert {m.dtype for m in masks} == ({torch.bool} if implementation == "sdpa" else {torch.float32})


def test_an_answer_that_ends_before_its_budget_spares_the_rest_of_its_share():
    """Four prompts through two slots, each with a budget of 6 tokens, ended after 2, 6, 1 and 4 (``done``): the count
    ends at the four requests, and what each spares is its unused tokens' share of its steps, worked by hand. The
    prompts' passes read 3, 2, 1 and 2 tokens ([1, 2, 4, 5] shares [1, 2] with [1, 2, 3] before it in token order),
    1.75, 1.5, 1.25 and 1.5 steps: row 0 spares 4 of 7.75 steps, row 1 none, row 2 5 of 7.25, row 3 2 of 7.5."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=20)).eval()
    prompts, ends = [[1, 2, 3], [1, 2, 4, 5], [6], [7, 8]], [2, 6, 1, 4]
    counter = type("Counter", (), {"n": 0.0, "spared": [], "update": lambda self, n: setattr(self, "n", self.n + n),
                                   "spare": lambda self, n: self.spared.append(n)})()  # fmt: skip
    shares = stepping.Shares(counter, [6] * 4, unshared_lengths(prompts))
    with torch.inference_mode():
        answers = continuous.decode(model, prompts, [6] * 4, lambda row, tokens: len(tokens) >= ends[row], None,
                                    torch.device("cpu"), 2, shares)  # fmt: skip
    shares.finish()
    assert [len(answer) for answer in answers] == ends
    assert counter.n == pytest.approx(4)
    assert sum(counter.spared) == pytest.approx(4 / 7.75 + 5 / 7.25 + 2 / 7.5)
