"""What a benchmark builder declares: typed features, configs (subsets), card facts and a row generator.

Each ``dataset_scripts/<benchmark>/`` module exposes one ``Benchmark``; ``physprobe.export``
turns it into Parquet files and a dataset card, the same way for every benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import datasets

from physprobe.sources import Upstream

Row = dict
RowFilter = Callable[[Row], bool]


@dataclass(frozen=True)
class Config:
    """One subset of a benchmark: a name, what it holds, and which rows belong to it (all if None)."""

    name: str
    description: str
    keep: RowFilter | None = None


@dataclass(frozen=True)
class Card:
    """Facts for the dataset card's front matter and body."""

    pretty_name: str
    license: str
    task_categories: tuple[str, ...]
    body: str  # Markdown with a ``$configs_table`` placeholder (``string.Template``)
    language: tuple[str, ...] = ("en",)
    source_datasets: tuple[str, ...] = ("original",)
    task_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Benchmark:
    """A benchmark builder: from upstream files (``generate``) to typed rows, split into configs."""

    name: str
    upstream: Upstream | None
    features: datasets.Features
    configs: tuple[Config, ...]
    card: Card
    generate: Callable[[Mapping[str, Path]], list[Row]]
    split: str = "test"

    def config(self, name: str) -> Config:
        """The config called ``name``; ``KeyError`` lists the known ones."""
        for config in self.configs:
            if config.name == name:
                return config
        raise KeyError(f"{self.name} has no config {name!r}; known: {', '.join(c.name for c in self.configs)}")


def read_card_body(module_file: str) -> str:
    """The ``card.md`` that sits next to a builder module."""
    return (Path(module_file).parent / "card.md").read_text(encoding="utf-8")
