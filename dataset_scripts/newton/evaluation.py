"""NEWTON evaluation: default configs, protocols and metric wiring (read by ``physprobe score``).

Prompts are those the authors' released ``hf_track1.py``, ``hf_track2.py`` and ``hf_track3.py`` build:
the question with its options listed as ``(a) .. (b) ..``, joined by the two characters ``\\n`` (the
f-strings hold ``\\\\n``, a backslash and an ``n``, not a newline). Where ``hf_track2.py`` comments out
the paper's Table 1 wording (``True/False: {question}``), that wording is the ``table1-generate``
protocol. The released code generates an answer and saves it; it releases no comparison with the
gold answer, so physprobe's ``match_answer`` is documented in the card.

>>> from physprobe.dataset_scripts.newton.evaluation import EVALUATION
>>> [p.name for p in EVALUATION.protocols]
['released-generate', 'table1-generate', 'released-loglik-labels', 'released-loglik-texts', 'table1-loglik', 'table1-loglik-seq2seq']
>>> released_prompt({"question": "pillow is soft.", "choices": ["True", "False"]}, "track2_boolean")
'pillow is soft. \\\\n (a) True (b) False'
"""

from __future__ import annotations

import re

from physprobe.protocols import Evaluation, Protocol, decided, first_mentioned, load_metric, several_mentioned
from physprobe.requests import Choice, Generate, Seq2Seq

LABELS = "abcd"
# The released flan/unifiedqa classes allow 128 output tokens; an answer names its label or option within
# the first few, and match_answer reads only what was generated, so 32 bounds the cost, not the result.
MAX_NEW_TOKENS = 32
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


def table1_prompt(row: dict, config: str) -> str:
    """The paper's Table 1 wording where ``hf_track2.py`` comments it out (``True/False: {question}``);
    the released prompt elsewhere.

    >>> table1_prompt({"question": "pillow is soft.", "choices": ["True", "False"]}, "track2_boolean")
    'True/False: pillow is soft.'
    """
    return f"True/False: {row['question']}" if config == "track2_boolean" else released_prompt(row, config)


# An option label stated as the answer, anywhere in it: "(b)", "b)", "answer is b", "option b", or a bare
# letter that is the whole answer ("b", "b, pillow"); not the article of "a rock".
_LABEL = re.compile(
    r"\(([a-d])\)"
    r"|(?<![\w(])([a-d])\)"
    r"|(?:answer(?:\s+is)?\s*:?|option)\s+([a-d])(?=\s*(?:$|[,;:!?]))"
    r"|^([a-d])(?=\s*(?:$|[,;:!?]))"
)


def match_answer(text: str, choices: list[str]) -> int | None:
    """The option a generated answer names, or None (unparsed).

    Normalised as the released ``gpt_track*.py`` store responses (lower case, full stops removed), then:
    the first option label stated as the answer anywhere (``(b)``, ``b)``, ``the answer is b``,
    ``option b``, or ``b`` alone); else the option text named first, in whole words
    (``protocols.first_mentioned``: a longer option wins over one inside it).

    >>> choices = ["rock", "rocking_chair", "pillow", "sponge"]
    >>> match_answer("The answer is (c).", choices), match_answer("Rocking_chair.", choices), match_answer("d", choices)
    (2, 1, 3)
    >>> match_answer("I am not sure", choices) is None, match_answer("rock or pillow", choices), match_answer("a pillow", choices)
    (True, 0, 2)
    """
    answer = text.lower().replace(".", "").strip()
    for hit in _LABEL.finditer(answer):
        index = LABELS.index(next(group for group in hit.groups() if group))
        if index < len(choices):
            return index
    return first_mentioned(answer, [choice.lower().replace(".", "") for choice in choices])


