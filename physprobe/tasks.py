"""What to ask a model for each benchmark and method, and how its scores become the papers' metrics.

Formats are data (``FORMATS``), taken from the papers: PROST Table 2, CConS "Tasks Format Details",
NEWTON Table 1, Text2Afford Tables 4 and 10. A request is one of:

- ``("sequences", [text, ...])``: causal LM, log-probability of each option's full text;
- ``("masked", (text_with_[MASK], [word, ...]))``: masked LM, candidates at the mask;
- ``("seq2seq", (input, [target, ...]))``: encoder-decoder, log-probability of each target;
- ``("nli", [(premise, hypothesis), ...])``: NLI cross-encoder, entailment probability per pair;
- ``("yes", [prompt, ...])``: P(YES) of each prompt.
"""

from __future__ import annotations

import math

from physprobe.errors import PhysprobeError
from physprobe.generators import cccons, text2afford
from physprobe.generators.prost import superlative_pair

METHODS = ("causal", "mlm", "seq2seq", "nli", "yes_no")

FORMATS = {
    "prost": {
        "causal": "{context} {question}",  # [MASK] replaced by each option; whole sentence scored
        "mlm": "{context} {question}",  # the four options' words at [MASK]
        "seq2seq_input": "{context} {question}",  # [MASK] -> <extra_id_0>
        "seq2seq_target": "<extra_id_0> {option} <extra_id_1>",
    },
    "cccons": {
        "answer": "{generative_input} {answer}",  # causal: the question, then each object as the answer
        "mlm_candidates": list(cccons.MLM_CANDIDATES),
    },
    "newton": {
        "track1": "{question}\nAnswer:",
        "track2_boolean": "True/False: {question}\nAnswer:",
        "track2_mc": "{question} Options: {options}.\nAnswer:",
        "track3": "{context} {question}\nAnswer:",
    },
    "text2afford": {"yes_no": "yes_no_flan_t5"},  # see physprobe.generators.text2afford.PROMPTS
}

DEFAULT_CONFIGS = {
    "prost": ["default"],
    "cccons": ["ordinary", "ccommon", "ordinary_nocontext", "ccommon_nocontext"],
    "newton": ["track1", "track2_boolean", "track2_mc", "track3"],
    "text2afford": ["default"],
}
# Configs a method can score where not every config can (others hold tables or one binary class each).
SCORABLE_CONFIGS = {
    "newton": ("track1", "track2_boolean", "track2_mc", "track3"),
    "text2afford": ("default",),
}
SUPPORTED = {
    "prost": {"causal", "mlm", "seq2seq"},
    "cccons": {"causal", "mlm", "seq2seq"},
    "newton": {"causal", "seq2seq"},
    "text2afford": {"mlm", "nli", "yes_no"},
}


class TaskError(PhysprobeError):
    """A benchmark, config or method that does not go together."""


def check(benchmark: str, method: str) -> None:
    """Raise ``TaskError`` when ``method`` cannot score ``benchmark``."""
    if benchmark not in SUPPORTED:
        raise TaskError(f"unknown benchmark {benchmark!r}; known: {', '.join(SUPPORTED)}")
    if method not in SUPPORTED[benchmark]:
        raise TaskError(f"{benchmark} cannot be scored with method {method!r}; use one of {sorted(SUPPORTED[benchmark])}")


