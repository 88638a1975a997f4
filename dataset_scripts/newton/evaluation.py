"""NEWTON evaluation: default configs, protocols and metric wiring (read by ``physprobe score``).

Prompts are those the authors' released ``hf_track1.py``, ``hf_track2.py`` and ``hf_track3.py`` build:
the question with its options listed as ``(a) .. (b) ..``, joined by the two characters ``\\n`` (the
f-strings hold ``\\\\n``, a backslash and an ``n``, not a newline). Where ``hf_track2.py`` comments out
the paper's Table 1 wording (``True/False: {question}``), that wording is the ``table1-generate``
protocol. The released code generates an answer and saves it; it releases no comparison with the
gold answer, so physprobe's ``match_answer`` is documented in the card.

>>> from physprobe.dataset_scripts.newton.evaluation import EVALUATION
>>> [p.name for p in EVALUATION.protocols][:4]
['released-generate', 'table1-generate', 'released-gpt-chat', 'gpt-chat-printed-template']
>>> released_prompt({"question": "pillow is soft.", "choices": ["True", "False"]}, "track2_boolean")
'pillow is soft. \\\\n (a) True (b) False'
"""

from __future__ import annotations

import re

from physprobe.protocols import Evaluation, Kind, Protocol, decided, first_mentioned, load_metric, several_mentioned
from physprobe.protocols.decoding import Decoding, Released
from physprobe.protocols.requests import Choice, Generate, Seq2Seq
from physprobe.protocols.units import Unit

LABELS = "abcd"
# The released flan and unifiedqa classes (hf_track*.py, utils/huggingface_models.py) call
# generate(max_length=128, do_sample=False): 128 tokens with the prompt's (a causal model's pipeline) or with the
# decoder's start token (T5). A model may state its label late (SmolLM2 on track2_mc row 34000 after token 32).
MAX_LENGTH = 128
NEWLINE = "\\n"  # what hf_track*.py write between question and options: a backslash and an "n"


def _options(choices) -> str:
    return " ".join(f"({LABELS[i]}) {choice}" for i, choice in enumerate(choices))


def released_prompt(row: dict, config: str) -> str:
    """The model input of ``hf_track1.py`` (Track 1), ``hf_track2.py`` (Track 2) and ``hf_track3.py`` (Track 3).

    >>> released_prompt({"context": "I am packing a backpack.", "question": "Which of a, b should I put at the bottom?",
    ...                  "choices": ["a", "b"]}, "track3")
    'Context: I am packing a backpack. \\\\n Question: Which of a, b should I put at the bottom? \\\\n (a) a (b) b'
    """
    if config == "track3":
        return f"Context: {row['context']} {NEWLINE} Question: {row['question']} {NEWLINE} {_options(row['choices'])}"
    return f"{row['question']} {NEWLINE} {_options(row['choices'])}"


# gpt_track1.py:11-12, gpt_track2.py:10-11, gpt_track3.py:11-12: the ChatBot's system message (query_gpt.py:15).
GPT_SYSTEM = "Select the most correct answer letter from the provided options, no explanation. One word only."
GPT_SYSTEM_TRACK3 = "Select the correct answer, no explanation. One word only."
GPT_SYSTEMS = {"track1": GPT_SYSTEM, "track2_boolean": GPT_SYSTEM, "track2_mc": GPT_SYSTEM, "track3": GPT_SYSTEM_TRACK3}
GPT_LABELS = "ABCB"  # gpt_track2.py:37 labels the fourth MC option "B)" again; Track 3 (gpt_track3.py:31) has "D)"


def gpt_template(row: dict, config: str) -> str:
    """The ``question_template`` of ``gpt_track*.py``: what Track 3 sends (``gpt_track3.py:31,33``); Tracks 1-2
    build and print it but send the bare question (``gpt_track1.py:31,33``, ``gpt_track2.py:34-39``).

    >>> gpt_template({"question": "Which object is the most soft?", "choices": ["rock", "pillow", "brick", "spoon"]}, "track2_mc")
    'Question: Which object is the most soft? A) rock B) pillow C) brick B) spoon Answer:'
    """
    labels = GPT_LABELS if config == "track2_mc" else "ABCD"
    options = " ".join(f"{labels[i]}) {choice}" for i, choice in enumerate(row["choices"]))
    if config == "track3":
        return f"Context: {row['context']} Question: {row['question']} {options} Answer:"
    return f"Question: {row['question']} {options} Answer:"


