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
from physprobe.protocols.requests import Choice, Generate
from physprobe.protocols.results import Answer, Scores

BS_N = "\\n"  # hf_track*.py write f'... \\n ...': a backslash and an "n", not a newline


def _texts(answers) -> list[str]:
    """The texts of the generation engine's answers."""
    return [answer.text for answer in answers]


@pytest.fixture(scope="module")
def first_upstream_row(upstream_dir):
    with open(upstream_dir / "newton" / "confident_questions.csv", newline="") as handle:
        return next(csv.DictReader(handle))


def test_track1_prompt_is_hf_track1s(first_upstream_row):
    # hf_track1.py: prompt = f'{question} \\n (a) {candidate1} (b) {candidate2} (c) {candidate3}'
    up = first_upstream_row
    row = {"question": up["question"], "choices": [up["option_1"], up["option_2"], up["option_3"]]}
    request = EVALUATION.protocol("released-generate").build(row, "track1")
    assert isinstance(request, Generate) and request.max_length == evaluation.MAX_LENGTH == 128 and request.stop == ()
    expected = up["question"] + " " + BS_N + " (a) " + up["option_1"] + " (b) " + up["option_2"] + " (c) " + up["option_3"]
    assert request.prompt == expected and "\n" not in request.prompt
    assert request.choices == (up["option_1"], up["option_2"], up["option_3"])
    # The generated answer is matched against the request's options.
    assert EVALUATION.protocol("released-generate").predict(Answer("(c) " + up["option_3"]), request) == 2


def test_track2_and_track3_prompts_by_hand():
    boolean = {"question": "pillow is more soft than rock.", "choices": ["True", "False"]}
    assert released_prompt(boolean, "track2_boolean") == "pillow is more soft than rock. \\n (a) True (b) False"
    # The Table 1 wording hf_track2.py comments out.
    assert EVALUATION.protocol("table1-generate").build(boolean, "track2_boolean").prompt == (
        "True/False: pillow is more soft than rock."
    )
    mc = {"question": "Which object is the most soft?", "choices": ["rock", "pillow", "brick", "spoon"]}
    assert released_prompt(mc, "track2_mc") == "Which object is the most soft? \\n (a) rock (b) pillow (c) brick (d) spoon"
    scenario = {"context": "I am packing a backpack.", "choices": ["rock", "pillow", "brick", "spoon"],
                "question": "Which of rock, pillow, brick, spoon should I put at the bottom?"}  # fmt: skip
    # hf_track3.py: f'Context: {context} \\n Question: {question} \\n (a) {c1} (b) {c2} (c) {c3} (d) {c4}'
    assert released_prompt(scenario, "track3") == (
        "Context: I am packing a backpack. \\n Question: Which of rock, pillow, brick, spoon should I put at the "
        "bottom? \\n (a) rock (b) pillow (c) brick (d) spoon"
    )


def chatbot_messages(system: str, message: str) -> list[dict]:
    # query_gpt.py:10-21 by hand: ChatBot(system) keeps [system]; bot(message) sends it plus one user turn.
    return [{"role": "system", "content": system}, {"role": "user", "content": message}]


def test_gpt_chat_protocol_sends_the_system_message_and_the_bare_question(first_upstream_row):
    up = first_upstream_row
    protocol = EVALUATION.protocol("released-gpt-chat")
    assert protocol.needs_chat and protocol.method == "generate"
    system = "Select the most correct answer letter from the provided options, no explanation. One word only."
    # gpt_track1.py:11-12 ChatBot(system), :33 bot_turbo(question): the upstream question, without its options.
    row = {"question": up["question"], "choices": [up["option_1"], up["option_2"], up["option_3"]]}
    request = protocol.build(row, "track1")
    sent = [{"role": "system", "content": protocol.system("track1")}, {"role": "user", "content": request.prompt}]
    assert sent == chatbot_messages(system, up["question"])
    # gpt_track2.py:10-11, :39 bot_turbo(question), for both question types.
    for config, row in (
        ("track2_boolean", {"question": "pillow is more soft than rock.", "choices": ["True", "False"]}),
        ("track2_mc", {"question": "Which object is the most soft?", "choices": ["rock", "pillow", "brick", "spoon"]}),
    ):
        assert protocol.build(row, config).prompt == row["question"] and protocol.system(config) == system
    # gpt_track3.py:11-12 another system message; :31,33 the question template is what it sends.
    scenario = {"context": "I am packing a backpack.", "question": "Which of rock, pillow, brick, spoon should I put at the bottom?",
                "choices": ["rock", "pillow", "brick", "spoon"]}  # fmt: skip
    request = protocol.build(scenario, "track3")
    assert [protocol.system("track3"), request.prompt] == [
        "Select the correct answer, no explanation. One word only.",
        "Context: I am packing a backpack. Question: Which of rock, pillow, brick, spoon should I put at the bottom? "
        "A) rock B) pillow C) brick D) spoon Answer:",
    ]
    # The scripts store response.lower().replace('.', ''); "B." is option (b), "Spoon." the option text.
    assert protocol.predict(Answer("B."), request) == 1 and protocol.predict(Answer("Spoon."), request) == 3
    assert EVALUATION.default("causal", model_name="gpt-3.5-turbo").name == "released-gpt-chat"
    assert EVALUATION.default("causal", model_name="gpt2").name == "released-generate"


