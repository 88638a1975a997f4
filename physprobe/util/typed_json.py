"""Frozen dataclasses to JSON and back, checked against their own type hints: the one loader of every typed file
physprobe writes and reads (a run's spec.json and run.json), so their schema is the dataclasses themselves.

``dump`` gives JSON-ready data (tuples as lists; a field marked ``TRANSIENT`` is left out); ``load(cls, data, where)`` builds ``cls`` from such data, every
field checked against its hint (``str``, ``int``, ``float``, ``bool``, ``None``, unions, ``tuple[X, ...]``,
``tuple[X, Y]``, ``list[X]``, ``dict[str, X]``, ``dict`` and ``object`` for any JSON value, nested dataclasses), and
refuses, in one ``TypedJSONError`` line naming ``where`` and the field's path, a missing or unknown field, a value of
another type, or a number that is not finite. Rules a type cannot say (a fraction within 0-1) are the caller's.

Written by hand: pydantic or msgspec would do it, at the price of a dependency for ~100 lines; the schema stays
the dataclasses either way.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Point:
...     x: float
...     label: str | None = None
>>> load(Point, dump(Point(1.5)), "point.json")
Point(x=1.5, label=None)
>>> load(Point, {"x": "1.5", "label": None}, "point.json")
Traceback (most recent call last):
physprobe.util.typed_json.TypedJSONError: point.json: x is '1.5', expected a number
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing

from physprobe.errors import PhysprobeError

TRANSIENT = "physprobe.transient"  # a field's metadata key: what lives in this process only, never written
# A field's metadata key: written only where it differs from its default (an opt-in added later, so that a file of a run
# that does not use it reads, and is written, as before).
OMITTED_AT_DEFAULT = "physprobe.omitted_at_default"


class TypedJSONError(PhysprobeError):
    """JSON that is not a value of the dataclass it is read as (the message names the file and the field)."""


def dump(value):
    """``value`` (dataclasses, tuples, lists, dicts, scalars) as JSON-ready data: dataclasses as objects of their
    fields (a field marked ``OMITTED_AT_DEFAULT`` only where it differs from its default), tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: dump(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not f.metadata.get(TRANSIENT) and not (f.metadata.get(OMITTED_AT_DEFAULT) and getattr(value, f.name) == f.default)}  # fmt: skip
    if isinstance(value, dict):
        return {key: dump(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [dump(item) for item in value]
    return value


def load(cls: type, data, where: str, path: str = ""):
    """An instance of the dataclass ``cls`` from JSON ``data``, every field checked against its type hint."""
    return _as(cls, data, where, path)


def _fail(where: str, path: str, value, expected: str):
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    raise TypedJSONError(f"{where}: {path or 'the file'} is {shown}, expected {expected}")


def _number(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer of 400 digits
        return False


def _json(value) -> bool:
    """Whether ``value`` is plain JSON (objects with text keys, arrays, text, finite numbers, true, false, null)."""
    if value is None or isinstance(value, (str, bool)):
        return True
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, list):
        return all(map(_json, value))
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json(v) for k, v in value.items())
    return False


def _as(hint, value, where: str, path: str):
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return _dataclass(hint, value, where, path)
    if origin in (typing.Union, types.UnionType):
        present = [option for option in args if option is not type(None)]
        if value is not None and len(present) == 1:  # an optional value that is there: its own type's message
            return _as(present[0], value, where, path)
        for option in args:
            try:
                return _as(option, value, where, path)
            except TypedJSONError:
                continue
        _fail(where, path, value, " or ".join(_name(option) for option in args))
    if hint is type(None) or hint is None:
        return value if value is None else _fail(where, path, value, "null")
    if hint is bool:
        return value if isinstance(value, bool) else _fail(where, path, value, "true or false")
    if hint is int:
        return value if _number(value) and isinstance(value, int) else _fail(where, path, value, "a whole number")
    if hint is float:
        return float(value) if _number(value) else _fail(where, path, value, "a number")
    if hint is str:
        return value if isinstance(value, str) else _fail(where, path, value, "text")
    if hint in (object, typing.Any) or (hint is dict and not args):
        if hint is dict and not isinstance(value, dict):
            _fail(where, path, value, "an object")
        return value if _json(value) else _fail(where, path, value, "plain JSON")
    if origin in (list, tuple):
        if not isinstance(value, list):
            _fail(where, path, value, "a list")
        if origin is tuple and args and args[-1] is not Ellipsis:  # a fixed-length tuple
            if len(value) != len(args):
                _fail(where, path, value, f"a list of {len(args)}")
            return tuple(_as(a, v, where, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
        items = [_as(args[0] if args else object, v, where, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            _fail(where, path, value, "an object")
        return {k: _as(args[1], v, where, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    raise TypeError(f"{where}: no JSON reading of the type {hint!r} ({path})")


def _dataclass(cls, value, where: str, path: str):
    if not isinstance(value, dict):
        _fail(where, path, value, "an object")
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init and not f.metadata.get(TRANSIENT)]
    known = {f.name for f in fields}
    unknown = sorted(set(value) - known)
    if unknown:
        raise TypedJSONError(f"{where}: {path + '.' if path else ''}{unknown[0]} is not a field physprobe writes here")
    kwargs = {}
    for f in fields:
        field_path = f"{path}.{f.name}" if path else f.name
        if f.name not in value:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise TypedJSONError(f"{where}: {field_path} is missing")
            continue
        kwargs[f.name] = _as(hints[f.name], value[f.name], where, field_path)
    return cls(**kwargs)


def _name(hint) -> str:
    if hint is type(None):
        return "null"
    return getattr(hint, "__name__", str(hint))
