"""Text2Afford protocols: the exact model inputs of the paper's Table 10 and the released scripts for a
release row (strings and, with a tiny tokenizer, token ids), and the paper's decision (YES=1, NO=0, ties
wrong, pairwise) applied to hand-made scores."""

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from physprobe import report
from physprobe.backends.hf import score_loaded
from physprobe.dataset_scripts.text2afford import evaluation
from physprobe.dataset_scripts.text2afford.evaluation import EVALUATION, from_yes_set, prompt, yes_set
from physprobe.generators import text2afford
from physprobe.protocols import tokenized
from physprobe.protocols.requests import Entailment, GenerateEach, Masked, MaskedPair
from physprobe.protocols.results import Answer, Answers, Scores


def _answers(texts: list[str]) -> Answers:
    return Answers(tuple(Answer(text) for text in texts))


ROW = {"sentence": "Make sure to have steaks and potatoes .", "object": "steaks",  # first row of the release
       "labels": [1, 1, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0]}  # fmt: skip


def prompts(name):
    return list(EVALUATION.protocol(name).build(ROW, "default").prompts)


def test_flan_t5_prompts_are_table_10s_with_the_released_class_words():
    request = EVALUATION.protocol("yes-no-flan-t5").build(ROW, "default")
    # One greedy answer per class, up to 20 new tokens (src/LLM/zero_shot_LLM.py:68); no stop strings.
    assert isinstance(request, GenerateEach) and len(request.prompts) == 15
    assert (request.max_new_tokens, request.stop) == (20, ())
    prompts = list(request.prompts)
    assert prompts[0] == ("consider Make sure to have steaks and potatoes .. Now, from this information can human "
                          "grasp the steaks? Answer YES or NO:")  # fmt: skip
    # src/LLM/zero_shot_LLM.py oov_class_map: play -> "play using", siton -> "sit on", typeon -> "type using".
    assert "can human play using the steaks?" in prompts[6] and "can human sit on the steaks?" in prompts[8]
    assert "can human type using the steaks?" in prompts[14] and "can human look through the steaks?" in prompts[12]


def test_falcon_and_vlm_prompts_are_table_10s():
    falcon = prompts("yes-no-falcon")
    assert falcon[1] == ('You are a helpful AI assistant. Answer only "YES" or "NO" for the question based on the given '
                         "context. Context:Make sure to have steaks and potatoes . \n \u00bbQUESTION\u00ab Can human "
                         "lift the steaks? \n \u00bbANSWER\u00ab")  # fmt: skip
    vlm = prompts("yes-no-vlm-text")
    assert vlm[2].startswith("consider the sentence Make sure to have steaks and potatoes .. Now from this information, "
                             "can human throw the steaks? Accompanying this query is an image of the steaks.")  # fmt: skip
    assert vlm[2].endswith('answer YES or NO whether the human can throw the steaks. Answer: "')


# src/LLM/zero_shot_llama-3.py, copied from the script (:35-52, :64-81, :89-97) to rebuild its input by hand.
SCRIPT_ALPACA = """Below is an instruction that describes a task. Write a response that appropriately completes the request.

### Instruction:
You are an AI assistant that has strong reasoning capability. You are given a context containing an object, and you are asked to answer a question about the object based on the context. Just response 'Yes' or 'No'

### Context:
{}

### Object:
{}

### Example questions and answers:
{}

### Question:
{}

### Answer: """
SCRIPT_OOV = {"play": "play", "lookthrough": "look through", "siton": "sit on", "pourfrom": "pour from",
              "writewith": "write with", "typeon": "type on"}  # fmt: skip
SCRIPT_EXAMPLES = """Example 1: can human ride bicycle? Answer: Yes

Example 2: can human lift donkey? Answer: No

Example 3: can human watch the tower? Answer: No

Example 4: can human ride violin? Answer: No

Example 5: can human write with chalk? Answer: Yes """


