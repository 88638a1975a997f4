"""How a generating protocol decodes: greedy (physprobe's default), or as the released script did.

A ``Decoding`` is one of three kinds (``Decoding.greedy``, ``Decoding.sampling``, ``Decoding.beam``), with the
settings the released call passed (or the library default it left in force), the token budget it set (None: the
protocol's own) and its ``source``, the upstream file and line. A generating protocol declares, as ``Released``,
the decoding of its released path and, where the released scripts decode one model class another way (NEWTON's
``hf_track*.py`` classes), each by a regex on the model's name. ``physprobe score --decoding released`` decodes with
``Released.of(model)``; ``--decoding greedy``, the default, with none of it. A sampled request carries a seed drawn
from the run's ``--seed``, the row, the sample index and the settings alone (``sample_seed``), so that a row's seed
does not depend on batches, order, resumption or ranks (its draw may still move with the batch shape's logits:
docs/scoring.md).

>>> llama3 = Decoding.sampling("zero_shot_llama-3.py:108-115", temperature=0.7, top_p=0.9, top_k=50, max_new_tokens=5)
>>> llama3.samples, llama3.key()
(True, {'kind': 'sampling', 'temperature': 0.7, 'top_p': 0.9, 'top_k': 50, 'max_new_tokens': 5})
>>> released = Released(Decoding.greedy("flan class"), (("falcon", Decoding.sampling("falcon class", top_k=10)),))
>>> released.of("tiiuae/falcon-7b").kind, released.of("google/flan-t5-large").kind
('sampling', 'greedy')
>>> sample_seed(0, "newton", "track1", 17, 2, llama3) == sample_seed(0, "newton", "track1", 17, 2, llama3)
True
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

KINDS = ("greedy", "sampling", "beam")
CHOICES = ("greedy", "released")  # --decoding


@dataclass(frozen=True)
class Decoding:
    """One way of decoding an answer: ``kind`` greedy, sampling (``temperature``, ``top_p``, ``top_k``; 0: no top-k
    cut) or beam (``num_beams``, ``length_penalty``, ``early_stopping``); ``max_new_tokens`` and ``max_length`` the
    released budget, which replaces the protocol's where ``max_new_tokens`` is set (``max_length`` None: no bound
    counting the prompt); ``source`` where it is read from. Make one with ``greedy``,
    ``sampling`` or ``beam``, which leave the other kinds' settings at their neutral values."""

    kind: str = "greedy"
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: bool = False
    max_new_tokens: int | None = None
    max_length: int | None = None
    source: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"decoding kind {self.kind!r}: one of {', '.join(KINDS)}")
        if self.kind == "sampling" and not (self.temperature > 0 and 0 < self.top_p <= 1 and self.top_k >= 0):
            raise ValueError(f"sampling needs temperature > 0, 0 < top_p <= 1, top_k >= 0 ({self.source})")
        if (self.kind == "beam") != (self.num_beams > 1):
            raise ValueError(f"a beam search has num_beams > 1, and only a beam search ({self.source})")

    @classmethod
    def greedy(cls, source: str, **budget) -> Decoding:
        return cls("greedy", source=source, **budget)

    @classmethod
    def sampling(cls, source: str, temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0, **budget) -> Decoding:
        return cls("sampling", temperature=temperature, top_p=top_p, top_k=top_k, source=source, **budget)

    @classmethod
    def beam(cls, source: str, num_beams: int, length_penalty: float = 1.0, early_stopping: bool = False, **budget) -> Decoding:
        return cls("beam", num_beams=num_beams, length_penalty=length_penalty, early_stopping=early_stopping, source=source,
                   **budget)  # fmt: skip

    @property
    def samples(self) -> bool:
        """Whether answers are drawn at random (a seed changes them)."""
        return self.kind == "sampling"

    def key(self) -> dict:
        """The settings that change an answer (not ``source``), those of its kind and the budget where set."""
        used = {
            "greedy": (),
            "sampling": ("temperature", "top_p", "top_k"),
            "beam": ("num_beams", "length_penalty", "early_stopping"),
        }
        out = {"kind": self.kind, **{name: getattr(self, name) for name in used[self.kind]}}
        return out | {name: getattr(self, name) for name in ("max_new_tokens", "max_length") if getattr(self, name) is not None}

    def describe(self) -> str:
        """The settings in a few words, as the docs and the command's summary show them.

        >>> Decoding.beam("alpaca class", num_beams=4, max_new_tokens=128).describe()
        'beam search, num_beams=4, length_penalty=1.0, early_stopping=False, max_new_tokens=128'
        """
        words = {"greedy": "greedy", "sampling": "sampling", "beam": "beam search"}[self.kind]
        return ", ".join([words, *(f"{k}={v}" for k, v in self.key().items() if k != "kind")])


@dataclass(frozen=True)
class Released:
    """A generating protocol's released decoding: ``default``, and the decoding of each model class the released
    scripts decode another way, as (regex on the model's name, decoding), the first match winning."""

    default: Decoding
    by_model: tuple[tuple[str, Decoding], ...] = ()

    def of(self, model: str) -> Decoding:
        """The released decoding of ``model`` (its name or path, searched case-insensitively)."""
        for pattern, decoding in self.by_model:
            if re.search(pattern, model, re.IGNORECASE):
                return decoding
        return self.default

    def all(self) -> list[tuple[str | None, Decoding]]:
        """Every (pattern, decoding), the default's pattern None."""
        return [(None, self.default), *self.by_model]


GREEDY = Decoding.greedy("physprobe's default (--decoding greedy)")


def sample_seed(seed: int, benchmark: str, config: str, row: int, sample: int, decoding: Decoding) -> int:
    """The seed of one sampled answer: a 63-bit number from the run's ``seed``, the row (benchmark, config, its index
    in the config), the sample's index and the settings, and nothing else.

    >>> a = Decoding.sampling("x", top_p=0.5)
    >>> len({sample_seed(0, "b", "c", 1, k, a) for k in range(3)}), sample_seed(1, "b", "c", 1, 0, a) != sample_seed(0, "b", "c", 1, 0, a)
    (3, True)
    """
    text = json.dumps([seed, benchmark, config, row, sample, decoding.key()], sort_keys=True)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def part_seed(seed: int, part: int) -> int:
    """The seed of a request's ``part``-th prompt (a ``GenerateEach`` asks several), from the request's seed.

    >>> part_seed(5, 0) != part_seed(5, 1)
    True
    """
    return int.from_bytes(hashlib.sha256(f"{seed}/{part}".encode()).digest()[:8], "big") >> 1
