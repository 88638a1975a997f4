"""The figures of a scored config, from its samples (``physprobe.run.samples``): the benchmark's metric wiring with the
counts beside it (unparsed, fallback, excluded), a seeded bootstrap of each overall figure, the baselines of the same
rows, and the pooled figures the paper computes over several configs.

Every function reads samples alone; none glues parallel lists by index.

>>> from physprobe.protocols import Evaluation, Protocol, Outcome
>>> from physprobe.protocols.requests import Choice
>>> from physprobe.protocols.results import Scores
>>> from physprobe.run.samples import Sample
>>> def accuracy(config, rows, predictions, scores):
...     return {"n": len(rows), "accuracy": sum(p == r["label"] for p, r in zip(predictions, rows)) / len(rows)}
>>> demo = Evaluation("demo", ("default",), (), metrics=accuracy)
>>> protocol = Protocol("demo", Choice, lambda row, config: None, "", "")
>>> samples = [Sample.scored("default", i, {"label": 0}, (0,), None, Scores((-1.0, -2.0)), Outcome([-1.0, -2.0], 0, 2)) for i in range(3)]
>>> metrics(demo, protocol, "default", [*samples, Sample.left_out("default", 3, {"label": 1}, (1,))])
{'n': 3, 'accuracy': 1.0, 'excluded': 1}
"""

from __future__ import annotations

import collections
import statistics
from dataclasses import dataclass

from physprobe.protocols import COUNTS, Evaluation, Protocol
from physprobe.record.run_record import Baselines
from physprobe.run import baselines
from physprobe.run.samples import Sample, answered
from physprobe.util import provenance


@dataclass(frozen=True)
class Figures:
    """A config's figures: its metrics, the seeded bootstrap of each overall figure and the baselines of its rows
    (None where not computed)."""

    metrics: dict
    bootstrap: dict | None
    baselines: Baselines | None


def figures(
    evaluation: Evaluation, protocol: Protocol, config: str, samples: list[Sample], iterations: int, spreads: bool
) -> Figures:
    """The figures of one config: its ``metrics``; with ``spreads`` (rank 0, where rows were asked), also its
    ``bootstrap`` of ``iterations`` resamples (none for 0) and its ``config_baselines``."""
    found = metrics(evaluation, protocol, config, samples)
    spread = bootstrap(evaluation, protocol, config, samples, iterations) if iterations and spreads else None
    return Figures(found, spread, config_baselines(evaluation, protocol, config, samples) if spreads else None)


def _wiring(evaluation: Evaluation, protocol: Protocol, config: str, samples: list[Sample]) -> dict:
    """The metric wiring's figures of answered ``samples``."""
    return evaluation.metrics(config, [s.data for s in samples], [s.metric_prediction for s in samples],
                              [list(s.scores) for s in samples], **protocol.metric_options)  # fmt: skip


def metrics(evaluation: Evaluation, protocol: Protocol, config: str, samples: list[Sample]) -> dict:
    """The metrics of one config: its wiring's figures over the answered samples, then the counts of generated
    answers that named no option (``unparsed``, for a protocol that reads generated text), of decisions by the
    protocol's fallback rule (``fallback``) and of rows the protocol left out (``excluded``)."""
    kept = answered(samples)
    found = _wiring(evaluation, protocol, config, kept)
    if protocol.answer == "text":  # answers that named no option, counted wrong by the metric wiring
        found["unparsed"] = sum(s.status == "unparsed" for s in kept)
    if protocol.fallback is not None:
        found["fallback"] = sum(s.fell_back for s in kept)
    if len(kept) < len(samples):
        found["excluded"] = len(samples) - len(kept)
    return found


def bootstrap(evaluation: Evaluation, protocol: Protocol, config: str, samples: list[Sample], iterations: int) -> dict:
    """The seeded bootstrap of each overall figure of ``config`` over its answered samples."""
    kept = answered(samples)
    return provenance.bootstrap(lambda idx: _wiring(evaluation, protocol, config, [kept[i] for i in idx]), len(kept), iterations)


def config_baselines(evaluation: Evaluation, protocol: Protocol, config: str, samples: list[Sample]) -> Baselines:
    """The baselines of the answered ``samples`` (a config's, or a pooled figure's configs' together)."""
    kept = answered(samples)
    return baselines.compute(evaluation, config, [s.data for s in kept], [s.options for s in kept],
                             [s.metric_prediction for s in kept], [list(s.scores) for s in kept], **protocol.metric_options)  # fmt: skip


def pooled(
    evaluation: Evaluation, protocol: Protocol, by_config: dict[str, list[Sample]], config_metrics: dict[str, dict]
) -> dict:
    """The benchmark's figures over several configs (e.g. CConS's NoCon) where all were scored, with the sum of
    their configs' ``unparsed`` and ``fallback`` counts where each config has one."""
    outcomes = {}
    for config, samples in by_config.items():
        kept = answered(samples)
        outcomes[config] = ([s.data for s in kept], [s.metric_prediction for s in kept], [list(s.scores) for s in kept])
    found = evaluation.pooled_metrics(outcomes, **protocol.metric_options)
    for figure, values in found.items():
        for count in ("unparsed", "fallback"):
            members = [config_metrics[member] for member in evaluation.pooled[figure]]
            if all(count in m for m in members):
                values[count] = sum(m[count] for m in members)
    return found


def _leaves(tree: dict, path: tuple = ()) -> dict[tuple, float]:
    """The figures of a metrics tree by their key paths (numbers, not the counts ``COUNTS`` names)."""
    found = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            found.update(_leaves(value, (*path, key)))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and key not in COUNTS:
            found[(*path, key)] = value
    return found


def _tree(values: dict[tuple, float]) -> dict:
    out: dict = {}
    for path, value in values.items():
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return out


def over_samples(draws: list[dict], samples: list[list[Sample]]) -> dict:
    """The spread of a config's figures over ``drawn`` sampled answers per question (``--samples``): each figure's
    ``mean`` and sample standard deviation ``sd`` (n - 1) over the draws' metrics, keyed as the metrics are, and
    ``agreement``, the mean over answered questions of the share of draws that decided as the commonest decision.

    >>> from physprobe.protocols import Outcome
    >>> def drawn(prediction):
    ...     return Sample.scored("default", 0, {}, (0,), None, None, Outcome([], prediction, 2))
    >>> spread = over_samples([{"n": 2, "accuracy": 0.5}, {"n": 2, "accuracy": 1.0}, {"n": 2, "accuracy": 0.5}],
    ...                       [[drawn(0), drawn(1)], [drawn(0), drawn(0)], [drawn(0), drawn(1)]])
    >>> [round(x, 4) for x in (spread["mean"]["accuracy"], spread["sd"]["accuracy"], spread["agreement"])]
    [0.6667, 0.2887, 0.8333]
    """
    leaves = [_leaves(d) for d in draws]
    shared = [path for path in leaves[0] if all(path in other for other in leaves)]
    mean = {p: statistics.fmean(x[p] for x in leaves) for p in shared}
    sd = {p: statistics.stdev(x[p] for x in leaves) for p in shared}
    rows = [list(row) for row in zip(*samples, strict=True) if row[0].answered]
    shares = [collections.Counter(s.decision for s in row).most_common(1)[0][1] / len(row) for row in rows]
    return {"drawn": len(draws), "mean": _tree(mean), "sd": _tree(sd),
            "agreement": statistics.fmean(shares) if shares else None}  # fmt: skip
