"""Accuracy of a multiple-choice probe with the breakdowns of the PROST and CConS papers."""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """
Accuracy of multiple-choice predictions, with the breakdowns that the PROST and CConS papers report:
per group (concept or subset) and their macro average (PROST Table 5: templates averaged into
concepts, concepts into the macro average; CConS Tables 2-3: Ordinary / CCommon / Easy / Hard),
per position of the correct answer in the context (PROST Table 6), and the absolute accuracy gap
between a question and its superlative inverse (PROST Table 7).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): predicted option index of each question.
    references (`list` of `int`): correct option index of each question.
    groups (`list` of `str`, optional): group of each question (PROST concept, CConS subset).
        Adds `by_group` ({group: {"accuracy", "n"}}) and `macro_accuracy` (mean of the group accuracies).
    templates (`list` of `str`, optional): template of each question. With `groups`, a group's
        accuracy is the mean of its templates' accuracies, as in PROST's Table 5; adds `by_template`.
    positions (`list` of `int`, optional): position of the correct answer in the context.
        Adds `by_position` ({position: {"accuracy", "n"}}) as in PROST's Table 6.
    position_reading (`str`, default "template_mean"): how a position's accuracy is formed.
        "template_mean" (needs `templates`): the mean of the accuracies of the templates at that
        position, as PROST's released analysis code computes Table 6 (`src/baselines/results.py`,
        `process_preds_positions`). "question_mean": accuracy over the position's questions.
    pairs (`list` of `str`, optional, with `inverted`): superlative-inverse pair of each question
        (e.g. "mass_1" for mass_1_a and mass_1_b) and whether the question is on the inverted side.
        Adds `by_pair` ({pair: {"accuracy", "inverted_accuracy", "gap"}}) and `inverse_gap`, the mean
        over pairs of |accuracy - inverted_accuracy| (PROST Table 7), over the pairs with questions on
        both sides. Questions whose pair is None (PROST's directions) have no inverse and are left out.
        With `groups`, adds `inverse_gap_by_group` and their mean, `macro_inverse_gap` (Table 7's macro
        average), over the groups with questions on both sides.
    inverted (`list` of `bool`, optional, with `pairs`): see `pairs`.
    inverse_gap_reading (`str`, default "pooled"): how a group's inverse gap is formed from its
        pairs. "pooled": |accuracy over all its non-inverted questions - accuracy over all its
        inverted ones|, as PROST's released analysis code computes Table 7 (`src/baselines/results.py`,
        `process_preds_inverse`), a question counting on its side whether or not its own pair has
        questions on the other (a sample may hold one). "per_pair": the mean of its pairs' gaps (every
        pair needs both sides).
    num_choices (`int`, optional): number of options; predictions and references must lie in [0, num_choices).
Returns:
    accuracy (`float`): fraction of correct predictions over all questions (micro), and the
    breakdowns above when their inputs are given.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("metrics/probe_accuracy")
    >>> metric.compute(predictions=[0, 1, 2, 3], references=[0, 1, 3, 3])
    {'accuracy': 0.75}

    Template accuracies are averaged into their group, groups into the macro average:

    >>> result = metric.compute(
    ...     predictions=[0, 0, 0, 1, 2, 2],
    ...     references=[0, 0, 1, 1, 2, 3],
    ...     groups=["dir", "dir", "dir", "dir", "mass", "mass"],
    ...     templates=["d1", "d1", "d1", "d2", "m1", "m1"],
    ... )
    >>> result["by_group"]["dir"], result["macro_accuracy"]
    ({'accuracy': 0.8333333333333333, 'n': 4}, 0.6666666666666666)

    Position accuracy and superlative-inverse gaps:

    >>> result = metric.compute(
    ...     predictions=[0, 1, 1, 1], references=[0, 1, 0, 1], positions=[1, 2, 1, 2],
    ...     position_reading="question_mean",
    ...     pairs=["mass_1", "mass_1", "mass_1", "mass_1"], inverted=[False, False, True, True],
    ... )
    >>> result["by_position"], result["inverse_gap"]
    ({1: {'accuracy': 0.5, 'n': 2}, 2: {'accuracy': 1.0, 'n': 2}}, 0.5)

    Table 6 as the released code reads it: template accuracies averaged per position:

    >>> result = metric.compute(
    ...     predictions=[0, 0, 0, 1, 1], references=[0, 0, 1, 1, 0], positions=[1, 1, 1, 2, 2],
    ...     templates=["s_1", "s_1", "t_1", "s_2", "s_2"],
    ... )
    >>> result["by_position"]
    {1: {'accuracy': 0.5, 'n': 3}, 2: {'accuracy': 0.5, 'n': 2}}
"""

_CITATION = """
@inproceedings{aroca-ouellette-etal-2021-prost,
  title = {{PROST}: Physical Reasoning about Objects through Space and Time},
  author = {Aroca-Ouellette, St{\\'e}phane and Paik, Cory and Roncone, Alessandro and Kann, Katharina},
  booktitle = {Findings of the Association for Computational Linguistics: ACL-IJCNLP 2021},
  year = {2021},
}
"""

