"""CConS protocols against the paper (no evaluation code was released): the formats of §4 "Tasks Format
Details" built by hand for a few rows (strings, and token ids with a tiny tokenizer), both readings of the
masked-LM rule on hand-made probabilities, answers matched to an object, the figures of Tables 2-3 that
depend only on the data (the BERT-L / ALBERT-B rows are constant predictors), and `physprobe score` with
every default protocol."""

import json
import math

import datasets
import pytest
import torch
from transformers import AutoTokenizer

from physprobe import protocols
from physprobe.cli import main
from physprobe.data import registry
from physprobe.dataset_scripts.cccons import evaluation as cccons
from physprobe.protocols.requests import Generate
from physprobe.protocols.results import Answer

EVALUATION = registry.evaluation("cccons")
CONFIGS = ("ordinary", "ccommon", "ordinary_easy", "ordinary_hard", "ccommon_easy", "ccommon_hard",
           "ordinary_nocontext", "ccommon_nocontext")  # fmt: skip


@pytest.fixture(scope="module")
def by_config(built_all):
    return {c: datasets.load_dataset(str(built_all / "cccons"), c, split="test").to_list() for c in CONFIGS}


@pytest.fixture(scope="module")
def tiny(by_config, tiny_model):
    texts = [f"{r['mlm_input']} {r['generative_input']} larger bigger smaller shorter" for r in by_config["ordinary"]]
    texts += [r["generative_input"] for r in by_config["ccommon"]]
    return {"mlm": tiny_model("masked", texts, "bert"), "causal": tiny_model("causal", texts, "gpt"),
            "seq2seq": tiny_model("seq2seq", texts, "t5")}  # fmt: skip


def test_default_configs_are_every_subset_the_paper_reports():
    assert EVALUATION.configs == CONFIGS
    assert EVALUATION.pooled == {"nocontext": ("ordinary_nocontext", "ccommon_nocontext")}  # Table 2 NoCon


