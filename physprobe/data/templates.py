"""Expansion of CheckList-syntax templates, without depending on the ``checklist`` package.

Templates are plain strings (or lists/dicts of strings) with ``{key}`` slots, as in
``checklist.editor.Editor().template``:

- ``{key}`` is filled from the lexicon ``key``;
- ``{a:key}`` / ``{an:key}`` put "a" or "an" (chosen from the filled word) before the fill;
- numbered copies ``{key1}``, ``{key2}`` ... draw from the lexicon ``key``;
- all slots are expanded as a Cartesian product, and with ``remove_duplicates`` every fill
  in which two slots received the same value is dropped (so numbered copies are distinct draws);
- each expanded item comes with ``meta``: the value of every slot.

Why not use checklist itself: checklist 0.0.11 (2021) cannot be installed with pip's default
build isolation and pulls Jupyter, IPython<9 and setuptools<81 at import time (about 1 GB),
all for some 60 lines of string formatting. The PROST authors re-implemented the same
formatting for their own datasets builder. ``tests/test_templates.py`` checks this module
against ``checklist`` on every template in the project.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from physprobe.errors import TemplateError

_SLOT = re.compile(r"\{(?:(?P<option>[^{}:]+):)?(?P<slot>[^{}:]+)\}")
_NUMBER_SUFFIX = re.compile(r"\d+$")

Template = str | Sequence[Any] | Mapping[str, Any]


@dataclass(frozen=True)
class Expansion:
    """One filled template: ``data`` has the template's shape, ``meta`` maps slot to value."""

    data: Any
    meta: dict[str, str]


def article(word: str) -> str:
    """The English indefinite article CheckList puts before ``word``.

    >>> article("egg"), article("microwave")
    ('an', 'a')
    """
    return "an" if word[:1].lower() in "aeiou" else "a"


def lexicon_name(slot: str) -> str:
    """The lexicon a slot draws from: the slot name without its copy number.

    >>> lexicon_name("mass_obj3")
    'mass_obj'
    """
    return _NUMBER_SUFFIX.sub("", slot)


def _strings(template: Template) -> Iterator[str]:
    if isinstance(template, str):
        yield template
    elif isinstance(template, Mapping):
        for value in template.values():
            yield from _strings(value)
    elif isinstance(template, Sequence):
        for value in template:
            yield from _strings(value)
    else:
        raise TemplateError(f"template leaves must be strings, got {type(template).__name__}: {template!r}")


def slots(template: Template) -> list[str]:
    """Slot names of a template, in order of first appearance.

    >>> slots({"context": "{a:obj1} and {obj2}", "A": "{obj1}"})
    ['obj1', 'obj2']
    """
    found: dict[str, None] = {}
    for text in _strings(template):
        _check_braces(text)
        for match in _SLOT.finditer(text):
            found.setdefault(match["slot"], None)
    return list(found)


def _check_braces(text: str) -> None:
    leftover = _SLOT.sub("", text)
    if "{" in leftover or "}" in leftover:
        raise TemplateError(f"unbalanced or malformed slot in template text {text!r}")


def fill(template: Template, mapping: Mapping[str, str], articles: Mapping[str, str] | None = None) -> Any:
    """Fill every slot of ``template`` from ``mapping`` (slot name to value).

    ``articles`` lists words whose article departs from CheckList's vowel rule (as a data
    release may have it); CheckList itself has no such exceptions.

    >>> fill("{a:obj1} hits {an:obj2}.", {"obj1": "egg", "obj2": "brick"})
    'an egg hits a brick.'
    >>> fill("{a:obj}", {"obj": "key"}, articles={"key": "an"})
    'an key'
    """

    def substitute(match: re.Match) -> str:
        slot = match["slot"]
        if slot not in mapping:
            raise TemplateError(f"no value for slot {{{slot}}}")
        value = mapping[slot]
        if match["option"] is not None and "a" in match["option"]:
            chosen = articles.get(value) if articles else None
            return f"{chosen or article(value)} {value}"
        return value

    if isinstance(template, str):
        return _SLOT.sub(substitute, template)
    if isinstance(template, Mapping):
        return {key: fill(value, mapping, articles) for key, value in template.items()}
    if isinstance(template, tuple):
        return tuple(fill(value, mapping, articles) for value in template)
    return [fill(value, mapping, articles) for value in template]


def expand(template: Template, lexicons: Mapping[str, Sequence[str]], *, remove_duplicates: bool = True) -> list[Expansion]:
    """Expand ``template`` over the product of its slots' lexicons.

    Slots vary in order of first appearance, the last slot fastest. With
    ``remove_duplicates`` (the default, as PROST builds its data), fills that give two slots
    the same value are skipped.

    >>> rows = expand("{a:fruit1} or {a:fruit2}", {"fruit": ["apple", "pear", "fig"]})
    >>> [row.data for row in rows]
    ['an apple or a pear', 'an apple or a fig', 'a pear or an apple', 'a pear or a fig', 'a fig or an apple', 'a fig or a pear']
    >>> rows[0].meta
    {'fruit1': 'apple', 'fruit2': 'pear'}
    """
    names = slots(template)
    missing = sorted({lexicon_name(name) for name in names} - set(lexicons))
    if missing:
        raise TemplateError(f"no lexicon for template key(s) {', '.join(missing)}")
    choices = [lexicons[lexicon_name(name)] for name in names]
    expansions = []
    for values in itertools.product(*choices):
        if remove_duplicates and len(set(values)) != len(values):
            continue
        meta = dict(zip(names, values, strict=True))
        expansions.append(Expansion(fill(template, meta), meta))
    return expansions
