"""NEWTON protocols: the exact model inputs of the released hf_track*.py for a few rows (strings and, with a
tiny tokenizer, token ids), the answer matching, and the breakdowns the paper reports."""

import csv

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from physprobe import protocols
from physprobe.backends.hf import generation
from physprobe.dataset_scripts.newton import evaluation
from physprobe.dataset_scripts.newton.evaluation import EVALUATION, match_answer, released_prompt
from physprobe.requests import Choice, Generate

BS_N = "\\n"  # hf_track*.py write f'... \\n ...': a backslash and an "n", not a newline


@pytest.fixture(scope="module")
def first_upstream_row(upstream_dir):
    with open(upstream_dir / "newton" / "confident_questions.csv", newline="") as handle:
        return next(csv.DictReader(handle))


def test_track1_prompt_is_hf_track1s(first_upstream_row):
    # hf_track1.py: prompt = f'{question} \\n (a) {candidate1} (b) {candidate2} (c) {candidate3}'
    up = first_upstream_row
    row = {"question": up["question"], "choices": [up["option_1"], up["option_2"], up["option_3"]]}
    request = EVALUATION.protocol("released-generate").build(row, "track1")
    assert isinstance(request, Generate) and request.max_new_tokens == evaluation.MAX_NEW_TOKENS and request.stop == ()
    expected = up["question"] + " " + BS_N + " (a) " + up["option_1"] + " (b) " + up["option_2"] + " (c) " + up["option_3"]
    assert request.prompt == expected and "\n" not in request.prompt
    assert request.choices == (up["option_1"], up["option_2"], up["option_3"])
    # The generated answer is matched against the request's options.
    assert EVALUATION.protocol("released-generate").predict(["(c) " + up["option_3"]], request) == 2


def test_track2_and_track3_prompts_by_hand():
    boolean = {"question": "pillow is more soft than rock.", "choices": ["True", "False"]}
    assert released_prompt(boolean, "track2_boolean") == "pillow is more soft than rock. \\n (a) True (b) False"
    # The Table 1 wording hf_track2.py comments out.
    assert EVALUATION.protocol("table1-generate").build(boolean, "track2_boolean").prompt == (
        "True/False: pillow is more soft than rock.")
    mc = {"question": "Which object is the most soft?", "choices": ["rock", "pillow", "brick", "spoon"]}
    assert released_prompt(mc, "track2_mc") == "Which object is the most soft? \\n (a) rock (b) pillow (c) brick (d) spoon"
    scenario = {"context": "I am packing a backpack.", "choices": ["rock", "pillow", "brick", "spoon"],
                "question": "Which of rock, pillow, brick, spoon should I put at the bottom?"}  # fmt: skip
    # hf_track3.py: f'Context: {context} \\n Question: {question} \\n (a) {c1} (b) {c2} (c) {c3} (d) {c4}'
    assert released_prompt(scenario, "track3") == (
        "Context: I am packing a backpack. \\n Question: Which of rock, pillow, brick, spoon should I put at the "
        "bottom? \\n (a) rock (b) pillow (c) brick (d) spoon")


def test_token_ids_of_a_seq2seq_input_worked_by_hand():
    # A T5-like word-level tokenizer: the flan/unifiedqa classes encode the prompt and append </s>.
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, "pillow": 3, "is": 4, "soft.": 5, "\\n": 6, "(a)": 7, "True": 8,
             "(b)": 9, "False": 10}  # fmt: skip
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    prompt = EVALUATION.protocol("released-generate").build(
        {"question": "pillow is soft.", "choices": ["True", "False"]}, "track2_boolean").prompt
    assert tokenizer(prompt)["input_ids"] == [3, 4, 5, 6, 7, 8, 9, 10, 1]


def test_loglik_alternatives_score_labels_or_texts():
    mc = {"question": "Which object is the most soft?", "choices": ["rock", "pillow", "brick", "spoon"]}
    request = EVALUATION.protocol("released-loglik-labels").build(mc, "track2_mc")
    labels = request.texts()
    assert isinstance(request, Choice) and labels[1].endswith("(d) spoon Answer: (b)") and len(labels) == 4
    texts = EVALUATION.protocol("released-loglik-texts").build(mc, "track2_mc").texts()
    assert texts[1].endswith("(d) spoon Answer: pillow")
    # The highest summed log-probability wins (hand-made scores).
    assert EVALUATION.protocol("released-loglik-texts").predict([-9.0, -4.5, -4.6, -12.0], mc) == 1


