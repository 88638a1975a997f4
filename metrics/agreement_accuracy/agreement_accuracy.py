"""Agreement-weighted accuracy of NEWTON (Eq. 1): accuracy that counts each question by its human agreement."""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """
NEWTON's Track 1 metric. Eq. 1 of the paper multiplies the share of model answers that match the human
majority by the share of human answers that match it. Read per question, as the paper's Tables 4 and 10
are consistent with, every correct answer counts with its question's annotator agreement:
agreement_accuracy = mean_i [prediction_i == reference_i] * agreement_i. Plain accuracy (Tracks 2-3) is
reported alongside. `reading="global"` gives the other reading: accuracy times the mean agreement.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `int`): predicted option index per question.
    references (`list` of `int`): majority human option index per question.
    agreements (`list` of `float`, optional): share of annotators who gave the majority answer, in [0, 1].
        Without it only `accuracy` and `n` are returned.
    groups (`list` of `str`, optional): group per question (e.g. attribute, scenario); adds `by_group`
        with the same figures per group. The top-level figures are over all questions (micro), as the
        paper's "Overall" column.
    polarities (`list` of `str`, optional): polarity per question ("pos" / "neg", Track 2); adds
        `by_polarity`, the breakdown of the paper's Table 9 and Figure 4B.
    by_position (`bool`, default False): adds `by_position`, the figures per position of the correct
        option (0 = first), the breakdown of the paper's Figure 4C.
    reading (`str`, default "per_question"): "per_question" or "global" (see the description).
Returns:
    agreement_accuracy (`float`, with agreements), accuracy (`float`), n (`int`), by_group (with groups),
    by_polarity (with polarities), by_position (with by_position=True).
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("metrics/agreement_accuracy")
    >>> metric.compute(predictions=[0, 2, 2, 0], references=[0, 2, 0, 0], agreements=[1.0, 0.75, 1.0, 0.75])
    {'agreement_accuracy': 0.625, 'accuracy': 0.75, 'n': 4}

    >>> result = metric.compute(predictions=[0, 2, 2, 0], references=[0, 2, 0, 0],
    ...                         agreements=[1.0, 0.75, 1.0, 0.75], groups=["soft", "soft", "sharp", "sharp"])
    >>> result["by_group"]["sharp"]
    {'agreement_accuracy': 0.375, 'accuracy': 0.5, 'n': 2}

    >>> metric.compute(predictions=[1, 0], references=[1, 1])
    {'accuracy': 0.5, 'n': 2}

    >>> result = metric.compute(predictions=[0, 1, 3, 2], references=[0, 1, 3, 0],
    ...                         polarities=["pos", "neg", "neg", "pos"], by_position=True)
    >>> result["by_polarity"]["pos"], result["by_position"]["0"]
    ({'accuracy': 0.5, 'n': 2}, {'accuracy': 0.5, 'n': 2})
"""

_CITATION = """
@inproceedings{wang2023newton,
  title = {{NEWTON}: Are Large Language Models Capable of Physical Reasoning?},
  author = {Wang, Yi Ru and Duan, Jiafei and Fox, Dieter and Srinivasa, Siddhartha},
  booktitle = {Findings of the Association for Computational Linguistics: EMNLP 2023},
  year = {2023},
}
"""

READINGS = ("per_question", "global")


def _is_integer(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_integers(name, values):
    """ValueError naming `name` and the first index whose value is not an integer (raw input, before evaluate's cast)."""
    if isinstance(values, np.ndarray) and values.ndim == 1 and np.issubdtype(values.dtype, np.integer):
        return
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


def _figures(correct, agreements, reading):
    out = {}
    if agreements is not None:
        if reading == "per_question":
            out["agreement_accuracy"] = float(np.mean(correct * agreements))
        else:
            out["agreement_accuracy"] = float(np.mean(correct) * np.mean(agreements))
    out["accuracy"] = float(np.mean(correct))
    out["n"] = int(len(correct))
    return out


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class AgreementAccuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}),
            reference_urls=["https://arxiv.org/abs/2310.07018"],
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
        self, predictions, references, agreements=None, groups=None, reading="per_question", polarities=None, by_position=False
    ):
        if not isinstance(by_position, (bool, np.bool_)):
            raise ValueError(f"by_position must be True or False, got {by_position!r}")
        if len(predictions) == 0:
            raise ValueError("predictions is empty: there is nothing to score")
        if len(predictions) != len(references):
            raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
        if reading not in READINGS:
            raise ValueError(f"reading must be one of {READINGS}, got {reading!r}")
        n = len(predictions)
        if (np.asarray(references) < 0).any():
            index = int(np.argmax(np.asarray(references) < 0))
            raise ValueError(f"references[{index}] = {references[index]} is not an option index (negative)")
        correct = (np.asarray(predictions) == np.asarray(references)).astype(float)
        if agreements is not None:
            if len(agreements) != n:
                raise ValueError(f"agreements has {len(agreements)} entries but there are {n} predictions")
            for index, value in enumerate(agreements):
                if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, (bool, np.bool_)):
                    raise ValueError(f"agreements[{index}] = {value!r} is not a number")
            agreements = np.asarray(agreements, dtype=float)
            bad = np.isnan(agreements) | (agreements < 0) | (agreements > 1)
            if bad.any():
                index = int(np.argmax(bad))
                raise ValueError(f"agreements[{index}] = {agreements[index]} is outside [0, 1]")
        result = _figures(correct, agreements, reading)
        breakdowns = {"by_group": ("groups", groups), "by_polarity": ("polarities", polarities),
                      "by_position": ("references", [str(r) for r in references] if by_position else None)}  # fmt: skip
        for key, (argument, keys) in breakdowns.items():
            if keys is None:
                continue
            if len(keys) != n:
                raise ValueError(f"{argument} has {len(keys)} entries but there are {n} predictions")
            _check_keys(argument, keys)
            group_of = np.asarray(keys)
            result[key] = {
                group.item(): _figures(
                    correct[group_of == group], None if agreements is None else agreements[group_of == group], reading
                )
                for group in np.unique(group_of)
            }
        return result
