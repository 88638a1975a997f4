"""Checks that stop ``physprobe score`` from turning input that cannot give a number into one: a tokenizer that
encodes nothing, non-finite scores and gold labels that name no option. Each failure is one line naming the config and row (``ScoringError`` for what a
model gave, ``DataError`` for the data, ``ModelLoadError`` for a tokenizer), or a bool.

>>> from physprobe.protocols.results import Answer, Scores
>>> finite_scores([Scores((0.5, -1.0)), Answer("a text")], "mass", [3, 9])
>>> finite_scores([Scores((0.5, float("nan")))], "mass", [3])
Traceback (most recent call last):
physprobe.errors.ScoringError: config mass row 3: the model gave a non-finite score (nan) (in float16 this is usually an overflow); score again with --dtype float32 or bfloat16
"""

from __future__ import annotations

from physprobe.errors import DataError, ModelLoadError, ScoringError


def finite_scores(results: list, config: str, rows: list[int]) -> None:
    """``ScoringError`` naming the first row whose result (``physprobe.protocols.results``) holds NaN or infinity (never
    scored as an option)."""
    for result, row in zip(results, rows, strict=True):
        bad = result.not_finite()
        if bad is not None:
            raise ScoringError(f"config {config} row {row}: the model gave a non-finite score ({bad}) (in float16 this is "
                            "usually an overflow); score again with --dtype float32 or bfloat16")  # fmt: skip


def references(reference, rows: list[dict], options: list[int], config: str, indices: list[int]) -> None:
    """``DataError`` naming the first row whose gold answer (``reference(row)``: option indices) is not an
    integer index among the row's ``options`` choices.

    >>> ref = lambda row: [int(row["label"])]
    >>> references(ref, [{"label": 1}], [4], "mass", [0])
    >>> references(ref, [{"label": 7}], [4], "mass", [5])
    Traceback (most recent call last):
    physprobe.errors.DataError: config mass row 5: the gold answer 7 is not one of the row's 4 options (0-3); fix or rebuild the data
    >>> references(ref, [{"label": "A"}], [4], "mass", [0])
    Traceback (most recent call last):
    physprobe.errors.DataError: config mass row 0: the gold answer is not an option index ('A'); fix or rebuild the data
    """
    for row, count, index in zip(rows, options, indices, strict=True):
        try:
            gold = reference(row)
        except (TypeError, ValueError, KeyError):
            raise DataError(f"config {config} row {index}: the gold answer is not an option index "
                            f"({row.get('label', row.get('labels'))!r}); fix or rebuild the data") from None  # fmt: skip
        for value in gold:
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
                raise DataError(f"config {config} row {index}: the gold answer {value!r} is not one of the row's "
                                f"{count} options (0-{count - 1}); fix or rebuild the data")  # fmt: skip


def usable_tokenizer(tokenizer, model: str) -> None:
    """``ModelLoadError`` for a tokenizer that cannot tell texts apart (e.g. a model folder without tokenizer
    files, where transformers builds an empty one): it must give different ids for different words."""
    try:
        ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in ("The coin is heavier.", "An egg falls.")]
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        raise ModelLoadError(
            f"{model}: its tokenizer cannot encode text ({error}); add the tokenizer files to the model folder"
        ) from None
    if not all(ids) or ids[0] == ids[1] or len(set(ids[0])) < 2:
        raise ModelLoadError(f"{model}: its tokenizer encodes every text alike (vocabulary of {len(tokenizer)}); "
                        "add the model's tokenizer files (tokenizer.json or vocab files) to its folder")  # fmt: skip
