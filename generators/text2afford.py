"""Text2Afford rows: the 15 affordance classes and the annotation pipeline of the paper (the prompts are in
``physprobe.dataset_scripts.text2afford.evaluation``).

The paper (Sections 3-4, Appendix A) has three annotators rate each sentence-object pair on a 0-3
Likert scale for each of 15 classes. A rating of 0-1 means "cannot", 2-3 "can"; the label is the
majority of the three binary votes, and the agreement of a triple is the share of annotators who
voted with the majority.

>>> votes = [{"sentence": "He rode the horse.", "object": "horse", "annotator": name,
...           **{c.name: 0 for c in CLASSES}, "Ride": rating} for name, rating in (("a", 3), ("b", 2), ("c", 1))]
>>> (row,) = aggregate(votes)
>>> row["labels"][CLASS_NAMES.index("Ride")], round(row["agreement"][CLASS_NAMES.index("Ride")], 3)
(1, 0.667)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from physprobe.errors import DataError


@dataclass(frozen=True)
class AffordanceClass:
    """One class: its name in the paper, its config name, and the words prompts use for it."""

    name: str
    config: str
    phrase: str  # "can a human <phrase> the <object>?", "<object> can be used for <phrase> by human"
    mlm_word: str  # the single word a masked LM scores at [MASK]


CLASSES = (
    AffordanceClass("Grasp", "grasp", "grasp", "grasp"),
    AffordanceClass("Lift", "lift", "lift", "lift"),
    AffordanceClass("Throw", "throw", "throw", "throw"),
    AffordanceClass("Push", "push", "push", "push"),
    AffordanceClass("Fix", "fix", "fix", "fix"),
    AffordanceClass("Ride", "ride", "ride", "ride"),
    AffordanceClass("Play", "play", "play", "play"),
    AffordanceClass("Watch", "watch", "watch", "watch"),
    AffordanceClass("SitOn", "sit_on", "sit on", "sitting"),
    AffordanceClass("Feed", "feed", "feed", "feed"),
    AffordanceClass("Row", "row", "row", "row"),
    AffordanceClass("PourFrom", "pour_from", "pour from", "pouring"),
    AffordanceClass("LookThrough", "look_through", "look through", "looking"),
    AffordanceClass("WriteWith", "write_with", "write with", "writing"),
    AffordanceClass("TypeOn", "type_on", "type on", "typing"),
)
CLASS_NAMES = [c.name for c in CLASSES]
LIKERT = (0, 1, 2, 3)


def binarise(rating: int) -> int:
    """Likert 0-1 -> 0 (cannot), 2-3 -> 1 (can).

    >>> [binarise(r) for r in LIKERT]
    [0, 0, 1, 1]
    """
    return int(rating >= 2)


def agreement_category(agreement: float) -> str:
    """The paper's agreement categories: high (> 0.75), medium (0.4-0.75), low (< 0.4).

    >>> agreement_category(1.0), agreement_category(2 / 3), agreement_category(1 / 3)
    ('high', 'medium', 'low')
    """
    return "high" if agreement > 0.75 else "medium" if agreement >= 0.4 else "low"


def _rating(row: Mapping, name: str, where: str) -> int:
    value = row.get(name)
    try:
        rating = int(value)
    except (TypeError, ValueError):
        raise DataError(f"{where}: column {name!r} must be a Likert rating 0-3, got {value!r}") from None
    if rating not in LIKERT or str(value).strip() not in {str(rating), f"{rating}.0"}:
        raise DataError(f"{where}: column {name!r} must be a Likert rating 0-3, got {value!r}")
    return rating


def aggregate(annotations: Iterable[Mapping], source: str = "annotations") -> list[dict]:
    """Majority-vote labels and agreements per sentence-object pair, from one row per annotator.

    Each returned row has ``sentence``, ``object``, ``labels`` (15 ints), ``agreement`` (15 floats:
    share of annotators voting with the binary majority) and ``likert_agreement`` (15 floats: share
    of annotators giving the most common Likert rating), in order of first appearance. An annotator
    rating the same pair twice is an error naming both lines (a vote would otherwise count twice).
    """
    pairs: dict[tuple[str, str], list[list[int]]] = {}
    first_line: dict[tuple[str, str, str], int] = {}
    for line, row in enumerate(annotations, start=2):
        where = f"{source}: line {line}"
        for field in ("sentence", "object", "annotator"):
            if not str(row.get(field) or "").strip():
                raise DataError(f"{where}: empty {field!r}")
        key = (row["sentence"], row["object"], row["annotator"])
        if key in first_line:
            raise DataError(
                f"{where}: annotator {row['annotator']!r} already rated ({row['sentence']!r}, "
                f"{row['object']!r}) on line {first_line[key]}; keep one rating per annotator and pair"
            )
        first_line[key] = line
        pairs.setdefault((row["sentence"], row["object"]), []).append([_rating(row, c, where) for c in CLASS_NAMES])
    rows = []
    for (sentence, obj), ratings in pairs.items():
        likert = np.array(ratings)  # annotators x classes
        votes = (likert >= 2).astype(int)
        positive = votes.sum(axis=0)
        negative = len(votes) - positive
        if (positive == negative).any():
            tied = CLASS_NAMES[int(np.argmax(positive == negative))]
            raise DataError(f"{source}: ({sentence!r}, {obj!r}) has a tied vote on {tied} ({len(votes)} annotators)")
        modal = [Counter(column).most_common(1)[0][1] for column in likert.T.tolist()]
        rows.append(
            {
                "sentence": sentence,
                "object": obj,
                "labels": (positive > negative).astype(int).tolist(),
                "agreement": (np.maximum(positive, negative) / len(votes)).tolist(),
                "likert_agreement": (np.array(modal) / len(votes)).tolist(),
            }
        )
    return rows


def alpha(annotations: Sequence[Mapping], level: str) -> float | None:
    """Krippendorff's alpha over all (pair, class) units, annotators as coders; None where undefined.

    ``level="nominal"`` on the binarised votes, ``"ordinal"`` on the raw Likert ratings. Alpha is
    undefined when no unit has two ratings (a single annotator) or every rating is the same value.

    >>> rows = [{"sentence": "s", "object": "o", "annotator": a, **{c: 3 for c in CLASS_NAMES}} for a in "ab"]
    >>> alpha(rows, "nominal") is None
    True
    """
    import krippendorff

    units = {}
    coders = sorted({row["annotator"] for row in annotations})
    coder_index = {coder: i for i, coder in enumerate(coders)}
    for row in annotations:
        key = (row["sentence"], row["object"])
        units.setdefault(key, len(units))
    data = np.full((len(coders), len(units) * len(CLASSES)), np.nan)
    for row in annotations:
        start = units[(row["sentence"], row["object"])] * len(CLASSES)
        ratings = [int(row[c]) for c in CLASS_NAMES]
        values = [binarise(r) for r in ratings] if level == "nominal" else ratings
        data[coder_index[row["annotator"]], start : start + len(CLASSES)] = values
    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    if not pairable.any() or len(np.unique(data[:, pairable][~np.isnan(data[:, pairable])])) < 2:
        return None
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def from_release(rows: Iterable[Mapping], source: str) -> list[dict]:
    """Rows of the authors' released table (sentence, object, one 0/1 column per class)."""
    out = []
    for line, row in enumerate(rows, start=2):
        where = f"{source}: line {line}"
        labels = []
        for name in CLASS_NAMES:
            value = str(row.get(name, "")).strip()
            if value not in ("0", "1"):
                raise DataError(f"{where}: column {name!r} must be 0 or 1, got {row.get(name)!r}")
            labels.append(int(value))
        if not str(row.get("Sentence") or "").strip() or not str(row.get("Object") or "").strip():
            raise DataError(f"{where}: empty Sentence or Object")
        out.append({"sentence": row["Sentence"], "object": row["Object"], "labels": labels,
                    "agreement": None, "likert_agreement": None})  # fmt: skip
    return out