def script_messages(sentence, object_name):
    """The chat messages zero_shot_llama-3.py builds for each class (:87-97)."""
    classes = [SCRIPT_OOV.get(name.lower(), name.lower()) for name in text2afford.CLASS_NAMES]
    return [[{"role": "system", "content": "You are a chatbot who always responds to the query!"},
             {"role": "user", "content": SCRIPT_ALPACA.format(sentence, object_name, SCRIPT_EXAMPLES,
                                                              f"Can human '{affordance}' the {object_name}?")}]
            for affordance in classes]  # fmt: skip


def test_llama3_messages_are_the_released_scripts():
    protocol = EVALUATION.protocol("yes-no-llama3-released")
    request = protocol.build(ROW, "high_agreement")
    # The script's 5 new tokens (zero_shot_llama-3.py:110); greedy here where it samples.
    assert request.max_new_tokens == 5 and protocol.needs_chat
    sent = [[{"role": "system", "content": protocol.system("high_agreement")}, {"role": "user", "content": text}]
            for text in request.prompts]  # fmt: skip
    assert sent == script_messages(ROW["sentence"], ROW["object"])
    # The zero-shot variant: the same messages without the example section.
    zero = EVALUATION.protocol("yes-no-llama3-zero-shot")
    assert [p.replace("### Question:", "### Example questions and answers:\n" + SCRIPT_EXAMPLES + "\n\n### Question:")
            for p in zero.build(ROW, "default").prompts] == list(request.prompts)  # fmt: skip
    assert (
        zero.system("default") == protocol.system("default")
        and zero.needs_chat
        and "Example 1" not in zero.build(ROW, "default").prompts[0]
    )


def test_llama3_runs_are_filed_under_table_6s_columns():
    released, zero = EVALUATION.protocol("yes-no-llama3-released"), EVALUATION.protocol("yes-no-llama3-zero-shot")
    # The script reads data_high_agreement.tsv (its last filename, :57); its examples make it Table 6's ICL column.
    assert released.configs == ("high_agreement",) and released.metric_options == {"in_context": True}
    assert zero.configs == () and zero.metric_options == {}
    out = evaluation.metrics("high_agreement", [ROW], [yes_set([1.0] * 4 + [0.0] * 11)], [[]], **released.metric_options)
    assert set(out) == {"in_context_pairwise", "in_context_strict"}
    columns = {c.name: c.keys for c in report.paper_tables("text2afford").table("table6_llm").columns}
    assert columns == {"Acc (zero-shot)": ("default.pairwise.accuracy",),
                       "Acc (ICL)": ("high_agreement.in_context_pairwise.accuracy",)}  # fmt: skip
    assert EVALUATION.headline_of(out) == ("in_context_pairwise.accuracy", out["in_context_pairwise"]["accuracy"])


def test_high_agreement_config_is_the_rows_llama3_reads(built_all, upstream_dir):
    import math

    import datasets
    import pandas as pd

    # zero_shot_llama-3.py:59 pd.read_csv(filename, sep='\t'); :145 skips ids < 1868; :164 a NaN cell is in
    # neither class list.
    data = pd.read_csv(upstream_dir / "text2afford" / "data_high_agreement.tsv", sep="\t")
    scored = [(rows.iloc[0], rows.iloc[1], [-1 if math.isnan(v) else int(v) for v in rows.iloc[2:]])
              for ids, rows in data.iterrows() if not ids < 1868]  # fmt: skip
    subset = datasets.load_dataset(str(built_all / "text2afford"), "high_agreement", split="test")
    assert len(scored) == subset.num_rows == 630
    assert list(zip(subset["sentence"], subset["object"], subset["labels"])) == scored
    assert subset[0]["agreement"] is None and "high_agreement" in EVALUATION.scorable