def gpt_message(row: dict, config: str) -> str:
    """The user message ``gpt_track*.py`` send (``bot_turbo(...)``, ``bot_gpt4(...)``): the bare question for
    Tracks 1-2 (no options), the question template for Track 3.

    >>> gpt_message({"question": "pillow is more soft than rock.", "choices": ["True", "False"]}, "track2_boolean")
    'pillow is more soft than rock.'
    """
    return gpt_template(row, config) if config == "track3" else row["question"]


def table1_prompt(row: dict, config: str) -> str:
    """The paper's Table 1 wording where ``hf_track2.py`` comments it out (``True/False: {question}``);
    the released prompt elsewhere.

    >>> table1_prompt({"question": "pillow is soft.", "choices": ["True", "False"]}, "track2_boolean")
    'True/False: pillow is soft.'
    """
    return f"True/False: {row['question']}" if config == "track2_boolean" else released_prompt(row, config)


# How a generated answer states an option label (matched on the lower-cased answer, full stops kept: "b." is a
# label, and "a rock" is the article, not option (a)).
_MARKS = r"[\s*_`\"'“”]*"  # space, Markdown emphasis and quotes around a label
_LABEL = r"(?P<label>\(\s*(?P<bracketed>[a-d])\s*\)|(?P<bare>[a-d])(?P<close>\))?(?!\w|['’]\w))"
# 1. Stated as the answer: "the answer is b", "answer: **B**", "the correct answer is option A", "option (c)",
#    "I choose b"; after "option", "choice" or "letter" an "a" is a label even before a word ("option a is right").
_STATED = re.compile(
    r"\b(?:(?P<noun>option|choice|letter)|answer|choose|chose|pick|select|go\s+with)"
    r"(?:\s+(?:is|would\s+be|will\s+be|should\s+be|must\s+be))?"
    r"(?:[\s:=*_`\"'“”-]+(?P<noun2>option|choice|letter)\b)?"
    rf"[\s:=*_`\"'“”-]*{_LABEL}"
)
# 2. A label that opens the answer: "(b) pillow", "b) pillow", "B.", "b, pillow", "**B**", "c because ...".
_OPENING = re.compile(rf"^{_MARKS}{_LABEL}")
# 3. A bracketed label anywhere: "... so (c)", "I think b) is right".
_BRACKETED = re.compile(r"\(\s*([a-d])\s*\)|(?<![\w(])([a-d])\)")
# A bracketed letter beyond the options ("(d)" of three, "(e)"): the answer goes on listing options of its own.
_LISTED = re.compile(r"(?<!\w)\(\s*([a-z])\s*\)")


def _article(hit: re.Match, text: str) -> bool:
    """Whether a bare "a" is the article of a following word ("a rock"), not option (a)."""
    return hit["bare"] == "a" and not hit["close"] and re.match(r"\s+[a-z]", text[hit.end() :]) is not None


def stated_label(answer: str, count: int) -> int | None:
    """The option label (0-based, below ``count``) a lower-cased answer states, by the rules above in order:
    stated as the answer, then opening the answer, then a bracketed label anywhere (None when brackets name
    two different labels: "either (a) or (b)"); None when it states none.

    >>> stated_label("the answer is b. a sponge is not.", 4), stated_label("answer: **b**", 2), stated_label("a rock", 4)
    (1, 1, None)
    """
    for hit in _STATED.finditer(answer):
        index = LABELS.index(hit["bracketed"] or hit["bare"])
        if index < count and (hit["noun"] or hit["noun2"] or not _article(hit, answer)):
            return index
    hit = _OPENING.match(answer)
    if hit and not _article(hit, answer) and LABELS.index(hit["bracketed"] or hit["bare"]) < count:
        return LABELS.index(hit["bracketed"] or hit["bare"])
    named = {LABELS.index(a or b) for a, b in _BRACKETED.findall(answer)} & set(range(count))
    return named.pop() if len(named) == 1 else None