@pytest.mark.parametrize(
    "answer, expected",
    [("The answer is (a).", 0), ("The answer is (b).", 1), ("(b)", 1), ("b)", 1), ("(B) False", 1),
     ("Answer: (a) True", 0), ("The correct answer is b.", 1), ("Option (b).", 1), ("\n\n(a) True", 0),
     ("b", 1), ("True.", 0), ("false", 1), ("a true statement", 0), ("The statement is False.", 1),
     ("It depends.", None)],
)  # fmt: skip
def test_answer_matching_finds_a_label_stated_as_the_answer_before_option_text(answer, expected):
    # Track 2 Boolean answers as small instruction models write them (SmolLM2: "The answer is (a)." in most).
    assert match_answer(answer, ["True", "False"]) == expected
    protocol = EVALUATION.protocol("released-generate")
    assert protocol.predict([answer], Generate("", tuple(["True", "False"]))) == (protocols.UNPARSED if expected is None else expected)


@pytest.mark.parametrize(
    "answer, expected",
    [("(b) pillow", 1), ("B", 1), ("b) pillow", 1), ("Pillow.", 1), ("the answer is spoon", 3),
     ("rock", 0), ("rocking_chair", None), ("pillow or spoon", 1), ("", None),
     ("rock salt", 4)],
)  # fmt: skip
def test_answer_matching(answer, expected):
    assert match_answer(answer, ["rock", "pillow", "brick", "spoon", "rock salt"]) == expected


def test_boolean_answers_match_true_or_false():
    row = ["True", "False"]
    assert [match_answer(a, row) for a in ("True", "false.", "(a)", "(b) False", "maybe")] == [0, 1, 0, 1, None]


def test_generation_is_the_default_for_generative_families():
    assert EVALUATION.default("causal").name == "released-generate"
    assert EVALUATION.default("seq2seq", model_name="google/flan-t5-large").name == "released-generate"
    assert EVALUATION.default("causal", method="causal").name == "released-loglik-labels"


def test_metrics_report_polarity_position_and_macro_breakdowns():
    rows = [{"attribute": "Softness", "polarity": "pos", "label": 0}, {"attribute": "Softness", "polarity": "neg", "label": 1},
            {"attribute": "Sharpness", "polarity": "neg", "label": 1}]  # fmt: skip
    out = evaluation.metrics("track2_boolean", rows, [0, 0, None], [[], [], []])
    # The unparsed answer (None) counts as wrong: 1 right of 3.
    assert out["n"] == 3 and out["undecided"] == 1 and out["accuracy"] == pytest.approx(1 / 3)
    assert out["by_polarity"] == {"neg": {"accuracy": 0.0, "n": 2}, "pos": {"accuracy": 1.0, "n": 1}}
    track1 = [{"attribute": "Softness", "label": 0, "agreement": 1.0}, {"attribute": "Softness", "label": 2, "agreement": 0.5},
              {"attribute": "Sharpness", "label": 2, "agreement": 0.75}]  # fmt: skip
    out = evaluation.metrics("track1", track1, [0, 0, 2], [[], [], []])
    # Softness: (1.0 + 0) / 2 = 0.5; Sharpness: 0.75 -> mean over attributes 0.625 (Table 4's Overall).
    assert out["agreement_accuracy_macro"] == pytest.approx(0.625)
    assert out["agreement_accuracy"] == pytest.approx(1.75 / 3)
    track3 = [{"tag": "hammering", "label": 2}, {"tag": "insulation", "label": 0}]
    out = evaluation.metrics("track3", track3, [2, 1], [[], []])
    assert set(out["by_group"]) == {"hammering", "insulation"} and out["by_position"]["2"]["accuracy"] == 1.0


@pytest.mark.parametrize("adds_bos", [False, True])
def test_generation_reads_the_prompt_as_the_tokenizer_encodes_it(tmp_path, adds_bos):
    # The released text-generation pipeline (utils/huggingface_models.py) encodes the prompt with the tokenizer's own
    # special tokens and decodes greedily (flan: do_sample=False): no BOS is added unless the tokenizer adds it.
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from . import tiny_models

    rows = [{"question": f"{o} is {a}.", "choices": ["True", "False"]} for o in ("pillow", "rock", "sponge", "knife")
            for a in ("soft", "hard", "sharp")]  # fmt: skip
    prompts = [released_prompt(row, "track2_boolean") for row in rows]
    folder = tiny_models.causal_lm(tmp_path / "m", prompts + ["The answer is (a). True", "(b) False"])
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    if adds_bos:  # as Llama's and Gemma's tokenizers do
        tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", tokenizer.bos_token_id)])
    protocol = EVALUATION.protocol("released-generate")
    requests = [{"prompt": r.prompt, "max_new_tokens": r.max_new_tokens, "stop": list(r.stop)}
                for r in (protocol.build(row, "track2_boolean") for row in rows[:6])]  # fmt: skip
    texts = generation.generate(model, tokenizer, requests, torch.device("cpu"))
    for request, text in zip(requests, texts):
        ids = tokenizer(request["prompt"], return_tensors="pt")["input_ids"]
        assert (ids[0, 0].item() == tokenizer.bos_token_id) == adds_bos
        with torch.inference_mode():
            out = model.generate(ids, max_new_tokens=request["max_new_tokens"], do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id)  # fmt: skip
        assert text == tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
