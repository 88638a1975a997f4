"""NEWTON evaluation: default configs, protocols and metric wiring (read by ``physprobe score``).

The protocols here are physprobe's formats before issue 10 (NEWTON Table 1 wording, options ranked
by log-likelihood); the released ``hf_track*.py`` prompts and answer matching are yet to be declared.

>>> from physprobe.dataset_scripts.newton.evaluation import EVALUATION
>>> [p.name for p in EVALUATION.protocols]
['table1-loglik', 'table1-loglik-seq2seq']
"""

from __future__ import annotations

from physprobe.protocols import Evaluation, Protocol, decided, load_metric

# NEWTON Table 1, one prompt per config; options listed for Track 2 multiple choice.
PROMPTS = {
    "track1": "{question}\nAnswer:",
    "track2_boolean": "True/False: {question}\nAnswer:",
    "track2_mc": "{question} Options: {options}.\nAnswer:",
    "track3": "{context} {question}\nAnswer:",
}
SOURCE = "NEWTON paper Table 1 (prompt wording); options ranked by log-likelihood (physprobe, no upstream equivalent)"


def prompt(row: dict, config: str) -> str:
    """The Table 1 prompt of a row.

    >>> prompt({"question": "Which is heavier, a brick or a leaf?"}, "track1")
    'Which is heavier, a brick or a leaf?\\nAnswer:'
    """
    return PROMPTS[config].format(options=", ".join(row["choices"]), **row)


def metrics(config: str, rows: list[dict], predictions: list, scores: list) -> dict:
    """Agreement-weighted accuracy per attribute (Tracks 1-2) or scenario (Track 3)."""
    out, kept = decided(rows, predictions)
    if not kept:
        return out
    key = "scenario" if config == "track3" else "attribute"
    agreements = [rows[i]["agreement"] for i in kept] if config == "track1" else None
    out.update(load_metric("agreement_accuracy").compute(
        predictions=[predictions[i] for i in kept], references=[int(rows[i]["label"]) for i in kept],
        agreements=agreements, groups=[str(rows[i][key]) for i in kept]))  # fmt: skip
    return out


EVALUATION = Evaluation(
    benchmark="newton",
    configs=("track1", "track2_boolean", "track2_mc", "track3"),
    protocols=(
        Protocol("table1-loglik", "causal", lambda row, config, tokenizer: [f"{prompt(row, config)} {c}" for c in row["choices"]],
                 SOURCE, "Table 1 prompt, then each option; highest total log-probability", default_for=("causal",)),
        Protocol("table1-loglik-seq2seq", "seq2seq", lambda row, config, tokenizer: (prompt(row, config), list(row["choices"])),
                 SOURCE, "Table 1 prompt as input, each option as target; highest log-probability", default_for=("seq2seq",)),
    ),  # fmt: skip
    metrics=metrics,
)
