"""The report as a list of blocks (headings, paragraphs, tables, notes, images), one structure written as
Markdown and as HTML."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Paragraph:
    text: str
    css: str = ""


@dataclass
class TableBlock:
    header: list[str]
    rows: list[list[str]]
    kinds: list[str]  # per row: published, section, run, baseline (a run's majority answer), card, detail
    css: str = ""  # the HTML table's class (the card's: "card")


@dataclass
class Notes:
    items: list[str]


@dataclass
class Image:
    path: Path
    name: str
    alt: str
