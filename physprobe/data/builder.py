"""What a benchmark builder declares: typed features, configs (subsets), card facts and a row generator.

Each ``dataset_scripts/<benchmark>/`` module exposes one ``Benchmark``; ``physprobe.data.dataset_folder``
turns it into Parquet files and a dataset card, the same way for every benchmark.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import datasets

from physprobe.data.sources import Upstream, fetch, resolve_source_dir

Row = dict


@dataclass(frozen=True)
class Config:
    """One subset of a benchmark: a name, what it holds, and its rows.

    ``select`` turns the benchmark's rows into this config's rows (all rows if None); ``features``
    types them when they differ from the benchmark's.
    """

    name: str
    description: str
    select: Callable[[list[Row]], list[Row]] | None = None
    features: datasets.Features | None = None


def keep(predicate: Callable[[Row], bool]) -> Callable[[list[Row]], list[Row]]:
    """A ``Config.select`` keeping the rows for which ``predicate`` holds."""
    return lambda rows: [row for row in rows if predicate(row)]


@dataclass(frozen=True)
class MadeRows:
    """What a builder's ``make_rows`` returns: the rows, and values for the card body's placeholders."""

    rows: list[Row]
    card_fields: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Card:
    """Facts for the dataset card's front matter and body; ``license`` is ``unknown`` where upstream states none."""

    pretty_name: str
    license: str
    task_categories: tuple[str, ...]
    body: str  # Markdown with a ``$configs_table`` placeholder (``string.Template``)
    language: tuple[str, ...] = ("en",)
    source_datasets: tuple[str, ...] = ("original",)
    task_ids: tuple[str, ...] = ()
    arxiv: tuple[str, ...] = ()  # the paper's arXiv ids: the Hub links them as ``arxiv:<id>`` tags
    tags: tuple[str, ...] = ()
    paperswithcode_id: str | None = None  # only where Papers with Code lists the dataset


@dataclass(frozen=True)
class Benchmark:
    """A benchmark builder: from upstream files (``make_rows``) to typed rows, split into configs.

    Its files are whatever ``local_sources`` finds in the mirror folder (inputs that replace the
    release, e.g. Text2Afford's raw annotations), else the pinned ``upstream`` release.
    """

    name: str
    upstream: Upstream | None
    features: datasets.Features
    configs: tuple[Config, ...]
    card: Card
    make_rows: Callable[[Mapping[str, Path]], MadeRows]
    split: str = "test"
    local_sources: Callable[[Path | None], dict[str, Path]] | None = None

    def sources(self, source_dir: str | os.PathLike | None = None) -> Mapping[str, Path]:
        """Local paths of this benchmark's input files (downloaded and checked if pinned)."""
        local = self.local_sources(resolve_source_dir(source_dir)) if self.local_sources else {}
        if local or self.upstream is None:
            return local
        return fetch(self.upstream, source_dir)

    def config(self, name: str) -> Config:
        """The config called ``name``; ``KeyError`` lists the known ones."""
        for config in self.configs:
            if config.name == name:
                return config
        raise KeyError(f"{self.name} has no config {name!r}; known: {', '.join(c.name for c in self.configs)}")


def read_card_body(module_file: str) -> str:
    """The ``card.md`` that sits next to a builder module."""
    return (Path(module_file).parent / "card.md").read_text(encoding="utf-8")