UNLABELLED = -1  # a class of a pair the annotators did not agree on (an empty cell of data_high_agreement.tsv)
HIGH_AGREEMENT_CELLS = {"1.0": 1, "0.0": 0, "": UNLABELLED}


def from_high_agreement(rows: Iterable[Mapping], source: str) -> list[dict]:
    """Rows of the released ``data_high_agreement.tsv``: a class cell holds ``1.0`` or ``0.0`` where the
    annotators agreed strongly and is empty where they did not, read as ``UNLABELLED`` (-1), in no comparison.

    >>> row = {"Sentence": "He rode the horse .", "Object": "horse", **{name: "0.0" for name in CLASS_NAMES}}
    >>> from_high_agreement([{**row, "Ride": "1.0", "Row": ""}], "demo")[0]["labels"]
    [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, -1, 0, 0, 0, 0]
    """
    out = []
    for line, row in enumerate(rows, start=2):
        where = f"{source}: line {line}"
        labels = []
        for name in CLASS_NAMES:
            value = str(row.get(name) or "").strip()
            if value not in HIGH_AGREEMENT_CELLS:
                raise DataError(f"{where}: column {name!r} must be 1.0, 0.0 or empty, got {row.get(name)!r}")
            labels.append(HIGH_AGREEMENT_CELLS[value])
        if not str(row.get("Sentence") or "").strip() or not str(row.get("Object") or "").strip():
            raise DataError(f"{where}: empty Sentence or Object")
        out.append({"sentence": row["Sentence"], "object": row["Object"], "labels": labels,
                    "agreement": None, "likert_agreement": None})  # fmt: skip
    return out