def request(benchmark: str, config: str, row: dict, method: str, sep_token: str = "[SEP]"):
    """The request for one dataset row (see the module docstring); ``sep_token`` is the model's separator."""
    if benchmark == "prost":
        options = [row[k] for k in "ABCD"]
        text = FORMATS["prost"]["causal"].format(**row)
        if method == "causal":
            return "sequences", [text.replace("[MASK]", o) for o in options]
        if method == "mlm":
            return "masked", (text, options)
        target = FORMATS["prost"]["seq2seq_target"]
        return "seq2seq", (text.replace("[MASK]", "<extra_id_0>"), [target.format(option=o) for o in options])
    if benchmark == "cccons":
        if method == "mlm":
            return "masked", (row["mlm_input"], FORMATS["cccons"]["mlm_candidates"])
        answers = [cccons.noun_phrase(row["obj1"], row["context"]), cccons.noun_phrase(row["obj2"], row["context"])]
        if method == "causal":
            return "sequences", [FORMATS["cccons"]["answer"].format(generative_input=row["generative_input"], answer=a) for a in answers]
        return "seq2seq", (row["generative_input"], answers)
    if benchmark == "newton":
        prompt = FORMATS["newton"][config].format(options=", ".join(row["choices"]), **row)
        if method == "causal":
            return "sequences", [f"{prompt} {choice}" for choice in row["choices"]]
        return "seq2seq", (prompt, list(row["choices"]))
    # text2afford
    classes = text2afford.CLASSES
    if method == "mlm":
        return "masked", (text2afford.prompt("mlm", row["sentence"], row["object"], sep_token=sep_token), [c.mlm_word for c in classes])
    if method == "nli":
        return "nli", [(row["sentence"], text2afford.prompt("nli_hypothesis", row["sentence"], row["object"], c)) for c in classes]
    kind = FORMATS["text2afford"]["yes_no"]
    return "yes", [text2afford.prompt(kind, row["sentence"], row["object"], c) for c in classes]


def reference(benchmark: str, row: dict) -> list[int]:
    """The gold answer as a list (one option index, or Text2Afford's 15 labels)."""
    return list(row["labels"]) if benchmark == "text2afford" else [int(row["label"])]


def prediction(benchmark: str, method: str, scores: list[float | None]) -> int | None:
    """The predicted option from a request's scores; None when the question cannot be decided
    (a masked LM whose candidates are not all single tokens)."""
    if benchmark == "text2afford":
        return None  # ranked, not predicted: the metric uses the scores
    if any(s is None for s in scores):
        return None
    if benchmark == "cccons" and method == "mlm":
        return cccons.mlm_decision([math.exp(s) for s in scores])
    return max(range(len(scores)), key=lambda i: scores[i])


def load_metric(name: str):
    """The installed evaluate module ``name`` (see ``physprobe.metric_modules``)."""
    from physprobe import metric_modules

    return metric_modules.load(name)


def compute_metrics(benchmark: str, config: str, rows: list[dict], predictions: list, scores: list) -> dict:
    """The paper's breakdowns for one scored config (rows without a prediction are counted, not scored)."""
    if benchmark == "text2afford":
        rank = load_metric("affordance_rank")
        refs = [list(r["labels"]) for r in rows]
        clean = [[s if s is not None else -1e9 for s in row_scores] for row_scores in scores]
        return {mode: rank.compute(predictions=clean, references=refs, mode=mode) for mode in ("strict", "pairwise")}
    kept = [i for i, p in enumerate(predictions) if p is not None]
    out = {"n": len(rows), "undecided": len(rows) - len(kept)}
    if not kept:
        return out
    preds = [predictions[i] for i in kept]
    refs = [int(rows[i]["label"]) for i in kept]
    if benchmark == "prost":
        accuracy = load_metric("probe_accuracy")
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
    if benchmark == "cccons":
        accuracy = load_metric("probe_accuracy")
        out.update(accuracy.compute(predictions=preds, references=refs, num_choices=2))
        difficulty = [j for j, i in enumerate(kept) if rows[i]["difficulty"]]
        if difficulty:
            split = accuracy.compute(predictions=[preds[j] for j in difficulty], references=[refs[j] for j in difficulty],
                                     groups=[rows[kept[j]]["difficulty"] for j in difficulty])  # fmt: skip
            out["by_difficulty"] = split["by_group"]
        return out
    agreement = load_metric("agreement_accuracy")
    key = "scenario" if config == "track3" else "attribute"
    groups = [str(rows[i][key]) for i in kept]
    agreements = [rows[i]["agreement"] for i in kept] if config == "track1" else None
    out.update(agreement.compute(predictions=preds, references=refs, agreements=agreements, groups=groups))
    return out
