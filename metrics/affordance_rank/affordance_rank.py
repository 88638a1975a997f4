"""Rank-based affordance accuracy and mean average precision of Text2Afford (Section 6, Appendix G)."""

import itertools

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """
Rank-based accuracy and mAP of per-class affordance scores, as defined by the Text2Afford paper. Each
sentence-object pair has a score per class (e.g. 15 masked-LM probabilities, NLI entailment scores, or
YES=1/NO=0) and binary references (-1 for a class left unlabelled). Accuracy compares positive classes with
negative ones; mAP ranks the classes by score, tied classes in class order as the released scripts sort them.
Pairs with no positive class (paper footnote 5) or no negative class are skipped and counted in `skipped`.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `list` of `float`): one score per class for each pair (same length for all).
    references (`list` of `list` of `int`): 0/1 per class for each pair; -1 for a class left unlabelled (the
        annotators did not agree: an empty cell of the released `data_high_agreement.tsv`), which is in no
        comparison and never a hit, though it is ranked (as `zero_shot_llama-3.py` skips such cells).
    mode (`str`, default "pairwise"): "pairwise" (Appendix G, and every released evaluation script) counts
        each (positive, negative) class pair as correct when the positive scores higher; "strict" (one
        reading of Section 6) counts each positive class as correct when its score is higher than the
        score of every negative class. The paper's random baseline (Table 6, 0.18) is what pairwise gives.
    ties (`str`, default "wrong"): "wrong" as Appendix G ("If a positive affordance's score is higher ...
        Correct; otherwise, the Wrong count") and the released YES/NO scripts (`>`); "correct" as the
        released masked-LM and NLI scripts (`>=`).
    map_ties (`str`, default "class_order"): how tied scores rank for mAP. "class_order" as every released
        script: a stable sort, tied classes in class order (`sorted(dict.items(), key=score, reverse=True)`
        over classes inserted in column order, then `utils/eval.py` `apk`), returned as `map`;
        "pessimistic": a class ranks below every class scoring at least as high (scikit-learn's
        average precision), returned as `map_pessimistic`.
    average (`str`, default "micro"): "micro" divides all correct counts by all counts (Section 6: "the
        total number of correct counts by the total number of the instances"); "macro" averages the
        accuracy of each pair (Appendix G defines accuracy per sentence-object pair).
    k (`int`, optional): mAP@k; by default k is the number of classes.
    class_names (`list` of `str`, optional): one name per class; adds `by_class` (see below).
Returns:
    accuracy (`float`), map (`float`; `map_pessimistic` under that reading), n (`int`, pairs scored),
    skipped (`int`, pairs with no positive or no negative class: nothing to rank, left out of every figure
    in every mode and average).
    by_class (with class_names): per class, `accuracy` over the comparisons the chosen mode counts with
    that class on the positive side, and `n` (pairs where it is positive); a class positive in no
    scored pair is left out. The comparisons of all classes together are the overall figure's.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("metrics/affordance_rank")
    >>> scores = [[0.9, 0.5, 0.7, 0.1], [0.2, 0.8, 0.3, 0.6], [0.4, 0.4, 0.1, 0.3]]
    >>> labels = [[1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]]
    >>> metric.compute(predictions=scores, references=labels)
    {'accuracy': 1.0, 'map': 1.0, 'n': 2, 'skipped': 1}

    Pairwise credits the negatives a positive beats; strict wants it above every negative:

    >>> metric.compute(predictions=[[0.5, 0.9, 0.7, 0.1]], references=[[1, 0, 1, 0]])
    {'accuracy': 0.5, 'map': 0.5833333333333333, 'n': 1, 'skipped': 0}
    >>> metric.compute(predictions=[[0.5, 0.9, 0.7, 0.1]], references=[[1, 0, 1, 0]], mode="strict")["accuracy"]
    0.0

    Per class: each positive class with the comparisons it makes (here 1 of 2 each):

    >>> metric.compute(predictions=[[0.5, 0.9, 0.7, 0.1]], references=[[1, 0, 1, 0]],
    ...                class_names=["grasp", "lift", "throw", "push"])["by_class"]
    {'grasp': {'accuracy': 0.5, 'n': 1}, 'throw': {'accuracy': 0.5, 'n': 1}}

    YES=1 / NO=0 answers tie often; ties are wrong unless told otherwise:

    >>> metric.compute(predictions=[[1, 1, 0, 0]], references=[[1, 0, 1, 0]])["accuracy"]
    0.25
    >>> metric.compute(predictions=[[1, 1, 0, 0]], references=[[1, 0, 1, 0]], ties="correct")["accuracy"]
    0.75

    Tied classes rank in class order for mAP (ranks 1, 2, 3, 4: AP (1/1 + 2/3) / 2), or each below its ties
    (ranks 2, 2, 4, 4: (1/2 + 2/4) / 2):

    >>> metric.compute(predictions=[[1, 1, 0, 0]], references=[[1, 0, 1, 0]])["map"]
    0.8333333333333333
    >>> metric.compute(predictions=[[1, 1, 0, 0]], references=[[1, 0, 1, 0]], map_ties="pessimistic")["map_pessimistic"]
    0.5
"""