def test_printed_template_variant_keeps_the_scripts_labels():
    # gpt_track2.py:35,37 (built and printed, not sent): Boolean "A) .. B)", MC "A) B) C) B)" (the script's typo).
    protocol = EVALUATION.protocol("gpt-chat-printed-template")
    boolean = {"question": "pillow is more soft than rock.", "choices": ["True", "False"]}
    mc = {"question": "Which object is the most soft?", "choices": ["rock", "pillow", "brick", "spoon"]}
    assert protocol.build(boolean, "track2_boolean").prompt == "Question: pillow is more soft than rock. A) True B) False Answer:"
    assert (
        protocol.build(mc, "track2_mc").prompt
        == "Question: Which object is the most soft? A) rock B) pillow C) brick B) spoon Answer:"
    )
    assert protocol.needs_chat and protocol.system("track2_mc") == EVALUATION.protocol("released-gpt-chat").system("track2_mc")


def test_hf_protocols_send_no_system_message():
    # hf_track*.py call pipelines on the raw prompt: no chat template, no system turn.
    for name in ("released-generate", "table1-generate", "released-loglik-labels"):
        protocol = EVALUATION.protocol(name)
        assert not protocol.needs_chat and protocol.system("track1") is None


def test_token_ids_of_a_seq2seq_input_worked_by_hand():
    # A T5-like word-level tokenizer: the flan/unifiedqa classes encode the prompt and append </s>.
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, "pillow": 3, "is": 4, "soft.": 5, "\\n": 6, "(a)": 7, "True": 8,
             "(b)": 9, "False": 10}  # fmt: skip
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    prompt = (
        EVALUATION.protocol("released-generate")
        .build({"question": "pillow is soft.", "choices": ["True", "False"]}, "track2_boolean")
        .prompt
    )
    assert tokenizer(prompt)["input_ids"] == [3, 4, 5, 6, 7, 8, 9, 10, 1]


def test_loglik_alternatives_score_labels_or_texts():
    mc = {"question": "Which object is the most soft?", "choices": ["rock", "pillow", "brick", "spoon"]}
    request = EVALUATION.protocol("released-loglik-labels").build(mc, "track2_mc")
    labels = request.texts()
    assert isinstance(request, Choice) and labels[1].endswith("(d) spoon Answer: (b)") and len(labels) == 4
    texts = EVALUATION.protocol("released-loglik-texts").build(mc, "track2_mc").texts()
    assert texts[1].endswith("(d) spoon Answer: pillow")
    # The highest summed log-probability wins (hand-made scores).
    assert EVALUATION.protocol("released-loglik-texts").predict(Scores((-9.0, -4.5, -4.6, -12.0)), mc) == 1


BOOL = ["True", "False"]
MC = ["rock", "pillow", "brick", "spoon"]
TRACK1 = ["Low: object can withstand most impact forces (drop, smash, etc.).",
          "Moderate: object can withstand minor impact forces.", "High: object shatters easily with impact force."]  # fmt: skip
