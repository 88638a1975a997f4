"""CConS: prompts, template induction from the released sentences, the commonsense partial order,
and new counter-commonsense examples from the induced templates.

The release holds sentences, not templates. Every sentence names its two objects with an article
("a key box", "an oven"); agent templates also start with an article and an agent noun ("A clown
abandoned ..."). Induction replaces these mentions by CheckList slots ``{a:s1}``, ``{a:s2}`` (the
objects in sentence order) and ``{a:agent}``, so that the expander, given a row's template and
fills, regenerates its sentence byte for byte.

>>> induced = induce("A clown abandoned an electric bulb in a studio.", "electric bulb", "studio", 1)
>>> induced.template, induced.fills, induced.larger_slot
('{a:agent} abandoned {a:s1} in {a:s2}.', {'agent': 'clown', 's1': 'electric bulb', 's2': 'studio'}, 's2')
>>> render(induced.template, induced.fills)
'A clown abandoned an electric bulb in a studio.'
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from physprobe.data.templates import article, fill
from physprobe.errors import DataError

LABELS = ("obj1_larger", "obj1_smaller")  # upstream integers: 0 = obj1 larger, 1 = obj1 smaller

# The paper's "Tasks Format Details". [MASK] is a placeholder the scorer replaces by the tokenizer's mask.
PROMPTS = {
    ("mlm", True): "{context} In this situation, the size of {obj1} is probably much [MASK] than the size of {obj2}.",
    ("mlm", False): "The size of {obj1} is probably much [MASK] than the size of {obj2}.",
    ("generative", True): "{context} Which is bigger in this situation, {obj1} or {obj2}?",
    ("generative", False): "Which is bigger in general, {obj1} or {obj2}?",
}

_ARTICLE = r"(?<![\w])(?P<article>[Aa]n?)\s+"
_AGENT = re.compile(r"^(?P<article>An?) (?P<agent>[a-z]+) ")


def noun_phrase(noun: str, context: str = "") -> str:
    """The object with the article the context gives it ("an key" stays as released), else a/an.

    >>> noun_phrase("key box", "He found a key in a key box."), noun_phrase("oven")
    ('a key box', 'an oven')
    """
    match = re.search(_ARTICLE + re.escape(noun) + r"(?![\w])", context) if context else None
    return f"{match['article'].lower()} {noun}" if match else f"{article(noun)} {noun}"


def prompt(kind: str, context: str, obj1: str, obj2: str) -> str:
    """The masked-LM (``kind="mlm"``) or generative input of a row, with or without context.

    >>> prompt("mlm", "", "hat", "oven")
    'The size of a hat is probably much [MASK] than the size of an oven.'
    >>> prompt("generative", "A key box contains a key.", "key", "key box")
    'A key box contains a key. Which is bigger in this situation, a key or a key box?'
    """
    return PROMPTS[(kind, bool(context))].format(
        context=context, obj1=noun_phrase(obj1, context), obj2=noun_phrase(obj2, context)
    )


# --- template induction --------------------------------------------------------------------
@dataclass(frozen=True)
class Induced:
    """One row as a template: the CheckList template, its fills, and which object slot is larger."""

    template: str
    fills: dict[str, str]
    larger_slot: str
    articles: dict[str, str] = field(default_factory=dict)  # noun -> article used in the sentence


def _mention(context: str, noun: str, taken: tuple[int, int] | None) -> re.Match:
    found = [
        m
        for m in re.finditer(_ARTICLE + re.escape(noun) + r"(?![\w])", context)
        if taken is None or m.end() <= taken[0] or m.start() >= taken[1]
    ]
    if len(found) != 1:
        raise DataError(f"object {noun!r} is mentioned with an article {len(found)} times in {context!r}; expected once")
    return found[0]


def induce(context: str, obj1: str, obj2: str, label: int) -> Induced:
    """Express one released sentence as a CheckList template with its fills (see the module doc)."""
    first, second = sorted(((obj1, "obj1"), (obj2, "obj2")), key=lambda item: -len(item[0]))
    m_first = _mention(context, first[0], None)
    m_second = _mention(context, second[0], m_first.span())
    spans = sorted([(m_first, first), (m_second, second)], key=lambda item: item[0].start())
    slot_of = {role: f"s{i + 1}" for i, (_, (_, role)) in enumerate(spans)}
    template, fills, articles, cursor = "", {}, {}, 0
    for match, (noun, role) in spans:
        template += context[cursor : match.start()] + "{a:%s}" % slot_of[role]
        fills[slot_of[role]] = noun
        articles[noun] = match["article"].lower()
        cursor = match.end()
    template += context[cursor:]
    agent = _AGENT.match(template)
    if agent:
        template = "{a:agent} " + template[agent.end() :]
        fills = {"agent": agent["agent"], **fills}
        articles[agent["agent"]] = agent["article"].lower()
    template = template[:1].lower() + template[1:] if template.startswith("{") else template
    larger = slot_of["obj1"] if label == 0 else slot_of["obj2"]
    return Induced(template, fills, larger, articles)


def article_exceptions(induced: Iterable[Induced]) -> dict[str, str]:
    """Nouns whose released article departs from the a/an vowel rule (e.g. "an key"), checked consistent."""
    seen: dict[str, set[str]] = defaultdict(set)
    for row in induced:
        for noun, used in row.articles.items():
            seen[noun].add(used)
    exceptions = {}
    for noun, used in sorted(seen.items()):
        if len(used) > 1:
            raise DataError(f"noun {noun!r} appears with different articles {sorted(used)} in the release")
        (only,) = used
        if only != article(noun):
            exceptions[noun] = only
    return exceptions


def render(template: str, fills: Mapping[str, str], articles: Mapping[str, str] | None = None) -> str:
    """A sentence from a template and fills: CheckList expansion, then a capital first letter."""
    text = fill(template, fills, articles)
    return text[:1].upper() + text[1:]


# --- templates, lexicons and the commonsense partial order -----------------------------------
@dataclass
class Template:
    """An induced template with the release's facts about it."""

    id: str
    text: str
    larger_slot: str
    lexicons: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    released_pairs: set[tuple[str, str]] = field(default_factory=set)
    difficulties: set[str] = field(default_factory=set)