_CITATION = """
@misc{adak2024text2afford,
  title = {{TEXT2AFFORD}: Probing Object Affordance Prediction abilities of Language Models solely from Text},
  author = {Adak, Sayantan and Agrawal, Daivik and Mukherjee, Animesh and Aditya, Somak},
  year = {2024},
}
"""

MODES = ("pairwise", "strict")
TIES = ("wrong", "correct")
MAP_TIES = {"class_order": "map", "pessimistic": "map_pessimistic"}  # reading -> the key of its figure
UNLABELLED = -1  # a reference class with no label: in no comparison, never a hit
AVERAGES = ("micro", "macro")
CHUNK = 1 << 15  # pairs per block: bounds the (pairs x classes x classes) comparison arrays


def _is_number(value):
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _plainly_valid(name, rows):
    """True when `rows` are non-empty rows of plain numbers (0/1 integers for references), checked at C speed
    (a per-value Python check takes 20 s at a million pairs); False sends the caller to the row-by-row check
    that names the first bad row."""
    try:
        if any(isinstance(row, (str, bytes)) or len(row) == 0 for row in rows):
            return False
        kinds = set(map(type, itertools.chain.from_iterable(rows)))
        numbers = (int, np.integer) if name == "references" else (int, float, np.integer, np.floating)
        if not all(issubclass(kind, numbers) and not issubclass(kind, (bool, np.bool_)) for kind in kinds):
            return False
        values = np.asarray(rows, dtype=float)
    except (TypeError, ValueError):  # not sized, not numbers, or ragged
        return False
    return bool(np.isin(values, (0, 1, UNLABELLED)).all() if name == "references" else np.isfinite(values).all())


def _check_inputs(predictions, references):
    """Raw inputs, before evaluate casts them (0.5 -> 0): ValueError naming the argument and first bad row."""
    for name, rows in (("predictions", predictions), ("references", references)):
        if rows is None:
            continue
        if len(rows) and _plainly_valid(name, rows):
            continue
        if len(rows) == 0:
            raise ValueError(f"{name} is empty: there is nothing to score")
        for index, row in enumerate(rows):
            if isinstance(row, (str, bytes)) or not hasattr(row, "__len__") or len(row) == 0:
                raise ValueError(f"{name}[{index}] must be a non-empty list with one entry per class, got {row!r}")
            if name == "predictions":
                if not all(_is_number(v) for v in row) or not np.isfinite(np.asarray(row, dtype=float)).all():
                    raise ValueError(
                        f"predictions[{index}] contains NaN, inf or a non-number: {list(row)}; scores must be finite numbers"
                    )
            elif not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v in (0, 1, UNLABELLED)
                         for v in row):  # fmt: skip
                raise ValueError(f"references[{index}] is not binary (0/1 integers, -1 for an unlabelled class): {list(row)}")
    if predictions is not None and references is not None and len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")


def _matrix(name, values, dtype):
    lengths = {len(row) for row in values}
    if len(lengths) > 1:
        raise ValueError(f"{name} is ragged: rows have {sorted(lengths)} scores; every pair needs one per class")
    return np.asarray(values, dtype=dtype)


def _counts(scores, labels, mode, k, ties, map_ties):
    """Per-pair correct and total comparison counts, and average precision (vectorised)."""
    positive = labels == 1
    negative = labels == 0
    wins = np.greater if ties == "wrong" else np.greater_equal
    if mode == "strict":
        best_negative = np.where(negative, scores, -np.inf).max(axis=1, keepdims=True)
        correct = (positive & wins(scores, best_negative)).sum(axis=1)
        total = positive.sum(axis=1)
    else:
        beats = wins(scores[:, :, None], scores[:, None, :])  # [pair, positive candidate, negative candidate]
        correct = (beats & positive[:, :, None] & negative[:, None, :]).sum(axis=(1, 2))
        total = positive.sum(axis=1) * negative.sum(axis=1)
    # Average precision. Ahead of a class (and counted in its precision) are the classes scoring higher and,
    # of those tied with it, "class_order": those of lower index and itself (a stable sort), "pessimistic": all.
    ahead = scores[:, None, :] >= scores[:, :, None]  # [pair, class, other]
    if map_ties == "class_order":
        classes = np.arange(scores.shape[1])
        ahead = (scores[:, None, :] > scores[:, :, None]) | (ahead & (classes[None, :] <= classes[:, None])[None])
    rank = ahead.sum(axis=2)
    precision = (ahead & positive[:, None, :]).sum(axis=2) / rank
    counted = positive & (rank <= k)
    ap = (precision * counted).sum(axis=1) / np.minimum(positive.sum(axis=1), k)
    return correct, total, ap


# --- by_class: the overall accuracy broken down by positive class ----------------------------------------
# Self-contained: `_compute` calls `_by_class` once, after the overall figures, on the same kept pairs.


