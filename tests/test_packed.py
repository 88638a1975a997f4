"""The packed (tree) plan for causal log-likelihoods against every sequence run whole: GPT-2 (SDPA and eager), Llama,
Gemma-3's sliding windows, ALiBi models (which take the cached plan instead); tokens fed, head rows and passes
counted; rows and batches planned within their budgets; request types through the hf backend."""

import itertools
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from physprobe.backends.hf import attention, batching, packed, score_loaded, scoring
from physprobe.backends.hf.model import Loaded
from physprobe.protocols.requests import Choice, MeanTokens, YesNo

VOCAB = 100


def _questions(seed: int = 0, n: int = 30) -> list[list[list[int]]]:
    """Token-id questions of every shape: prefixes of 1 to 20 tokens, 1 to 5 options of 1 to 8 own tokens, an option
    that is a prefix of another, and options sharing no first token."""
    rng = random.Random(seed)
    questions = []
    for _ in range(n):
        prefix = [1] + [rng.randrange(2, VOCAB) for _ in range(rng.randrange(0, 20))]
        questions.append(
            [prefix + [rng.randrange(2, VOCAB) for _ in range(rng.randrange(1, 9))] for _ in range(rng.randrange(1, 6))]
        )
    said = [1, 7, 8, 9]
    questions.append([said, said + [10], said + [10, 11, 12]])  # each a prefix of the next
    questions.append([[5, 6, 7], [8, 9], [4, 3, 2, 1]])  # nothing shared
    return questions


def _whole(model, questions, count_prefix: bool) -> list[list[float]]:
    """Each sequence run alone: the sum of its tokens' log-probabilities from its first own token on (``count_prefix``:
    from its second token on)."""
    totals = []
    with torch.inference_mode():
        for options in questions:
            n = packed.shared_length(options)
            row = []
            for s in options:
                logprobs = torch.log_softmax(model(torch.tensor([s])).logits[0, :-1].float(), -1).gather(
                    -1, torch.tensor(s[1:])[:, None]
                )[:, 0]
                row.append(logprobs[0 if count_prefix else max(n - 1, 0) :].sum().item())
            totals.append(row)
    return totals


def _gpt2(implementation="sdpa"):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=32, n_layer=2, n_head=4, initializer_range=0.2,
                        bos_token_id=1, eos_token_id=1, attn_implementation=implementation)  # fmt: skip
    return GPT2LMHeadModel(config).eval()


def _llama(implementation="sdpa"):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, initializer_range=0.2, attn_implementation=implementation)  # fmt: skip
    return LlamaForCausalLM(config).eval()


def _gemma3(window: int):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    config = Gemma3TextConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=6, num_attention_heads=2,
                              num_key_value_heads=1, head_dim=16, sliding_window=window, max_position_embeddings=256,
                              initializer_range=0.3, attn_implementation="sdpa")  # fmt: skip
    return Gemma3ForCausalLM(config).eval()


def _mpt():
    from transformers import MptConfig, MptForCausalLM

    torch.manual_seed(0)
    return MptForCausalLM(
        MptConfig(vocab_size=VOCAB, d_model=32, n_layers=2, n_heads=2, max_seq_len=128, initializer_range=0.3)
    ).eval()


def _bloom():
    from transformers import BloomConfig, BloomForCausalLM

    torch.manual_seed(0)
    return BloomForCausalLM(BloomConfig(vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=2, initializer_range=0.3)).eval()


def _passes(model):
    """Forward passes, tokens fed and vocabulary-head rows of every call of ``model``."""
    seen = {"passes": 0, "fed": 0, "head": 0}

    def count(module, args, kwargs, out):
        seen["passes"] += 1
        seen["fed"] += kwargs["input_ids"].numel()
        seen["head"] += out.logits.shape[0] * out.logits.shape[1]

    model.register_forward_hook(count, with_kwargs=True)
    return seen


def _other(config: str, model: str, **shape):
    """A random model of another architecture through transformers' attention interface."""
    import transformers

    def make():
        torch.manual_seed(0)
        return getattr(transformers, model)(getattr(transformers, config)(vocab_size=VOCAB, **shape)).eval()

    return make


