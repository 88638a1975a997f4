"""The constrained field types of a run's record (spec.json, run.json, predictions.parquet's lines) and the one line a
value outside them gives: the record's types are pydantic dataclasses whose fields say their rules, so that reading,
writing and the published JSON Schema hold the same ones.

>>> from pydantic import TypeAdapter, ValidationError
>>> try:
...     TypeAdapter(Sha256).validate_python("abc")
... except ValidationError as error:
...     print(one_line(error, "run.json", "chat.template_sha256"))
run.json: chat.template_sha256 is 'abc', expected a sha256 in hex; score the run again
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, ValidationError

# Every record type's configuration: no field it does not declare, no number that is not finite, its instances frozen.
RECORD = ConfigDict(extra="forbid", allow_inf_nan=False)


def _one_line_of_text(text: str) -> str:
    if not text.isprintable():
        raise ValueError("expected one line of printable text")
    return text


def _a_name(text: str) -> str:
    if not text:
        raise ValueError("expected the model's name")
    return text


OneLine = Annotated[str, StringConstraints(min_length=1), AfterValidator(_one_line_of_text)]  # written by physprobe
ModelName = Annotated[str, AfterValidator(_a_name)]  # a model's name as given (any text: the report escapes it)
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0)]
AtLeastOne = Annotated[int, Field(ge=1)]

EXPECTED = {  # pydantic's error types, as a record's reader says them
    "bool_type": "expected true or false", "int_type": "expected a whole number", "int_from_float": "expected a whole number",
    "float_type": "expected a number", "finite_number": "expected a finite number", "string_type": "expected text",
    "list_type": "expected a list", "tuple_type": "expected a list", "dict_type": "expected an object",
    "dataclass_type": "expected an object", "dataclass_exact_type": "expected an object", "missing": "missing",
    "unexpected_keyword_argument": "not a field physprobe writes here", "extra_forbidden": "not a field physprobe writes here",
    "string_too_short": "expected one line of printable text", "string_pattern_mismatch": "expected a sha256 in hex",
}  # fmt: skip


def fault(first: dict, prefix: str = "") -> str:
    """One of pydantic's errors (``ValidationError.errors()``' items) as the words of a line: the field's dotted path
    (under ``prefix``), its value and what was expected (a field's own rule says its words)."""
    path = ".".join(str(part) for part in (prefix, *first["loc"]) if part != "") or "the file"
    kind, value = first["type"], first.get("input")
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    if kind in ("missing", "unexpected_keyword_argument", "extra_forbidden"):
        return f"{path} is {EXPECTED[kind]}"
    if kind == "greater_than_equal" and isinstance(value, int):
        expected = f"expected a whole number from {first['ctx']['ge']}"
    elif kind in ("greater_than_equal", "less_than_equal"):
        expected = f"expected {'at least' if kind == 'greater_than_equal' else 'at most'} {next(iter(first['ctx'].values()))}"
    elif kind == "literal_error":
        expected = f"expected one of {first['ctx']['expected']}"
    else:
        expected = EXPECTED.get(kind) or first["msg"].removeprefix("Value error, ")
    return f"{path} is {shown}, {expected}"


def one_line(error: ValidationError, where: str, prefix: str = "") -> str:
    """The first fault of a pydantic ``error`` as one line naming ``where`` and the field (``fault``)."""
    return f"{where}: {fault(error.errors(include_url=False)[0], prefix)}; score the run again"