@dataclass
class Induction:
    """Templates induced from released rows, keyed by template text, and the article exceptions."""

    templates: dict[str, Template]
    articles: dict[str, str]
    conflicting_relations: list[str]

    def template_id(self, context: str, obj1: str, obj2: str, label: int) -> str:
        return self.templates[induce(context, obj1, obj2, label).template].id


def induce_templates(rows: Iterable[Mapping]) -> Induction:
    """Group released rows (``context``, ``obj1``, ``obj2``, ``label``, optional ``difficulty``) by template.

    Templates are numbered ``T001``, ``T002``... in order of first appearance. A template whose rows
    disagree on which slot is larger is listed in ``conflicting_relations``.
    """
    templates: dict[str, Template] = {}
    induced_rows = []
    conflicts = set()
    for row in rows:
        induced = induce(row["context"], row["obj1"], row["obj2"], row["label"])
        induced_rows.append(induced)
        template = templates.setdefault(
            induced.template, Template(f"T{len(templates) + 1:03d}", induced.template, induced.larger_slot)
        )
        if template.larger_slot != induced.larger_slot:
            conflicts.add(template.id)
        for slot, noun in induced.fills.items():
            template.lexicons[slot].add(noun)
        template.released_pairs.add((induced.fills["s1"], induced.fills["s2"]))
        if row.get("difficulty"):
            template.difficulties.add(row["difficulty"])
    return Induction(templates, article_exceptions(induced_rows), sorted(conflicts))