def match_answer(text: str, choices: list[str]) -> int | None:
    """The option a generated answer names, or None (unparsed).

    The label stated as the answer comes first, wherever it stands (``stated_label``, on the lower-cased
    answer); an answer that brackets a letter beyond the options names none (it lists options of its own, as a
    model continuing the prompt does); else the option text named first, in whole words, read as the released
    ``gpt_track*.py`` store responses (lower case, full stops removed; ``protocols.first_mentioned``: a longer
    option wins over one inside it); else the head of a Track 1 option ("high" for "High: object shatters
    easily ...").

    >>> choices = ["rock", "rocking_chair", "pillow", "sponge"]
    >>> match_answer("The answer is (c).", choices), match_answer("Rocking_chair.", choices), match_answer("d", choices)
    (2, 1, 3)
    >>> match_answer("I am not sure", choices) is None, match_answer("rock or pillow", choices), match_answer("a pillow", choices)
    (True, 0, 2)
    >>> match_answer("The answer is b. A sponge is not.", choices), match_answer("Answer: **B**", choices)
    (1, 1)
    >>> match_answer("High.", ["Low: breaks rarely.", "Moderate: breaks sometimes.", "High: breaks easily."])
    2
    """
    answer = text.lower()
    label = stated_label(answer, len(choices))
    if label is not None:
        return label
    if any(ord(letter) - ord("a") >= len(choices) for letter in _LISTED.findall(answer)):
        return None  # an option list of the model's own ("(d) Very High: ..."), not an answer
    plain = answer.replace(".", "")
    named = first_mentioned(plain, [choice.lower().replace(".", "") for choice in choices])
    if named is None and all(": " in choice for choice in choices):
        named = first_mentioned(plain, [choice.split(": ", 1)[0].lower() for choice in choices])
    return named


def several_named(text: str, choices: list[str]) -> bool:
    """Whether ``match_answer`` took the first of several options the answer names: no label stated as the
    answer and two labels bracketed, or no label and two option texts (an answer that echoes the question's
    options names them all).

    >>> choices = ["rock", "pillow"]
    >>> several_named("(a) rock (b) pillow", choices), several_named("rock or pillow", choices), several_named("(b) pillow", choices)
    (True, True, False)
    """
    answer = text.lower()
    if _STATED.search(answer):  # a label stated as the answer decides alone
        return False
    labels = {LABELS.index(a or b) for a, b in _BRACKETED.findall(answer)} & set(range(len(choices)))
    if labels or stated_label(answer, len(choices)) is not None:
        return len(labels) > 1
    return several_mentioned(answer.replace(".", ""), [choice.lower().replace(".", "") for choice in choices])


def _generate(prompt: str, row: dict) -> Generate:
    return Generate(prompt, tuple(row["choices"]))


def _loglik_labels(row: dict, config: str) -> Choice:
    return Choice(f"{released_prompt(row, config)} Answer:", tuple(f" ({LABELS[i]})" for i in range(len(row["choices"]))))


def _loglik_texts(row: dict, config: str) -> Choice:
    return Choice(f"{released_prompt(row, config)} Answer:", tuple(f" {choice}" for choice in row["choices"]))


# physprobe's formats before issue 10 (Table 1 wording, options ranked by log-likelihood), kept by name.
PROMPTS = {
    "track1": "{question}\nAnswer:",
    "track2_boolean": "True/False: {question}\nAnswer:",
    "track2_mc": "{question} Options: {options}.\nAnswer:",
    "track3": "{context} {question}\nAnswer:",
}


def prompt(row: dict, config: str) -> str:
    """The Table 1 prompt of the ``table1-loglik`` protocols.

    >>> prompt({"question": "Which is heavier, a brick or a leaf?", "choices": ["brick", "leaf"]}, "track1")
    'Which is heavier, a brick or a leaf?\\nAnswer:'
    """
    return PROMPTS[config].format(options=", ".join(row["choices"]), **row)


def group(row: dict, config: str) -> str:
    """The group of the paper's breakdowns a row counts in: its scenario tag in Track 3 (Table 6), else its
    attribute (Tables 4, 5, 9).

    >>> group({"tag": "hammering", "attribute": "Softness"}, "track3"), group({"attribute": "Softness"}, "track1")
    ('hammering', 'Softness')
    """
    return str(row["tag" if config == "track3" else "attribute"])


def metrics(config: str, rows: list[dict], predictions: list, scores: list) -> dict:
    """Accuracy (and Track 1 agreement) per attribute or scenario tag, per polarity (Track 2, Table 9 /
    Figure 4B: overall and within each attribute) and per answer position (four-option configs, Figure
    4C); Track 1 also the mean over attributes (``*_macro``), which is how Table 4's Overall is computed
    (its human row). ``track2`` is Table 5's Combined: Boolean and Multiple Choice questions pooled
    (``EVALUATION.pooled``), with the same breakdowns.

    An answer that names no option (``undecided``: unparsed) counts as wrong, as a paper's accuracy over
    all questions does; ``n`` is every question.
    """
    out, _ = decided(rows, predictions)
    if not rows:
        return out
    extra = {}
    if config == "track1":
        extra["agreements"] = [row["agreement"] for row in rows]
    if config.startswith("track2"):
        extra["polarities"] = [row["polarity"] for row in rows]
    if config in ("track2_mc", "track3"):
        extra["by_position"] = True
    metric = load_metric("agreement_accuracy")
    answers = {"predictions": [-1 if p is None else p for p in predictions], "references": [int(row["label"]) for row in rows]}
    out.update(metric.compute(**answers, groups=[group(row, config) for row in rows], **extra))
    if config.startswith("track2"):  # Table 9: each attribute per polarity, in one pass over attribute|polarity
        split = metric.compute(**answers, groups=[f"{row['attribute']}|{row['polarity']}" for row in rows])
        for pair, figures in split["by_group"].items():
            attribute, polarity = pair.rsplit("|", 1)
            out["by_group"][attribute].setdefault("by_polarity", {})[polarity] = figures
    if config == "track1":
        groups = out["by_group"].values()
        out["agreement_accuracy_macro"] = sum(g["agreement_accuracy"] for g in groups) / len(groups)
        out["accuracy_macro"] = sum(g["accuracy"] for g in groups) / len(groups)
    return out


