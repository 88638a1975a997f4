"""The rules of a run folder's record that its types cannot say (the types are ``physprobe.record.run_record``'s
dataclasses, loaded by ``physprobe.util.typed_json``): metrics.json's numbers read by their keys (a fraction within 0-1,
a count whole and at most ``n``), and run.json's texts, counts, times, intervals and hashes in range. Each failure is
one ``RunRecordError`` line naming the file and the field.

>>> check_metrics({"mass": {"accuracy": 0.5, "n": 10}}, "metrics.json")
>>> check_metrics({"mass": {"accuracy": 7.5}}, "metrics.json")
Traceback (most recent call last):
physprobe.errors.RunRecordError: metrics.json: mass.accuracy is 7.5, outside 0-1 for a fraction; score the run again
"""

from __future__ import annotations

import math
import re

from physprobe.errors import RunRecordError
from physprobe.protocols import COUNTS, METHODS
from physprobe.record.options import label_fault

FRACTIONS = {"accuracy", "map", "agreement"}  # words of a key naming a fraction (0-1)
PARTS_OF_N = ("undecided", "unparsed")  # counts of scored questions, so at most ``n``


def _finite(value: int | float) -> bool:
    """Whether a JSON number is finite as a float (an integer of 400 digits is not).

    >>> _finite(10**400), _finite(float("nan")), _finite(3)
    (False, False, True)
    """
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _rule(key: str, inherited: str | None) -> str | None:
    """What a metrics.json number under ``key`` may be: a ``count``, a ``fraction`` (0-1), a ``difference``
    of fractions (-1..1), or None (unchecked); keys naming nothing (a group's name) inherit their parent's.

    >>> _rule("macro_accuracy", None), _rule("n", None), _rule("mass", "difference"), _rule("mass", None)
    ('fraction', 'count', 'difference', None)
    """
    words = set(re.split(r"[_.]", key.lower()))
    if key in COUNTS:
        return "count"
    if "gap" in words:
        return "difference"
    if words & FRACTIONS:
        return "fraction"
    return inherited


def _refuse(where: str, field: str, value, expected: str):
    raise RunRecordError(f"{where}: {field} is {value!r}, {expected}; score the run again")


def check_metrics(metrics, where: str, path: str = "", inherited: str | None = None) -> None:
    """``RunRecordError`` (one line naming ``where`` and the field) for a metrics.json value no scorer writes:
    not finite, a fraction outside 0-1 (a difference outside -1..1), a count that is negative, not whole or
    above 1e12, text or a flag, or anything but numbers, null and objects of them."""
    if not isinstance(metrics, dict):
        raise RunRecordError(
            f"{where}: {path or 'the file'} is {type(metrics).__name__}, expected an object; score the run again"
        )
    for key, value in metrics.items():
        field = f"{path}.{key}" if path else str(key)
        rule = _rule(str(key), inherited)
        if isinstance(value, dict):
            check_metrics(value, where, field, rule)
        elif value is None:
            continue
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            _refuse(where, field, value, "not a number")
        elif not _finite(value):
            raise RunRecordError(f"{where}: {field} is {value}, not a finite number; score the run again")
        elif rule == "count" and (value < 0 or value != int(value) or value > 1e12):
            raise RunRecordError(f"{where}: {field} is {value}, not a count (a whole number from 0 to 1e12); score the run again")
        elif rule == "fraction" and not 0 <= value <= 1:
            raise RunRecordError(f"{where}: {field} is {value}, outside 0-1 for a fraction; score the run again")
        elif rule == "difference" and not -1 <= value <= 1:
            raise RunRecordError(f"{where}: {field} is {value}, outside -1..1 for a difference of fractions; score the run again")
    total = metrics.get("n")
    for part in PARTS_OF_N:  # questions among the n scored
        value = metrics.get(part)
        if isinstance(total, (int, float)) and isinstance(value, (int, float)) and value > total:
            field = f"{path}.{part}" if path else part
            raise RunRecordError(f"{where}: {field} is {value}, more than the {total} questions scored (n); score the run again")


