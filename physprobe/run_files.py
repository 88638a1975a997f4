"""A ``physprobe score`` run folder: who owns it, how its results are written (together, in one swap) and
the schema ``physprobe report`` checks its run.json and metrics.json against.

A run folder belongs to one model (its name, or a local folder's absolute path) on one benchmark
(``owner``): a second model whose default folder has the same name (``--model A/gpt2`` then ``B/gpt2``:
``runs/gpt2-prost``) is refused with a one-line error suggesting ``--out``. ``write`` swaps
``predictions.parquet``, ``metrics.json`` and ``run.json`` in together (``paths.staged``, the cache and
lock kept), so a kill never leaves files of two runs side by side.

>>> check_metrics({"mass": {"accuracy": 0.5, "n": 10}}, "metrics.json")
>>> check_metrics({"mass": {"accuracy": 7.5}}, "metrics.json")
Traceback (most recent call last):
physprobe.errors.DataError: metrics.json: mass.accuracy is 7.5, outside 0-1 for a fraction; score the run again
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from physprobe.errors import DataError
from physprobe.paths import Owner, check_folder_name, claim, staged

RESULTS = ("predictions.parquet", "metrics.json", "run.json")


def owner(model: str, benchmark: str, local: bool) -> Owner:
    """The owner of a run folder: the model (a local folder by its absolute path) and the benchmark.

    >>> owner("A/gpt2", "prost", local=False).describe()
    'a run of benchmark prost, model A/gpt2'
    """
    return Owner("run", {"model": os.path.abspath(model) if local else model, "benchmark": benchmark})


def open_folder(out: Path, model: str, benchmark: str, local: bool) -> Path:
    """Claim the run folder ``out`` for ``model`` on ``benchmark`` (``paths.claim``): created and marked if
    new; a folder of another model, benchmark or program is a one-line error naming it."""
    check_folder_name(Path(os.path.abspath(out)).name, "--out")
    return claim(out, owner(model, benchmark, local))


def write(out: Path, model: str, benchmark: str, local: bool, predictions, metrics: dict, info: dict) -> None:
    """Replace the run folder's results as one: ``predictions`` (a pyarrow table), metrics.json, run.json."""
    import pyarrow.parquet as pq

    with staged(out, owner(model, benchmark, local), carry=True) as staging:
        pq.write_table(predictions, staging / "predictions.parquet")
        for name, data in (("metrics.json", metrics), ("run.json", info)):
            (staging / name).write_text(json.dumps(data, indent=2, sort_keys=True, default=str))


# --- the schema report reads ------------------------------------------------------------------------------

COUNTS = ("n", "undecided", "unparsed", "excluded")
FRACTIONS = {"accuracy", "map", "agreement"}  # words of a key naming a fraction (0-1)


def _rule(key: str, inherited: str | None) -> str | None:
    """What a metrics.json number under ``key`` may be: a ``count``, a ``fraction`` (0-1), a ``difference``
    of fractions (-1..1), or None (unchecked); keys naming nothing (a group's name) inherit their parent's.

    >>> _rule("macro_accuracy", None), _rule("n", None), _rule("mass", "difference"), _rule("mass", None)
    ('fraction', 'count', 'difference', None)
    """
    words = set(key.lower().split("_"))
    if key in COUNTS:
        return "count"
    if "gap" in words:
        return "difference"
    if words & FRACTIONS:
        return "fraction"
    return inherited


def check_metrics(metrics, where: str, path: str = "", inherited: str | None = None) -> None:
    """``DataError`` (one line naming ``where`` and the field) for a metrics.json value no scorer writes: not
    finite, a fraction outside 0-1 (a difference outside -1..1), a count that is negative, not whole or
    above 1e12, text or a flag where a number belongs, or anything but numbers, text, flags (a config's chat
    setting), null and objects of them."""
    if not isinstance(metrics, dict):
        raise DataError(f"{where}: {path or 'the file'} is {type(metrics).__name__}, expected an object; score the run again")
    for key, value in metrics.items():
        field = f"{path}.{key}" if path else str(key)
        rule = _rule(str(key), inherited)
        if isinstance(value, dict):
            check_metrics(value, where, field, rule)
        elif value is None or (rule is None and (isinstance(value, bool) or isinstance(value, str) and value.isprintable())):
            continue
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DataError(f"{where}: {field} is {value!r}, not a number; score the run again")
        elif not math.isfinite(value):
            raise DataError(f"{where}: {field} is {value}, not a finite number; score the run again")
        elif rule == "count" and (value < 0 or value != int(value) or value > 1e12):
            raise DataError(f"{where}: {field} is {value}, not a count (a whole number from 0 to 1e12); score the run again")
        elif rule == "fraction" and not 0 <= value <= 1:
            raise DataError(f"{where}: {field} is {value}, outside 0-1 for a fraction; score the run again")
        elif rule == "difference" and not -1 <= value <= 1:
            raise DataError(f"{where}: {field} is {value}, outside -1..1 for a difference of fractions; score the run again")


def check_info(info: dict, where: str) -> None:
    """``DataError`` (one line naming ``where`` and the field) for a run.json the report cannot print
    faithfully: text fields that are not one printable line, ``configs`` not a list of names, a ``limit``
    that is not a positive whole number.

    >>> check_info({"model": "gpt2", "benchmark": "prost", "method": "causal", "configs": ["mass"]}, "run.json")
    >>> check_info({"model": "gpt2", "benchmark": "prost", "method": "causal", "configs": "default"}, "run.json")
    Traceback (most recent call last):
    physprobe.errors.DataError: run.json: configs is 'default', expected a list of config names; score the run again
    """
    for field in ("model", "benchmark", "method", "protocol", "dtype", "gguf_file"):
        value = info.get(field)
        if value is None:  # absent: report says what it lacks where it needs it
            continue
        if not isinstance(value, str) or not value or not value.isprintable():
            raise DataError(f"{where}: {field} is {value!r}, expected one line of printable text; score the run again")
    configs = info.get("configs")
    if configs is not None and (not isinstance(configs, list) or not all(isinstance(c, str) and c.isprintable() and c for c in configs)):
        raise DataError(f"{where}: configs is {configs!r}, expected a list of config names; score the run again")
    limit = info.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise DataError(f"{where}: limit is {limit!r}, expected a whole number of at least 1 or null; score the run again")


def check_run(folder: Path, info: dict, metrics: dict) -> None:
    """Both files of a run folder against the schema (``check_info``, ``check_metrics``); the hook
    ``physprobe report`` calls on every run it loads."""
    check_info(info, str(folder / "run.json"))
    check_metrics(metrics, str(folder / "metrics.json"))