SEVERAL = "the answer names several options (as one echoing the question's options does) and the first is taken"
RELEASED = "NEWTON hf_track1.py, hf_track2.py, hf_track3.py (the `prompt = f'...'` statement of each main loop)"
GPT = (
    "NEWTON gpt_track1.py, gpt_track2.py, gpt_track3.py through query_gpt.py's ChatBot (system message, one user "
    "turn, openai.ChatCompletion top_p=0.5, no token limit: greedy here, at most 128 new tokens)"
)
GPT_MAX_NEW_TOKENS = 128  # the chat call sets none; the system message asks for one word
# How the released hf_track*.py scripts decode, class by class, chosen by the model's name as their if-chain chooses
# (hf_track2.py:151-160, hf_track3.py:138-145; hf_track1.py imports the same classes, utils/huggingface_models.py):
# flan and unifiedqa greedily, dolly and falcon by sampling, alpaca by beam search.
NEWTON = "NewtonReasoning/Newton@f60288a "
HF_DECODING = Released(
    Decoding.greedy(f"{NEWTON}hf_track2.py:151-160 load no class for another name (the script stops); greedy, "
                    "physprobe's, as the flan and unifiedqa classes decode"),
    by_model=(
        (r"flan", Decoding.greedy(f"{NEWTON}hf_track2.py:37-42, hf_track3.py:35-40 (flan class: pipeline max_length=128, "
                                  "do_sample=False)")),
        (r"unifiedqa", Decoding.greedy(f"{NEWTON}hf_track2.py:25-26, hf_track3.py:23-24 (unifiedqa class: generate "
                                       "max_length=128, do_sample=False)")),
        (r"dolly", Decoding.sampling(f"{NEWTON}hf_track2.py:29-35 (dolly class: the model's own pipeline with its defaults), "
                                     "databrickslabs/dolly@46d3028 training/generate.py:66-67 (InstructionTextGenerationPipeline: "
                                     "do_sample=True, max_new_tokens=256, top_p=0.92, top_k=0)",
                                     top_p=0.92, top_k=0, max_new_tokens=256)),
        (r"alpaca", Decoding.beam(f"{NEWTON}hf_track2.py:76-82, hf_track3.py:51-57 (alpaca class: GenerationConfig num_beams=4, "
                                  "max_new_tokens=128; its temperature, top_p and top_k act only when sampling, which it "
                                  "does not ask)", num_beams=4, max_new_tokens=128)),
        (r"falcon", Decoding.sampling(f"{NEWTON}hf_track2.py:57-64 (falcon class: pipeline max_length=200, do_sample=True, "
                                      "top_k=10; hf_track3.py has no falcon class)", top_k=10, max_new_tokens=200, max_length=200)),
    ),
)  # fmt: skip
# query_gpt.py's ChatBot: top_p=0.5, the API's default temperature (1), no token limit (the protocol's bound stays).
GPT_DECODING = Released(Decoding.sampling(f"{NEWTON}query_gpt.py:25 (ChatCompletion.create top_p=0.5; temperature the "
                                          "API's default, 1)", top_p=0.5))  # fmt: skip
# What the generating protocols share: the released pipelines' budget (the prompt counted) or the GPT scripts' chat.
RELEASED_GENERATION = {
    "match": match_answer,
    "max_new_tokens": MAX_LENGTH,
    "max_length": MAX_LENGTH,
    "fallback": several_named,
    "fallback_reason": SEVERAL,
    "released": HF_DECODING,
}
GPT_CHAT = {
    "families": ("causal",),
    "match": match_answer,
    "max_new_tokens": GPT_MAX_NEW_TOKENS,
    "system_message": GPT_SYSTEMS,
    "needs_chat": True,
    "fallback": several_named,
    "fallback_reason": SEVERAL,
    "released": GPT_DECODING,
}
OBJECT_SET = Unit(
    "object set",
    lambda row, config: frozenset([row["object"]] if "object" in row else row.get("objects") or row["choices"]),
    "Track 1 asks up to eight attributes of one object (777 objects, 2,891 questions); Track 2 Boolean compares a pair "
    "(or states of one object) under several attributes and polarities (10,112 sets, 44,182 questions); Track 2 "
    "multiple-choice and Track 3 questions each offer their own set of objects",
)