def statistics(rows: Sequence[Mapping]) -> dict[str, object]:
    """The paper's Table 3 / Appendix B figures that follow from the labels alone.

    >>> stats = statistics([{"sentence": "s", "object": "o", "labels": [1] * 2 + [0] * 13}])
    >>> stats["pairs"], stats["triples"], stats["max_positives"], stats["avg_objects_per_class"]
    (1, 15, 2, 0.13333333333333333)
    """
    positives = np.array([row["labels"] for row in rows], dtype=int)
    per_class = positives.sum(axis=0)
    per_pair = positives.sum(axis=1)
    seen: dict[tuple[str, str], list[tuple[int, ...]]] = {}
    for row in rows:
        seen.setdefault((row["sentence"], row["object"]), []).append(tuple(row["labels"]))
    return {
        "pairs": len(rows),
        "classes": len(CLASSES),
        "triples": len(rows) * len(CLASSES),
        "instances_annotated": len(rows) * len(CLASSES) * 3,  # Table 3: pairs x classes x three annotators
        "positives": int(per_class.sum()),
        "positives_per_class": dict(zip(CLASS_NAMES, per_class.tolist(), strict=True)),
        "avg_objects_per_class": float(per_class.mean()),
        "most_prominent": (CLASS_NAMES[int(per_class.argmax())], int(per_class.max())),
        "least_prominent": (CLASS_NAMES[int(per_class.argmin())], int(per_class.min())),
        "max_positives": int(per_pair.max()),
        "pairs_with_a_positive": int((per_pair > 0).sum()),
        "pairs_without_a_negative": int((per_pair == len(CLASSES)).sum()),
        "distinct_pairs": len(seen),
        "repeated_pairs": sum(1 for labels in seen.values() if len(labels) > 1),
        "repeated_pairs_with_different_labels": sum(1 for labels in seen.values() if len(set(labels)) > 1),
        "distinct_objects": len({row["object"] for row in rows}),
        "distinct_sentences": len({row["sentence"] for row in rows}),
    }


def per_class(rows: Iterable[Mapping], index: int) -> list[dict]:
    """Long rows of one class: ``sentence``, ``object``, ``affordance``, ``label`` and its agreements."""
    return [
        {
            "sentence": row["sentence"],
            "object": row["object"],
            "affordance": CLASS_NAMES[index],
            "label": row["labels"][index],
            "agreement": None if row["agreement"] is None else row["agreement"][index],
            "likert_agreement": None if row["likert_agreement"] is None else row["likert_agreement"][index],
        }
        for row in rows
    ]
