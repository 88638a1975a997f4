"""PROST protocols against the released code (nala-cub/prost@d6285efa, src/baselines/): for a few rows the
exact model input its input_pipeline.py builds (re-derived here step by step, as upstream does it), the
decision zs_runner.py / results.py take on the same logits, Tables 6-7 as results.py reads them, the
paper's chance figure, and `physprobe score` with every default protocol."""

import json
import math
import re

import datasets
import pytest
import torch
from tokenizers import processors
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM, AutoTokenizer, GPT2Config
from transformers.modeling_outputs import CausalLMOutputWithPast

from physprobe import protocols
from physprobe.backends.hf import masked, scoring, seq2seq
from physprobe.cli import main
from physprobe.data import registry, sampling
from physprobe.dataset_scripts.prost import evaluation as prost
from physprobe.generators.prost import superlative_pair
from physprobe.protocols import tokenized
from physprobe.protocols.requests import Generate, MeanTokens
from physprobe.protocols.results import Answer

EVALUATION = registry.evaluation("prost")
UPSTREAM_MASK = r"( \[MASK\])|(\[MASK\])"
OPT = "ABCD"


@pytest.fixture(scope="module")
def rows(built_all):
    return datasets.load_dataset(str(built_all / "prost"), "default", split="test").to_list()


@pytest.fixture(scope="module")
def tiny(rows, tiny_model):
    texts = [f"{r['context']} {r['question']} {r['A']} {r['B']} {r['C']} {r['D']}" for r in rows[::5]]
    return {
        "causal": tiny_model("causal", texts, "gpt"),
        "mlm": tiny_model("masked", texts, "bert"),
        "seq2seq": tiny_model("seq2seq", texts, "t5"),
        "unifiedqa": tiny_model("seq2seq", texts, "unifiedqa-t5-tiny"),
    }


def sample(rows, tokenizer, single_token=True, n=8):
    """Rows spread over the concepts, optionally only those whose options are single tokens here."""
    picked = []
    for row in rows[::97]:
        if not single_token or all(len(tokenizer(f" {row[o]}", add_special_tokens=False)["input_ids"]) == 1 for o in "ABCD"):
            picked.append(row)
    assert len(picked) >= n
    return picked[:: max(1, len(picked) // n)][:n]


# --- causal: create_examples_gpt + mean token loss ---------------------------------------------
def upstream_gpt_instances(row, tokenizer):
    """input_pipeline.py:74-116 step by step: <pad> for the mask, BOS/EOS around when the tokenizer's name
    starts with 'gpt' (:88-89), encoded with the tokenizer's special tokens, pad id -> option id."""
    question = re.sub(UPSTREAM_MASK, tokenizer.pad_token, row["question"])
    text = f"{row['context']} {question}"
    if tokenizer.name_or_path.startswith("gpt"):
        text = f"{tokenizer.bos_token}{text}{tokenizer.eos_token}"
    encoding = tokenizer(text, padding="do_not_pad", add_special_tokens=True)
    tokens = encoding.tokens()
    target = tokens.index(tokenizer.pad_token, 1, len(tokens) - 1)
    options = [tokenizer(f" {row[o]}", add_special_tokens=False)["input_ids"] for o in "ABCD"]
    assert all(len(o) == 1 for o in options)  # upstream aborts otherwise (strict=True)
    instances = []
    for option in options:
        ids = list(encoding["input_ids"])
        ids[target] = option[0]
        instances.append(ids)
    return instances


def upstream_gpt_losses(model, instances, pad_id):
    """zs_runner.py:89-103: right-padded batch, shifted cross-entropy, pads ignored, mean over the length."""
    width = max(len(i) for i in instances)
    ids = torch.tensor([i + [pad_id] * (width - len(i)) for i in instances])
    mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i in instances])
    logits = model(input_ids=ids, attention_mask=mask).logits
    labels = ids[:, 1:].clone()
    labels[mask[:, 1:].eq(0)] = -100
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                             reduction="none", ignore_index=-100)  # fmt: skip
    return loss.reshape(len(instances), -1).mean(-1)


