"""What a run's figures are set against, on the rows it scored, and the flags of a run whose figures say little.

Baselines are answers that read no question, given to every row and scored by the benchmark's own metric wiring
(``Evaluation.metrics``), so they are the same figures as the run's: the majority answer (the commonest gold
option; where a row has a 0/1 label per class, each class scored by how often it holds), each constant answer
(each option every row offers; every class tied) and chance (the mean over answers that give each row each of its
options equally often; per class, each rank forwards and backwards: the expected figure of a uniform random
guess for every figure that averages per-question or per-comparison outcomes). Beside them, how alike the run's
own answers were. ``flags`` reads a record: a config whose answers are (nearly) all one, or whose decisions mostly
fell to the protocol's fallback rule, gets one line.

>>> from physprobe.protocols import Evaluation
>>> def accuracy(config, rows, predictions, scores):
...     return {"n": len(rows), "accuracy": sum(p == r["label"] for p, r in zip(predictions, rows)) / len(rows)}
>>> demo = Evaluation("demo", ("default",), (), metrics=accuracy)
>>> rows = [{"label": 0}, {"label": 0}, {"label": 0}, {"label": 1}]
>>> found = compute(demo, "default", rows, [2, 2, 2, 2], [0, 0, 0, 0], [[], [], [], []])
>>> found.majority_answer, found.majority["accuracy"], found.constant, found.chance
(0, 0.75, {'0': {'accuracy': 0.75}, '1': {'accuracy': 0.25}}, {'accuracy': 0.5})
>>> found.commonest_answer, found.commonest, found.answered
(0, 4, 4)
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from dataclasses import dataclass

from physprobe.data import registry
from physprobe.errors import ProtocolError
from physprobe.protocols import UNPARSED, Evaluation
from physprobe.record.run_record import Baselines, RunRecord
from physprobe.util import provenance

CONSTANT_SHARE = 0.9  # answers this alike (of at least MIN_ANSWERS) flag a config
MIN_ANSWERS = 3
FALLBACK_SHARE = 0.5  # decisions by the fallback rule above this share of the answers flag a config
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def compute(evaluation: Evaluation, config: str, rows: list[dict], options: list[int], predictions: list, scores: list,
            **metric_options) -> Baselines:  # fmt: skip
    """The baselines of ``config`` (a config or a pooled figure) on ``rows`` (each with ``options`` answers to
    choose from), and how alike the run's ``predictions`` (and ``scores``) were; ``metric_options``: the
    protocol's."""
    references = [evaluation.reference(row) for row in rows]

    def figures(answers: list, answer_scores: list) -> dict:
        return evaluation.metrics(config, rows, answers, answer_scores, **metric_options)

    if evaluation.classes is None:  # one gold option per row
        golds = [r[0] for r in references]
        majority_answer = min(set(golds), key=lambda g: (-golds.count(g), g))
        scored: dict[tuple, dict] = {}  # figures by answers: where every row has as many options, chance's answers
        # are the constants', and the majority answer is one of them (PROST: 4 metric calls, not 9)

        def given(answers: list[int]) -> dict:  # scores one-hot on the answer: what a model sure of it gives
            key = tuple(answers)
            if key not in scored:
                scored[key] = figures(answers, [[float(i == a) for i in range(o)] for a, o in zip(answers, options, strict=True)])
            return copy.deepcopy(scored[key])

        majority = given([majority_answer] * len(rows))
        constant = {str(k): provenance.overall_figures(given([k] * len(rows))) for k in range(min(options))}
        period = math.lcm(*set(options))
        chance = _mean([provenance.overall_figures(given([j % o for o in options])) for j in range(period)])
        answered = [p for p in predictions if p is not None and p != UNPARSED]
    else:  # a set of positive classes per row: answers are class scores (the wiring ranks them where the prediction is None)
        classes = evaluation.classes
        none = [None] * len(rows)
        prior = [sum(c in r for r in references) / len(rows) for c in range(classes)]
        majority_answer, majority = None, figures(none, [prior] * len(rows))
        constant = {"tied": provenance.overall_figures(figures(none, [[0.0] * classes] * len(rows)))}
        rotations = [[float((c + j) % classes) for c in range(classes)] for j in range(classes)]
        rankings = rotations + [[classes - 1 - s for s in ranking] for ranking in rotations]
        chance = _mean([provenance.overall_figures(figures(none, [ranking] * len(rows))) for ranking in rankings])
        answered = [
            p if p is not None else _ranks(s) for p, s in zip(predictions, scores, strict=True) if p is not None or None not in s
        ]
    top = Counter(answered).most_common(1)
    commonest_answer, commonest = top[0] if top else (None, 0)
    if majority_answer is None:  # a set or ranking of classes, not an option
        commonest_answer = None
    return Baselines(majority_answer, majority, constant, chance, len(answered), commonest, commonest_answer)


