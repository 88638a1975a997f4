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

from physprobe.generators import cccons
from physprobe.protocols import Evaluation, Protocol, decided, first_mentioned, load_metric, scored_as_wrong

FORMATS = "CConS §4 'Tasks Format Details'"


def answers(row: dict) -> list[str]:
    """The two objects as the question names them (with the context's article).

    >>> answers({"obj1": "key", "obj2": "key box", "context": "A key box contains a key."})
    ['a key', 'a key box']
    """
    return [cccons.noun_phrase(row["obj1"], row["context"]), cccons.noun_phrase(row["obj2"], row["context"])]


def _masked(row: dict, config: str, tokenizer) -> tuple[str, list[str]]:
    return row["mlm_input"], list(cccons.MLM_CANDIDATES)


def _question(row: dict, config: str, tokenizer) -> dict:
    return {"prompt": row["generative_input"], "choices": [row["obj1"], row["obj2"]]}


def _answer_sentences(row: dict, config: str, tokenizer) -> list[str]:
    return [f"{row['generative_input']} {answer}" for answer in answers(row)]


def _answer_targets(row: dict, config: str, tokenizer) -> tuple[str, list[str]]:
    return row["generative_input"], answers(row)


def decide_four(scores) -> int | None:
    """obj1 larger (0) when P(larger) + P(bigger) exceed half of the four candidates' probability, else 1.

    >>> decide_four([math.log(p) for p in (0.02, 0.02, 0.01, 0.01)])  # 0.04 of 0.06 -> larger
    0
    """
    if any(s is None for s in scores):
        return None
    return int(cccons.mlm_decision([math.exp(s) for s in scores]))


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

EVALUATION = Evaluation(
    benchmark="cccons",
    # Table 2: Ordinary, CCommon, NoCon (both no-context files pooled); Table 3: the four split files.
    configs=("ordinary", "ccommon", "ordinary_easy", "ordinary_hard", "ccommon_easy", "ccommon_hard",
             "ordinary_nocontext", "ccommon_nocontext"),  # fmt: skip
    pooled={"nocontext": ("ordinary_nocontext", "ccommon_nocontext")},
    protocols=(
        Protocol("mask-four", "mlm", _masked, f"{MLM_RULE}; probabilities renormalised over the four candidates",
                 "larger/bigger/smaller/shorter at the mask; obj1 larger if P(larger)+P(bigger) > 0.5 of the four",
                 default_for=("mlm",), decide=decide_four),
        Protocol("mask-vocab", "mlm", _masked, f"{MLM_RULE}; probabilities over the whole vocabulary",
                 "obj1 larger if P(larger)+P(bigger) over the whole vocabulary > 0.5", decide=decide_vocabulary),
        Protocol("question-generate", "generate", _question, QUESTION,
                 "the paper's question answered by greedy generation; the object named first is the answer, "
                 "an answer naming neither is wrong",
                 default_for=("causal", "seq2seq"), match=first_mentioned, max_new_tokens=20, stop=("\n",)),
        Protocol("answer-loglik", "causal", _answer_sentences, f"{QUESTION}; ranking by log-likelihood is physprobe's",
                 "the question, then each object as the answer; highest log-probability"),
        Protocol("answer-loglik-seq2seq", "seq2seq", _answer_targets, f"{QUESTION}; ranking by log-likelihood is physprobe's",
                 "the question as input, each object as target; highest log-probability"),
    ),  # fmt: skip
    metrics=metrics,
)