READINGS = ("pooled", "per_pair")
POSITION_READINGS = ("template_mean", "question_mean")


def _is_integer(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_integers(name, values):
    """ValueError naming `name` and the first index whose value is not an integer (raw input, before evaluate's cast)."""
    if isinstance(values, np.ndarray) and values.ndim == 1 and np.issubdtype(values.dtype, np.integer):
        return
    if len(values) and all(type(value) is int for value in values) and -(1 << 63) <= min(values) and max(values) < 1 << 63:
        return  # plain ints in range (bool is not int by type): the common case, checked without a call per value
    for index, value in enumerate(values):
        if not _is_integer(value):
            raise ValueError(f"{name}[{index}] = {value!r} is not an integer option index")
        if not -(1 << 63) <= int(value) < 1 << 63:
            raise ValueError(f"{name}[{index}] = {value!r} is far out of range for an option index")


def _check_inputs(predictions, references):
    """Raw predictions and references: non-empty, equally long, integers."""
    for name, values in (("predictions", predictions), ("references", references)):
        if values is not None:
            if len(values) == 0:
                raise ValueError(f"{name} is empty: there is nothing to score")
            _check_integers(name, values)
    if predictions is not None and references is not None and len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")


def _check_keys(name, values):
    """ValueError naming `name` and the first index whose key is missing or of another type than the first
    (numpy would merge 1 and "1" into one group)."""
    kinds = {type(value) for value in values[:1]}
    for index, value in enumerate(values):
        if value is None or (isinstance(value, float) and value != value) or type(value) not in kinds:
            raise ValueError(f"{name}[{index}] = {value!r}: every {name} entry must be a key of the same type as {name}[0]")


def _labels(name, values, num_choices):
    array = np.asarray(values)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must be a flat list of integer option indices")
    if (array < 0).any():
        raise ValueError(f"{name} has a negative option index at position {int(np.argmax(array < 0))}")
    if num_choices is not None and (array >= num_choices).any():
        index = int(np.argmax(array >= num_choices))
        raise ValueError(f"{name}[{index}] = {array[index]} is out of range for num_choices={num_choices}")
    return array


def _aligned(name, values, n):
    if values is None:
        return None
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} entries but there are {n} predictions")
    return np.asarray(values)


def _mean_by(keys, values):
    """Mean of `values` per distinct key: (sorted keys, means, counts), vectorised with numpy."""
    unique, index = np.unique(keys, return_inverse=True)
    counts = np.bincount(index)
    return unique, np.bincount(index, weights=values) / counts, counts