def test_llama3_pairwise_accuracy_as_the_script_counts_it_with_unlabelled_cells():
    # Labels with empty (NaN) cells, as data_high_agreement.tsv holds them: Grasp, Lift positive; Throw NaN;
    # Push, Fix negative; the rest NaN. YES answers for Grasp, Throw and Fix.
    labels = [1, 1, -1, 0, 0] + [-1] * 10
    answers = ["Yes", "No", "Yes", "No", "Yes"] + ["No"] * 10
    protocol = EVALUATION.protocol("yes-no-llama3-released")
    predicted = [float("yes" in a.lower()) for a in answers]  # :120-123
    # :157-186 by hand: positives [grasp, lift], negatives [push, fix]; pos > neg: grasp > push (1 > 0) right,
    # grasp > fix (1 > 1) wrong, lift > push (0 > 0) wrong, lift > fix wrong -> 1 of 4. Throw (NaN) is in no pair.
    row = {**ROW, "labels": labels}
    out = evaluation.metrics(
        "high_agreement", [row], [protocol.predict(_answers(answers), None)], [predicted], **protocol.metric_options
    )
    assert out["in_context_pairwise"]["accuracy"] == 0.25 and out["in_context_pairwise"]["n"] == 1
    # A pair with no negative (every other cell NaN) is skipped, as :181 does.
    only = {**ROW, "labels": [1] + [-1] * 14}
    out = evaluation.metrics("high_agreement", [row, only], [protocol.predict(_answers(answers), None)] * 2, [predicted] * 2,
                             **protocol.metric_options)  # fmt: skip
    assert out["in_context_pairwise"]["n"] == 1 and out["in_context_pairwise"]["skipped"] == 1
    # No pair to rank at all (a --limit sample can draw only such pairs): counts, no figures, no error.
    out = evaluation.metrics("high_agreement", [only], [0], [predicted], **protocol.metric_options)
    assert out == {"in_context_strict": {"n": 0, "skipped": 1}, "in_context_pairwise": {"n": 0, "skipped": 1}}


def test_default_protocol_follows_the_family_and_model_name():
    assert EVALUATION.default("seq2seq").name == "yes-no-flan-t5"
    assert EVALUATION.default("causal").name == "yes-no-falcon"
    assert EVALUATION.default("causal", model_name="meta-llama/Meta-Llama-3-8B-Instruct").name == "yes-no-llama3-released"
    assert EVALUATION.default("mlm").name == "mlm-released-probing"
    assert EVALUATION.default("nli").name == "nli-released-multi-choice"


def test_token_ids_of_a_flan_t5_input_worked_by_hand():
    words = "consider Make sure to have steaks and potatoes .. Now, from this information can human grasp the steaks? Answer YES or NO:"
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(dict.fromkeys(words.split()))}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    prompt = EVALUATION.protocol("yes-no-flan-t5").build(ROW, "default").prompts[0]
    # consider=3 Make=4 sure=5 to=6 have=7 steaks=8 and=9 potatoes=10 ..=11 Now,=12 from=13 this=14
    # information=15 can=16 human=17 grasp=18 the=19 steaks?=20 Answer=21 YES=22 or=23 NO:=24, then </s>.
    assert tokenizer(prompt)["input_ids"] == [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                                              23, 24, 1]  # fmt: skip