MODELS = {"gpt2": _gpt2, "gpt2-eager": lambda: _gpt2("eager"), "llama": _llama, "llama-eager": lambda: _llama("eager"),
          "gemma3-wide-window": lambda: _gemma3(64),
          "opt": _other("OPTConfig", "OPTForCausalLM", hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
                        word_embed_proj_dim=32, max_position_embeddings=128),  # learned positions, offset by 2
          "qwen2": _other("Qwen2Config", "Qwen2ForCausalLM", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2),
          "gpt-neox": _other("GPTNeoXConfig", "GPTNeoXForCausalLM", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, rotary_pct=0.5),  # rotary on half of each head
          "gemma2-softcap": _other("Gemma2Config", "Gemma2ForCausalLM", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=64)}  # eager: softcapping  # fmt: skip


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("count_prefix", [False, True])
def test_packed_plan_equals_every_sequence_whole_in_one_pass_per_batch(name, count_prefix):
    """Within 1e-4 of each sequence alone (float32); one forward pass per batch of ``tree_batches``; the tokens fed are
    the batch's rows (``pack_rows``) times its widest tree, of which the trees' own are each prefix once and every
    option's tokens but its last; one head row per scored position (the prefix's last serving every option)."""
    model = MODELS[name]()
    questions = _questions()
    assert packed.fits(model, questions)
    trees = [packed.Tree.of(options, count_prefix) for options in questions]
    own = sum(len(t.ids) for t in trees)
    assert [packed.Tree.length(options) for options in questions] == [len(t.ids) for t in trees]  # what batches plan on
    prefixes = [packed.shared_length(options) for options in questions]
    assert own == sum(n + sum(len(s) - n - 1 for s in options) for n, options in zip(prefixes, questions))
    heads = sum(len({token for token, _, _ in t.heads}) for t in trees)
    assert heads == sum((max(n - 1, 0) if count_prefix else 0) + (1 if n else 0) + sum(len(s) - n - 1 for s in options)
                        for n, options in zip(prefixes, questions))  # fmt: skip
    whole = _whole(model, questions, count_prefix)
    seen = _passes(model)
    for batch_tokens in (120, 100_000):  # many batches, and one
        seen.update(passes=0, fed=0, head=0)
        with torch.inference_mode():
            fast = packed.totals(model, questions, torch.device("cpu"), batch_tokens, 64, None, count_prefix)
        batches = packed.tree_batches(
            [len(t.ids) for t in trees], batch_tokens, 64, batching.pass_tokens(model, torch.device("cpu"))
        )
        widths = [max(len(trees[i].ids) for i in b) for b in batches]
        rows = [len(packed.pack_rows([len(trees[i].ids) for i in b], w)) for b, w in zip(batches, widths)]
        assert seen == {"passes": len(batches), "fed": sum(r * w for r, w in zip(rows, widths)), "head": heads}
        assert len(batches) < len({len(t.ids) for t in trees})  # fewer passes than lengths
        assert max(abs(a - b) for f, w in zip(fast, whole) for a, b in zip(f, w)) <= 1e-4


@pytest.mark.parametrize("make, packs", [(lambda: _gemma3(12), False), (_mpt, False), (_bloom, False), (_gpt2, True)])
def test_models_that_cannot_take_a_tree_mask_take_the_cached_plan(make, packs, monkeypatch):
    """A sliding window narrower than a sequence, or ALiBi (MPT, Bloom: tokens placed by slot, outside transformers'
    attention interface), takes the cached plan; every model's scores equal each sequence whole."""
    model = make()
    questions = _questions(seed=1, n=12)
    assert packed.fits(model, questions) == packs
    used = []
    for plan in ("totals", "cached_totals"):
        original = getattr(packed if plan == "totals" else scoring, plan)
        monkeypatch.setattr(
            packed if plan == "totals" else scoring, plan, lambda *a, _o=original, _p=plan, **k: used.append(_p) or _o(*a, **k)
        )
    for count_prefix in (False, True):
        fast = scoring.option_totals(model, questions, torch.device("cpu"), None, None, None, count_prefix)
        whole = _whole(model, questions, count_prefix)
        assert max(abs(a - b) for f, w in zip(fast, whole) for a, b in zip(f, w)) <= 1e-4
    assert used == (["totals"] if packs else ["cached_totals"]) * 2


def test_a_bfloat16_model_computes_in_bfloat16():
    """Weights loaded in bf16 run as they are (no autocast, no float32 copy): the packed scores equal the bf16 model's
    own whole-sequence scores within bf16 rounding, and differ from the float32 model's."""
    model = _llama()
    questions = _questions(seed=2, n=8)
    full = _whole(model, questions, False)
    model = model.to(torch.bfloat16)
    dtypes = []
    model.model.layers[0].mlp.register_forward_hook(lambda m, a, out: dtypes.append(out.dtype))
    with torch.inference_mode():
        fast = packed.totals(model, questions, torch.device("cpu"), 8192, 64, None, False)
    assert set(dtypes) == {torch.bfloat16}
    half = _whole(model, questions, False)
    assert max(abs(a - b) for f, w in zip(fast, half) for a, b in zip(f, w)) <= 0.1
    assert max(abs(a - b) for f, w in zip(fast, full) for a, b in zip(f, w)) > 1e-4