def named(folder, name, **kwargs):
    """The folder's tokenizer under the name the released code would have loaded it by (its test reads it)."""
    tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
    tokenizer.name_or_path = name
    return tokenizer


def test_released_gpt_input_is_the_upstream_token_sequence(rows, tiny):
    tokenizer = named(tiny["causal"], "gpt2")
    protocol = EVALUATION.protocol("released-gpt")
    for row in sample(rows, tokenizer):
        request = protocol.build(row, "default")
        payload = tokenized.mean_token_ids([request], tokenizer)[0]
        assert isinstance(request, MeanTokens)
        assert payload == upstream_gpt_instances(row, tokenizer)
        first = tokenizer.convert_ids_to_tokens(payload[0])
        assert first[0] == first[-1] == "<s>"  # BOS and EOS are fed
        assert tokenizer.decode(payload[0][1:-1]) == f"{row['context']} {row['question'].replace('[MASK]', row['A'])}"


def test_released_gpt_input_for_other_tokenizer_names_is_the_tokenizers_own_encoding(rows, tiny):
    # Not a 'gpt' name: no BOS/EOS added (input_pipeline.py:88-89 skipped), the text encoded with the tokenizer's
    # own special tokens: none for this tokenizer (as SmolLM2's), a leading <s> once a post-processor adds it
    # (as Gemma's and Llama's tokenizers do).
    protocol = EVALUATION.protocol("released-gpt")
    plain = named(tiny["causal"], "HuggingFaceTB/SmolLM2-135M-Instruct")
    with_bos = named(tiny["causal"], "google/gemma-3-270m")
    bos = with_bos.bos_token_id
    with_bos.backend_tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    for row in sample(rows, plain, n=4):
        payload = tokenized.mean_token_ids([protocol.build(row, "default")], plain)[0]
        assert payload == upstream_gpt_instances(row, plain)
        assert bos not in payload[0]  # neither BOS nor EOS (<s> is both here)
        assert plain.decode(payload[1]) == f"{row['context']} {row['question'].replace('[MASK]', row['B'])}"
        payload = tokenized.mean_token_ids([protocol.build(row, "default")], with_bos)[0]
        assert payload == upstream_gpt_instances(row, with_bos)
        assert payload[0][0] == bos and payload[0].count(bos) == 1
        # The tokenizer-agnostic variant keeps BOS + text + EOS whatever the name (physprobe's earlier default).
        variant = tokenized.mean_token_ids([EVALUATION.protocol("released-gpt-bos-eos").build(row, "default")], plain)[0]
        assert variant == [[bos, *ids, bos] for ids in tokenized.mean_token_ids([protocol.build(row, "default")], plain)[0]]


@pytest.mark.parametrize("name", ["gpt2", "HuggingFaceTB/SmolLM2-135M-Instruct"])
def test_released_gpt_decision_is_the_lowest_mean_loss(rows, tiny, name):
    model = AutoModelForCausalLM.from_pretrained(tiny["causal"]).eval()
    tokenizer = named(tiny["causal"], name)
    protocol = EVALUATION.protocol("released-gpt")
    picked = sample(rows, tokenizer)
    payloads = tokenized.mean_token_ids([protocol.build(row, "default") for row in picked], tokenizer)
    ours = scoring.mean_token_logprobs(model, tokenizer, payloads, torch.device("cpu"))
    with torch.inference_mode():
        for row, scores in zip(picked, ours):
            losses = upstream_gpt_losses(model, upstream_gpt_instances(row, tokenizer), tokenizer.pad_token_id)
            assert scores == pytest.approx((-losses).tolist(), abs=1e-5)
            assert protocol.decide(scores) == int(losses.argmin())  # results.py to_wide_rankings: idxmin of loss