def test_yes_no_decision_on_hand_made_scores():
    # P(YES) per class: YES on Grasp, Lift, Feed and Ride (0.51 > 0.5); NO elsewhere (0.5 is not YES).
    p_yes = [0.9, 0.7, 0.1, 0.5, 0.2, 0.51, 0.3, 0.4, 0.0, 0.8, 0.1, 0.1, 0.1, 0.1, 0.1]
    protocol = EVALUATION.protocol("yes-no-logprob-flan-t5")
    mask = protocol.predict(Scores(tuple(p_yes)), ROW)
    assert mask == yes_set(p_yes) == 0b1000100011
    assert from_yes_set(mask) == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    # Positives Grasp, Lift, Throw, Push, Watch, Feed (6); negatives 9. A (positive, negative) pair is right
    # only when the positive is YES and the negative NO: YES positives Grasp, Lift, Feed (3) x NO negatives
    # (all but Ride: 8) = 24 of 54; ties (YES-YES, NO-NO) are wrong.
    out = evaluation.metrics("default", [ROW], [mask], [p_yes])
    assert out["pairwise"]["accuracy"] == pytest.approx(24 / 54)
    # The continuous alternative (P(YES) as the score) counts the pairs where the positive has the higher P(YES).
    continuous = evaluation.metrics(
        "default", [ROW], [EVALUATION.protocol("yes-no-probability-flan-t5").predict(Scores(tuple(p_yes)), ROW)], [p_yes]
    )
    beaten = sum(p > n for p, lab in zip(p_yes, ROW["labels"]) if lab for n, nl in zip(p_yes, ROW["labels"]) if not nl)
    assert continuous["pairwise"]["accuracy"] == pytest.approx(beaten / 54)


def test_mlm_input_and_class_words_of_the_released_probing_code():
    request = EVALUATION.protocol("mlm-table4").build(ROW, "default")  # [SEP]: the tokenizer's separator
    text, words = request.text, list(request.candidates)
    assert isinstance(request, Masked)
    assert text == "Make sure to have steaks and potatoes . [SEP] steaks can be used for [MASK] by human"
    # src/probing.py: class names lower-cased, oov_class_map for the two-word classes.
    assert words == ["grasp", "lift", "throw", "push", "fix", "ride", "play", "watch", "sitting", "feed", "row",
                     "pouring", "looking", "writing", "typing"]  # fmt: skip
    # Ranked, not predicted: the metric reads the 15 log-probabilities.
    assert EVALUATION.protocol("mlm-table4").predict(Scores((-1.0,) * 15), ROW) is None


def test_nli_pairs_use_the_papers_hypothesis():
    request = EVALUATION.protocol("nli-table4").build(ROW, "default")
    pairs = request.pairs
    assert (
        isinstance(request, Entailment)
        and request.reading == "three_way"
        and pairs[0] == ("Make sure to have steaks and potatoes .", "steaks can be used for grasp by human")
    )
    assert pairs[12][1] == "steaks can be used for looking by human"


def _word_tokenizer(words):
    """A BERT-like word-level tokenizer: [CLS] A [SEP] B [SEP], segment ids 0 then 1."""
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]"), vocab  # fmt: skip


def _loaded(model, tokenizer, family):
    import torch

    from physprobe.backends.hf.model import Loaded

    return Loaded(model, tokenizer, family, torch.device("cpu"))