def test_request_types_through_the_backend_equal_whole_sequences():
    """``Choice`` (sentence sums), ``MeanTokens`` and ``YesNo`` requests, scored through the hf backend on the packed
    plan, equal each sequence run whole."""

    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {"<unk>": 0, "<s>": 1, **{str(i): i for i in range(2, VOCAB - 2)}, "YES": VOCAB - 2, "NO": VOCAB - 1}
    backend = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="<s>", pad_token="<unk>"
    )
    model = _gpt2()
    loaded = Loaded(model, tokenizer, "causal", torch.device("cpu"))
    choices = [Choice("5 6 7", (" 8", " 9 10 11", " 12 13")), Choice("20 21", (" 22", " 23"))]
    got = [r.values for r in score_loaded(loaded, choices)]
    expected = _whole(
        model, [scoring.tokenize_options(tokenizer, [r.context + c for c in r.continuations]) for r in choices], False
    )
    assert max(abs(a - b) for g, e in zip(got, expected) for a, b in zip(g, e)) <= 1e-4
    mean = [MeanTokens(options=(("3 4", " 5"), ("3 4", " 6 7")), specials="bos_eos")]
    ids = [[1, 3, 4, 5, 1], [1, 3, 4, 6, 7, 1]]  # BOS, the segments' ids, EOS
    (got,) = [r.values for r in score_loaded(loaded, mean)]
    assert got == pytest.approx([total / (len(s) - 1) for total, s in zip(_whole(model, [ids], True)[0], ids)], abs=1e-4)
    (got,) = [r.values for r in score_loaded(loaded, [YesNo(prompts=("30 31 32", "40"))])]
    for p, prompt in zip(got, ("30 31 32", "40")):
        yes, no = _whole(model, [scoring.tokenize_options(tokenizer, [f"{prompt} YES", f"{prompt} NO"])], False)[0]
        assert p == pytest.approx(float(torch.softmax(torch.tensor([yes, no]), 0)[0]), abs=1e-4)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=12), st.integers(1, 120), st.integers(1, 6), st.integers(0, 40))
def test_batches_hold_every_tree_once_within_budget_at_the_least_cost(lengths, batch_tokens, max_batch, pass_cost):
    """Every tree in one batch; a batch of more than one tree within ``max_batch`` trees and ``batch_tokens`` tokens (a
    row per tree, as wide as its widest); and the plan's cost (passes x ``pass_cost`` + rows x width) no more than any
    cut of the lengths, sorted, into groups of whole lengths (worked by brute force), each cut into batches as the
    budget allows, its rows as wide as the group's widest."""
    batches = packed.tree_batches(lengths, batch_tokens, max_batch, pass_cost)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        width = max(lengths[i] for i in batch)
        assert len(batch) == 1 or (len(batch) <= max_batch and len(batch) * width <= batch_tokens)

    def cost(groups) -> int:
        total = 0
        for group in groups:
            per_pass = max(1, min(max_batch, batch_tokens // group[0]))
            total += -(-len(group) // per_pass) * pass_cost + len(group) * group[0]
        return total

    ordered = sorted(lengths, reverse=True)
    boundaries = [k for k in range(1, len(ordered)) if ordered[k] != ordered[k - 1]]  # where a length ends
    best = min(cost([ordered[a:b] for a, b in zip([0, *cut], [*cut, len(ordered)])])
               for k in range(len(boundaries) + 1) for cut in itertools.combinations(boundaries, k))  # fmt: skip
    assert sum(pass_cost + len(b) * max(lengths[i] for i in b) for b in batches) <= best


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=30), st.integers(1, 40))
def test_rows_hold_every_tree_once_within_their_width(lengths, extra):
    """``pack_rows``: every tree in one row, no row wider than the width, fewer rows than trees where two fit one."""
    width = max(lengths) + extra
    rows = packed.pack_rows(lengths, width)
    assert sorted(i for r in rows for i in r) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in r) <= width for r in rows)
    smallest = sorted(lengths)
    assert len(rows) < len(lengths) or len(lengths) == 1 or smallest[0] + smallest[1] > width


def test_custom_masks_take_each_implementations_form():
    """SDPA reads a boolean mask, eager an additive one (0 or the dtype's minimum)."""
    allowed = torch.tensor([[[True, False], [True, True]]])
    assert attention.custom_mask(allowed, _gpt2()).dtype == torch.bool
    additive = attention.custom_mask(allowed, _gpt2("eager"))
    assert (
        additive.shape == (1, 1, 2, 2)
        and additive[0, 0, 1].tolist() == [0.0, 0.0]
        and additive[0, 0, 0, 1] == torch.finfo(torch.float32).min
    )


