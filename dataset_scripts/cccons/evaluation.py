"""CConS evaluation: default configs, protocols and metric wiring (read by ``physprobe score``).

The authors released no evaluation code (cfkazu/Counter-Commonsense-Context holds the data and a
one-line README), so every protocol follows the paper's text: §4 "Tasks Format Details" and Tables 2-3.
``dataset_scripts/cccons/card.md`` ("Evaluating") discusses each choice.

>>> from physprobe.dataset_scripts.cccons.evaluation import EVALUATION
>>> [EVALUATION.default(family).name for family in ("mlm", "causal", "seq2seq")]
['mask-four', 'question-generate', 'question-generate']
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from physprobe.generators import cccons
from physprobe.protocols import (
    Evaluation,
    Kind,
    Protocol,
    decided,
    first_mentioned,
    load_metric,
    scored_as_wrong,
    several_mentioned,
)
from physprobe.protocols.decoding import Decoding, Released
from physprobe.protocols.requests import Choice, Generate, Masked, Seq2Seq
from physprobe.protocols.units import Unit

FORMATS = "CConS §4 'Tasks Format Details'"


def answers(row: dict) -> list[str]:
    """The two objects as the question names them (with the context's article).

    >>> answers({"obj1": "key", "obj2": "key box", "context": "A key box contains a key."})
    ['a key', 'a key box']
    """
    return [cccons.noun_phrase(row["obj1"], row["context"]), cccons.noun_phrase(row["obj2"], row["context"])]


def _masked(row: dict, config: str) -> Masked:
    return Masked(row["mlm_input"], tuple(MLM_CANDIDATES))


def _question(row: dict, config: str) -> Generate:
    return Generate(row["generative_input"], (row["obj1"], row["obj2"]))


def _answer_sentences(row: dict, config: str) -> Choice:
    return Choice(row["generative_input"], tuple(f" {answer}" for answer in answers(row)))


def _answer_targets(row: dict, config: str) -> Seq2Seq:
    return Seq2Seq(row["generative_input"], tuple(answers(row)))


def decide_four(scores) -> int | None:
    """obj1 larger (0) when P(larger) + P(bigger) exceed half of the four candidates' probability, else 1.

    >>> decide_four([math.log(p) for p in (0.02, 0.02, 0.01, 0.01)])  # 0.04 of 0.06 -> larger
    0
    """
    if any(s is None for s in scores):
        return None
    return int(mlm_decision([math.exp(s) for s in scores]))


def decide_vocabulary(scores) -> int | None:
    """obj1 larger (0) when P(larger) + P(bigger), over the whole vocabulary, exceed 0.5, else 1.

    >>> decide_vocabulary([math.log(p) for p in (0.02, 0.02, 0.01, 0.01)]), decide_vocabulary([math.log(0.3)] * 4)
    (1, 0)
    """
    if any(s is None for s in scores[:2]):
        return None
    return 0 if math.exp(scores[0]) + math.exp(scores[1]) > 0.5 else 1


def metrics(config: str, rows: list[dict], predictions: list, scores: list) -> dict:
    """Accuracy (Tables 2-3), and Easy/Hard for rows that carry a difficulty.

    A generated answer that names neither object is wrong (it stays in the denominator, as NEWTON's and
    PROST's do); a masked-LM question whose candidates are not single tokens is left out (``undecided``).
    """
    out, kept = decided(rows, predictions)
    if not kept:
        return out
    accuracy = load_metric("probe_accuracy")
    refs = [int(rows[i]["label"]) for i in kept]
    preds = scored_as_wrong([predictions[i] for i in kept], refs, 2)
    out.update(accuracy.compute(predictions=preds, references=refs, num_choices=2))
    difficulty = [j for j, i in enumerate(kept) if rows[i]["difficulty"]]
    if difficulty:
        split = accuracy.compute(predictions=[preds[j] for j in difficulty], references=[refs[j] for j in difficulty],
                                 groups=[rows[kept[j]]["difficulty"] for j in difficulty])  # fmt: skip
        out["by_difficulty"] = split["by_group"]
    return out


MLM_RULE = f"{FORMATS}: 'If the sum of the probabilities of the first two options exceeds 0.5'"
QUESTION = f"{FORMATS}, Format for Generative Models (GPT-3, T0)"

OBJECT_PAIR = Unit(
    "object pair",
    lambda row, config: frozenset((row["obj1"], row["obj2"])),
    "a pair of objects is compared in several contexts (and in both no-context files); within one file nearly every "
    "question has its own pair (Ordinary: 729 pairs for 772 questions, CCommon: 315 for 332)",
)

EVALUATION = Evaluation(
    benchmark="cccons",
    unit=OBJECT_PAIR,
    figures={"accuracy": Kind.FRACTION},  # probe_accuracy's accuracy, overall and per difficulty (Tables 2-3)
    # Table 2: Ordinary, CCommon, NoCon (both no-context files pooled); Table 3: the four split files.
    configs=(
        "ordinary",
        "ccommon",
        "ordinary_easy",
        "ordinary_hard",
        "ccommon_easy",
        "ccommon_hard",
        "ordinary_nocontext",
        "ccommon_nocontext",
    ),  # fmt: skip
    pooled={"nocontext": ("ordinary_nocontext", "ccommon_nocontext")},
    protocols=(
        Protocol(
            "mask-four",
            Masked,
            _masked,
            f"{MLM_RULE}; probabilities renormalised over the four candidates",
            "larger/bigger/smaller/shorter at the mask; obj1 larger if P(larger)+P(bigger) > 0.5 of the four",
            default_for=("mlm",),
            decide=decide_four,
            answers=2,
        ),
        Protocol(
            "mask-vocab",
            Masked,
            _masked,
            f"{MLM_RULE}; probabilities over the whole vocabulary",
            "obj1 larger if P(larger)+P(bigger) over the whole vocabulary > 0.5",
            decide=decide_vocabulary,
            answers=2,
        ),
        Protocol(
            "question-generate",
            Generate,
            _question,
            QUESTION,
            "the paper's question answered by greedy generation; the object named first is the answer, "
            "an answer naming neither is wrong",
            default_for=("causal", "seq2seq"),
            match=first_mentioned,
            max_new_tokens=20,
            stop=("\n",),
            released=Released(
                Decoding.greedy(
                    "no released code (cfkazu/Counter-Commonsense-Context@5d6356d holds a README "
                    "only) and the paper names no decoding: greedy, physprobe's"
                )
            ),
            fallback=several_mentioned,
            fallback_reason="the answer names both objects (as an echoed question does) and the one named first is taken",
        ),
        Protocol(
            "answer-loglik",
            Choice,
            _answer_sentences,
            f"{QUESTION}; ranking by log-likelihood is physprobe's",
            "the question, then each object as the answer; highest log-probability",
        ),
        Protocol(
            "answer-loglik-seq2seq",
            Seq2Seq,
            _answer_targets,
            f"{QUESTION}; ranking by log-likelihood is physprobe's",
            "the question as input, each object as target; highest log-probability",
        ),
    ),  # fmt: skip
    metrics=metrics,
)


# The masked-LM candidates and the paper's decision over them (§4, Format for Masked Language Models).
MLM_CANDIDATES = ("larger", "bigger", "smaller", "shorter")


def mlm_decision(probabilities: Sequence[float] | np.ndarray) -> np.ndarray | int:
    """The paper's binary decision from the masked LM's probabilities of larger, bigger, smaller, shorter.

    obj1 is judged larger (label 0) when P(larger) + P(bigger) exceeds half of the four candidates'
    total probability, else smaller (label 1). Accepts one row of four or an array of shape (n, 4).

    >>> mlm_decision([0.30, 0.25, 0.40, 0.05]), mlm_decision([0.1, 0.1, 0.2, 0.1])
    (0, 1)
    >>> mlm_decision([[0.1, 0.1, 0.1, 0.1], [0.6, 0.0, 0.3, 0.1]]).tolist()
    [1, 0]
    """
    p = np.asarray(probabilities, dtype=float)
    if p.shape[-1] != len(MLM_CANDIDATES) or (p < 0).any():
        raise ValueError(f"expected non-negative probabilities of {MLM_CANDIDATES}, got shape {p.shape}")
    larger = p[..., 0] + p[..., 1]
    decision = np.where(larger / p.sum(axis=-1) > 0.5, 0, 1)
    return int(decision) if decision.ndim == 0 else decision