def test_released_mlm_encoding_and_scores_worked_by_hand():
    import torch
    from transformers import BertConfig, BertForMaskedLM

    row = {"sentence": "he rides a horse .", "object": "horse", "labels": [0] * 5 + [1] + [0] * 9}
    words = "he rides a horse . can be used for by human grasp lift ride sitting".split()
    tokenizer, vocab = _word_tokenizer(words)
    request = EVALUATION.protocol("mlm-released-probing").build(row, "default")
    payload = (request.first, request.second)
    assert isinstance(request, MaskedPair) and EVALUATION.default("mlm").name == "mlm-released-probing"
    # src/probing.py:93-106: encode_plus(sentence, object + " can be used for  " + mask + " by human")
    assert payload[:2] == ("he rides a horse .", "horse can be used for  [MASK] by human")
    encoded = tokenizer(payload[0], payload[1].replace("[MASK]", tokenizer.mask_token), return_token_type_ids=True)
    # [CLS]=2 he=5 rides=6 a=7 horse=8 .=9 [SEP]=3 | horse=8 can=10 be=11 used=12 for=13 [MASK]=4 by=14 human=15 [SEP]=3
    assert encoded["input_ids"] == [2, 5, 6, 7, 8, 9, 3, 8, 10, 11, 12, 13, 4, 14, 15, 3]
    assert encoded["token_type_ids"] == [0] * 7 + [1] * 9
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32, max_position_embeddings=64)).eval()  # fmt: skip
    (scores,) = [list(r.values) for r in score_loaded(_loaded(model, tokenizer, "mlm"), [request])]
    ids, mask = torch.tensor([encoded["input_ids"]]), torch.tensor([encoded["attention_mask"]])
    with torch.no_grad():  # probing.py:130: model(input_ids, attention_mask), no token types
        released = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits[0, 12], dim=-1)
        segments = torch.log_softmax(
            model(input_ids=ids, token_type_ids=torch.tensor([encoded["token_type_ids"]])).logits[0, 12], dim=-1
        )
    assert not torch.allclose(released, segments)  # the token types change the scores
    # probing.py:151: convert_tokens_to_ids of each class word; a word outside the vocabulary converts to [UNK].
    expected = [released[vocab.get(c.mlm_word, vocab["[UNK]"])].item() for c in evaluation.CLASSES]
    assert scores == pytest.approx(expected, abs=1e-5)
    assert scores[2] == scores[14] == pytest.approx(released[vocab["[UNK]"]].item(), abs=1e-5)
    # The alternative passes the segment ids and leaves unknown words unscored (physprobe's earlier reading).
    (scores,) = [
        r.values
        for r in score_loaded(_loaded(model, tokenizer, "mlm"), [EVALUATION.protocol("mlm-pair-segments").build(row, "default")])
    ]
    assert scores[5] == pytest.approx(segments[vocab["ride"]].item(), abs=1e-5) and scores[2] is None


def test_released_mlm_lower_cases_for_a_cased_tokenizer_that_takes_the_option():
    # src/probing.py:38 loads the tokenizer with do_lower_case=True: a cased BERT tokenizer then lower-cases (and
    # strips accents); an uncased one does already; BPE tokenizers have no such option.
    protocol = EVALUATION.protocol("mlm-released-probing")
    row = {"sentence": "Zoë rode the Horse .", "object": "the Horse"}

    class Cased:
        do_lower_case = False

    class Uncased:
        do_lower_case = True

    request = protocol.build(row, "default")
    assert request.lower_case  # the backend reads the pair as such a tokenizer reads it (tokenized.lower_cased)
    assert (tokenized.lower_cased(request.first, Cased()), tokenized.lower_cased(request.second, Cased())) == (
        "zoe rode the horse .", "the horse can be used for  [mask] by human")  # fmt: skip
    assert tokenized.lower_cased(request.first, Uncased()) == "Zoë rode the Horse ."
    assert tokenized.lower_cased(request.second, object()) == "the Horse can be used for  [MASK] by human"


def test_ties_count_as_each_released_script_counts_them():
    # Positives Grasp, Lift, Throw, Push, Watch, Feed; every class scored equal but Grasp (higher).
    scores = [0.0] + [-1.0] * 14
    mlm = EVALUATION.protocol("mlm-released-probing")
    # probing.py:214 / multi_choice.py:132: pos >= neg is correct, so every pair is right (6 x 9 = 54).
    out = evaluation.metrics("default", [ROW], [mlm.predict(Scores(tuple(scores)), ROW)], [scores], **mlm.metric_options)
    assert out["pairwise"]["accuracy"] == 1.0
    assert EVALUATION.protocol("nli-released-multi-choice").metric_options == mlm.metric_options == {"ties": "correct"}
    # zero_shot_LLM.py:132 (YES/NO): pos > neg, ties wrong: only Grasp's 9 pairs are right.
    assert evaluation.metrics("default", [ROW], [None], [scores])["pairwise"]["accuracy"] == pytest.approx(9 / 54)
    assert EVALUATION.protocol("yes-no-flan-t5").metric_options == {}


