"""The report as a list of blocks (headings, paragraphs, tables, notes, images, links), one structure written as
Markdown and as HTML; a heading, table or image with an ``anchor`` is a place the contents and links point at."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Heading:
    level: int
    text: str
    anchor: str = ""  # its id (``contents.anchor_blocks``); a heading with one links back to the contents


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
    anchor: str = ""


@dataclass
class Notes:
    items: list[str]
    css: str = ""  # the HTML list's class besides "notes" (the report's header: "about")


@dataclass
class Image:
    path: Path
    name: str
    alt: str
    anchor: str = ""


@dataclass
class Links:
    """A list of links, each (depth, text, target): the contents (depth 0 a benchmark, 1 what is in it) or the
    explorer's entries below a figure or table; ``lead`` the line before them."""

    items: list[tuple[int, str, str]]
    lead: str = ""
    css: str = ""
