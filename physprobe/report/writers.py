"""The report's blocks written as Markdown (GFM tables) and as one self-contained HTML page."""

from __future__ import annotations

import base64
import html
import re

from physprobe.report.blocks import Heading, Image, Links, Notes, Paragraph, TableBlock
from physprobe.util.redact import escaped

_CODE = re.compile(r"(`[^`]+`)")
TOP = "top"  # the anchor every section links back to (``contents.TOP``)
PAGE_WIDTH = 1368  # px: the widest the page's content gets (max-width 1400px less 1em each side), figures included


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
        if getattr(block, "anchor", ""):
            out.append(f'<a id="{block.anchor}"></a>\n')
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {_md_escape(block.text)}")
            if block.anchor and block.anchor != TOP:
                out.append(f"\n[↑ top](#{TOP})")
        elif isinstance(block, Links):
            lead = f"{_md_escape(block.lead)}:\n\n" if block.lead else ""
            out.append(lead + "\n".join(f"{'  ' * depth}- [{_md_escape(text)}]({target})" for depth, text, target in block.items))
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
table.card{font-size:14px;width:100%}table.card td,table.card th{padding:5px 8px;overflow-wrap:anywhere}
table.card td:first-child{min-width:9em}table.card tr.section td{background:#eef3f8;font-size:13px}
a.top{font-size:13px;margin-left:.6em;text-decoration:none;color:#888}
nav.contents{font-size:13px;border:1px solid #ddd;padding:.3em 1em;margin:1em 0}nav.contents ul{list-style:none;padding:0;columns:2}
nav.contents li.depth0{font-weight:bold;margin-top:.3em}nav.contents li.depth1{margin-left:1.2em}
nav.contents li.depth2{margin-left:2.4em;font-size:12px}div.links{font-size:13px}div.links li{margin:.15em 0}
ul.about{font-size:13px;color:#222;overflow-wrap:anywhere}"""


def to_html(blocks: list) -> str:
    """One self-contained HTML page: the same blocks, figures embedded as base64 PNG."""
    out = ['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
           '<title>physprobe report</title>', f"<style>{_CSS}</style>", "</head>", "<body>"]  # fmt: skip
    for block in blocks:
        if isinstance(block, Heading):
            anchor = f' id="{block.anchor}"' if block.anchor else ""
            back = f'<a class="top" href="#{TOP}" title="back to the top">↑</a>' if block.anchor and block.anchor != TOP else ""
            out.append(f"<h{block.level}{anchor}>{_html_text(block.text)}{back}</h{block.level}>")
        elif isinstance(block, Links):
            out.append(_html_links(block))
        elif isinstance(block, Paragraph):
            out.append(
                f'<p class="{block.css}">{_html_text(block.text)}</p>' if block.css else f"<p>{_html_text(block.text)}</p>"
            )
        elif isinstance(block, TableBlock):
            anchor = f' id="{block.anchor}"' if block.anchor else ""
            out.append(f'<div class="scroll"{anchor}><table class="{block.css}"><thead><tr>' if block.css
                       else f'<div class="scroll"{anchor}><table><thead><tr>')  # fmt: skip
            out.append("".join(f"<th>{_html_text(h)}</th>" for h in block.header) + "</tr></thead><tbody>")
            for row, kind in zip(block.rows, block.kinds, strict=True):
                if kind == "section":
                    out.append(f'<tr class="section"><td colspan="{len(row)}">{_html_text(row[0])}</td></tr>')
                else:
                    out.append(f'<tr class="{kind}">' + "".join(f"<td>{_html_text(c)}</td>" for c in row) + "</tr>")
            out.append("</tbody></table></div>")
        elif isinstance(block, Notes):
            out.append(
                f'<ul class="notes{" " + block.css if block.css else ""}">'
                + "".join(f"<li>{_html_text(i)}</li>" for i in block.items)
                + "</ul>"
            )
        elif isinstance(block, Image):
            data = base64.b64encode(block.path.read_bytes()).decode("ascii")
            anchor = f' id="{block.anchor}"' if block.anchor else ""
            out.append(f'<figure{anchor}><img src="data:image/png;base64,{data}" alt="{html.escape(block.alt)}">'
                       f"<figcaption>{html.escape(block.alt)}</figcaption></figure>")  # fmt: skip
    out += ["</body>", "</html>", ""]
    return "\n".join(out)


def _html_links(block: Links) -> str:
    """A list of links: the contents as a nav (its items indented by depth), others as a list after their lead."""
    items = "".join(f'<li class="depth{depth}"><a href="{html.escape(target)}">{_html_text(text)}</a></li>'
                    for depth, text, target in block.items)  # fmt: skip
    lead = f"<p>{_html_text(block.lead)}</p>" if block.lead else ""
    if block.css == "contents":
        return f'<nav id="contents" class="contents">{lead}<ul>{items}</ul></nav>'
    return f'<div class="links {block.css}">{lead}<ul>{items}</ul></div>'