@pytest.mark.parametrize(
    "answers, yes",
    [(["Yes", "yes.", " YES", "No", "no", "Yes, a human can.", "No, they cannot.", "Eyes", "", "NO", "yes and no",
       "I don't know", "Sure", "Nope", "Answer: Yes"], [0, 1, 2, 5, 7, 10, 14])],
)  # fmt: skip
def test_released_yes_no_rule_on_generated_answers(answers, yes):
    # zero_shot_LLM.py:73-76: 1 if 'yes' in answer.lower() else 0; the pair's prediction is the YES set.
    protocol = EVALUATION.protocol("yes-no-flan-t5")
    assert protocol.outcome(_answers(answers), None).scores == [1.0 if i in yes else 0.0 for i in range(15)]
    mask = protocol.predict(_answers(answers), None)
    assert mask == sum(1 << i for i in yes)
    # Pairwise, pos > neg (zero_shot_LLM.py:132): YES positives (Grasp, Lift, Throw, and Watch: "Eyes" holds
    # 'yes') x NO negatives (the 9 negatives but Ride, Row, TypeOn: 6) = 24 of 54.
    positives = [i for i, label in enumerate(ROW["labels"]) if label]
    negatives = [i for i, label in enumerate(ROW["labels"]) if not label]
    right = sum(int(p in yes) > int(n in yes) for p in positives for n in negatives)
    assert right == 24
    out = evaluation.metrics("default", [ROW], [mask], [protocol.outcome(_answers(answers), None).scores])
    assert out["pairwise"]["accuracy"] == pytest.approx(right / 54)


