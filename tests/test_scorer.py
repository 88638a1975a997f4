"""The scorer with tiny models of every family: exactness, masked-LM candidates, NLI labels, resume,
errors, the CLI end to end with a report, and one check that a trained model is scored right."""

import json

import datasets
import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM, AutoTokenizer

from physprobe import protocols
from physprobe.backends import hf
from physprobe.backends.hf import batching, masked, nli, packed, scoring, seq2seq
from physprobe.backends.hf import model as hf_model
from physprobe.cli import main
from physprobe.data import registry, sampling
from physprobe.errors import PhysprobeError
from physprobe.protocols import tokenized
from physprobe.record import spec
from physprobe.report import paper_tables
from physprobe.run import runner
from tests.interrupting import interrupt_second_call

from . import tiny_models


@pytest.fixture(scope="module")
def corpus(built_all):
    texts = []
    prost = datasets.load_dataset(str(built_all / "prost"), "default", split="test")
    texts += [f"{r['context']} {r['question']} {r['A']} {r['B']} {r['C']} {r['D']}" for r in prost.select(range(0, 18736, 5))]
    cccons = datasets.load_dataset(str(built_all / "cccons"), "ordinary", split="test")
    texts += [f"{t} larger bigger smaller shorter" for t in cccons["generative_input"]]
    texts += datasets.load_dataset(str(built_all / "newton"), "track3", split="test").select(range(3000))["question"]
    texts += datasets.load_dataset(str(built_all / "text2afford"), "default", split="test")["sentence"]
    return texts


@pytest.fixture(scope="module")
def tiny(corpus, tiny_model):
    return {
        "causal": tiny_model("causal", corpus, "gpt"),
        "mlm": tiny_model("masked", corpus, "bert"),
        "seq2seq": tiny_model("seq2seq", corpus, "t5"),
        "nli": tiny_model("nli", corpus, "nli"),
    }


def naive_logprobs(model, tokenizer, texts):
    """Each full sequence on its own, summing the log-probabilities after the options' shared tokens."""
    ids = scoring.tokenize_options(tokenizer, texts)
    shared = scoring.common_prefix(ids)
    out = []
    for sequence in ids:
        logprobs = torch.log_softmax(model(torch.tensor([sequence])).logits[0].float(), dim=-1)
        out.append(sum(logprobs[i - 1, sequence[i]].item() for i in range(shared, len(sequence))))
    return out


@pytest.mark.parametrize(("plan", "batch_tokens"), [  # small batches, and one batch mixing option counts
    ("packed", 100_000), pytest.param("packed", 300, marks=pytest.mark.slow),
    pytest.param("cached", 300, marks=pytest.mark.slow), pytest.param("cached", 100_000, marks=pytest.mark.slow)])  # fmt: skip
def test_shared_prefix_scoring_equals_naive_scoring(tiny, built_all, batch_tokens, plan, monkeypatch):
    model = AutoModelForCausalLM.from_pretrained(tiny["causal"]).eval()
    if plan == "cached":
        monkeypatch.setattr(packed, "fits", lambda model, tokenized: False)
    tokenizer = AutoTokenizer.from_pretrained(tiny["causal"])
    prost = datasets.load_dataset(str(built_all / "prost"), "default", split="test").select(range(0, 18736, 1171))
    sentence_sum = registry.evaluation("prost").protocol("sentence-sum")
    questions = [sentence_sum.build(row, "default").texts() for row in prost]
    questions.append(["Short.", "A much longer option with many more tokens in it."])  # ragged suffixes
    fast = scoring.sequence_logprobs(model, tokenizer, questions, torch.device("cpu"), batch_tokens=batch_tokens)
    with torch.inference_mode():
        reference = [naive_logprobs(model, tokenizer, q) for q in questions]
    difference = max(abs(a - b) for f, r in zip(fast, reference) for a, b in zip(f, r))
    assert difference <= 1e-4