# Answer forms as models write them, with the option each names (None: unparsed, counted wrong). Worked by
# hand: a label stated as the answer wins wherever it stands, before any option text.
ANSWER_FORMS = [
    # the label stated as the answer, then more text (issue 29's four misses first)
    ("The answer is b. A sponge is not.", MC, 1),
    ("The answer is b.\nExplanation: a pillow is soft.", MC, 1),
    ("The correct answer is option A.\n\nA rock is the hardest.", MC, 0),
    ("Answer: **B**", MC, 1),
    ("(c) because a brick is stiff", MC, 2),
    ("The answer is (a).", BOOL, 0),
    ("The answer is (b).", BOOL, 1),
    ("The answer is: (d) spoon", MC, 3),
    ("The answer would be c, the brick.", MC, 2),
    ("Answer: The correct option is b", MC, 1),
    ("**Answer:** (d)", MC, 3),
    ("Answer:\n(b) pillow", MC, 1),
    ("The correct answer is d. Spoons are sharp.", MC, 3),
    ("Option (b).", BOOL, 1),
    ("Option a is right: a rock is hard.", MC, 0),
    ("I choose b.", MC, 1),
    ("A rock can hold it, so the answer is (c).", MC, 2),  # the stated label beats the option text before it
    ("Pillow is soft. Answer: (d)", MC, 3),
    ("(a) True (b) False\nAnswer: (b)", BOOL, 1),  # an echoed option list, then the answer
    ("Answer: B) False", BOOL, 1),
    ("The answer is A.", BOOL, 0),
    ("the answer is 'c'", MC, 2),
    # a label opening the answer
    ("(b)", BOOL, 1),
    ("b)", BOOL, 1),
    ("(B) False", BOOL, 1),
    ("\n\n(a) True", BOOL, 0),
    ("b", BOOL, 1),
    ("B.", MC, 1),
    ("d. spoon", MC, 3),
    ("B: pillow", MC, 1),
    ("c, brick", MC, 2),
    ("**C**", MC, 2),
    (" D", MC, 3),
    ("a", MC, 0),
    ("A) rock", MC, 0),
    # a bracketed label elsewhere
    ("I think b) is right.", MC, 1),
    ("Pillow (b)", MC, 1),
    ("It must be (c) here.", MC, 2),
    # option text, no label stated
    ("True.", BOOL, 0),
    ("false", BOOL, 1),
    ("The statement is False.", BOOL, 1),
    ("a true statement", BOOL, 0),  # "a" before a word is the article
    ("A pillow.", MC, 1),
    ("The answer is a rock.", MC, 0),  # the article again: option text "rock", not label (a)
    ("The answer is spoon", MC, 3),
    ("Pillow or spoon", MC, 1),  # the first named
    ("pillow.", MC, 1),
    ("High.", TRACK1, 2),  # a Track 1 option's head
    ("Moderate: object can withstand minor impact forces.", TRACK1, 1),
    ("low", TRACK1, 0),
    # unparsed
    ("", MC, None),
    ("It depends.", BOOL, None),
    ("I am not sure.", MC, None),
    ("None of the above.", MC, None),
    ("The answer is (e).", MC, None),
    ("(c)", BOOL, None),  # no option (c) in a two-option question
    ("The answer is c.", BOOL, None),
    ("either (a) or (b)", MC, None),  # two labels, none stated as the answer
    ("answer is bad", MC, None),  # "bad" is no label
    ("rocking_chair", MC, None),  # not the option "rock" (whole words)
    ("A sponge.", MC, None),
    ("c'mon", MC, None),
    # a model continuing the prompt with options of its own (SmolLM2 on raw Track 1 and Track 2 prompts)
    ("(d) Very High: object shatters with extreme impact forces. (e) High: object shatters", TRACK1, None),
    ("\\n (d) Very High: the object is very soft. (e) Very Low: the object is very soft.", TRACK1, None),
    (" (e) table (f) chair (g) bed (h) chair", MC, None),
    ("Pillows and sponge(s) are soft: pillow", MC, 1),  # "(s)" is a plural, not a label
]


def test_answer_table_is_large_and_covers_every_outcome():
    assert len(ANSWER_FORMS) >= 50 and len({(a, tuple(c)) for a, c, _ in ANSWER_FORMS}) == len(ANSWER_FORMS)
    assert {expected for _, _, expected in ANSWER_FORMS} == {None, 0, 1, 2, 3}


@pytest.mark.parametrize("answer, choices, expected", ANSWER_FORMS)
def test_answer_matching_finds_a_label_stated_as_the_answer_before_option_text(answer, choices, expected):
    assert match_answer(answer, choices) == expected
    protocol = EVALUATION.protocol("released-generate")
    assert protocol.predict(Answer(answer), Generate("", tuple(choices))) == (
        protocols.UNPARSED if expected is None else expected
    )