def test_flex_attention_takes_the_cached_plan_and_is_refused_on_cpu(tmp_path):
    """Flex attention takes no tree mask (``takes_custom_masks``), and on CPU, where torch 2.13's inductor cannot
    compile it under a padded batch's mask, ``--model-args attn_implementation=flex_attention`` is one line before
    any weight loads."""
    from physprobe.backends.hf.model import FLEX_ON_CPU, describe_model
    from physprobe.errors import ModelOptionError

    model = _llama()
    model.set_attn_implementation("flex_attention")
    assert not attention.takes_custom_masks(model) and not packed.fits(model, _questions(seed=3, n=6))
    model.save_pretrained(tmp_path / "llama")
    with pytest.raises(ModelOptionError) as refused:
        describe_model(str(tmp_path / "llama"), "cpu", model_args={"attn_implementation": "flex_attention"})
    assert str(refused.value) == FLEX_ON_CPU


@pytest.mark.parametrize("family", ["causal", "seq2seq", "mlm", "nli"])
def test_pass_costs_are_measured_once_per_model_on_an_accelerator(family, monkeypatch):
    """On CPU a pass costs the measured table's 32 tokens; elsewhere ``calibrate`` measures it once per model and
    device (on its trunk: an encoder-decoder's encoder), a power of two."""
    from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification, T5Config, T5ForConditionalGeneration

    bert = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    model = {"causal": _llama, "seq2seq": lambda: T5ForConditionalGeneration(T5Config(vocab_size=VOCAB, d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=4)),
             "mlm": lambda: BertForMaskedLM(bert), "nli": lambda: BertForSequenceClassification(bert)}[family]().eval()  # fmt: skip
    assert batching.pass_tokens(model, torch.device("cpu")) == 32
    measured = []
    monkeypatch.setattr(
        batching,
        "calibrate",
        lambda m, d, _c=batching.calibrate: measured.append(d) or _c(m, torch.device("cpu"), rows=2, width=8),
    )
    monkeypatch.setattr(batching, "PASS_TOKENS", {})  # as on a device without a measured table
    cost = batching.pass_tokens(model, torch.device("cpu"))
    assert cost >= 1 and cost & (cost - 1) == 0
    assert batching.pass_tokens(model, torch.device("cpu")) == cost and len(measured) == 1


def test_batches_laid_out_ahead_on_a_thread_give_the_same_sums_even_when_one_runs_out_of_memory(monkeypatch):
    """Where torch leaves a core free (as ``threads.choose`` does for a small model on a CPU): each next batch laid out
    on a thread while this one runs; the sums equal, bit for bit, those of batches laid out in turn (every core
    torch's); a batch that runs out of memory runs again halved (its halves laid out in turn), the sums then within
    1e-4 (other batches, other float sums)."""
    import threading

    model, questions = _gpt2(), _questions(seed=3, n=40)
    monkeypatch.setattr(packed.threads, "cores", lambda: torch.get_num_threads())  # every core torch's: in turn
    with torch.inference_mode():
        in_turn = packed.totals(model, questions, torch.device("cpu"), 150, 64, None, True)
    laid_on, layout, batch_sums = [], packed.layout, packed._batch_sums
    failed = []

    def watched(trees, n_options, pin=False):
        laid_on.append(threading.current_thread().name)
        return layout(trees, n_options, pin)

    def out_of_memory_once(model, laid, device):
        if failed == [] and laid.ids.shape[0] > 1:
            failed.append(laid.ids.shape[0])
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return batch_sums(model, laid, device)

    monkeypatch.setattr(packed.threads, "cores", lambda: torch.get_num_threads() + 1)  # a core torch leaves free
    monkeypatch.setattr(packed, "layout", watched)
    with torch.inference_mode():
        ahead = packed.totals(model, questions, torch.device("cpu"), 150, 64, None, True)
    assert ahead == in_turn
    here = threading.current_thread().name
    assert laid_on.count(here) == 1 and len(laid_on) > 2  # the first batch here, the others ahead on the thread
    laid_on.clear()
    monkeypatch.setattr(packed.threads, "cores", lambda: torch.get_num_threads())
    with torch.inference_mode():
        assert packed.totals(model, questions, torch.device("cpu"), 150, 64, None, True) == in_turn
    assert set(laid_on) == {here}  # every core torch's: no thread takes one
    monkeypatch.setattr(packed.threads, "cores", lambda: torch.get_num_threads() + 1)
    monkeypatch.setattr(packed, "_batch_sums", out_of_memory_once)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    with torch.inference_mode():
        halved = packed.totals(model, questions, torch.device("cpu"), 150, 64, None, True)
    assert failed and max(abs(a - b) for h, t in zip(halved, in_turn) for a, b in zip(h, t)) <= 1e-4