def test_masked_lm_one_pass_per_text_and_mask_position_only(tiny):
    model = AutoModelForMaskedLM.from_pretrained(tiny["mlm"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny["mlm"])
    rows_seen, head_inputs = [], []
    model.base_model.register_forward_hook(
        lambda m, args, kwargs, out: rows_seen.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    masked._mlm_head(model).register_forward_hook(lambda m, args, out: head_inputs.append(tuple(args[0].shape)))
    texts = ["A person is trying to stack [MASK].", "The [MASK] is the easiest to roll."]
    words = [["books", "eggs", "zzzqqq"], ["apple", "ball", "egg", "can"]]
    scores = masked.masked_logprobs(model, tokenizer, texts, words, torch.device("cpu"))
    assert sum(rows_seen) == 2  # one pass per text, whatever the number of candidates
    assert head_inputs == [(2, model.config.hidden_size)]  # vocabulary projection at the two masks only
    assert scores[0][2] is None and all(s is not None for s in scores[1])  # "zzzqqq" is several tokens
    assert protocols.argmax(scores[0]) is None  # such a question is undecided, and reported


def test_masked_lm_needs_a_mask_token(tiny):
    model = AutoModelForCausalLM.from_pretrained(tiny["causal"])
    tokenizer = AutoTokenizer.from_pretrained(tiny["causal"])
    with pytest.raises(scoring.ScoringError, match="has no mask token"):
        masked.masked_logprobs(model, tokenizer, ["a [MASK]"], [["b"]], torch.device("cpu"))


def test_entailment_label_lookup(tiny):
    assert nli.entailment_label(AutoConfig.from_pretrained(tiny["nli"])) == 2
    config = AutoConfig.from_pretrained(tiny["nli"])
    config.id2label = {0: "entailment", 1: "not_entailment"}
    assert nli.entailment_label(config) == 0
    config.id2label = {0: "LABEL_0", 1: "LABEL_1"}
    with pytest.raises(scoring.ScoringError, match="cannot find the entailment label"):
        nli.entailment_label(config)


def test_too_long_input_is_an_error_unless_truncated(tiny):
    model = AutoModelForCausalLM.from_pretrained(tiny["causal"])
    tokenizer = AutoTokenizer.from_pretrained(tiny["causal"])
    long = " ".join(["apple"] * 800)
    with pytest.raises(scoring.ScoringError, match="over the model's maximum of 512; pass --truncate"):
        scoring.sequence_logprobs(model, tokenizer, [[long + " a", long + " b"]], torch.device("cpu"))
    scores = scoring.sequence_logprobs(model, tokenizer, [[long + " a", long + " b"]], torch.device("cpu"), truncate=True)
    assert len(scores[0]) == 2


def test_method_detection_and_mismatches(tiny):
    assert hf_model.detect_family(AutoConfig.from_pretrained(tiny["causal"])) == "causal"
    assert hf_model.detect_family(AutoConfig.from_pretrained(tiny["mlm"])) == "mlm"
    assert hf_model.detect_family(AutoConfig.from_pretrained(tiny["seq2seq"])) == "seq2seq"
    assert hf_model.detect_family(AutoConfig.from_pretrained(tiny["nli"])) == "nli"
    gguf_like = AutoConfig.from_pretrained(tiny["causal"])
    gguf_like.architectures = None  # GGUF configs name only the model type
    assert hf_model.detect_family(gguf_like) == "causal"
    with pytest.raises(protocols.ProtocolError, match="newton cannot be scored with method 'mlm'"):
        spec.make(str(tiny["causal"]), "newton", method="mlm")


def test_cccons_decision_rule_in_the_pipeline():
    import math

    # log-probabilities of larger, bigger, smaller, shorter: 0.3 + 0.3 of 1.0 -> obj1 larger.
    scores = [math.log(p) for p in (0.3, 0.3, 0.2, 0.2)]
    decide = registry.evaluation("cccons").protocol("mask-four").decide
    assert decide(scores) == 0
    assert decide([math.log(p) for p in (0.1, 0.1, 0.2, 0.05)]) == 1


SLOW = pytest.mark.slow  # generation by tiny random models runs to its token budget: minutes on a CPU


@pytest.mark.parametrize("benchmark, family", [("prost", "causal"), ("prost", "mlm"), ("prost", "seq2seq"),
                                               ("cccons", "mlm"), pytest.param("cccons", "causal", marks=SLOW),
                                               pytest.param("newton", "causal", marks=SLOW), pytest.param("newton", "seq2seq", marks=SLOW),
                                               ("text2afford", "nli"), ("text2afford", "mlm"),
                                               pytest.param("text2afford", "causal", marks=SLOW)])  # fmt: skip
def test_cli_scores_every_benchmark_and_reports(tiny, built_all, tmp_path, benchmark, family, capsys):
    out = tmp_path / "run"
    args = [
        "score",
        "--model",
        str(tiny[family]),
        "--benchmark",
        benchmark,
        "--limit",
        "12",
        "--data",
        str(built_all),
        "--out",
        str(out),
    ]
    assert main(args) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    info = json.loads((out / "run.json").read_text())
    assert info["spec"]["protocol"] == registry.evaluation(benchmark).default(family).name
    predictions = pq.read_table(out / "predictions.parquet").to_pylist()
    configs = registry.evaluation(benchmark).configs
    sizes = [datasets.load_dataset(str(built_all / benchmark), c, split="test").num_rows for c in configs]
    excluded = sum(metrics[c].get("excluded", 0) for c in configs)  # rows a protocol leaves out (T5: sliding)
    assert len(predictions) == sum(min(12, n) for n in sizes) and sum(p["status"] == "excluded" for p in predictions) == excluded
    assert all(p["prediction"] == -3 and p["scores"] == [] for p in predictions if p["status"] == "excluded")
    if benchmark == "text2afford":  # pairs count where they hold a positive and a negative class
        dataset = datasets.load_dataset(str(built_all / benchmark), "default", split="test")
        sample = dataset.select(sampling.rows_to_score(dataset, "default", 12, registry.evaluation(benchmark).groups))
        ranked = sum(1 in r["labels"] and 0 in r["labels"] for r in sample)
        assert metrics["default"]["strict"]["n"] == ranked > 0 and len(predictions[0]["scores"]) == 15
    else:
        first = metrics[configs[0]]
        assert first["n"] + first.get("excluded", 0) == 12 and ("accuracy" in first or first["undecided"] == first["n"])
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert f"## {paper_tables(benchmark).title}" in report and "**physprobe runs**" in report


def test_resume_after_an_interruption(tiny, built_all, tmp_path, monkeypatch):
    out = tmp_path / "run"
    real = interrupt_second_call(monkeypatch, hf.HFBackend, "score")
    with pytest.raises(KeyboardInterrupt):
        runner.run(spec.make(str(tiny["causal"]), "prost", out=out, data=built_all, limit=20, chunk=8))
    monkeypatch.setattr(hf.HFBackend, "score", real)
    first = runner.run(spec.make(str(tiny["causal"]), "prost", out=out, data=built_all, limit=20, chunk=8))
    assert json.loads((out / "run.json").read_text())["scored_now"] == 12  # 8 came from the cache
    fresh = runner.run(spec.make(str(tiny["causal"]), "prost", out=tmp_path / "fresh", data=built_all, limit=20, chunk=8))
    assert first.metrics == fresh.metrics

    def no_weights(*args, **kwargs):
        raise AssertionError("a fully cached run loaded the model")

    monkeypatch.setattr(hf_model, "load", no_weights)  # everything is cached now: the tokenizer suffices
    again = runner.run(spec.make(str(tiny["causal"]), "prost", out=out, data=built_all, limit=20, chunk=8))
    info = json.loads((out / "run.json").read_text())
    assert again.metrics == first.metrics and info["scored_now"] == 0 and info["backend"]["model_loaded"] is False

    # Another --limit cuts other chunks; the questions the first runs cached are still not rescored.
    monkeypatch.undo()  # the model may load again
    rows = datasets.load_dataset(str(built_all / "prost"), "default", split="test")
    groups = registry.evaluation("prost").groups
    overlap = set(sampling.rows_to_score(rows, "default", 20, groups)) & set(sampling.rows_to_score(rows, "default", 30, groups))
    runner.run(spec.make(str(tiny["causal"]), "prost", out=out, data=built_all, limit=30, chunk=8))
    assert json.loads((out / "run.json").read_text())["scored_now"] == 30 - len(overlap) < 30


def test_unknown_config_is_a_clear_error(tiny, built_all, tmp_path):
    with pytest.raises(PhysprobeError, match="prost has no config 'weight'"):
        runner.run(spec.make(str(tiny["causal"]), "prost", out=tmp_path / "run", data=built_all, configs=["weight"]))


@pytest.mark.slow
def test_a_trained_tiny_lm_is_scored_right(built_all, tmp_path):
    """Train a tiny causal LM on the correct sentences of the stacking templates; it must then pick the
    right option on held-out stacking questions far above chance (25%)."""
    rows = datasets.load_dataset(str(built_all / "prost"), "stacking", split="test").to_list()
    easy = [r for r in rows if not r["name"].startswith("non")]
    generator = torch.Generator().manual_seed(0)
    order = torch.randperm(len(easy), generator=generator).tolist()
    train, held_out = [easy[i] for i in order[:960]], [easy[i] for i in order[960:1060]]
    sentences = [f"{r['context']} {r['question'].replace('[MASK]', r['ABCD'[r['label']]])}" for r in train]
    folder = tiny_models.causal_lm(
        tmp_path / "model", sentences + [f"{r['context']} {r['question']}" for r in held_out], layers=2, width=64
    )
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    encoded = [scoring.tokenize_options(tokenizer, [s])[0] for s in sentences]
    model.train()
    for epoch in range(4):
        for start in range(0, len(encoded), 32):
            batch = encoded[start : start + 32]
            width = max(len(s) for s in batch)
            ids = torch.full((len(batch), width), tokenizer.pad_token_id)
            mask = torch.zeros_like(ids)
            for row, s in enumerate(batch):
                ids[row, : len(s)] = torch.tensor(s)
                mask[row, : len(s)] = 1
            loss = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
            loss.backward()
            optimiser.step()
            optimiser.zero_grad()
    model.eval()
    sentence_sum = registry.evaluation("prost").protocol("sentence-sum")
    questions = [sentence_sum.build(r, "stacking").texts() for r in held_out]
    scores = scoring.sequence_logprobs(model, tokenizer, questions, torch.device("cpu"))
    correct = sum(protocols.argmax(s) == r["label"] for s, r in zip(scores, held_out))
    assert correct / len(held_out) >= 0.8


def _fed_and_head_rows(model):
    seen = {"fed": 0, "head": 0}

    def count(module, args, kwargs, out):
        seen["fed"] += kwargs.get("input_ids", args[0] if args else None).numel()
        seen["head"] += out.logits.shape[0] * out.logits.shape[1]

    model.register_forward_hook(count, with_kwargs=True)
    return seen


def _tiny_llama(tokenizer, folder):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    llama = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, bos_token_id=tokenizer.bos_token_id)  # fmt: skip
    LlamaForCausalLM(llama).save_pretrained(folder)
    return folder


def test_padding_only_where_cheaper_than_a_pass_and_head_only_at_scored_tokens(tiny, built_all, tmp_path, monkeypatch):
    """Fed tokens are each prefix once, padded within its group of near-equal prefixes (``length_groups``: the
    padding costs less than the passes it saves), plus every option's own tokens; one head row per scored token
    (the prefix's last row serves every option's first token) — on GPT-2 and on a Llama with its own cache, by the
    cached plan (which models that cannot take a tree mask run)."""
    tokenizer = AutoTokenizer.from_pretrained(tiny["causal"])
    prost = datasets.load_dataset(str(built_all / "prost"), "default", split="test").select(range(0, 18736, 997))
    sentence_sum = registry.evaluation("prost").protocol("sentence-sum")
    questions = [sentence_sum.build(row, "default").texts() for row in prost]
    questions.append(["Short.", "A much longer option with many more tokens in it."])
    ids = [scoring.tokenize_options(tokenizer, q) for q in questions]
    prefixes = [scoring.common_prefix(options) for options in ids]
    own = sum(len(s) - n - 1 for options, n in zip(ids, prefixes) for s in options)
    monkeypatch.setattr(packed, "fits", lambda model, tokenized: False)
    cpu_pass = batching.pass_tokens(None, torch.device("cpu"))
    for folder in (tiny["causal"], _tiny_llama(tokenizer, tmp_path / "llama")):
        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        seen = _fed_and_head_rows(model)
        fast = scoring.sequence_logprobs(model, tokenizer, questions, torch.device("cpu"), batch_tokens=400, max_batch=8)
        costs = [n + sum(len(s) - n - 1 for s in options) for options, n in zip(ids, prefixes)]
        padded = passes = exact = 0
        for batch in scoring._prefix_sorted_batches(prefixes, costs, 400, 8):
            groups = batching.length_groups([prefixes[q] for q in batch], cpu_pass)
            padded += sum(len(g) * max(prefixes[batch[i]] for i in g) for g in groups)
            passes, exact = passes + len(groups), exact + len({prefixes[q] for q in batch})
        assert seen == {"fed": padded + own, "head": len(questions) + own}
        assert sum(prefixes) <= padded <= sum(prefixes) + cpu_pass * (exact - passes)
        assert passes < exact
        with torch.inference_mode():
            reference = [naive_logprobs(model, tokenizer, q) for q in questions]
        assert max(abs(a - b) for f, r in zip(fast, reference) for a, b in zip(f, r)) <= 1e-4


def _mean_token_questions(tokenizer, built_all):
    """PROST's released-gpt payloads, plus options of different lengths, an option that is a prefix of
    another, and a question with one option."""
    prost = datasets.load_dataset(str(built_all / "prost"), "default", split="test").select(range(0, 18736, 1499))
    released = registry.evaluation("prost").protocol("released-gpt")
    questions = tokenized.mean_token_ids([released.build(row, "default") for row in prost], tokenizer)
    bos = tokenizer.bos_token_id
    said = tokenizer("A person drops an egg, a ball and a glass on the floor. The", add_special_tokens=False)["input_ids"]
    words = [
        tokenizer(w, add_special_tokens=False)["input_ids"]
        for w in (" egg", " ball bounces", " glass is the most likely to break")
    ]
    questions.append([[bos, *said, *w, bos] for w in words])  # own tokens of 1..7 ids
    questions.append([[bos, *said], [bos, *said, *words[0]], [bos, *said, *words[0], bos]])  # each a prefix of the next
    questions.append([[bos, *said, *words[2]]])  # one option
    return questions


@pytest.mark.slow
def test_mean_token_logprobs_share_the_prefix_and_equal_whole_sequences(tiny, built_all, tmp_path, monkeypatch):
    """By the cached plan, each prefix runs once (its tokens scored once), each option's own tokens after it; the mean
    equals running every sequence whole to 1e-4, with the same decisions — GPT-2, a Llama, and the fallback for
    caches that cannot be rearranged; the packed plan's means equal them too."""
    tokenizer = AutoTokenizer.from_pretrained(tiny["causal"])
    questions = _mean_token_questions(tokenizer, built_all)
    prefixes = [scoring.common_prefix(options) for options in questions]
    needed = sum(n + sum(len(s) - n - 1 for s in options) for options, n in zip(questions, prefixes))
    assert needed < sum(len(s) for options in questions for s in options) * 0.6  # the sharing is worth testing
    for folder in (tiny["causal"], _tiny_llama(tokenizer, tmp_path / "llama")):
        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        with torch.inference_mode():
            whole = [[torch.log_softmax(model(torch.tensor([s])).logits[0, :-1].float(), -1)
                      .gather(-1, torch.tensor(s[1:])[:, None]).mean().item() for s in options] for options in questions]  # fmt: skip
        with torch.inference_mode():
            tree = scoring.mean_token_logprobs(model, tokenizer, questions, torch.device("cpu"))
        assert max(abs(a - b) for f, w in zip(tree, whole) for a, b in zip(f, w)) <= 1e-4
        monkeypatch.setattr(packed, "fits", lambda model, tokenized: False)
        seen = _fed_and_head_rows(model)
        for batch_tokens in (60, 100_000):  # many small batches, and one mixing prefix lengths
            seen.update(fed=0, head=0)
            fast = scoring.mean_token_logprobs(model, tokenizer, questions, torch.device("cpu"), batch_tokens=batch_tokens)
            # Prefixes padded within their groups of near-equal length, where a padded position (trunk and head)
            # costs less than the pass it saves: here 16 tokens, half a CPU pass.
            costs = [n + sum(len(s) - n - 1 for s in options) for options, n in zip(questions, prefixes)]
            padding = 0
            for batch in scoring._prefix_sorted_batches(prefixes, costs, batch_tokens, 64):
                groups = batching.length_groups(
                    [prefixes[q] for q in batch], batching.pass_tokens(model, torch.device("cpu")) // 2
                )
                extra = sum(len(g) * max(prefixes[batch[i]] for i in g) - sum(prefixes[batch[i]] for i in g) for g in groups)
                assert extra <= 16 * (len({prefixes[q] for q in batch}) - len(groups))
                padding += extra
            assert seen == {"fed": needed + padding, "head": needed + padding}
            assert max(abs(a - b) for f, w in zip(fast, whole) for a, b in zip(f, w)) <= 1e-4
            assert [max(range(len(f)), key=f.__getitem__) for f in fast] == [max(range(len(w)), key=w.__getitem__) for w in whole]
        monkeypatch.undo()
    monkeypatch.setattr(packed, "fits", lambda model, tokenized: False)
    monkeypatch.setattr(scoring, "cache_layers", lambda cache, span: None)
    fallback = scoring.mean_token_logprobs(model, tokenizer, questions, torch.device("cpu"))
    assert max(abs(a - b) for f, w in zip(fallback, whole) for a, b in zip(f, w)) <= 1e-4


def test_mean_token_logprobs_needs_two_tokens(tiny):
    model = AutoModelForCausalLM.from_pretrained(tiny["causal"]).eval()
    with pytest.raises(scoring.ScoringError, match="at least 2"):
        scoring.mean_token_logprobs(model, None, [[[5, 6], [5]]], torch.device("cpu"))


def test_seq2seq_pads_where_cheaper_than_a_pass_and_equals_one_target_at_a_time(tiny, built_all):
    """Encoder inputs and decoder targets of several lengths, text and token ids (PROST's released-t5
    [sentinel, token] targets): each input encoded once, in groups of near-equal length padded where a pass costs
    more than the padding (``batching.grouped_batches``), each batch's targets decoded in one pass padded to its
    longest; the scores equal one (input, target) pair at a time to 1e-4, with the same decisions."""
    model = AutoModelForSeq2SeqLM.from_pretrained(tiny["seq2seq"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny["seq2seq"])
    prost = datasets.load_dataset(str(built_all / "prost"), "default", split="test").select(range(0, 18736, 1499))
    released = registry.evaluation("prost").protocol("released-t5")
    requests = [released.build(row, "default") for row in prost]
    questions = list(zip([r.source for r in requests], tokenized.seq2seq_targets(requests, tokenizer)))
    questions += [("A person drops an egg and a ball.", ["The egg breaks.", "The ball bounces off the floor twice.", "YES"]),
                  ("Stack them.", ["books", [7, 8, 9, 10], "NO"]), ("Stack the books.", ["books"]), ("Roll the can.", ["YES", "NO"])]  # fmt: skip
    inputs = [tokenizer(text)["input_ids"] for text, _ in questions]
    targets = [[t if isinstance(t, list) else tokenizer(t)["input_ids"] for t in options] for _, options in questions]
    assert len({len(i) for i in inputs}) > 3 and len({len(t) for ts in targets for t in ts}) > 3
    fed = {"encoder": 0, "decoder": 0, "passes": 0}
    model.get_encoder().register_forward_pre_hook(
        lambda m, a, k: fed.update(encoder=fed["encoder"] + k["input_ids"].numel(), passes=fed["passes"] + 1), with_kwargs=True
    )
    model.get_decoder().register_forward_pre_hook(
        lambda m, a, k: fed.update(decoder=fed["decoder"] + k["input_ids"].numel()), with_kwargs=True
    )
    fast = seq2seq.seq2seq_logprobs(model, tokenizer, questions, torch.device("cpu"), batch_tokens=60)
    batches = batching.grouped_batches([len(i) for i in inputs], batching.pass_tokens(model, torch.device("cpu")), 60, 64)
    assert fed == {"encoder": sum(len(b) * max(len(inputs[i]) for i in b) for b in batches), "passes": len(batches),
                   "decoder": sum(sum(len(targets[i]) for i in b) * max(len(t) for i in b for t in targets[i]) for b in batches)}  # fmt: skip
    assert len(batches) < len({len(i) for i in inputs})  # fewer passes than exact lengths
    with torch.inference_mode():
        alone = [[torch.log_softmax(model(input_ids=torch.tensor([ids]), labels=torch.tensor([t])).logits[0].float(), -1)
                  .gather(-1, torch.tensor(t)[:, None]).sum().item() for t in ts] for ids, ts in zip(inputs, targets)]  # fmt: skip
    assert max(abs(a - b) for f, r in zip(fast, alone) for a, b in zip(f, r)) <= 1e-4
    assert [max(range(len(f)), key=f.__getitem__) for f in fast] == [max(range(len(r)), key=r.__getitem__) for r in alone]


def test_masked_lm_batches_pad_where_cheaper_than_a_pass_and_equal_one_text_at_a_time(tiny):
    """Texts of several lengths run in padded groups (``batching.grouped_batches``), and score as each text alone."""
    model = AutoModelForMaskedLM.from_pretrained(tiny["mlm"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny["mlm"])
    widths = []
    model.base_model.register_forward_hook(
        lambda m, args, kwargs, out: widths.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    texts = [
        "A person is trying to stack [MASK].",
        "The [MASK] is the easiest to roll.",
        "[MASK] breaks.",
        "Roll the [MASK] down the hill.",
    ]
    words = [["books", "eggs"], ["apple", "ball"], ["glass", "egg"], ["ball", "can"]]
    together = masked.masked_logprobs(model, tokenizer, texts, words, torch.device("cpu"))
    lengths = [len(ids) for ids in tokenizer(texts)["input_ids"]]
    batches = batching.grouped_batches(lengths, batching.pass_tokens(model, torch.device("cpu")), 16384, 128)
    assert widths == [max(lengths[i] for i in b) for b in batches] and len(batches) < len(set(lengths))
    alone = [masked.masked_logprobs(model, tokenizer, [t], [w], torch.device("cpu"))[0] for t, w in zip(texts, words)]
    assert max(abs(a - b) for x, y in zip(together, alone) for a, b in zip(x, y) if a is not None) <= 1e-5


# --- what a run records beside its figures (issue 31) --------------------------------------------------------


def test_a_run_records_prompts_baselines_and_its_label(tiny, built_all, tmp_path, capsys):
    """NEWTON Track 1 with the tiny causal model: each row's prompt is the released prompt of that row (worked from
    the built rows), with its token count; the baselines match the references the run scored; the label is kept."""
    from transformers import AutoTokenizer

    from physprobe.dataset_scripts.newton.evaluation import released_prompt

    out = tmp_path / "run"
    args = ["score", "--model", str(tiny["causal"]), "--benchmark", "newton", "--config", "track1", "--limit", "6",
            "--data", str(built_all), "--out", str(out), "--label", "tiny GPT, raw"]  # fmt: skip
    assert main(args) == 0
    summary = capsys.readouterr().out
    rows = pq.read_table(next((built_all / "newton" / "track1").glob("*.parquet"))).to_pylist()
    tokenizer = AutoTokenizer.from_pretrained(tiny["causal"])
    predictions = pq.read_table(out / "predictions.parquet").to_pylist()
    for p in predictions:
        prompt = released_prompt(rows[p["row"]], "track1")
        assert p["prompts"] == [prompt] and p["prompt_tokens"] == [len(tokenizer(prompt)["input_ids"])]
    info = json.loads((out / "run.json").read_text())
    assert info["spec"]["label"] == "tiny GPT, raw"
    references = [p["reference"][0] for p in predictions]
    found = info["baselines"]["track1"]
    assert found["majority_answer"] == max(sorted(set(references)), key=references.count)
    answered = [p["prediction"] for p in predictions if p["status"] == "decided"]
    assert (found["answered"], found["commonest"]) == (len(answered), max(map(answered.count, answered), default=0))
    assert "  baselines, agreement_accuracy on the same rows: majority answer (the" in summary


def test_a_refused_score_leaves_no_folder_and_a_failed_one_keeps_its_cache(tiny, built_all, tmp_path, capsys, monkeypatch):
    """A system instruction given to a masked LM is refused once the run folder is claimed (when the protocol's
    requests are built): neither it nor the runs/ folder made for it is left. A run that fails after scores reached
    its cache keeps them, and resumes."""
    runs = tmp_path / "runs"
    args = ["score", "--model", str(tiny["mlm"]), "--benchmark", "prost", "--limit", "4", "--data", str(built_all)]
    assert main([*args, "--out", str(runs / "bert"), "--system-instruction", "Answer briefly."]) == 2
    err = capsys.readouterr().err
    assert "this protocol asks for candidate words at a mask and reads no prompt: leave them out" in err and not runs.exists()

    def broken(*arguments, **options):
        raise RuntimeError("a bug after scoring")

    monkeypatch.setattr(runner.baselines, "compute", broken)
    with pytest.raises(RuntimeError):
        main([*args, "--out", str(runs / "bert")])
    assert (runs / "bert" / "cache.sqlite").is_file() and not (runs / "bert" / "run.json").exists()
    monkeypatch.undo()
    assert main([*args, "--out", str(runs / "bert")]) == 0
    assert json.loads((runs / "bert" / "run.json").read_text())["scored_now"] == 0  # all four from the cache


def test_text2afford_with_nothing_to_rank_gives_n_0():
    """Pairs with no negative (or no positive) class leave nothing to rank: n = 0 and no figure, not an error."""
    evaluation = registry.evaluation("text2afford")
    rows = [{"labels": [1] * 15}, {"labels": [0] * 15}]
    assert evaluation.metrics("default", rows, [None, None], [[0.5] * 15] * 2) == {
        "strict": {"n": 0, "skipped": 2},
        "pairwise": {"n": 0, "skipped": 2},
    }


@pytest.mark.slow
@pytest.mark.parametrize("limit", [1, 2, 3])
@pytest.mark.parametrize("benchmark, family", [("prost", "causal"), ("prost", "mlm"), ("cccons", "mlm"), ("newton", "seq2seq"),
                                               ("text2afford", "nli"), ("text2afford", "causal")])  # fmt: skip
def test_any_limit_scores_with_intervals_or_none(tiny, built_all, tmp_path, benchmark, family, limit):
    """Every default config at --limit 1, 2 and 3: a run folder that report reads, every interval finite."""
    out = tmp_path / "run"
    args = ["score", "--model", str(tiny[family]), "--benchmark", benchmark, "--limit", str(limit), "--data", str(built_all),
            "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    info = json.loads((out / "run.json").read_text())
    for by_figure in info["bootstrap"]["figures"].values():
        for spread in by_figure.values():
            assert spread["ci95"][0] <= spread["ci95"][1] and spread["stderr"] >= 0
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