@pytest.mark.slow
def test_yes_no_generation_equals_the_released_greedy_call(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from . import tiny_models

    protocol = EVALUATION.protocol("yes-no-falcon")
    texts = [p for p in prompts("yes-no-falcon")] + ["YES", "NO", "Yes, a human can.", "No."]
    folder = tiny_models.causal_lm(tmp_path / "m", texts)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    request = protocol.build(ROW, "default")
    (answers,) = score_loaded(_loaded(model, tokenizer, "causal"), [request])
    released = []
    for text in prompts("yes-no-falcon"):  # zero_shot_LLM.py:66-76, greedy
        inputs = tokenizer(text, return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(**inputs, max_new_tokens=20, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        released.append(tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True))
    assert list(answers.texts) == released
    assert protocol.predict(answers, request) == sum(1 << i for i, text in enumerate(released) if "yes" in text.lower())


def test_released_generative_config_is_the_rows_the_scripts_score(built_all, upstream_dir):
    import csv

    import datasets

    # zero_shot_LLM.py:96-99: `for ids, rows in data.iterrows(): if ids < 1868: continue` over the release.
    with open(upstream_dir / "text2afford" / "final_normal_dataset.tsv", newline="") as handle:
        release = list(csv.DictReader(handle, delimiter="\t"))
    scored = [(r["Sentence"], r["Object"]) for ids, r in enumerate(release) if not ids < 1868]
    subset = datasets.load_dataset(str(built_all / "text2afford"), "released_generative", split="test")
    assert len(scored) == subset.num_rows == 500
    assert list(zip(subset["sentence"], subset["object"])) == scored
    assert "released_generative" in EVALUATION.scorable


def test_nli_pipeline_multi_label_and_released_single_label_worked_by_hand():
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    row = {"sentence": "he rides a horse .", "object": "horse", "labels": [0] * 15}
    words = "he rides a horse . can be used for by human This example is".split() + [c.mlm_word for c in evaluation.CLASSES]
    tokenizer, vocab = _word_tokenizer(words)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, num_labels=3,
                        id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"})  # fmt: skip
    model = BertForSequenceClassification(config).eval()
    loaded = _loaded(model, tokenizer, "nli")
    request = EVALUATION.protocol("nli-zero-shot-multi-label").build(row, "default")
    pairs = request.pairs
    assert request.reading == "vs_contradiction" and pairs[5] == ("he rides a horse .", "horse can be used for ride by human")
    (scores,) = [r.values for r in score_loaded(loaded, [request])]
    with torch.no_grad():
        logits = [model(**tokenizer(p, h, return_tensors="pt")).logits[0] for p, h in pairs]
    # The pipeline with multi_label=True: softmax over (contradiction, entailment) for each label on its own.
    assert scores == pytest.approx([torch.softmax(l[[0, 2]], dim=0)[1].item() for l in logits], abs=1e-5)
    # multi_choice.py:65-68 at the pinned commit: bare class words as the labels, multi_label=True.
    request = EVALUATION.protocol("nli-released-multi-choice").build(row, "default")
    pairs = request.pairs
    assert request.reading == "vs_contradiction" and pairs[12] == ("he rides a horse .", "This example is looking.")
    (scores,) = [r.values for r in score_loaded(loaded, [request])]
    with torch.no_grad():
        logits = [model(**tokenizer(p, h, return_tensors="pt")).logits[0] for p, h in pairs]
    assert scores == pytest.approx([torch.softmax(l[[0, 2]], dim=0)[1].item() for l in logits], abs=1e-5)
    request = EVALUATION.protocol("nli-released-single-label").build(row, "default")
    pairs = request.pairs
    assert pairs[0][1] == "This example is horse can be used for grasp by human."
    (scores,) = [r.values for r in score_loaded(loaded, [request])]
    with torch.no_grad():
        entail = torch.stack([model(**tokenizer(p, h, return_tensors="pt")).logits[0, 2] for p, h in pairs])
    # multi_label=False: a softmax of the 15 entailment logits.
    assert scores == pytest.approx(torch.softmax(entail, dim=0).tolist(), abs=1e-5)
    assert sum(scores) == pytest.approx(1.0)


def test_prompts_of_table_4_and_10():
    sentence, obj = "All the women in India wear bangles", "bangles"
    pour = text2afford.CLASSES[text2afford.CLASS_NAMES.index("PourFrom")]
    assert prompt("nli_hypothesis", sentence, obj, pour) == "bangles can be used for pour from by human"
    assert prompt("yes_no_falcon", sentence, obj, pour).endswith("Can human pour from the bangles? \n \u00bbANSWER\u00ab")
    assert prompt("mlm", sentence, obj, sep_token="[SEP]", mask_token="[MASK]") == (
        "All the women in India wear bangles [SEP] bangles can be used for [MASK] by human"
    )
    with pytest.raises(ValueError, match="needs an affordance"):
        prompt("yes_no_flan_t5", sentence, obj)


@pytest.mark.slow
def test_a_llama_run_scores_the_rows_its_released_script_reads(built_all, tmp_path):
    import json

    import datasets

    from physprobe.cli import main

    from . import tiny_models

    texts = datasets.load_dataset(str(built_all / "text2afford"), "high_agreement", split="test")["sentence"][:50]
    model = tiny_models.causal_lm(tmp_path / "tiny-llama", texts)  # the name picks yes-no-llama3-released
    base = [
        "score",
        "--model",
        str(model),
        "--benchmark",
        "text2afford",
        "--limit",
        "8",
        "--data",
        str(built_all),
        "--truncate",
    ]  # the tiny model reads 512 positions; the prompt is 519 tokens
    # The released script read its prompts through Llama-3-Instruct's chat template: a model without one is refused.
    assert main([*base, "--out", str(tmp_path / "no-template")]) == 2 and not (tmp_path / "no-template").exists()
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    tokenizer.save_pretrained(model)
    assert main([*base, "--out", str(tmp_path / "run")]) == 0
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert info["spec"]["protocol"] == "yes-no-llama3-released" and info["spec"]["configs"] == ["high_agreement"]
    assert (
        metrics["high_agreement"]["in_context_pairwise"]["n"] + metrics["high_agreement"]["in_context_pairwise"]["skipped"] == 8
    )
    # --config still chooses: the release's rows, figures still filed as in-context.
    assert main([*base, "--config", "default", "--out", str(tmp_path / "release")]) == 0
    assert json.loads((tmp_path / "release" / "run.json").read_text())["spec"]["configs"] == ["default"]
