"""The report's blocks written as Markdown (GFM tables) and as one self-contained HTML page."""

from __future__ import annotations

import base64
import html
import re

from physprobe.report.blocks import Heading, Image, Notes, Paragraph, TableBlock
from physprobe.util.redact import escaped

_CODE = re.compile(r"(`[^`]+`)")


def _md_escape(text: str) -> str:
    """Markdown-escape text, keeping `code` spans (pipes in them escaped, as GFM tables need); control and
    bidirectional characters as their escapes (``redact.escaped``), so no text reorders or breaks what is around it.

    >>> print(_md_escape("gpt|2 \u202emodel `a|b`"))
    gpt\\|2 \\\\u202emodel `a\\|b`
    """
    pieces = _CODE.split(escaped(text))
    return "".join(p.replace("|", "\\|") if _CODE.fullmatch(p) else re.sub(r"([\\`*_\[\]<>|#])", r"\\\1", p) for p in pieces)


def _html_text(text: str) -> str:
    """HTML-escape text, `code` spans as <code>; control and bidirectional characters as their escapes."""
    return "".join(
        f"<code>{html.escape(p[1:-1])}</code>" if _CODE.fullmatch(p) else html.escape(p) for p in _CODE.split(escaped(text))
    )


def to_markdown(blocks: list) -> str:
    """Markdown (GFM tables); images are paragraphs of their own, after the tables."""
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {_md_escape(block.text)}")
        elif isinstance(block, Paragraph):
            out.append(_md_escape(block.text))
        elif isinstance(block, TableBlock):
            out.append("| " + " | ".join(_md_escape(h) for h in block.header) + " |")
            out.append("|" + "---|" * len(block.header))
            for row, kind in zip(block.rows, block.kinds, strict=True):
                cells = [_md_escape(c) for c in row]
                if kind in ("run", "section") and cells[0]:
                    cells[0] = f"**{cells[0]}**"
                elif kind == "baseline":
                    cells = [f"*{c}*" if c else c for c in cells]
                out.append("| " + " | ".join(cells) + " |")
        elif isinstance(block, Notes):
            out.append("\n".join(f"- {_md_escape(item)}" for item in block.items))
        elif isinstance(block, Image):
            out.append(f"![{_md_escape(block.alt)}]({block.name})")
        out.append("")
    return "\n".join(out)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1400px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f2f2f2}tr.section td{background:#fafafa;font-weight:bold;text-align:left}
tr.run td{background:#fff4dc}tr.baseline td{color:#666;font-style:italic}.scroll{overflow-x:auto}
ul.notes{font-size:12px;color:#444}img{max-width:100%;border:1px solid #eee;margin:.5em 0}p.note{color:#666;font-style:italic}
table.card{font-size:14px}table.card td,table.card th{padding:5px 10px}table.card td{white-space:nowrap}
table.card td:first-child,table.card td:nth-last-child(2){white-space:normal;min-width:14em}
table.card tr.section td{background:#eef3f8;font-size:13px}"""


def to_html(blocks: list) -> str:
    """One self-contained HTML page: the same blocks, figures embedded as base64 PNG."""
    out = ['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
           '<title>physprobe report</title>', f"<style>{_CSS}</style>", "</head>", "<body>"]  # fmt: skip
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"<h{block.level}>{_html_text(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            out.append(
                f'<p class="{block.css}">{_html_text(block.text)}</p>' if block.css else f"<p>{_html_text(block.text)}</p>"
            )
        elif isinstance(block, TableBlock):
            out.append(
                f'<div class="scroll"><table class="{block.css}"><thead><tr>'
                if block.css
                else '<div class="scroll"><table><thead><tr>'
            )
            out.append("".join(f"<th>{_html_text(h)}</th>" for h in block.header) + "</tr></thead><tbody>")
            for row, kind in zip(block.rows, block.kinds, strict=True):
                if kind == "section":
                    out.append(f'<tr class="section"><td colspan="{len(row)}">{_html_text(row[0])}</td></tr>')
                else:
                    out.append(f'<tr class="{kind}">' + "".join(f"<td>{_html_text(c)}</td>" for c in row) + "</tr>")
            out.append("</tbody></table></div>")
        elif isinstance(block, Notes):
            out.append('<ul class="notes">' + "".join(f"<li>{_html_text(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Image):
            data = base64.b64encode(block.path.read_bytes()).decode("ascii")
            out.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(block.alt)}">'
                       f"<figcaption>{html.escape(block.alt)}</figcaption></figure>")  # fmt: skip
    out += ["</body>", "</html>", ""]
    return "\n".join(out)