def _line(where: str, field: str, value, optional: bool = False) -> None:
    """One line of printable text (or null where ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, str) or not value or not value.isprintable():
        _refuse(where, field, value, "expected one line of printable text")


def _at_least(where: str, field: str, value, low: float = 0) -> None:
    if value < low:
        _refuse(where, field, value, f"expected at least {low:g}")


def check(record, where: str) -> None:
    """``RunRecordError`` (one line naming ``where`` and the field) for a typed run.json (``RunRecord``) that
    ``write`` never writes: text that is not one printable line where physprobe wrote it (the model's name and the
    system instruction are any text: the report escapes them), a count or time below 0, no configs, a limit below 1,
    a method no protocol has, a template hash that is not one, an interval upside down, more commonest answers than
    answers."""
    spec = record.spec
    if not spec.model:
        _refuse(where, "spec.model", spec.model, "expected the model's name")
    for field in ("benchmark", "protocol", "backend", "family", "sends"):
        _line(where, f"spec.{field}", getattr(spec, field))
    _line(where, "started", record.started)
    if label_fault(spec.label):
        _refuse(where, "spec.label", spec.label, label_fault(spec.label))
    if spec.method not in METHODS:
        _refuse(where, "spec.method", spec.method, f"expected one of {', '.join(METHODS)}")
    if not spec.configs or not all(c and c.isprintable() for c in spec.configs):
        _refuse(where, "spec.configs", list(spec.configs), "expected a list of config names")
    if spec.limit is not None:
        _at_least(where, "spec.limit", spec.limit, 1)
    for field in ("bootstrap_iters", "chunk", "processes"):
        _at_least(where, f"spec.{field}", getattr(spec, field), 0 if field == "bootstrap_iters" else 1)
    _line(where, "backend.name", record.backend.get("name"))
    _line(where, "backend.gguf_file", record.backend.get("gguf_file"), optional=True)
    sent = record.backend.get("requests_sent", 0)  # a server backend's count of HTTP requests
    if isinstance(sent, bool) or not isinstance(sent, int) or sent < 0:
        _refuse(where, "backend.requests_sent", sent, "expected a whole number from 0")
    if record.chat is not None:
        _line(where, "chat.template", record.chat.template, optional=True)
        sha = record.chat.template_sha256
        if sha is not None and not (len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
            _refuse(where, "chat.template_sha256", sha, "expected a sha256 in hex or null")
    _at_least(where, "scored_now", record.scored_now)
    for field in ("load_model_s", "total_s"):
        _at_least(where, f"timings.{field}", getattr(record.timings, field))
    for config, seconds in record.timings.configs_s.items():
        _at_least(where, f"timings.configs_s.{config}", seconds)
    _at_least(where, "bootstrap.iterations", record.bootstrap.iterations)
    _check_spreads(where, record.bootstrap.figures)
    for config, found in record.baselines.items():
        field = f"baselines.{config}"
        for name in ("majority_answer", "commonest_answer", "answered", "commonest"):
            if getattr(found, name) is not None:
                _at_least(where, f"{field}.{name}", getattr(found, name))
        if found.commonest > found.answered:
            _refuse(where, f"{field}.commonest", found.commonest, f"expected at most answered ({found.answered})")
        for part in ("majority", "constant", "chance"):
            check_metrics(getattr(found, part), where, f"{field}.{part}")


def _check_spreads(where: str, figures: dict) -> None:
    """Each bootstrap figure a ``{"stderr", "ci95"}`` object: a standard error from 0 and an interval [low, high]."""
    for config, by_figure in figures.items():
        for figure, spread in by_figure.items():
            field = f"bootstrap.figures.{config}.{figure}"
            if not isinstance(spread, dict) or set(spread) != {"stderr", "ci95"}:
                _refuse(where, field, spread, "expected an object of stderr and ci95")
            stderr, interval = spread["stderr"], spread["ci95"]
            if isinstance(stderr, bool) or not isinstance(stderr, (int, float)) or stderr < 0:
                _refuse(where, f"{field}.stderr", stderr, "expected a finite number from 0")
            if (not isinstance(interval, list) or len(interval) != 2
                    or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in interval)
                    or interval[0] > interval[1]):  # fmt: skip
                _refuse(where, f"{field}.ci95", interval, "expected [low, high]")