@pytest.mark.parametrize("response", ["B.", "b", "A.", "True.", "False", "Pillow.", "d", "High."])
def test_one_word_answers_read_the_same_raw_or_as_gpt_track_scripts_store_them(response):
    # gpt_track*.py store response.lower().replace('.', ''): the released reading of a one-word answer names
    # the same option as the raw answer.
    for choices in (BOOL, MC, TRACK1):
        assert match_answer(response.lower().replace(".", ""), choices) == match_answer(response, choices)


def test_answer_matching_longer_options_win():
    assert match_answer("rock salt", ["rock", "pillow", "brick", "spoon", "rock salt"]) == 4


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


@pytest.mark.parametrize("adds_bos", [pytest.param(False, marks=pytest.mark.slow), True])
def test_generation_reads_the_prompt_as_the_tokenizer_encodes_it(tmp_path, adds_bos):
    # The released text-generation pipeline (utils/huggingface_models.py, class flan) encodes the prompt with the
    # tokenizer's own special tokens and calls generate(max_length=128, do_sample=False): no BOS is added unless the
    # tokenizer adds it, and the 128 tokens count the prompt's.
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from . import tiny_models

    rows = [{"question": f"{o} is {a}.", "choices": ["True", "False"]} for o in ("pillow", "rock", "sponge", "knife")
            for a in ("soft", "hard", "sharp")]  # fmt: skip
    prompts = [released_prompt(row, "track2_boolean") for row in rows]
    folder = tiny_models.causal_lm(tmp_path / "m", prompts + ["The answer is (a). True", "(b) False"])
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    model.generation_config.eos_token_id = None  # a random model rarely ends: every answer runs to the budget
    if adds_bos:  # as Llama's and Gemma's tokenizers do
        tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", tokenizer.bos_token_id)]
        )
    protocol = EVALUATION.protocol("released-generate")
    requests = [{"prompt": r.prompt, "max_new_tokens": r.max_new_tokens, "stop": list(r.stop), "max_length": r.max_length}
                for r in (protocol.build(row, "track2_boolean") for row in rows[:6])]  # fmt: skip
    texts = _texts(generation.generate(model, tokenizer, requests, torch.device("cpu")))
    for request, text in zip(requests, texts):
        ids = tokenizer(request["prompt"], return_tensors="pt")["input_ids"]
        assert (ids[0, 0].item() == tokenizer.bos_token_id) == adds_bos
        with torch.inference_mode():
            out = model.generate(ids, max_length=128, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        assert out.shape[1] == 128 and text == tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


@pytest.mark.slow
def test_seq2seq_generation_stops_where_t5s_max_length_128_does(tmp_path):
    # hf_track*.py's unifiedqa class: model.generate(tokenizer.encode(prompt), max_length=128, do_sample=False),
    # 128 decoder tokens with the start token, so 127 new ones.
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from . import tiny_models

    rows = [{"question": f"{o} is soft.", "choices": ["True", "False"]} for o in ("pillow", "rock", "sponge")]
    prompts = [released_prompt(row, "track2_boolean") for row in rows]
    folder = tiny_models.seq2seq(tmp_path / "t5", prompts + ["(a) True", "(b) False"])
    model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    model.generation_config.eos_token_id = None
    protocol = EVALUATION.protocol("released-generate")
    requests = [{"prompt": r.prompt, "max_new_tokens": r.max_new_tokens, "stop": [], "max_length": r.max_length}
                for r in (protocol.build(row, "track2_boolean") for row in rows)]  # fmt: skip
    texts = _texts(generation.generate(model, tokenizer, requests, torch.device("cpu"), seq2seq=True))
    for request, text in zip(requests, texts):
        with torch.inference_mode():
            out = model.generate(tokenizer.encode(request["prompt"], return_tensors="pt"), max_length=128, do_sample=False)
        assert out.shape[1] == 128 and text == tokenizer.batch_decode(out, skip_special_tokens=True)[0]


def test_budget_counts_the_prompt_as_the_released_pipelines_did():
    # Worked by hand: a 40-token prompt under max_length=128 leaves 88 new tokens (causal) or 127 (T5's decoder
    # holds its start token); a prompt of 128 tokens or more gets one, as transformers 4 generated one with a warning.
    assert generation.answer_budget(40, 128, 128, seq2seq=False) == 88
    assert generation.answer_budget(40, 128, 128, seq2seq=True) == 127
    assert generation.answer_budget(128, 128, 128, seq2seq=False) == generation.answer_budget(300, 128, 128, seq2seq=False) == 1
    assert generation.answer_budget(10, 20, None, seq2seq=False) == 20