def _ranks(scores: list[float]) -> tuple[int, ...]:
    """Each score's rank among the distinct scores: equal for two rows that order their classes alike.

    >>> _ranks([0.2, 0.9, 0.2])
    (0, 1, 0)
    """
    distinct = sorted(set(scores))
    return tuple(distinct.index(s) for s in scores)


def _mean(samples: list[dict[str, float]]) -> dict[str, float]:
    keys = dict.fromkeys(k for sample in samples for k in sample)
    return {k: sum(s[k] for s in samples if k in s) / sum(k in s for s in samples) for k in keys}


def answer_text(answer: int | None) -> str:
    """An answer of ``Baselines`` in words.

    >>> answer_text(0), answer_text(12), answer_text(None)
    ('the first option', 'option 12 (from 0)', 'each class scored by how often it holds')
    """
    if answer is None:
        return "each class scored by how often it holds"
    return f"the {ORDINALS[answer]} option" if answer < len(ORDINALS) else f"option {answer} (from 0)"


def headline(benchmark: str, figures: dict) -> tuple[str, float] | None:
    """The benchmark's headline figure in ``figures`` (a config's metrics, or overall figures keyed by dot paths).

    >>> headline("demo-less", {"accuracy": 0.5}) is None
    True
    """
    try:
        evaluation = registry.evaluation(benchmark)
    except ProtocolError:
        return None
    found = evaluation.headline_of(figures)
    if found is None:
        found = next(((key, figures[key]) for key in evaluation.headline if isinstance(figures.get(key), float)), None)
    return found


def best_constant(benchmark: str, baselines: Baselines) -> tuple[str, tuple[str, float]] | None:
    """The constant answer with the highest headline figure, and that figure (None: none has one)."""
    scored = [(answer, found) for answer, figures in baselines.constant.items() if (found := headline(benchmark, figures))]
    return max(scored, key=lambda item: item[1][1]) if scored else None


def summary(benchmark: str, baselines: Baselines) -> str:
    """The baselines of one config in one phrase: majority, best constant and chance, by their headline figure."""
    parts = []
    majority = headline(benchmark, baselines.majority)
    if majority:
        parts.append(f"majority answer ({answer_text(baselines.majority_answer)}) {majority[1]:.3g}")
    best = best_constant(benchmark, baselines)
    if best:
        answer, (_, value) = best
        parts.append(f"best constant ({'every class tied' if answer == 'tied' else answer_text(int(answer))}) {value:.3g}")
    chance = headline(benchmark, baselines.chance)
    if chance:
        parts.append(f"chance {chance[1]:.3g}")
    key = next((found[0] for found in (majority, best and best[1], chance) if found), None)
    return f"{key} on the same rows: " + ", ".join(parts) if parts else "no baseline figure"


@dataclass(frozen=True)
class Flag:
    """A config whose figures say little: ``kind`` ``constant`` (answers nearly all one) or ``fallback``
    (decisions mostly the protocol's fallback rule), and the line that says so."""

    config: str
    kind: str
    text: str


def flags(record: RunRecord) -> list[Flag]:
    """The flags of a run's scored configs (not its pooled figures, which repeat them)."""
    found = []
    fallback_reason = _fallback_reason(record)
    for config in record.configs:
        baselines, metrics = record.baselines.get(config), record.metrics.get(config, {})
        if baselines is None:
            continue
        answered, commonest = baselines.answered, baselines.commonest
        if answered >= MIN_ANSWERS and commonest >= CONSTANT_SHARE * answered:
            what = ("the same answer" if baselines.commonest_answer is None and baselines.majority_answer is None
                    else answer_text(baselines.commonest_answer))  # fmt: skip
            found.append(Flag(config, "constant", f"{config}: {commonest} of {answered} answers are {what}, as a constant "
                                                  f"answer's would be; {summary(record.benchmark, baselines)}"))  # fmt: skip
        fallback = metrics.get("fallback") or 0
        if answered and fallback > FALLBACK_SHARE * answered:
            found.append(Flag(config, "fallback", f"{config}: {fallback} of {answered} answers were decided by protocol "
                                                  f"{record.protocol}'s fallback rule ({fallback_reason})"))  # fmt: skip
    return found


def _fallback_reason(record: RunRecord) -> str:
    try:
        return registry.evaluation(record.benchmark).protocol(record.protocol).fallback_reason or "its fallback rule"
    except ProtocolError:
        return "its fallback rule"
