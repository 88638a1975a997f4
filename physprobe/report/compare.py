"""Two runs of one benchmark compared question by question: for each figure of the benchmark's card and each group
figure behind it (PROST's concepts, NEWTON's attributes and scenarios, Text2Afford's classes, CConS's subsets), the
difference B - A on the questions both answered, its paired bootstrap 95% interval and a p-value
(``physprobe.report.paired``).

Questions are matched by identity, not position: config, row and the sha256 of the row's content (predictions.parquet's
``row_sha256``); a row one run holds and the other does not (another ``--limit`` sample), or holds with other content
(another data revision), or that a protocol left out, is dropped and counted with its reason. Runs of different
protocols or data revisions are refused in one line unless ``across`` is given.

Every figure is computed by the benchmark's own metric wiring (``Evaluation.metrics``, with each run's protocol's
options), as the run's metrics.json was: on the matched questions, on each resample of them (so a macro figure is
resampled with its groups and averaged as the figure itself is), and on each question alone. Where a figure is the
plain mean of its questions' values (checked on the whole set and on a few resamples of the wiring's own figures),
the resamples are averaged with numpy instead of calling the wiring again; where those values are 0/1 for the same
questions in both runs (an accuracy), the p-value is McNemar's exact test, else approximate randomisation's (the two
runs' answers swapped on random halves of the questions, each swap's figures computed the same way).

>>> figure = Figure("default.by_group.mass.accuracy", "Table 5: Mass")
>>> figure.config, figure.path
('default', 'by_group.mass.accuracy')
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from dataclasses import dataclass, field

from physprobe.data import registry
from physprobe.errors import ComparisonError, ProtocolError
from physprobe.protocols import UNDECIDED, Evaluation
from physprobe.record import run_record
from physprobe.report import paired
from physprobe.report.runs import Run
from physprobe.report.tables import paper_tables
from physprobe.util import progress

CHECKS = 3  # resamples on which a figure read as a mean of its questions' values is checked against the wiring
TOLERANCE = 1e-9
BUDGET = 4_000_000  # values held at once while resamples are averaged (figures x resamples x questions), 32 MB
DROPPED = {
    "reference": "only in the reference's rows (another --limit sample or config)",
    "other": "only in the other run's rows",
    "content": "content differs (another data revision)",
    "excluded": "left out by a protocol (its skip rule)",
}


@dataclass(frozen=True)
class Figure:
    """A figure compared: its metrics.json ``key`` (config, then a dot path) and its ``name`` in the report (the
    paper's table and column)."""

    key: str
    name: str
    percent: bool = False  # printed in % on the card and in its table (PROST, NEWTON), else 0-1
    digits: int = 3  # the decimals its table prints

    @property
    def config(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def path(self) -> str:
        return self.key.split(".", 1)[1]


@dataclass(frozen=True)
class Difference:
    """One figure of two runs on the same ``questions``, held by ``units`` units (``unit``: the benchmark's, or
    "question"): the reference's value ``a``, the other's ``b``, ``delta`` = b - a, its paired bootstrap 95% interval
    [``low``, ``high``] over ``resamples`` resamples of whole units that held a value for both, the minimum
    difference ``detectable`` at 80% power and 5% (``paired.detectable`` of the resampled differences' standard
    error), the units on which the runs' answers differ (``differing``), and, where at least
    ``paired.MIN_DIFFERING`` do, the ``p``-value of ``test`` (``discordant``: McNemar's questions right for A alone
    and for B alone) and ``holm``, the p-value adjusted over the report's tested differences. ``test`` is "not
    tested" (``p`` 1, no ``holm``) where fewer units differ."""

    figure: Figure
    a: float
    b: float
    delta: float
    low: float | None  # None: no resample held a value for both runs
    high: float | None
    p: float
    test: str
    questions: int
    resamples: int
    units: int = 0
    unit: str = "question"
    differing: int = 0
    detectable: float | None = None
    discordant: tuple[int, int] | None = None
    holm: float | None = None

    @property
    def tested(self) -> bool:
        """Whether enough units differ for a test to decide (``paired.MIN_DIFFERING``)."""
        return self.test != "not tested"

    @property
    def differs(self) -> bool:
        """The verdict, read by the table's star, the figure's filled marker and the card: tested, and its
        Holm-adjusted p below ``paired.ALPHA``."""
        return self.tested and self.holm is not None and self.holm < paired.ALPHA


@dataclass(frozen=True)
class Comparison:
    """A run against the reference run of its benchmark: the ``differences``, the questions matched per config and
    the rows dropped per config and reason (``DROPPED``'s keys), with the ``seed`` and number of ``resamples``."""

    benchmark: str
    reference: str
    other: str
    differences: tuple[Difference, ...]
    matched: dict[str, int]
    dropped: dict[str, dict[str, int]]
    seed: int
    resamples: int
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class _Answer:
    """A question as a run answered it (a line of predictions.parquet)."""

    sha256: str
    data: dict
    status: str
    prediction: int | None  # as the metric wiring takes it: the option, None (undecided), UNPARSED
    scores: list


def figures(run: Run) -> list[Figure]:
    """The figures compared for ``run``'s benchmark: each card row's figure as ``run``'s method reads it, then the
    groups it spans (the columns of its groups table other than the summary ones)."""
    paper = paper_tables(run.record.benchmark)
    found: dict[str, Figure] = {}
    for row in paper.card:
        table, column = next(((t, c) for t, c in row.sources if t.methods is None or run.method in t.methods), row.sources[0])
        for key in column.keys:
            if key:
                found.setdefault(key, Figure(key, f"{table.source or table.title}: {column.name}", *_scale(table)))
        groups = row.groups
        for group in groups.columns if groups is not None else ():
            for key in group.keys:
                if key and not group.summary:
                    found.setdefault(key, Figure(key, f"{groups.source or groups.title}: {group.name}", *_scale(groups)))
    return list(found.values())


def card_figures(run: Run) -> list[Figure]:
    """The card's figures of ``run``: each card row's figure as ``run``'s method reads it."""
    found = []
    for row in paper_tables(run.record.benchmark).card:
        table, column = next(((t, c) for t, c in row.sources if t.methods is None or run.method in t.methods), row.sources[0])
        if column.keys[0]:
            found.append(Figure(column.keys[0], f"{table.source or table.title}: {column.name}", *_scale(table)))
    return found


def _scale(table) -> tuple[bool, int]:
    return table.scale == "percent", table.digits


def answers(run: Run) -> dict[str, dict[int, _Answer]]:
    """Per config and row, how ``run`` answered (predictions.parquet); a ``ComparisonError`` line where the file holds
    no row contents, several answers to a question, or a sampled run's several samples of one."""
    found: dict[str, dict[int, _Answer]] = {}
    for line in run_record.predictions(run.folder):
        if line.get("row_sha256") is None:
            raise ComparisonError(f"{run.folder / run_record.PREDICTIONS} holds no row contents (written by an earlier physprobe), "
                                  f"so its questions cannot be matched; score run {run.id} again with its command "
                                  "(it resumes from its cache)")  # fmt: skip
        if line.get("draws_prediction") is not None:
            raise ComparisonError(f"run {run.id} was sampled several times a question (--samples): comparing sampled runs "
                                  "(each question's mean over its samples) is not built yet; compare runs scored with "
                                  "--samples 1")  # fmt: skip
        rows = found.setdefault(line["config"], {})
        if line["row"] in rows:
            raise ComparisonError(f"{run.folder / run_record.PREDICTIONS} holds several answers to {line['config']} row "
                                  f"{line['row']}; a comparison reads one answer per question")  # fmt: skip
        code = line["prediction"]
        prediction = None if code == UNDECIDED else code  # UNPARSED stays: the wiring counts it wrong
        scores = [None if isinstance(s, float) and math.isnan(s) else s for s in line["scores"]]
        rows[line["row"]] = _Answer(line["row_sha256"], run_record.row_data(line), line["status"], prediction, scores)
    return found


def refusal(a: Run, b: Run) -> str | None:
    """Why runs ``a`` and ``b`` are not compared without ``across``: other protocols, or other data revisions of a
    config both scored (None: nothing)."""
    if a.record.protocol != b.record.protocol:
        return f"their protocols differ ({a.record.protocol}, {b.record.protocol})"
    for config in a.record.configs:
        ours, theirs = a.record.config_revisions.get(config), b.record.config_revisions.get(config)
        if config in b.record.configs and ours != theirs:
            return f"their data revisions of {config} differ ({ours}, {theirs})"
    return None


def compare(a: Run, b: Run, resamples: int = paired.RESAMPLES, seed: int = paired.SEED, across: bool = False) -> Comparison:
    """Run ``b`` against the reference run ``a`` (same benchmark) on the questions both answered; a
    ``ComparisonError`` line for runs of other protocols or data revisions (unless ``across``), or with no question
    in common."""
    why = refusal(a, b)
    if why and not across:
        raise ComparisonError(f"runs {a.id} and {b.id} are not compared: {why}; pass --compare-across to compare them "
                              "on the questions they share")  # fmt: skip
    evaluation = registry.evaluation(a.record.benchmark)
    try:
        options = [evaluation.protocol(r.record.protocol).metric_options for r in (a, b)]
    except ProtocolError as error:  # a run scored by a protocol this physprobe does not declare: its figures cannot be redone
        raise ComparisonError(f"runs {a.id} and {b.id} are not compared: {error}") from None
    ours, theirs = answers(a), answers(b)
    matched, dropped, differences = {}, {}, []
    shown = figures(a)
    for config in dict.fromkeys(f.config for f in shown):
        members = evaluation.pooled.get(config, (config,))
        if not all(m in ours and m in theirs for m in members):
            continue
        pairs: list[tuple[_Answer, _Answer]] = []
        for member in members:
            kept, reasons = _matched(ours[member], theirs[member])
            pairs += kept
            if reasons and member not in dropped:
                dropped[member] = dict(reasons)
        if not pairs:
            continue
        matched[config] = len(pairs)
        keys = [f for f in shown if f.config == config]
        try:
            differences += _differences(evaluation, config, keys, pairs, options, resamples, seed)
        except (KeyError, TypeError, ValueError) as error:  # rows no scorer wrote (the metric's refusal is a ValueError)
            raise ComparisonError(f"runs {a.id} and {b.id} are not compared: the rows of {config} in their predictions.parquet "
                                  f"do not fit {a.record.benchmark}'s metric wiring ({type(error).__name__}: {error}); "
                                  "score them again") from None  # fmt: skip
    if not matched:
        raise ComparisonError(f"runs {a.id} and {b.id} share no question of a figure to compare "
                              f"({', '.join(f'{c}: {sum(r.values())} rows dropped' for c, r in dropped.items()) or 'no config in common'})")  # fmt: skip
    return Comparison(a.record.benchmark, a.id, b.id, tuple(differences), matched, dropped, seed, resamples,
                      (f"compared across: {why}",) if why else ())  # fmt: skip


def _matched(ours: dict[int, _Answer], theirs: dict[int, _Answer]) -> tuple[list[tuple[_Answer, _Answer]], Counter]:
    """The questions of one config both runs answered with the same content, in row order, and the rest counted by
    reason."""
    kept, reasons = [], Counter()
    for row in sorted(ours.keys() | theirs.keys()):
        x, y = ours.get(row), theirs.get(row)
        if x is None or y is None:
            reasons["other" if x is None else "reference"] += 1
        elif x.sha256 != y.sha256:
            reasons["content"] += 1
        elif "excluded" in (x.status, y.status):
            reasons["excluded"] += 1
        else:
            kept.append((x, y))
    return kept, reasons


def value_at(figures: dict, path: str) -> float | None:
    node = figures
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None


class Side:
    """One run's answers on the matched questions, through the benchmark's metric wiring."""

    def __init__(self, evaluation: Evaluation, config: str, rows: list[dict], answers: list[_Answer], options: dict):
        self.evaluation, self.config, self.rows, self.options = evaluation, config, rows, options
        self.predictions = [x.prediction for x in answers]
        self.scores = [x.scores for x in answers]

    def swapped(self, other: Side, swap) -> Side:
        """This side with ``other``'s answers where ``swap`` is True (its own protocol's options)."""
        mixed = copy.copy(self)
        mixed.predictions = [b if s else a for a, b, s in zip(self.predictions, other.predictions, swap, strict=True)]
        mixed.scores = [b if s else a for a, b, s in zip(self.scores, other.scores, swap, strict=True)]
        return mixed

    def figures(self, indices) -> dict:
        """The wiring's figures of the questions at ``indices`` (with repeats)."""
        return self.evaluation.metrics(self.config, [self.rows[i] for i in indices], [self.predictions[i] for i in indices],
                                       [self.scores[i] for i in indices], **self.options)  # fmt: skip

    def values(self, paths: list[str]):
        """Each question's own value of each figure (NaN where the figure does not count it): a (figures, questions)
        array, the wiring run on each question alone."""
        import numpy as np

        alone = [self.figures([i]) for i in range(len(self.rows))]
        return np.array([[math.nan if (v := value_at(f, path)) is None else v for f in alone] for path in paths])


def _drawn(counts, of):
    """The question indices of one resample: each question as many times as its unit (``of``) was drawn."""
    import numpy as np

    return np.repeat(np.arange(len(of)), counts[of])


def resampled_figures(side: Side, paths: list[str], draws, of, bar):
    """Each figure of ``paths`` on each resample of units (rows of ``draws``), by the wiring: a (figures, resamples)
    array (NaN where a resample gives a figure no value)."""
    import numpy as np

    found = np.full((len(paths), len(draws)), math.nan)
    for r, counts in enumerate(draws):
        figures = side.figures(_drawn(counts, of))
        for i, path in enumerate(paths):
            value = value_at(figures, path)
            found[i, r] = math.nan if value is None else value
        bar.update(1)
    return found


def _swapped(sides: list[Side], paths: list[str], swaps, of, bar):
    """Per swap of units (rows of ``swaps``), B's figures minus A's by the wiring, the two runs' answers traded on
    the units where the swap is True: a (figures, swaps) array (NaN where a swap gives a figure no value)."""
    import numpy as np

    every = range(len(sides[0].rows))
    found = np.full((len(paths), len(swaps)), math.nan)
    for r, swap in enumerate(swaps[:, of]):
        a, b = sides[0].swapped(sides[1], swap).figures(every), sides[1].swapped(sides[0], swap).figures(every)
        for i, path in enumerate(paths):
            x, y = value_at(a, path), value_at(b, path)
            found[i, r] = math.nan if x is None or y is None else y - x
        bar.update(2)
    return found


def is_mean(side: Side, values, paths: list[str], whole: dict, draws, of) -> bool:
    """Whether every figure of ``paths`` is the mean of its questions' ``values``: on the whole set (``whole``) and
    on the first ``CHECKS`` resamples, as the wiring computes them."""
    import numpy as np

    resamples = [_drawn(counts, of) for counts in draws[:CHECKS]]
    checks = [(whole, np.arange(values.shape[1]))] + [(side.figures(d), d) for d in resamples]
    for found, indices in checks:
        means = paired.weighted_means(values, np.bincount(indices, minlength=values.shape[1])[None, :])[:, 0]
        for path, mean in zip(paths, means, strict=True):
            value = value_at(found, path)
            if (value is None) != bool(np.isnan(mean)) or (value is not None and abs(value - mean) > TOLERANCE):
                return False
    return True


def units_of(evaluation: Evaluation, config: str, rows: list[dict]):
    """Each question's unit (``Evaluation.unit``) as an index, and the number of units: every question its own
    where the benchmark declares none.

    >>> demo = Evaluation("demo", ("default",), (), metrics=dict)
    >>> units_of(demo, "default", [{}, {}])[0].tolist()
    [0, 1]
    """
    import numpy as np

    if evaluation.unit is None:
        return np.arange(len(rows)), len(rows)
    keys: dict = {}
    of = np.array([keys.setdefault(evaluation.unit.key(row, config), len(keys)) for row in rows], dtype=int)
    return of, len(keys)


def _differences(evaluation: Evaluation, config: str, shown: list[Figure], pairs, options, resamples: int, seed: int):
    """The differences of one config's (or pooled figure's) ``shown`` figures on the matched ``pairs``."""

    rows = [x.data for x, _ in pairs]
    sides = [Side(evaluation, config, rows, [p[k] for p in pairs], options[k]) for k in (0, 1)]
    whole = [side.figures(range(len(rows))) for side in sides]
    shown = [f for f in shown if all(value_at(w, f.path) is not None for w in whole)]
    if not shown:
        return []
    paths = [f.path for f in shown]
    of, units = units_of(evaluation, config, rows)
    draws, swaps = paired.draws(units, resamples, seed), paired.swaps(units, resamples, seed)
    values = [side.values(paths) for side in sides]
    if all(is_mean(s, v, paths, w, draws, of) for s, v, w in zip(sides, values, whole, strict=True)):
        resampled = [_chunked(lambda w, v=v: paired.weighted_means(v, w), draws[:, of], values[0].size) for v in values]
        swapped = _chunked(lambda s: paired.swapped_means(*values, s), swaps[:, of].astype(float), values[0].size)
        fast = True
    else:
        with progress.bar(f"differences {evaluation.benchmark}/{config}", 4 * resamples, "resamples") as bar:
            resampled = [resampled_figures(side, paths, draws, of, bar) for side in sides]
            swapped = _swapped(sides, paths, swaps, of, bar)
        fast = False
    found = [_Drawn(resampled[1][i] - resampled[0][i], swapped[i], values[0][i], values[1][i]) for i in range(len(paths))]
    name = evaluation.unit.name if evaluation.unit is not None else "question"
    return [
        _difference(f, [value_at(w, f.path) for w in whole], d, of, units, name, fast) for f, d in zip(shown, found, strict=True)
    ]


def _chunked(means, weights, size: int):
    """``means`` of ``weights``' rows taken a chunk at a time (at most ``BUDGET`` values held at once)."""
    import numpy as np

    chunk = max(1, BUDGET // size)
    return np.concatenate([means(weights[start : start + chunk]) for start in range(0, len(weights), chunk)], axis=1)


@dataclass(frozen=True)
class _Drawn:
    """One figure's resampled differences, swapped differences and both runs' values of each question alone."""

    deltas: object
    swapped: object
    ours: object
    theirs: object


def _difference(figure: Figure, both: list[float], drawn: _Drawn, of, units: int, name: str, fast: bool) -> Difference:
    """A figure's ``Difference``: interval and standard error of the resampled differences, the units on which the
    runs differ, and, where enough do (``paired.MIN_DIFFERING``), the test."""
    import numpy as np

    a, b = both
    deltas = drawn.deltas[~np.isnan(drawn.deltas)]
    low, high = paired.interval(deltas) if len(deltas) else (None, None)
    va, vb = drawn.ours, drawn.theirs
    counted = ~np.isnan(va) | ~np.isnan(vb)
    unlike = counted & ~((va == vb) | (np.isnan(va) & np.isnan(vb)))
    differing = len(set(of[unlike].tolist()))
    spread = float(np.std(deltas, ddof=1)) if len(deltas) > 1 else None
    common = dict(questions=int(counted.sum()), units=len(set(of[counted].tolist())), unit=name, differing=differing,
                  detectable=None if spread is None else paired.detectable(spread))  # fmt: skip
    if differing < paired.MIN_DIFFERING:
        return Difference(figure, a, b, b - a, low, high, 1.0, "not tested", resamples=len(deltas), **common)
    single = units == len(of)  # each unit one question: McNemar's exact test where the figure is an accuracy
    binary = fast and single and np.array_equal(~np.isnan(va), ~np.isnan(vb)) and np.isin(va[counted], (0, 1)).all()
    if binary and np.isin(vb[counted], (0, 1)).all():
        discordant = (int(np.sum((va == 1) & (vb == 0))), int(np.sum((va == 0) & (vb == 1))))
        return Difference(figure, a, b, b - a, low, high, paired.mcnemar(*discordant), "McNemar exact",
                          resamples=len(deltas), discordant=discordant, **common)  # fmt: skip
    permuted = drawn.swapped[~np.isnan(drawn.swapped)]
    return Difference(figure, a, b, b - a, low, high, paired.randomisation_p(permuted, b - a), "approximate randomisation",
                      resamples=len(deltas), **common)  # fmt: skip