def _class_counts(scores, labels, mode, ties):
    """Per pair and class, the comparisons won and made with that class on the positive side (0 and 0 where
    it is negative): summed over classes they are `_counts`' correct and total."""
    positive = labels == 1
    negative = labels == 0
    wins = np.greater if ties == "wrong" else np.greater_equal
    if mode == "strict":
        best_negative = np.where(negative, scores, -np.inf).max(axis=1, keepdims=True)
        return (positive & wins(scores, best_negative)).astype(np.int64), positive.astype(np.int64)
    beats = wins(scores[:, :, None], scores[:, None, :])  # [pair, positive candidate, negative candidate]
    correct = (beats & positive[:, :, None] & negative[:, None, :]).sum(axis=2)
    return correct, positive * negative.sum(axis=1, keepdims=True)


def _by_class(scores, labels, class_names, mode, average, ties):
    """Accuracy and n (pairs where the class is positive) per named class, in `average`'s way."""
    if len(class_names) != scores.shape[1]:
        raise ValueError(f"class_names has {len(class_names)} names but there are {scores.shape[1]} classes")
    if not all(isinstance(name, str) and name for name in class_names):
        raise ValueError(f"class_names must be non-empty strings, got {list(class_names)!r}")
    if len(set(class_names)) != len(class_names):
        raise ValueError(f"class_names repeats a name: {list(class_names)}")
    parts = [_class_counts(scores[i : i + CHUNK], labels[i : i + CHUNK], mode, ties) for i in range(0, len(scores), CHUNK)]
    correct, total = (np.concatenate(column) for column in zip(*parts, strict=True))
    out = {}
    for index, name in enumerate(class_names):
        made = total[:, index] > 0
        if not made.any():
            continue
        if average == "micro":
            accuracy = correct[made, index].sum() / total[made, index].sum()
        else:
            accuracy = np.mean(correct[made, index] / total[made, index])
        out[str(name)] = {"accuracy": float(accuracy), "n": int(made.sum())}
    return out


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class AffordanceRank(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.List(datasets.Value("float64")),
                    "references": datasets.List(datasets.Value("int64")),
                }
            ),
        )

    # evaluate casts inputs to the declared features before `_compute`: check the raw values first.
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

    def _compute(self, predictions, references, mode="pairwise", average="micro", k=None, ties="wrong",
                 map_ties="class_order", class_names=None):  # fmt: skip
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if ties not in TIES:
            raise ValueError(f"ties must be one of {TIES}, got {ties!r}")
        if map_ties not in MAP_TIES:
            raise ValueError(f"map_ties must be one of {tuple(MAP_TIES)}, got {map_ties!r}")
        if average not in AVERAGES:
            raise ValueError(f"average must be one of {AVERAGES}, got {average!r}")
        if len(predictions) == 0:
            raise ValueError("predictions is empty: there is nothing to score")
        if len(predictions) != len(references):
            raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
        scores = _matrix("predictions", predictions, np.float64)
        labels = _matrix("references", references, np.int64)
        if scores.shape != labels.shape:
            raise ValueError(f"predictions have {scores.shape[1]} scores per pair but references {labels.shape[1]} labels")
        if not np.isfinite(scores).all():
            row = int(np.argmax(~np.isfinite(scores).all(axis=1)))
            raise ValueError(f"predictions[{row}] contains NaN or inf")
        if not np.isin(labels, (0, 1, UNLABELLED)).all():
            row = int(np.argmax(~np.isin(labels, (0, 1, UNLABELLED)).all(axis=1)))
            raise ValueError(f"references[{row}] is not binary (0/1, -1 for an unlabelled class): {labels[row].tolist()}")
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer))):
            raise ValueError(f"k must be a whole number of classes (an int), got {k!r}")
        k = scores.shape[1] if k is None else int(k)
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        # A pair with no positive (paper footnote 5) or no negative class has nothing to rank: skipped in
        # every mode and average, and counted in `skipped`.
        kept = (labels == 1).any(axis=1) & (labels == 0).any(axis=1)
        scores, labels = scores[kept], labels[kept]
        if len(scores) == 0:
            raise ValueError("no pair has a positive class and a negative class: nothing to score")
        parts = [_counts(scores[i : i + CHUNK], labels[i : i + CHUNK], mode, k, ties, map_ties)
                 for i in range(0, len(scores), CHUNK)]  # fmt: skip
        correct, total, ap = (np.concatenate(column) for column in zip(*parts, strict=True))
        if average == "micro":
            accuracy = correct.sum() / total.sum()
        else:
            accuracy = np.mean(correct / np.maximum(total, 1))
        result = {"accuracy": float(accuracy), MAP_TIES[map_ties]: float(ap.mean()), "n": int(len(scores)),
                  "skipped": int((~kept).sum())}  # fmt: skip
        if class_names is not None:
            result["by_class"] = _by_class(scores, labels, class_names, mode, average, ties)
        return result
