"""PROST evaluation: default configs, protocols and metric wiring (read by ``physprobe score``).

>>> from physprobe.dataset_scripts.prost.evaluation import EVALUATION
>>> EVALUATION.default("mlm").name
'sentence-mlm'
"""

from __future__ import annotations

from physprobe.generators.prost import superlative_pair
from physprobe.protocols import Evaluation, Protocol, decided, load_metric

OPTIONS = "ABCD"


def sentence(row: dict) -> str:
    """PROST Table 2's input: the context, then the question with its ``[MASK]``.

    >>> sentence({"context": "A coin and an egg fall.", "question": "The [MASK] is heavier."})
    'A coin and an egg fall. The [MASK] is heavier.'
    """
    return f"{row['context']} {row['question']}"


def _filled(row: dict, config: str, tokenizer) -> list[str]:
    return [sentence(row).replace("[MASK]", row[o]) for o in OPTIONS]


def _masked(row: dict, config: str, tokenizer) -> tuple[str, list[str]]:
    return sentence(row), [row[o] for o in OPTIONS]


def _span(row: dict, config: str, tokenizer) -> tuple[str, list[str]]:
    return sentence(row).replace("[MASK]", "<extra_id_0>"), [f"<extra_id_0> {row[o]} <extra_id_1>" for o in OPTIONS]


def metrics(config: str, rows: list[dict], predictions: list, scores: list) -> dict:
    """Table 5 (templates into concepts, macro average), Table 6 (answer position), Table 7 (inverse gaps)."""
    out, kept = decided(rows, predictions)
    if not kept:
        return out
    accuracy = load_metric("probe_accuracy")
    preds = [predictions[i] for i in kept]
    refs = [int(rows[i]["label"]) for i in kept]
    names = [rows[i]["name"] for i in kept]
    pairs, inverted = zip(*(superlative_pair(n) for n in names))
    sides = {(pair, flip) for pair, flip in zip(pairs, inverted)}
    # A pair counts only when both sides were scored (a --limit run may hold one side).
    pairs = [p if (p, True) in sides and (p, False) in sides else None for p in pairs]
    if not any(pairs):
        pairs, inverted = None, None
    out.update(accuracy.compute(predictions=preds, references=refs, groups=[rows[i]["group"] for i in kept],
                                templates=names, pairs=pairs, inverted=None if inverted is None else list(inverted)))  # fmt: skip
    objects = [j for j, i in enumerate(kept) if rows[i]["group"] != "directions"]
    if objects:
        positions = accuracy.compute(predictions=[preds[j] for j in objects], references=[refs[j] for j in objects],
                                     positions=[refs[j] + 1 for j in objects])  # fmt: skip
        out["by_position"] = positions["by_position"]
    return out


EVALUATION = Evaluation(
    benchmark="prost",
    configs=("default",),
    protocols=(
        Protocol("sentence-sum", "causal", _filled, "PROST §4 ('highest total probability'); physprobe reading",
                 "whole sentence with each option, summed log-probability", default_for=("causal",)),
        Protocol("sentence-mlm", "mlm", _masked, "PROST §4, Table 2", "the four options' words at the mask",
                 default_for=("mlm",)),
        Protocol("span-sum", "seq2seq", _span, "PROST Table 2 (T5 span format); physprobe reading",
                 "'<extra_id_0> option <extra_id_1>' as target, summed log-probability", default_for=("seq2seq",)),
    ),  # fmt: skip
    metrics=metrics,
)