class HandMade(torch.nn.Module):
    """A causal LM with hand-made logits: next-token logits depend only on the current token."""

    config = GPT2Config(n_positions=16)

    def __init__(self, table):
        super().__init__()
        self.table = torch.tensor(table)

    def forward(self, input_ids, attention_mask=None, **kwargs):
        return CausalLMOutputWithPast(logits=self.table[input_ids])


def test_mean_token_reduction_on_hand_made_logits():
    # Vocabulary of 3; after token t the logits are table[t]. Sequence 0 1 2: log p(1|0) and log p(2|1).
    table = [[0.0, math.log(3), 0.0], [0.0, 0.0, math.log(2)], [0.0, 0.0, 0.0]]
    tokenizer = type("T", (), {"pad_token_id": 0})()
    scores = scoring.mean_token_logprobs(HandMade(table), tokenizer, [[[0, 1, 2], [0, 2]]], torch.device("cpu"))
    assert scores[0][0] == pytest.approx((math.log(3 / 5) + math.log(2 / 4)) / 2)  # BOS not predicted; EOS is
    assert scores[0][1] == pytest.approx(math.log(1 / 5))


# --- masked LM: create_examples_bert + four-option softmax at the mask --------------------------
def test_released_mlm_input_and_decision(rows, tiny):
    model = AutoModelForMaskedLM.from_pretrained(tiny["mlm"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny["mlm"])
    protocol = EVALUATION.protocol("released-mlm")
    picked = sample(rows, tokenizer)
    payloads = [(r.text, r.candidates) for r in (protocol.build(row, "default") for row in picked)]
    ours = masked.masked_logprobs(model, tokenizer, [p[0] for p in payloads], [p[1] for p in payloads], torch.device("cpu"))
    with torch.inference_mode():
        for row, (text, words), scores in zip(picked, payloads, ours):
            # input_pipeline.py:166-194: BERT keeps the space before the mask; option ids of ' %s'.
            upstream_text = "{context} {question}".format(
                context=row["context"], question=re.sub(r"(\[MASK\])", tokenizer.mask_token, row["question"])
            )
            encoding = tokenizer(upstream_text, padding="do_not_pad", add_special_tokens=True)
            assert tokenizer(text.replace("[MASK]", tokenizer.mask_token))["input_ids"] == encoding["input_ids"]
            target = encoding.tokens().index(tokenizer.mask_token)
            option_ids = [tokenizer(f" {row[o]}", add_special_tokens=False)["input_ids"][0] for o in "ABCD"]
            assert [tokenizer(" " + w, add_special_tokens=False)["input_ids"] for w in words] == [[i] for i in option_ids]
            logits = model(input_ids=torch.tensor([encoding["input_ids"]])).logits[0, target]
            probs = torch.softmax(logits[option_ids], -1)  # zs_runner.py:117-135, then idxmax
            assert protocol.decide(scores) == int(probs.argmax())


def test_mask_decision_on_hand_made_logits():
    decide = EVALUATION.protocol("released-mlm").decide
    logits = torch.tensor([0.5, 2.0, 5.0, 1.0, 4.9, 3.0])  # options are tokens 1..4
    upstream = int(torch.softmax(logits[[1, 2, 3, 4]], -1).argmax())
    assert decide(torch.log_softmax(logits, -1)[[1, 2, 3, 4]].tolist()) == upstream == 1
    assert decide([-1.0, -2.0, None, -0.5]) is None  # an option of several tokens: undecided (upstream aborts)


# --- T5: create_examples_t5, decoder position 1, sliding dropped --------------------------------
def test_released_t5_input_decision_and_sliding(rows, tiny):
    model = AutoModelForSeq2SeqLM.from_pretrained(tiny["seq2seq"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny["seq2seq"])
    protocol = EVALUATION.protocol("released-t5")
    picked = [r for r in sample(rows, tokenizer, single_token=False, n=10) if "sliding" not in r["name"]]
    requests = [protocol.build(row, "default") for row in picked]
    payloads = list(zip([r.source for r in requests], tokenized.seq2seq_targets(requests, tokenizer)))
    ours = seq2seq.seq2seq_logprobs(model, tokenizer, payloads, torch.device("cpu"))
    sentinels = tokenizer.convert_tokens_to_ids(["<extra_id_0>", "<extra_id_1>"])
    with torch.inference_mode():
        for row, (text, targets), scores in zip(picked, payloads, ours):
            question = re.sub(UPSTREAM_MASK, "<extra_id_0>", row["question"])  # input_pipeline.py:131-136
            assert text == f"{row['context']} {question}"
            instance = tokenizer(text, padding="do_not_pad", add_special_tokens=True)
            option_ids = [tokenizer(f" {row[o]}", add_special_tokens=False)["input_ids"][0] for o in "ABCD"]
            assert targets == [[sentinels[0], i] for i in option_ids]
            labels = torch.tensor([[sentinels[0], option_ids[row["label"]], sentinels[1]]])
            logits = model(input_ids=torch.tensor([instance["input_ids"]]), labels=labels).logits
            probs = torch.softmax(logits[0, 1][option_ids], -1)  # zs_runner.py:107-116, 134
            assert protocol.decide(scores) == int(probs.argmax())
    assert protocol.skip({"name": "nonsliding_2"}) and protocol.skip({"name": "sliding_1"})
    assert not protocol.skip({"name": "stacking_1"})


# --- UnifiedQA: Table 2 format, generation, unifiedqa.py matching -------------------------------
def test_unifiedqa_input_choices_and_matching(rows, tiny):
    tokenizer = AutoTokenizer.from_pretrained(tiny["unifiedqa"])
    protocol = EVALUATION.protocol("released-unifiedqa")
    row = {"ex_question": "Which is the easiest to roll?", "A": "apple", "B": "book", "C": "box", "D": "block",
           "context": "A person is trying to roll an apple, a book, a box, and a block.", "name": "rolling_1"}  # fmt: skip
    request = protocol.build(row, "default")
    assert isinstance(request, Generate) and request.max_new_tokens == 19
    assert request.prompt == ("Which is the easiest to roll? \\n (A) apple (B) book (C) box (D) block \\n "
                                 "A person is trying to roll an apple, a book, a box, and a block.")  # fmt: skip
    first = [tokenizer(f" {row[o]}", add_special_tokens=False)["input_ids"][0] for o in "ABCD"]
    assert tokenized.first_token_choices([request], tokenizer) == [tokenizer.decode(first).split()]  # zs_runner.py:161
    choices = ["apple", "book", "box", "block"]
    assert protocol.match("box", choices) == 2  # exact: 3.0
    assert protocol.match("The Box.", choices) == 2  # normalised: 2.0
    assert protocol.match("a red apple", choices) == 0  # overlap 1/2
    assert protocol.match("book box", choices) == 1  # overlap ties: first (numpy argmax)
    assert protocol.match("a ball", choices) is None  # every score 0: upstream -1, here unparsed
    assert protocol.predict(Answer("a ball"), Generate("", tuple(choices))) == protocols.UNPARSED
    assert protocol.skip({"name": "sliding_2", "ex_question": "Which?"}) and protocol.skip(
        {"name": "mass_1_a", "ex_question": ""}
    )
    assert protocol.reported_apart and EVALUATION.default("seq2seq", model_name=str(tiny["unifiedqa"])) is protocol


def test_unifiedqa_unmatched_answers_count_wrong_as_results_py_counts_them(rows):
    # Answers as UnifiedQA writes them, for eight questions of one concept: zs_runner.py:160-171 gives an answer
    # matching no option pred_idx -1, and results.py's correct = pred_idx == label keeps it, wrong.
    picked = [r for r in rows if r["group"] == "mass" and r["ex_question"]][:8]
    protocol = EVALUATION.protocol("released-unifiedqa")
    answers = [picked[0][OPT[picked[0]["label"]]], "The " + picked[1][OPT[picked[1]["label"]]] + ".", "none of them",
               picked[3][OPT[(picked[3]["label"] + 1) % 4]], "I do not know", picked[5][OPT[picked[5]["label"]]],
               "a feather", picked[7][OPT[picked[7]["label"]]]]  # fmt: skip
    predictions = [protocol.predict(Answer(a), Generate("", tuple([r[o] for o in "ABCD"]))) for a, r in zip(answers, picked)]
    upstream = [-1 if p == protocols.UNPARSED else p for p in predictions]
    correct = [p == r["label"] for p, r in zip(upstream, picked)]
    assert upstream.count(-1) == 3 and sum(correct) == 4
    out = prost.metrics("default", picked, predictions, [[] for _ in picked])
    assert out["n"] == 8 and out["undecided"] == 0 and out["accuracy"] == pytest.approx(sum(correct) / 8)


# --- Tables 5-7 as results.py computes them ----------------------------------------------------
def test_table_6_and_7_readings_follow_the_released_analysis(rows):
    # Hand-made predictions: correct on every question whose example_idx is divisible by 3.
    picked = rows[::7]
    predictions = [r["label"] if r["example_idx"] % 3 == 0 else (r["label"] + 1) % 4 for r in picked]
    out = prost.metrics("default", picked, predictions, [[]] * len(picked))
    correct = [p == r["label"] for p, r in zip(predictions, picked)]
    # process_preds_positions: template accuracy, position = name.split('_')[1], mean over templates.
    templates = {}
    for row, ok in zip(picked, correct):
        templates.setdefault(row["name"], []).append(ok)
    by_position = {}
    for name, oks in templates.items():
        by_position.setdefault(int(name.split("_")[1]), []).append(sum(oks) / len(oks))
    assert {p: v["accuracy"] for p, v in out["by_position"].items()} == pytest.approx(
        {p: sum(a) / len(a) for p, a in by_position.items()}
    )
    # process_preds_inverse: per concept, mean over all inverted vs all plain questions, absolute difference.
    sides = {}
    for row, ok in zip(picked, correct):
        if row["name"].startswith("directions"):
            continue
        inverse = row["name"].startswith("non") or row["name"].split("_")[-1] == "b"
        sides.setdefault((row["group"], inverse), []).append(ok)
    gaps = {g: abs(sum(sides[(g, True)]) / len(sides[(g, True)]) - sum(sides[(g, False)]) / len(sides[(g, False)]))
            for g in {g for g, _ in sides}}  # fmt: skip
    assert out["inverse_gap_by_group"] == pytest.approx(gaps)
    assert out["macro_inverse_gap"] == pytest.approx(sum(gaps.values()) / len(gaps))  # pivoted_to_longtex: mean over concepts
    # physprobe's earlier Table 6 reading stays, under its own key: the answer's context position.
    answer = {}
    for row, ok in zip(picked, correct):
        if row["group"] != "directions":
            answer.setdefault(row["label"] + 1, []).append(ok)
    assert {p: v["accuracy"] for p, v in out["by_answer_position"].items()} == pytest.approx(
        {p: sum(a) / len(a) for p, a in answer.items()}
    )


def released_inverse_gaps(picked, correct):
    """process_preds_inverse (results.py:438-461) by hand: per concept (name.split('_')[0] without 'non'), the
    mean of `correct` over each side (is_inverse: a 'non' prefix or a '_b' suffix; directions dropped), then
    |inverted - plain|; a concept must hold both sides (results.py asserts it)."""
    sides = {}
    for row, ok in zip(picked, correct):
        if row["name"].startswith("directions"):
            continue
        group = row["name"].split("_")[0].replace("non", "")
        inverse = row["name"].startswith("non") or row["name"].split("_")[-1] == "b"
        sides.setdefault((group, inverse), []).append(ok)
    return {g: abs(sum(sides[(g, True)]) / len(sides[(g, True)]) - sum(sides[(g, False)]) / len(sides[(g, False)]))
            for g in {g for g, _ in sides} if (g, True) in sides and (g, False) in sides}  # fmt: skip


def test_table_7_pools_each_side_under_limit(rows):
    # 200 rows evenly spread over PROST (sampling.spread); hand-made predictions right on every third question.
    picked = [rows[i] for i in sampling.spread(len(rows), 200)]
    predictions = [r["label"] if r["example_idx"] % 3 == 0 else (r["label"] + 1) % 4 for r in picked]
    correct = [p == r["label"] for p, r in zip(predictions, picked)]
    pairs = [superlative_pair(r["name"]) for r in picked]
    both = {p for p, flip in pairs if flip} & {p for p, flip in pairs if not flip}
    one_sided = {p for p, _ in pairs if p is not None} - both
    assert one_sided  # the sample holds pairs with one side only: the case a per-pair filter got wrong
    out = prost.metrics("default", picked, predictions, [[]] * len(picked))
    gaps = released_inverse_gaps(picked, correct)
    assert out["inverse_gap_by_group"] == pytest.approx(gaps)
    assert out["macro_inverse_gap"] == pytest.approx(sum(gaps.values()) / len(gaps))


def test_paper_section_5_random_guessing_is_25_percent(rows):
    """PROST §5: 'random guessing would yield an accuracy of 25%' — the mean of the four constant
    predictors (one of which is right on each question) under Table 5's macro average, with and without
    sliding (T5's '*' column)."""
    for kept in (rows, [r for r in rows if r["group"] != "sliding"]):
        runs = [prost.metrics("default", kept, [k] * len(kept), [[]] * len(kept)) for k in range(4)]
        assert f"{100 * sum(r['macro_accuracy'] for r in runs) / 4:.1f}" == "25.0"
        for group in runs[0]["by_group"]:
            assert f"{100 * sum(r['by_group'][group]['accuracy'] for r in runs) / 4:.1f}" == "25.0"


# --- physprobe score with every default protocol -----------------------------------------------
@pytest.mark.parametrize("family, protocol", [("causal", "released-gpt"), ("mlm", "released-mlm"),
                                              ("seq2seq", "released-t5"), ("unifiedqa", "released-unifiedqa")])  # fmt: skip
def test_score_runs_every_default_protocol(tiny, built_all, tmp_path, family, protocol):
    out = tmp_path / "run"
    args = [
        "score",
        "--model",
        str(tiny[family]),
        "--benchmark",
        "prost",
        "--limit",
        "40",
        "--data",
        str(built_all),
        "--out",
        str(out),
    ]
    assert main(args) == 0
    info = json.loads((out / "run.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())["default"]
    assert info["spec"]["protocol"] == protocol and info["protocol_source"] == EVALUATION.protocol(protocol).source
    dataset = datasets.load_dataset(str(built_all / "prost"), "default", split="test")
    sample = dataset.select(sampling.rows_to_score(dataset, "default", 40, EVALUATION.groups))  # the rows --limit 40 scores
    skip = EVALUATION.protocol(protocol).skip or (lambda row: False)
    excluded = sum(skip(r) for r in sample)
    assert metrics["n"] == 40 - excluded and metrics.get("excluded", 0) == excluded
    if family in ("seq2seq", "unifiedqa"):
        assert excluded > 0 and "sliding" not in metrics.get("by_group", {})
    if family != "unifiedqa":
        assert metrics["undecided"] < 40
        assert set(metrics["by_group"]) == {r["group"] for r in sample if not skip(r)}
