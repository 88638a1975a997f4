"""Text2Afford evaluation: default configs, protocols and metric wiring (read by ``physprobe score``).

The protocols here are physprobe's formats before issue 10 (paper Tables 4 and 10); the released
probing code's encodings are yet to be declared.

>>> from physprobe.dataset_scripts.text2afford.evaluation import EVALUATION
>>> [p.name for p in EVALUATION.protocols]
['mlm-table4', 'nli-table4', 'yes-no-flan-t5']
"""

from __future__ import annotations

from physprobe.generators import text2afford
from physprobe.protocols import Evaluation, Protocol, load_metric

CLASSES = text2afford.CLASSES


def _mlm(row: dict, config: str, tokenizer) -> tuple[str, list[str]]:
    sep = getattr(tokenizer, "sep_token", None) or getattr(tokenizer, "eos_token", None) or "[SEP]"
    return text2afford.prompt("mlm", row["sentence"], row["object"], sep_token=sep), [c.mlm_word for c in CLASSES]


def _nli(row: dict, config: str, tokenizer) -> list[tuple[str, str]]:
    return [(row["sentence"], text2afford.prompt("nli_hypothesis", row["sentence"], row["object"], c)) for c in CLASSES]


def _yes_no(row: dict, config: str, tokenizer) -> list[str]:
    return [text2afford.prompt("yes_no_flan_t5", row["sentence"], row["object"], c) for c in CLASSES]


def _ranked(scores) -> None:
    return None  # ranked, not predicted: the metric reads the 15 scores


def metrics(config: str, rows: list[dict], predictions: list, scores: list) -> dict:
    """``affordance_rank`` in both modes over the 15 class scores of each pair."""
    rank = load_metric("affordance_rank")
    refs = [list(r["labels"]) for r in rows]
    clean = [[s if s is not None else -1e9 for s in row_scores] for row_scores in scores]
    return {mode: rank.compute(predictions=clean, references=refs, mode=mode) for mode in ("strict", "pairwise")}


EVALUATION = Evaluation(
    benchmark="text2afford",
    configs=("default",),
    protocols=(
        Protocol("mlm-table4", "mlm", _mlm, "Text2Afford paper Table 4 (MLM prompt)",
                 "class words at the mask after '<sentence> <sep> <object> can be used for'", default_for=("mlm",), decide=_ranked),
        Protocol("nli-table4", "nli", _nli, "Text2Afford paper Table 4 (NLI hypothesis)",
                 "P(entailment) of '<object> can be used for <affordance> by human'", default_for=("nli",), decide=_ranked),
        Protocol("yes-no-flan-t5", "yes_no", _yes_no, "Text2Afford paper Table 10 (FLAN-T5 prompt)",
                 "P(YES) / (P(YES) + P(NO)) after the FLAN-T5 prompt", default_for=("causal", "seq2seq"), decide=_ranked),
    ),  # fmt: skip
    metrics=metrics,
    reference=lambda row: list(row["labels"]),
)