def test_masked_lm_input_is_the_paper_format(by_config, tiny):
    tokenizer = AutoTokenizer.from_pretrained(tiny["mlm"])
    protocol = EVALUATION.protocol("mask-four")
    row = by_config["ordinary"][0]  # "A human abandoned a curtain in a studio."
    request = protocol.build(row, "ordinary")
    text, words = request.text, list(request.candidates)
    assert text == ("A human abandoned a curtain in a studio. In this situation, the size of a curtain is "
                    "probably much [MASK] than the size of a studio.")  # fmt: skip
    assert words == ["larger", "bigger", "smaller", "shorter"]
    bare = by_config["ordinary_nocontext"][0]  # the same pair, no context
    assert protocol.build(bare, "ordinary_nocontext").text == (
        "The size of a curtain is probably much [MASK] than the size of a studio."
    )
    ids = tokenizer(text.replace("[MASK]", tokenizer.mask_token))["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and tokens.count("[MASK]") == 1
    assert tokens[tokens.index("[MASK]") - 2 : tokens.index("[MASK]") + 2] == ["probably", "much", "[MASK]", "than"]


@pytest.mark.parametrize(
    "probabilities, four, vocabulary",
    [
        ((0.30, 0.25, 0.40, 0.05), 0, 0),  # 0.55 of 1.0: both readings say obj1 larger
        ((0.02, 0.02, 0.01, 0.01), 0, 1),  # 0.04 of 0.06 among the four, but only 0.04 of the vocabulary
        ((0.20, 0.20, 0.30, 0.30), 1, 1),
        ((0.25, 0.25, 0.25, 0.25), 1, 1),  # exactly half: not "exceeds 0.5"
    ],
)
def test_mask_rule_both_readings_on_hand_made_probabilities(probabilities, four, vocabulary):
    scores = [math.log(p) for p in probabilities]  # the scorer hands over log-probabilities over the vocabulary
    assert EVALUATION.protocol("mask-four").decide(scores) == four
    assert EVALUATION.protocol("mask-vocab").decide(scores) == vocabulary


def test_mask_rule_on_a_tiny_model_s_logits(by_config, tiny):
    from transformers import AutoModelForMaskedLM

    from physprobe.backends.hf import masked

    model = AutoModelForMaskedLM.from_pretrained(tiny["mlm"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny["mlm"])
    rows = by_config["ccommon"][:6]
    payloads = [(q.text, q.candidates) for q in (EVALUATION.protocol("mask-four").build(r, "ccommon") for r in rows)]
    scores = masked.masked_logprobs(model, tokenizer, [p[0] for p in payloads], [p[1] for p in payloads], torch.device("cpu"))
    ids = [tokenizer(f" {w}", add_special_tokens=False)["input_ids"] for w in ("larger", "bigger", "smaller", "shorter")]
    assert all(len(i) == 1 for i in ids)
    with torch.inference_mode():
        for (text, _), row_scores in zip(payloads, scores):
            encoded = tokenizer(text.replace("[MASK]", tokenizer.mask_token), return_tensors="pt")
            where = encoded["input_ids"][0].tolist().index(tokenizer.mask_token_id)
            p = torch.softmax(model(**encoded).logits[0, where], -1)[[i[0] for i in ids]]
            assert EVALUATION.protocol("mask-four").decide(row_scores) == (0 if (p[0] + p[1]) / p.sum() > 0.5 else 1)
            assert EVALUATION.protocol("mask-vocab").decide(row_scores) == (0 if p[0] + p[1] > 0.5 else 1)


def test_generative_question_and_answer_matching(by_config):
    protocol = EVALUATION.protocol("question-generate")
    row = next(r for r in by_config["ordinary"] if r["obj2"] == "cutting board")
    request = protocol.build(row, "ordinary")
    assert isinstance(request, Generate) and request.stop == ("\n",) and request.choices == ("shelf", "cutting board")
    assert request.prompt == ("A cutting board is aligned with a shelf. "
                                 "Which is bigger in this situation, a shelf or a cutting board?")  # fmt: skip
    bare = by_config["ccommon_nocontext"][3]
    assert protocol.build(bare, "ccommon_nocontext").prompt == "Which is bigger in general, a bin or a table?"
    choices = ["key", "key box"]
    assert protocol.match("The key box.", choices) == 1  # label 1 = obj1 smaller: obj2 is the bigger one
    assert protocol.match(" A KEY is bigger than a key box", choices) == 0  # first named wins
    assert protocol.match("I cannot tell.", choices) is None  # unparsed, never scored as an option


def test_unparsed_answers_count_wrong_not_dropped(by_config):
    # Five questions answered as a small instruction model answers; two name neither object. NEWTON and PROST
    # count such answers wrong; so does CConS now: 2 right of 5 (dropping them would give 2 of 3).
    protocol = EVALUATION.protocol("question-generate")
    rows = by_config["ordinary"][:5]
    answers = [f"The {rows[0]['obj1'] if rows[0]['label'] == 0 else rows[0]['obj2']} is bigger.", "",
               f"A {rows[2]['obj2']}.", "It is hard to say.", f"{rows[4]['obj1']}"]  # fmt: skip
    payloads = [protocol.build(r, "ordinary") for r in rows]
    predictions = [protocol.predict(Answer(a), p) for a, p in zip(answers, payloads)]
    assert predictions[1] == predictions[3] == protocols.UNPARSED
    right = sum(p == r["label"] for p, r in zip(predictions, rows))
    out = cccons.metrics("ordinary", rows, predictions, [[] for _ in rows])
    assert out["n"] == 5 and out["undecided"] == 0 and out["accuracy"] == pytest.approx(right / 5)
    # Every answer empty (SmolLM2 on the paper's question): accuracy 0, not NaN.
    assert cccons.metrics("ordinary", rows, [protocols.UNPARSED] * 5, [[]] * 5)["accuracy"] == 0.0


def _constant(rows, label):
    return [label] * len(rows)


def test_tables_2_and_3_constant_predictor_rows(by_config):
    """Table 2 and 3 rows of BERT-L and ALBERT-B (identical) are constant predictors: obj1 larger on every
    contextual question, obj1 smaller on every no-context question; NoCon is one figure over both
    no-context files (each alone gives 0.500 / 0.479)."""
    results = {c: cccons.metrics(c, rows, _constant(rows, 1 if "nocontext" in c else 0), [[]] * len(rows))
               for c, rows in by_config.items()}  # fmt: skip
    outcomes = {c: (rows, _constant(rows, 1 if "nocontext" in c else 0), [[]] * len(rows)) for c, rows in by_config.items()}
    results.update(EVALUATION.pooled_metrics(outcomes))
    table_2 = {"ordinary": "0.500", "ccommon": "0.521", "nocontext": "0.494"}
    table_3 = {"ordinary_easy": "0.527", "ordinary_hard": "0.479", "ccommon_easy": "0.480", "ccommon_hard": "0.553"}
    for key, printed in {**table_2, **table_3}.items():
        assert f"{results[key]['accuracy']:.3f}" == printed, key
    assert results["nocontext"]["n"] == 772 + 332
    assert f"{results['ordinary_nocontext']['accuracy']:.3f}" == "0.500"


@pytest.mark.parametrize(
    "family, protocol", [("mlm", "mask-four"), ("causal", "question-generate"), ("seq2seq", "question-generate")]
)
def test_score_runs_every_default_protocol(tiny, built_all, tmp_path, family, protocol):
    out = tmp_path / "run"
    args = [
        "score",
        "--model",
        str(tiny[family]),
        "--benchmark",
        "cccons",
        "--limit",
        "5",
        "--data",
        str(built_all),
        "--out",
        str(out),
    ]
    assert main(args) == 0
    assert json.loads((out / "run.json").read_text())["spec"]["protocol"] == protocol
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics) == {*CONFIGS, "nocontext"}
    assert metrics["nocontext"]["n"] == 10 and all(metrics[c]["n"] == 5 for c in CONFIGS)
    assert all("accuracy" in metrics[c] for c in metrics)
    if protocol == "question-generate":  # unparsed answers are wrong, not undecided
        assert all(metrics[c]["undecided"] == 0 and metrics[c]["accuracy"] <= 1 - metrics[c]["unparsed"] / metrics[c]["n"]
                   for c in metrics)  # fmt: skip


@pytest.mark.parametrize(
    "family, protocol", [("mlm", "mask-vocab"), ("causal", "answer-loglik"), ("seq2seq", "answer-loglik-seq2seq")]
)
def test_named_alternatives_run(tiny, built_all, tmp_path, family, protocol):
    out = tmp_path / "run"
    args = ["score", "--model", str(tiny[family]), "--benchmark", "cccons", "--config", "ordinary", "--protocol", protocol,
            "--limit", "5", "--data", str(built_all), "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    assert json.loads((out / "metrics.json").read_text())["ordinary"]["undecided"] == 0


def test_mlm_decision_worked_by_hand():
    # larger + bigger = 0.35 + 0.2 of a total 1.0 -> 0.55 > 0.5: obj1 larger.
    assert cccons.mlm_decision([0.35, 0.2, 0.4, 0.05]) == 0
    # Unnormalised probabilities (the four are a slice of the vocabulary): 0.02 / 0.05 = 0.4 -> smaller.
    assert cccons.mlm_decision([0.01, 0.01, 0.02, 0.01]) == 1
    assert cccons.mlm_decision([0.25, 0.25, 0.25, 0.25]) == 1  # exactly half is not "exceeds"