EVALUATION = Evaluation(
    benchmark="newton",
    unit=OBJECT_SET,
    # agreement_accuracy's figures, overall and per group, polarity and position; Track 1's means over attributes
    figures={
        "accuracy": Kind.FRACTION,
        "agreement_accuracy": Kind.FRACTION,
        "accuracy_macro": Kind.FRACTION,
        "agreement_accuracy_macro": Kind.FRACTION,
    },  # fmt: skip
    headline=("agreement_accuracy", "accuracy"),
    configs=("track1", "track2_boolean", "track2_mc", "track3"),
    pooled={"track2": ("track2_boolean", "track2_mc")},  # Table 5 Combined: both kinds of question together
    scorable=("track1", "track2_boolean", "track2_mc", "track3"),  # not the attribute table
    protocols=(
        Protocol(
            "released-generate",
            Generate,
            lambda row, config: _generate(released_prompt(row, config), row),
            f"{RELEASED}; greedy to max_length={MAX_LENGTH} with the prompt, as the flan/unifiedqa classes "
            "(do_sample=False); answer matched as match_answer",
            f"released prompt (question, options (a)-(d)); greedy answer ({MAX_LENGTH} tokens with the prompt) "
            "matched to a label or option text",
            default_for=("causal", "seq2seq"),
            **RELEASED_GENERATION,
        ),
        Protocol(
            "table1-generate",
            Generate,
            lambda row, config: _generate(table1_prompt(row, config), row),
            "NEWTON paper Table 1; hf_track2.py `# prompt = f'True/False: {question}'` (commented out)",
            "Table 1 wording for Track 2 Boolean, released prompts elsewhere; generated answer matched",
            **RELEASED_GENERATION,
        ),
        Protocol(
            "released-gpt-chat",
            Generate,
            lambda row, config: _generate(gpt_message(row, config), row),
            f"{GPT} (the bare question for Tracks 1-2, the question template for Track 3); answer read as "
            "the scripts store it (lower case, full stops removed) and matched as match_answer",
            "chat: the GPT scripts' system message, then the bare question (Tracks 1-2) or 'Context: .. "
            "Question: .. A) .. Answer:' (Track 3); greedy answer matched to a label or option text",
            default_for_models=(r"gpt-(?:3\.5|4)",),
            **GPT_CHAT,
        ),
        Protocol(
            "gpt-chat-printed-template",
            Generate,
            lambda row, config: _generate(gpt_template(row, config), row),
            f"{GPT}, with the question_template the scripts build and print for every track (sent only for "
            "Track 3; the paper's Track 2 multiple-choice figures need the options the bare question lacks)",
            "chat: the GPT scripts' system message, then 'Question: .. A) .. B) .. Answer:'; greedy answer "
            "matched to a label or option text",
            **GPT_CHAT,
        ),
        Protocol(
            "released-loglik-labels",
            Choice,
            _loglik_labels,
            f"{RELEASED} (prompt); option labels ranked by log-likelihood (physprobe, no upstream equivalent)",
            "released prompt + ' Answer: (x)'; the most likely label",
        ),
        Protocol(
            "released-loglik-texts",
            Choice,
            _loglik_texts,
            f"{RELEASED} (prompt); option texts ranked by log-likelihood (physprobe; favours short options)",
            "released prompt + ' Answer: <option>'; the most likely option text (summed log-probability)",
        ),
        Protocol(
            "table1-loglik",
            Choice,
            lambda row, config: Choice(prompt(row, config), tuple(f" {c}" for c in row["choices"])),
            "NEWTON paper Table 1 (prompt wording); options ranked by log-likelihood (physprobe)",
            "Table 1 prompt, then each option; highest total log-probability",
        ),
        Protocol(
            "table1-loglik-seq2seq",
            Seq2Seq,
            lambda row, config: Seq2Seq(prompt(row, config), tuple(row["choices"])),
            "NEWTON paper Table 1 (prompt wording); options ranked by log-likelihood (physprobe)",
            "Table 1 prompt as input, each option as target; highest log-probability",
        ),
    ),  # fmt: skip
    metrics=metrics,
    groups=lambda row, config: (group(row, config),),
)
