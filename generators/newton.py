"""NEWTON: the object-attribute repository, Track 1, and the condition-statement pipeline behind Tracks 2-3.

The repository (``confident_questions.csv``) holds one row per object-attribute pair: a 3-point Likert
majority kept only at its extremes (1 = low, 3 = high) and the share of annotators who gave it. A
condition statement ``{attribute, polarity, padding}`` (paper, Section 3.3) selects positives — objects
with that polarity — and ``padding`` distractors of the opposite polarity; filling a template with one
positive and the distractors gives a question with exactly one correct option.

>>> repo = Repository([Entry("sponge", "Softness", "high", 1.0), Entry("rock", "Softness", "low", 0.75),
...                    Entry("brick", "Softness", "low", 1.0), Entry("spoon", "Softness", "low", 1.0),
...                    Entry("pebble", "Softness", "low", 1.0)])
>>> spec = Spec("soft", "", "Which of {object1}, {object2}, {object3}, {object4} is soft?",
...             (Condition("Softness", "high", 3),))
>>> questions = list(challenge_set(repo, spec, seed=0))
>>> len(questions), questions[0]["answer"], sorted(questions[0]["choices"])
(4, 'sponge', ['brick', 'pebble', 'rock', 'sponge'])
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from physprobe.data.templates import fill, slots
from physprobe.errors import DataError

ATTRIBUTES = {  # upstream attribute name -> phrase in Track 2 questions (paper Table 1)
    "Elasticity": "elastic",
    "Stiffness": "stiff",
    "Surface smoothness": "smooth",
    "Surface Hardness": "hard on the surface",
    "Softness": "soft",
    "Brittleness": "brittle",
    "Malleability": "malleable",
    "Sharpness": "sharp",
}
POLARITIES = ("low", "high")
NAME_STYLES = ("upstream", "natural")  # object names as the upstream generator writes them, or with spaces
LIKERT_POLARITY = {1.0: "low", 3.0: "high"}
DISTRACTOR_RULES = ("all", "any")


@dataclass(frozen=True)
class Entry:
    """One object-attribute pair of the repository."""

    object: str
    attribute: str
    polarity: str
    agreement: float


class Repository:
    """The object-attribute repository, indexed for filtering by condition."""

    def __init__(self, entries: Iterable[Entry]):
        self.entries = list(entries)
        self.polarity: dict[str, dict[str, str]] = defaultdict(dict)  # object -> attribute -> polarity
        for entry in self.entries:
            self.polarity[entry.object][entry.attribute] = entry.polarity
        self.objects = sorted(self.polarity)

    def matching(self, conditions: Sequence[tuple[str, str]]) -> list[str]:
        """Objects with every (attribute, polarity) — across rows, one row per attribute."""
        return [o for o in self.objects if all(self.polarity[o].get(a) == p for a, p in conditions)]

    def opposite(self, conditions: Sequence[tuple[str, str]], rule: str) -> list[str]:
        """Distractors: objects of the opposite polarity on all condition attributes (``rule="all"``, the
        paper's reading) or on at least one (``"any"``); either way none satisfies every condition."""
        flipped = [(a, "low" if p == "high" else "high") for a, p in conditions]
        test = all if rule == "all" else any
        return [o for o in self.objects if test(self.polarity[o].get(a) == p for a, p in flipped)]


def render_name(name: str, style: str = "upstream") -> str:
    """An object name in questions: as the upstream generator writes it (its ``category`` verbatim,
    underscores and all), or ``"natural"`` with spaces.

    >>> render_name("birthday_cake"), render_name("birthday_cake", "natural")
    ('birthday_cake', 'birthday cake')
    """
    if style not in NAME_STYLES:
        raise ValueError(f"object name style must be one of {NAME_STYLES}, got {style!r}")
    return name if style == "upstream" else name.replace("_", " ")


def read_repository(rows: Iterable[Mapping], source: str, names: str = "upstream") -> Repository:
    """The repository from upstream rows (``category``, ``attribute``, ``result_majority``, ``agreement``),
    object names rendered in the ``names`` style (see ``render_name``)."""
    entries = []
    for line, row in enumerate(rows, start=2):
        where = f"{source}: line {line}"
        if row.get("attribute") not in ATTRIBUTES:
            raise DataError(f"{where}: unknown attribute {row.get('attribute')!r} (known: {', '.join(ATTRIBUTES)})")
        try:
            majority = float(row["result_majority"])
        except (TypeError, ValueError, KeyError):
            raise DataError(f"{where}: result_majority must be a Likert value, got {row.get('result_majority')!r}") from None
        if majority not in (1.0, 2.0, 3.0):
            raise DataError(f"{where}: result_majority {majority} is outside the Likert scale 1-3")
        if majority == 2.0:
            raise DataError(f"{where}: result_majority 2 (moderate) is not an extreme; the repository keeps 1 and 3 only")
        try:
            agreement = float(row["agreement"])
        except (TypeError, ValueError, KeyError):
            raise DataError(f"{where}: missing or non-numeric agreement {row.get('agreement')!r}") from None
        if not 0.0 <= agreement <= 1.0:
            raise DataError(f"{where}: agreement {agreement} is outside [0, 1]")
        entries.append(Entry(render_name(row["category"], names), row["attribute"], LIKERT_POLARITY[majority], agreement))
    return Repository(entries)


# --- the pipeline: condition statements -> questions ----------------------------------------
@dataclass(frozen=True)
class Condition:
    """A condition statement: attribute, polarity (low/high) and padding (number of distractors)."""

    attribute: str
    polarity: str
    padding: int = 3


@dataclass(frozen=True)
class Spec:
    """A challenge-set template: context, question with ``{object1}``.. slots, and conditions."""

    name: str
    context: str
    question: str
    conditions: tuple[Condition, ...]
    max_questions: int = 10_000
    distractors: str = "all"
    extra: dict = field(default_factory=dict)  # columns copied into every row (e.g. scenario number)

    def validate(self, where: str = "spec") -> None:
        """Raise ``DataError`` naming the field if the spec is not usable."""
        if not self.conditions:
            raise DataError(f"{where}: conditions must list at least one {{attribute, polarity, padding}}")
        for i, condition in enumerate(self.conditions):
            if condition.attribute not in ATTRIBUTES:
                raise DataError(
                    f"{where}: conditions[{i}].attribute {condition.attribute!r} is unknown (known: {', '.join(ATTRIBUTES)})"
                )
            if condition.polarity not in POLARITIES:
                raise DataError(f"{where}: conditions[{i}].polarity must be low or high, got {condition.polarity!r}")
            if not isinstance(condition.padding, int) or condition.padding < 1:
                raise DataError(f"{where}: conditions[{i}].padding must be a positive integer, got {condition.padding!r}")
        if len({c.padding for c in self.conditions}) > 1:
            raise DataError(f"{where}: all conditions must have the same padding (one group of options per question)")
        if self.distractors not in DISTRACTOR_RULES:
            raise DataError(f"{where}: distractors must be one of {DISTRACTOR_RULES}, got {self.distractors!r}")
        options = self.conditions[0].padding + 1
        named = slots(self.question)
        unknown = [s for s in named if not (s.startswith("object") and s[6:].isdigit() and 1 <= int(s[6:]) <= options)]
        if unknown:
            raise DataError(f"{where}: question has slot(s) {unknown}; with padding {self.conditions[0].padding} "
                            f"the slots are object1 .. object{options}")  # fmt: skip
        missing = [f"object{i}" for i in range(1, options + 1) if f"object{i}" not in named]
        if named and missing:  # an option the question does not name may be the answer: the question is unanswerable
            raise DataError(f"{where}: question names {', '.join(named)} but padding {self.conditions[0].padding} makes "
                            f"{options} options; name every one (missing: {', '.join(missing)}) or lower padding")  # fmt: skip
        if not isinstance(self.max_questions, int) or self.max_questions < 1:
            raise DataError(f"{where}: max_questions must be a positive integer, got {self.max_questions!r}")


def sample_groups(positives: Sequence[str], negatives: Sequence[str], k: int, cap: int, rng: random.Random) -> list[tuple]:
    """Up to ``cap`` groups of one positive and ``k`` negatives, as the upstream release samples them.

    When the negatives' ``k``-combinations outnumber ``cap``, ``cap`` distinct combinations are drawn
    and positives are paired with them in turn (round robin); otherwise every (positive, combination)
    is formed and ``cap`` of them drawn. The combinations are drawn by rejection, never enumerated.
    """
    if not positives or len(negatives) < k:
        return []
    n_combinations = math.comb(len(negatives), k)
    if n_combinations > cap:
        seen, combinations = set(), []
        while len(combinations) < cap:
            combination = tuple(sorted(rng.sample(range(len(negatives)), k)))
            if combination not in seen:
                seen.add(combination)
                combinations.append(combination)
        return [(positives[i % len(positives)], *(negatives[j] for j in c)) for i, c in enumerate(combinations)]
    groups = [(p, *c) for p in positives for c in itertools.combinations(negatives, k)]
    return groups if len(groups) <= cap else rng.sample(groups, cap)


class Permutation:
    """A seeded bijection of ``range(n)`` computed one value at a time, in constant memory, for any ``n``.

    A four-round Feistel network on the smallest even-width power of two >= ``n``, cycle-walking values
    that land outside the range. Written by hand: numpy and ``random`` permute by materialising the
    whole range, which is what a flat-memory stream of millions of questions must not do.

    >>> p = Permutation(10, seed=3)
    >>> sorted(p(i) for i in range(10)) == list(range(10))
    True
    """

    def __init__(self, n: int, seed: int):
        self.n = n
        self.half = max(1, (max(n - 1, 1).bit_length() + 1) // 2)
        self.mask = (1 << self.half) - 1
        self.key = hashlib.blake2b(repr(("physprobe-permutation", seed, n)).encode(), digest_size=16).digest()

    def _round(self, value: int, round_: int) -> int:
        data = round_.to_bytes(1, "big") + value.to_bytes((self.half + 7) // 8 + 1, "big")
        return int.from_bytes(hashlib.blake2b(data, key=self.key, digest_size=16).digest(), "big") & self.mask

    def __call__(self, index: int) -> int:
        value = index
        while True:
            left, right = value >> self.half, value & self.mask
            for round_ in range(4):
                left, right = right, left ^ self._round(right, round_)
            value = (left << self.half) | right
            if value < self.n:
                return value


def unrank_combination(rank: int, n: int, k: int) -> tuple[int, ...]:
    """The ``rank``-th ``k``-combination of ``range(n)`` in the combinatorial number system (colex order).

    >>> [unrank_combination(r, 4, 2) for r in range(6)]
    [(0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3)]
    """
    combination = []
    for size in range(k, 0, -1):
        low, high = size - 1, n - 1  # largest c with comb(c, size) <= rank, by bisection
        while low < high:
            middle = (low + high + 1) // 2
            if math.comb(middle, size) <= rank:
                low = middle
            else:
                high = middle - 1
        combination.append(low)
        rank -= math.comb(low, size)
        n = low
    return tuple(reversed(combination))


def challenge_set(repository: Repository, spec: Spec, seed: int) -> Iterator[dict]:
    """Questions for ``spec``, streamed: one positive and ``padding`` distractors each, answer position
    balanced and shuffled with ``seed``. Raises ``DataError`` when no object satisfies the conditions.

    Memory is flat in ``max_questions``: question ``j`` draws the ``j``-th value of a seeded permutation
    of all distractor combinations (so no combination repeats while there are more combinations than
    questions, and no (answer, combination) pair ever repeats), pairs it with the positives in turn,
    and takes its answer position from a permutation of the question numbers (every position used
    equally often, ±1). Nothing is remembered between questions.
    """
    spec.validate(f"spec {spec.name!r}")
    conditions = [(c.attribute, c.polarity) for c in spec.conditions]
    positives = repository.matching(conditions)
    negatives = repository.opposite(conditions, spec.distractors)
    k = spec.conditions[0].padding
    if not positives:
        raise DataError(f"spec {spec.name!r}: no object satisfies all conditions {conditions}")
    if len(negatives) < k:
        raise DataError(f"spec {spec.name!r}: {len(negatives)} distractor(s) for conditions {conditions}, need {k}")
    n_combinations = math.comb(len(negatives), k)
    total = min(spec.max_questions, len(positives) * n_combinations)
    combination_order, position_order = Permutation(n_combinations, seed), Permutation(total, seed + 1)
    rng = random.Random(seed)
    described = [f"{a}={p}" for a, p in conditions]
    for j in range(total):
        turn, column = divmod(j, n_combinations)  # turn > 0 only once every combination was used
        answer = positives[(column + turn) % len(positives)]
        distractors = [negatives[i] for i in unrank_combination(combination_order(column), len(negatives), k)]
        rng.shuffle(distractors)
        position = position_order(j) % (k + 1)
        choices = distractors[:position] + [answer] + distractors[position:]
        slots = {f"object{i + 1}": choice for i, choice in enumerate(choices)}
        yield {
            **spec.extra,
            "context": spec.context,
            "question": fill(spec.question, slots),
            "choices": choices,
            "label": position,
            "answer": answer,
            "conditions": described,
            "distractor_rule": spec.distractors,
        }


# --- Track 2 --------------------------------------------------------------------------------
def track2_boolean(repository: Repository, seed: int, cap: int = 1200) -> list[dict]:
    """True/False questions per attribute (paper Table 1): pairwise "more"/"less" on up to ``cap`` pairs
    of a high and a low object, and "is"/"is not" on every object."""
    rng = random.Random(seed)
    rows = []
    for attribute, phrase in ATTRIBUTES.items():
        high = repository.matching([(attribute, "high")])
        low = repository.matching([(attribute, "low")])
        for big, small in sample_groups(high, low, 1, cap, rng):
            for text, polarity, truth in (
                (f"{big} is more {phrase} than {small}.", "pos", True),
                (f"{small} is more {phrase} than {big}.", "pos", False),
                (f"{small} is less {phrase} than {big}.", "neg", True),
                (f"{big} is less {phrase} than {small}.", "neg", False),
            ):
                rows.append(_boolean(attribute, polarity, [big, small], text, truth))
        for obj in high + low:
            rows.append(_boolean(attribute, "pos", [obj], f"{obj} is {phrase}.", obj in high))
            rows.append(_boolean(attribute, "neg", [obj], f"{obj} is not {phrase}.", obj not in high))
    return rows


def _boolean(attribute: str, polarity: str, objects: list[str], question: str, truth: bool) -> dict:
    return {"attribute": attribute, "polarity": polarity, "objects": objects, "question": question,
            "choices": ["True", "False"], "label": 0 if truth else 1, "answer": str(truth)}  # fmt: skip


def track2_mc(repository: Repository, seed: int, cap: int = 2500) -> list[dict]:
    """Four-option questions per attribute and polarity: "Which object is the most/least <attribute>?"."""
    rows = []
    for index, (attribute, phrase) in enumerate(ATTRIBUTES.items()):
        for polarity, word, wanted in (("pos", "most", "high"), ("neg", "least", "low")):
            spec = Spec(
                f"{attribute}-{word}", "", f"Which object is the {word} {phrase}?",
                (Condition(attribute, wanted, 3),), max_questions=cap,
            )  # fmt: skip
            for row in challenge_set(repository, spec, seed * 1000 + index * 2 + (polarity == "neg")):
                rows.append({"attribute": attribute, "polarity": polarity, "question": row["question"],
                             "choices": row["choices"], "label": row["label"], "answer": row["answer"]})  # fmt: skip
    return rows


# --- Track 3: the nine scenarios of the paper's Table 1 ---------------------------------------
# In the order, wording and conditions of the upstream generator (implicit_querying_template.py), which
# are those of Table 1 but for two questions (noted below); each scenario keeps the upstream ``tag``.
_WHICH = "Which of {object1}, {object2}, {object3}, {object4}"
SCENARIOS = (
    ("backpack_packing", "I am packing a backpack.", f"{_WHICH} should I put at the bottom?",
     {"Stiffness": "high", "Brittleness": "low"}),
    ("suitcase_packing", "I have an irregularly shaped space in my suitcase, and four objects with the same volume.",
     f"{_WHICH} could fit in that space?", {"Malleability": "high", "Elasticity": "high"}),
    ("sandpaper_placing", "I need an object to place sandpaper above.", f"{_WHICH} is the most suitable?",
     {"Surface Hardness": "high", "Surface smoothness": "low"}),
    ("plastic_packaging", "I am trying to open some plastic packaging.", f"{_WHICH} can help me open?",
     {"Sharpness": "high"}),
    ("fragile_gifts", "I am wrapping fragile gifts and want to protect them from impact.",
     f"{_WHICH} should I choose for cushioning?", {"Softness": "high", "Elasticity": "high"}),
    ("hammering", "I need to hammer a nail into a solid wooden board.", f"{_WHICH} should I choose?",
     {"Surface Hardness": "high", "Brittleness": "low", "Stiffness": "high"}),
    ("kids_play_area", "I need to prepare a work table as a play area for kids.", f"{_WHICH} should I remove?",
     {"Sharpness": "high"}),
    # Table 1 asks "should I remove?" here, which contradicts its own conditions (the answer is the tough,
    # elastic object); the upstream generator asks "can be tossed safely?", used here.
    ("robot_tossing", "I have a robot which sorts objects by tossing them to bins.", f"{_WHICH} can be tossed safely?",
     {"Brittleness": "low", "Elasticity": "high"}),
    # Table 1 says "insulation from a sharp edge"; the upstream generator "insulation for a sharp edge", used here.
    ("insulation", "I need an object to provide insulation for a sharp edge on a piece of furniture.",
     f"{_WHICH} should I choose?", {"Softness": "high", "Elasticity": "high"}),
)  # fmt: skip


def scenario_specs(distractors: str = "all", cap: int = 10_000) -> list[Spec]:
    """The nine Track 3 scenarios as pipeline specs (``scenario`` = Table 1 number, ``tag`` = upstream tag)."""
    return [
        Spec(
            f"scenario_{i}",
            context,
            question,
            tuple(Condition(a, p, 3) for a, p in conditions.items()),
            max_questions=cap,
            distractors=distractors,
            extra={"scenario": i, "tag": tag},
        )  # fmt: skip
        for i, (tag, context, question, conditions) in enumerate(SCENARIOS, start=1)
    ]


def track3(repository: Repository, seed: int, distractors: str = "all", cap: int = 10_000) -> list[dict]:
    """Questions of all nine scenarios (up to ``cap`` each)."""
    return [
        row for spec in scenario_specs(distractors, cap) for row in challenge_set(repository, spec, seed + spec.extra["scenario"])
    ]