@dataclass
class PartialOrder:
    """ "Commonsense larger than" over nouns, transitively closed; ``larger[i, j]``: noun i > noun j."""

    nouns: list[str]
    larger: np.ndarray
    facts: int

    def decides(self, big: str, small: str) -> bool | None:
        """True if commonsense says ``big`` > ``small``, False if the reverse, None if undecided or contradictory."""
        index = {noun: i for i, noun in enumerate(self.nouns)}
        if big not in index or small not in index:
            return None
        forward, backward = self.larger[index[big], index[small]], self.larger[index[small], index[big]]
        return None if forward == backward else bool(forward)

    @property
    def size(self) -> int:
        """Ordered pairs in the closure, contradictions excluded."""
        return int((self.larger & ~self.larger.T).sum())

    def contradictions(self) -> list[tuple[str, str]]:
        """Pairs ordered both ways after closure (cycles in the release's facts)."""
        i, j = np.nonzero(self.larger & self.larger.T & np.triu(np.ones_like(self.larger), 1))
        return [(self.nouns[a], self.nouns[b]) for a, b in zip(i, j, strict=True)]


def partial_order(rows: Iterable[Mapping]) -> PartialOrder:
    """The commonsense size order implied by released rows with context.

    An Ordinary row means the context's larger object is commonsense-larger; a CCommon row means
    the reverse. The facts are closed transitively (Warshall's algorithm on a boolean matrix).
    """
    facts = set()
    for row in rows:
        big, small = (row["obj1"], row["obj2"]) if row["label"] == 0 else (row["obj2"], row["obj1"])
        facts.add((big, small) if row["subset"] == "ordinary" else (small, big))
    nouns = sorted({noun for pair in facts for noun in pair})
    index = {noun: i for i, noun in enumerate(nouns)}
    larger = np.zeros((len(nouns), len(nouns)), dtype=bool)
    for big, small in facts:
        larger[index[big], index[small]] = True
    for k in range(len(nouns)):
        larger |= larger[:, k : k + 1] & larger[k : k + 1, :]
    return PartialOrder(nouns, larger, len(facts))


def new_examples(induction: Induction, order: PartialOrder, n: int, seed: int) -> list[dict]:
    """``n`` new labelled rows from the induced templates, with noun pairs absent from the release.

    Candidates are every (template, s1, s2) with nouns from the slots' lexicons; the label follows
    the template's relation, and the subset is Ordinary or CCommon only where the partial order
    decides the pair (others are skipped). ``n`` candidates are drawn with ``seed``, which also
    picks the agent and the order of obj1/obj2.
    """
    candidates = []
    for template in sorted(induction.templates.values(), key=lambda t: t.id):
        if template.id in induction.conflicting_relations:
            continue
        for s1 in sorted(template.lexicons["s1"]):
            for s2 in sorted(template.lexicons["s2"]):
                if s1 == s2 or (s1, s2) in template.released_pairs:
                    continue
                if "agent" in template.lexicons and not template.lexicons["agent"] - {s1, s2}:
                    continue
                big, small = (s1, s2) if template.larger_slot == "s1" else (s2, s1)
                verdict = order.decides(big, small)
                if verdict is not None:
                    candidates.append((template, s1, s2, "ordinary" if verdict else "ccommon"))
    if n > len(candidates):
        raise DataError(f"only {len(candidates)} new examples can be generated (asked for {n})")
    rng = random.Random(seed)
    rows = []
    for template, s1, s2, subset in rng.sample(candidates, n):
        fills = {"s1": s1, "s2": s2}
        if "agent" in template.lexicons:  # distinct fills, as CheckList's remove_duplicates
            fills["agent"] = rng.choice(sorted(template.lexicons["agent"] - {s1, s2}))
        context = render(template.text, fills, induction.articles)
        obj1, obj2 = (s1, s2) if rng.random() < 0.5 else (s2, s1)
        big = s1 if template.larger_slot == "s1" else s2
        difficulty = next(iter(template.difficulties)) if len(template.difficulties) == 1 else None
        rows.append(row(context, obj1, obj2, int(obj1 != big), subset, difficulty, template.id) | {"generated": True})
    return rows


def row(context: str, obj1: str, obj2: str, label: int, subset: str, difficulty: str | None, template_id: str | None) -> dict:
    """One dataset row with both model inputs."""
    return {
        "context": context,
        "obj1": obj1,
        "obj2": obj2,
        "label": label,
        "subset": subset,
        "difficulty": difficulty,
        "template_id": template_id,
        "mlm_input": prompt("mlm", context, obj1, obj2),
        "generative_input": prompt("generative", context, obj1, obj2),
    }