def _key(value):
    return value.item() if isinstance(value, np.generic) else value


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ProbeAccuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}),
            reference_urls=["https://aclanthology.org/2021.findings-acl.404"],
        )

    # evaluate casts inputs to the declared features before `_compute` (1.7 -> 1, 0.5 -> 0): check the raw values first.
    def compute(self, *, predictions=None, references=None, **kwargs):
        """evaluate's `compute`, after checking the raw inputs."""
        _check_inputs(predictions, references)
        return super().compute(predictions=predictions, references=references, **kwargs)

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """evaluate's `add_batch`, after checking the raw inputs."""
        _check_inputs(predictions, references)
        return super().add_batch(predictions=predictions, references=references, **kwargs)

    def add(self, *, prediction=None, reference=None, **kwargs):
        """evaluate's `add`, after checking the raw inputs."""
        _check_inputs(None if prediction is None else [prediction], None if reference is None else [reference])
        return super().add(prediction=prediction, reference=reference, **kwargs)

    def _compute(
        self,
        predictions,
        references,
        groups=None,
        templates=None,
        positions=None,
        pairs=None,
        inverted=None,
        inverse_gap_reading="pooled",
        position_reading="template_mean",
        num_choices=None,
    ):
        if len(predictions) == 0:
            raise ValueError("predictions is empty: there is nothing to score")
        if len(predictions) != len(references):
            raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
        if inverse_gap_reading not in READINGS:
            raise ValueError(f"inverse_gap_reading must be one of {READINGS}, got {inverse_gap_reading!r}")
        if position_reading not in POSITION_READINGS:
            raise ValueError(f"position_reading must be one of {POSITION_READINGS}, got {position_reading!r}")
        if positions is not None and position_reading == "template_mean" and templates is None:
            raise ValueError("position_reading='template_mean' needs templates; pass them or position_reading='question_mean'")
        if (pairs is None) != (inverted is None):
            raise ValueError("pairs and inverted go together: give both or neither")
        if num_choices is not None and (not _is_integer(num_choices) or num_choices < 1):
            raise ValueError(f"num_choices must be a whole number of at least 1, got {num_choices!r}")
        for index, value in enumerate(inverted if inverted is not None else []):
            if not (isinstance(value, (bool, np.bool_)) or (_is_integer(value) and value in (0, 1))):
                raise ValueError(f"inverted[{index}] = {value!r} is not a bool (True/False)")
        n = len(predictions)
        correct = _labels("predictions", predictions, num_choices) == _labels("references", references, num_choices)
        correct = correct.astype(float)
        for name, values in (("groups", groups), ("templates", templates)):
            if values is not None:
                _check_keys(name, values)
        if positions is not None:
            _check_integers("positions", positions)
        groups, templates, positions = (
            _aligned(k, v, n) for k, v in (("groups", groups), ("templates", templates), ("positions", positions))
        )
        pairs, inverted = _aligned("pairs", pairs, n), _aligned("inverted", inverted, n)

        result = {"accuracy": float(correct.mean())}
        if groups is not None:
            result.update(self._by_group(correct, groups, templates))
        if positions is not None:
            result["by_position"] = self._by_position(correct, positions, templates, position_reading)
        if pairs is not None:
            result.update(self._inverse_gaps(correct, pairs, inverted.astype(bool), groups, inverse_gap_reading))
        return result

    @staticmethod
    def _by_group(correct, groups, templates):
        keys, means, counts = _mean_by(groups, correct)
        out = {}
        if templates is not None:
            # A template belongs to one group: its name alone is its key (no joined strings that could collide).
            owner = {}
            for index, (template, group) in enumerate(zip(templates.tolist(), groups.tolist(), strict=True)):
                if owner.setdefault(template, group) != group:
                    raise ValueError(
                        f"templates[{index}] = {template!r} is in groups {owner[template]!r} and {group!r}; a template belongs to one group"
                    )
            t_keys, t_means, t_counts = _mean_by(templates, correct)
            owners = [owner[_key(k)] for k in t_keys]
            out["by_template"] = {
                _key(k): {"accuracy": float(m), "n": int(c)} for k, m, c in zip(t_keys, t_means, t_counts, strict=True)
            }
            means = np.array([np.mean([m for m, o in zip(t_means, owners, strict=True) if o == _key(group)]) for group in keys])
        out["by_group"] = {_key(k): {"accuracy": float(m), "n": int(c)} for k, m, c in zip(keys, means, counts, strict=True)}
        out["macro_accuracy"] = float(means.mean())
        return out

    @staticmethod
    def _by_position(correct, positions, templates, reading):
        keys, means, counts = _mean_by(positions, correct)
        if reading == "template_mean":
            # (position, template) cells; a position's accuracy is the mean of its templates' accuracies.
            cells = np.char.add(np.char.add(positions.astype(str), "\x1f"), templates.astype(str))
            cell_keys, cell_means, _ = _mean_by(cells, correct)
            owners = np.array([key.split("\x1f")[0] for key in cell_keys])
            means = np.array([cell_means[owners == str(k)].mean() for k in keys])
        return {_key(k): {"accuracy": float(m), "n": int(c)} for k, m, c in zip(keys, means, counts, strict=True)}

    @staticmethod
    def _inverse_gaps(correct, pairs, inverted, groups, reading):
        by_pair = {}
        paired = np.array([pair is not None for pair in pairs], dtype=bool)
        if not paired.any():
            raise ValueError("pairs has no entry other than None: no question has a superlative inverse")
        for pair in np.unique(pairs[paired].astype(str)):
            in_pair = paired & (pairs == pair)
            plain, flipped = correct[in_pair & ~inverted], correct[in_pair & inverted]
            if groups is not None and len(np.unique(groups[in_pair])) > 1:
                raise ValueError(f"pair {_key(pair)!r} spans several groups: {sorted(set(groups[in_pair].tolist()))}")
            if len(plain) == 0 or len(flipped) == 0:
                if reading == "per_pair":
                    raise ValueError(f"pair {_key(pair)!r} needs questions on both sides (inverted and not)")
                continue  # pooled: its questions still count on their side of the group
            accuracy, inverted_accuracy = float(plain.mean()), float(flipped.mean())
            by_pair[_key(pair)] = {
                "accuracy": accuracy,
                "inverted_accuracy": inverted_accuracy,
                "gap": abs(accuracy - inverted_accuracy),
            }
        out = {"by_pair": by_pair, "inverse_gap": float(np.mean([p["gap"] for p in by_pair.values()]))} if by_pair else {}
        if groups is not None:
            group_gaps = {}
            for group in np.unique(groups[paired]):
                in_group = paired & (groups == group)
                if reading == "per_pair":
                    gap = np.mean([by_pair[_key(p)]["gap"] for p in np.unique(pairs[in_group].astype(str))])
                elif (in_group & ~inverted).any() and (in_group & inverted).any():
                    gap = abs(correct[in_group & ~inverted].mean() - correct[in_group & inverted].mean())
                else:
                    continue  # one side only (a sample): no gap, as results.py has none to take
                group_gaps[_key(group)] = float(gap)
            if group_gaps:
                out["inverse_gap_by_group"] = group_gaps
                out["macro_inverse_gap"] = float(np.mean(list(group_gaps.values())))
        return out