def several_named(text: str, choices: list[str]) -> bool:
    """Whether ``match_answer`` took the first of several options the answer names: two labels stated, or no
    label and two option texts (an answer that echoes the question's options names them all).

    >>> choices = ["rock", "pillow"]
    >>> several_named("(a) rock (b) pillow", choices), several_named("rock or pillow", choices), several_named("(b) pillow", choices)
    (True, True, False)
    """
    answer = text.lower().replace(".", "").strip()
    labels = {LABELS.index(next(g for g in hit.groups() if g)) for hit in _LABEL.finditer(answer)} & set(range(len(choices)))
    if labels:
        return len(labels) > 1
    return several_mentioned(answer, [choice.lower().replace(".", "") for choice in choices])


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
    key = "tag" if config == "track3" else "attribute"
    extra = {}
    if config == "track1":
        extra["agreements"] = [row["agreement"] for row in rows]
    if config.startswith("track2"):
        extra["polarities"] = [row["polarity"] for row in rows]
    if config in ("track2_mc", "track3"):
        extra["by_position"] = True
    metric = load_metric("agreement_accuracy")
    answers = {"predictions": [-1 if p is None else p for p in predictions], "references": [int(row["label"]) for row in rows]}
    out.update(metric.compute(**answers, groups=[str(row[key]) for row in rows], **extra))
    if config.startswith("track2"):  # Table 9: each attribute per polarity, in one pass over attribute|polarity
        split = metric.compute(**answers, groups=[f"{row['attribute']}|{row['polarity']}" for row in rows])
        for group, figures in split["by_group"].items():
            attribute, polarity = group.rsplit("|", 1)
            out["by_group"][attribute].setdefault("by_polarity", {})[polarity] = figures
    if config == "track1":
        groups = out["by_group"].values()
        out["agreement_accuracy_macro"] = sum(g["agreement_accuracy"] for g in groups) / len(groups)
        out["accuracy_macro"] = sum(g["accuracy"] for g in groups) / len(groups)
    return out


SEVERAL = "the answer names several options (as one echoing the question's options does) and the first is taken"
RELEASED = "NEWTON hf_track1.py, hf_track2.py, hf_track3.py (the `prompt = f'...'` statement of each main loop)"
EVALUATION = Evaluation(
    benchmark="newton",
    headline=("agreement_accuracy", "accuracy"),
    configs=("track1", "track2_boolean", "track2_mc", "track3"),
    pooled={"track2": ("track2_boolean", "track2_mc")},  # Table 5 Combined: both kinds of question together
    scorable=("track1", "track2_boolean", "track2_mc", "track3"),  # not the attribute table
    protocols=(
        Protocol("released-generate", "generate", lambda row, config: _generate(released_prompt(row, config), row),
                 f"{RELEASED}; greedy as the flan/unifiedqa classes (do_sample=False); answer matched as match_answer",
                 "released prompt (question, options (a)-(d)); greedy answer matched to a label or option text",
                 default_for=("causal", "seq2seq"), match=match_answer, max_new_tokens=MAX_NEW_TOKENS,
                 fallback=several_named, fallback_reason=SEVERAL),
        Protocol("table1-generate", "generate", lambda row, config: _generate(table1_prompt(row, config), row),
                 "NEWTON paper Table 1; hf_track2.py `# prompt = f'True/False: {question}'` (commented out)",
                 "Table 1 wording for Track 2 Boolean, released prompts elsewhere; generated answer matched",
                 match=match_answer, max_new_tokens=MAX_NEW_TOKENS, fallback=several_named, fallback_reason=SEVERAL),
        Protocol("released-loglik-labels", "causal", _loglik_labels,
                 f"{RELEASED} (prompt); option labels ranked by log-likelihood (physprobe, no upstream equivalent)",
                 "released prompt + ' Answer: (x)'; the most likely label"),
        Protocol("released-loglik-texts", "causal", _loglik_texts,
                 f"{RELEASED} (prompt); option texts ranked by log-likelihood (physprobe; favours short options)",
                 "released prompt + ' Answer: <option>'; the most likely option text (summed log-probability)"),
        Protocol("table1-loglik", "causal", lambda row, config: Choice(prompt(row, config), tuple(f" {c}" for c in row["choices"])),
                 "NEWTON paper Table 1 (prompt wording); options ranked by log-likelihood (physprobe)",
                 "Table 1 prompt, then each option; highest total log-probability"),
        Protocol("table1-loglik-seq2seq", "seq2seq", lambda row, config: Seq2Seq(prompt(row, config), tuple(row["choices"])),
                 "NEWTON paper Table 1 (prompt wording); options ranked by log-likelihood (physprobe)",
                 "Table 1 prompt as input, each option as target; highest log-probability"),
    ),  # fmt: skip
    metrics=metrics,
)
