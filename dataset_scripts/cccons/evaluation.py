"""CConS evaluation: default configs, protocols and metric wiring (read by ``physprobe score``).

>>> from physprobe.dataset_scripts.cccons.evaluation import EVALUATION
>>> EVALUATION.default("mlm").name
'mask-four'
"""

from __future__ import annotations

import math

from physprobe.generators import cccons
from physprobe.protocols import Evaluation, Protocol, decided, load_metric


def _answers(row: dict) -> list[str]:
    return [cccons.noun_phrase(row["obj1"], row["context"]), cccons.noun_phrase(row["obj2"], row["context"])]


def _masked(row: dict, config: str, tokenizer) -> tuple[str, list[str]]:
    return row["mlm_input"], list(cccons.MLM_CANDIDATES)


def _answer_sentences(row: dict, config: str, tokenizer) -> list[str]:
    return [f"{row['generative_input']} {answer}" for answer in _answers(row)]


def _answer_targets(row: dict, config: str, tokenizer) -> tuple[str, list[str]]:
    return row["generative_input"], _answers(row)


def decide_four(scores) -> int | None:
    """obj1 larger (0) when P(larger) + P(bigger) exceed half of the four candidates' probability, else 1."""
    if any(s is None for s in scores):
        return None
    return int(cccons.mlm_decision([math.exp(s) for s in scores]))


def metrics(config: str, rows: list[dict], predictions: list, scores: list) -> dict:
    """Accuracy (Tables 2-3), and Easy/Hard for rows that carry a difficulty."""
    out, kept = decided(rows, predictions)
    if not kept:
        return out
    accuracy = load_metric("probe_accuracy")
    preds = [predictions[i] for i in kept]
    refs = [int(rows[i]["label"]) for i in kept]
    out.update(accuracy.compute(predictions=preds, references=refs, num_choices=2))
    difficulty = [j for j, i in enumerate(kept) if rows[i]["difficulty"]]
    if difficulty:
        split = accuracy.compute(predictions=[preds[j] for j in difficulty], references=[refs[j] for j in difficulty],
                                 groups=[rows[kept[j]]["difficulty"] for j in difficulty])  # fmt: skip
        out["by_difficulty"] = split["by_group"]
    return out


EVALUATION = Evaluation(
    benchmark="cccons",
    configs=("ordinary", "ccommon", "ordinary_nocontext", "ccommon_nocontext"),
    protocols=(
        Protocol("mask-four", "mlm", _masked, "CConS 'Tasks Format Details'; decision rule §4",
                 "larger/bigger/smaller/shorter at the mask; P(larger)+P(bigger) over the four > 0.5",
                 default_for=("mlm",), decide=decide_four),
        Protocol("answer-loglik", "causal", _answer_sentences, "CConS 'Tasks Format Details' (question); physprobe ranking",
                 "the question, then each object as the answer; highest log-probability", default_for=("causal",)),
        Protocol("answer-loglik-seq2seq", "seq2seq", _answer_targets, "CConS 'Tasks Format Details' (question); physprobe ranking",
                 "the question as input, each object as target; highest log-probability", default_for=("seq2seq",)),
    ),  # fmt: skip
    metrics=metrics,
)
