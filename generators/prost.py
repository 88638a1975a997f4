"""PROST questions from the upstream CheckList-syntax YAML templates.

Each template (one entry of a YAML file's ``configs``) has ``name``, ``context``, ``question``,
``ex_question``, ``choices`` (A-D) and ``expect_fn``, the rule giving the correct option.
Expanding every template over the lexicons (distinct fills only) gives the 18,736 questions of
the published benchmark, ordered as the upstream builder orders them (by the JSON text of the
row) and numbered by ``example_idx`` in that order.

>>> lexicons = {"mass_obj": ["leaf", "coin", "egg"]}
>>> template = {"name": "mass_1_a", "context": "{a:mass_obj1} and {a:mass_obj2} fall.",
...             "question": "The [MASK] is heavier.", "ex_question": "Which is heavier?",
...             "choices": {"A": "{mass_obj1}", "B": "{mass_obj2}", "C": "x", "D": "y"},
...             "expect_fn": "pick_ranked_filtered_max"}
>>> rows = generate([template], lexicons)
>>> len(rows), rows[0]["context"], rows[0]["label"], rows[0]["group"]
(6, 'A coin and an egg fall.', 1, 'mass')
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from physprobe.data.templates import expand, lexicon_name
from physprobe.errors import DataError, TemplateError

OPTIONS = ("A", "B", "C", "D")
TEMPLATE_FIELDS = ("name", "context", "question", "ex_question", "choices", "expect_fn")


def concept(name: str) -> str:
    """The concept (the dataset's ``group``) of a template name, as upstream derives it.

    >>> concept("nonstacking_3"), concept("mass_2_b"), concept("directions_1")
    ('stacking', 'mass', 'directions')
    """
    return name.split("_")[0].replace("non", "")


def superlative_pair(name: str) -> tuple[str | None, bool]:
    """The superlative-inverse pair of a template name, and whether it is the inverted side.

    Attribute templates pair ``X_a`` with ``X_b`` (e.g. heaviest/lightest); affordance templates
    pair ``stacking_k`` with ``nonstacking_k`` (easiest/hardest). The paper's Table 7 compares
    the accuracies of the two sides. Directions have no inverse: their pair is None.

    >>> superlative_pair("mass_1_b"), superlative_pair("nonrolling_2"), superlative_pair("rolling_2")
    (('mass_1', True), ('rolling_2', True), ('rolling_2', False))
    >>> superlative_pair("directions_2_a")
    (None, False)
    """
    head, _, side = name.rpartition("_")
    if concept(name) == "directions":
        return None, False
    if side in ("a", "b"):
        return head, side == "b"
    return name.removeprefix("non"), name.startswith("non")


# --- answer rules, keyed by the templates' ``expect_fn`` -------------------------------------
# Each takes the filled options (A-D), the slot fills, and the lexicons, and returns 0-3.
AnswerRule = Callable[[Sequence[str], Mapping[str, str], Mapping[str, Sequence[str]]], int]


def _constant(label: int) -> AnswerRule:
    return lambda options, fills, lexicons: label


def _turning(options, fills, lexicons) -> int:
    """Heading after a turn: compass index plus turn index plus one (right=0, around=1, left=2)."""
    return (lexicons["coord"].index(fills["coord"]) + lexicons["turn"].index(fills["turn"]) + 1) % 4


def _option_slots(options, fills) -> list[str]:
    by_value = {value: slot for slot, value in fills.items()}
    missing = [option for option in options if option not in by_value]
    if missing:
        raise TemplateError(f"options {missing} are not filled from a template slot")
    return [by_value[option] for option in options]


def _ranked(pick: Callable[[list[int]], int], first_n: int = 4) -> AnswerRule:
    """Rank the first ``first_n`` options by their position in their lexicon (its order is the ranking)."""

    def rule(options, fills, lexicons) -> int:
        slots = _option_slots(options[:first_n], fills)
        ranks = [lexicons[lexicon_name(slot)].index(fills[slot]) for slot in slots]
        return ranks.index(pick(ranks))

    return rule


def _odd_one_out(options, fills, lexicons) -> int:
    """The one option drawn from a lexicon no other option is drawn from."""
    sources = [lexicon_name(slot) for slot in _option_slots(options, fills)]
    counts = Counter(sources)
    singles = [index for index, source in enumerate(sources) if counts[source] == 1]
    if len(singles) != 1:
        raise TemplateError(f"odd one out needs exactly one option from its own lexicon, got lexicons {sources}")
    return singles[0]


ANSWER_RULES: dict[str, AnswerRule] = {
    "constant_a": _constant(0),
    "constant_b": _constant(1),
    "constant_c": _constant(2),
    "constant_d": _constant(3),
    "turning": _turning,
    "pick_ranked_min": _ranked(min),
    "pick_ranked_max": _ranked(max),
    # "filtered": the context names only the first two objects, so only A and B compete.
    "pick_ranked_filtered_min": _ranked(min, first_n=2),
    "pick_ranked_filtered_max": _ranked(max, first_n=2),
    "pick_odd_one_out": _odd_one_out,
}


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def validate_template(template: Mapping, where: str) -> None:
    """Raise ``DataError``/``TemplateError`` naming ``where`` if a template entry is malformed."""
    if not isinstance(template, Mapping):
        raise DataError(f"{where}: template must be a mapping, got {type(template).__name__}")
    missing = [field for field in TEMPLATE_FIELDS if field not in template]
    if missing:
        raise DataError(f"{where}: template {template.get('name', '?')!r} lacks field(s) {', '.join(missing)}")
    if not isinstance(template["choices"], Mapping) or sorted(template["choices"]) != list(OPTIONS):
        raise DataError(f"{where}: template {template['name']!r} must have choices A, B, C and D")
    if template["expect_fn"] not in ANSWER_RULES:
        raise TemplateError(
            f"{where}: template {template['name']!r} has unknown answer rule expect_fn={template['expect_fn']!r} "
            f"(known: {', '.join(ANSWER_RULES)})"
        )


def questions(template: Mapping, lexicons: Mapping[str, Sequence[str]]) -> list[dict]:
    """All questions of one template, unordered, without ``group``/``example_idx``."""
    rule = ANSWER_RULES[template["expect_fn"]]
    text = {field: template[field] for field in ("name", "context", "question", "ex_question")}
    text.update(template["choices"])
    try:
        expansions = expand(text, lexicons)
    except TemplateError as error:
        raise TemplateError(f"template {template['name']!r}: {error}") from None
    rows = []
    for expansion in expansions:
        row = dict(expansion.data)
        for field in ("context", "question", "ex_question"):
            row[field] = _capitalised(row[field])
        try:
            row["label"] = rule([row[option] for option in OPTIONS], expansion.meta, lexicons)
        except TemplateError as error:
            raise TemplateError(f"template {template['name']!r}: {error}") from None
        rows.append(row)
    return rows


def order(rows: list[dict]) -> list[dict]:
    """Put questions in upstream order and add ``group`` and ``example_idx``.

    Upstream sorts the rows by their JSON text (keys sorted) to make the order hermetic;
    doing the same here reproduces the published ``example_idx``.
    """
    rows = sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))
    for index, row in enumerate(rows):
        row["group"] = concept(row["name"])
        row["example_idx"] = index
    return rows


def generate(templates: Sequence[Mapping], lexicons: Mapping[str, Sequence[str]]) -> list[dict]:
    """Every question of every template, in upstream order, with ``group`` and ``example_idx``."""
    for index, template in enumerate(templates):
        validate_template(template, f"template #{index}")
    return order([row for template in templates for row in questions(template, lexicons)])
