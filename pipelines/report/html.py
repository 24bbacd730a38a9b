"""The report as one self-contained HTML file: inline CSS, inline SVG figures, no script and no external reference.

Renders the same document model as the Markdown (``pipelines/report/document.py``). Figures are inlined without their
XML prolog, DOCTYPE and namespace declarations (HTML5 parses inline ``<svg>`` without them), and every SVG id is
prefixed per figure so that several figures never share an id in one page.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from pipelines.report.document import Block, Figure, Section, Table, Text, cell_text, safe_name

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0;
       color: #1d1d1f; background: #fff; }
main { max-width: 1200px; margin: 0 auto; padding: 1.5rem 2rem 3rem; }
h1 { font-size: 1.7rem; border-bottom: 2px solid #ddd; padding-bottom: .4rem; }
h2 { font-size: 1.35rem; margin-top: 2.2rem; border-bottom: 1px solid #eee; }
h3 { font-size: 1.1rem; margin-top: 1.8rem; }
nav ul { columns: 2; padding-left: 1.2rem; }
table { border-collapse: collapse; margin: .6rem 0 1.2rem; font-size: .85rem; display: block; overflow-x: auto; }
th, td { border: 1px solid #ddd; padding: .25rem .55rem; text-align: left; white-space: nowrap; }
th { background: #f4f4f6; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:nth-child(even) { background: #fafafa; }
code { background: #f2f2f4; padding: 0 .25rem; border-radius: 3px; font-size: .9em; }
figure { margin: 1rem 0 1.6rem; overflow-x: auto; }
figure svg { max-width: 100%; height: auto; }
figcaption { font-size: .85rem; color: #555; margin-top: .3rem; }
footer { margin-top: 2.5rem; font-size: .8rem; color: #666; }
""".strip()

_NUMERIC = re.compile(r"^[-+]?(\d+(\.\d*)?([eE][-+]?\d+)?|nan|inf)$|^–$")
_PROLOG = re.compile(r"<\?xml[^>]*\?>\s*|<!DOCTYPE[^>]*>\s*", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_XMLNS = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')
_ID_REFS = re.compile(r'(\bid=")([^"]+)"|(url\(#)([^)]+)\)|(xlink:href="#)([^"]+)"|(\bhref="#)([^"]+)"')


def inline_markup(text: str) -> str:
    """Escape ``text`` and convert the Markdown subset of text blocks: ```code```, ``**strong**``, ``_emphasis_``."""
    out = html.escape(text, quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"(?<![\w])_(.+?)_(?![\w])", r"<em>\1</em>", out)


def inline_svg(svg: str, prefix: str) -> str:
    """Standalone SVG → an ``<svg>`` element for an HTML5 page, every id (and reference to it) prefixed."""
    body = _METADATA.sub("", _PROLOG.sub("", svg))
    body = _XMLNS.sub("", body)

    def sub(m: re.Match[str]) -> str:
        for i in (1, 3, 5, 7):
            if m.group(i):
                close = ")" if i == 3 else '"'
                return f"{m.group(i)}{prefix}-{m.group(i + 1)}{close}"
        return m.group(0)  # pragma: no cover - one of the alternatives always matched

    return _ID_REFS.sub(sub, body).strip()


def html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in t.frame.columns)
    rows = []
    for row in t.frame.iter_rows():
        cells = []
        for v in row:
            text = cell_text(v)
            cls = ' class="num"' if _NUMERIC.match(text) else ""
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>"


def _block(b: Block) -> str:
    if isinstance(b, Text):
        return f"<p>{inline_markup(b.text)}</p>"
    if isinstance(b, Table):
        return html_table(b)
    assert isinstance(b, Figure)
    return (f'<figure id="fig-{b.name}">\n{inline_svg(b.svg, safe_name(b.name))}\n'
            f"<figcaption>{html.escape(b.caption)}</figcaption>\n</figure>")


def _anchor(i: int, title: str) -> str:
    return f"s{i}-{safe_name(title.lower())}"


def render_html(title: str, preamble: Sequence[Block], sections: Sequence[Section],
                footer: Sequence[Block] = ()) -> str:
    """The whole page: title, preamble, a table of contents, the sections, the footer."""
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{html.escape(title)}</title>", f"<style>\n{CSS}\n</style>", "</head>", "<body>", "<main>",
             f"<h1>{html.escape(title)}</h1>"]
    parts += [_block(b) for b in preamble]
    if len(sections) > 1:
        items = "".join(f'<li><a href="#{_anchor(i, s.title)}">{html.escape(s.title)}</a></li>'
                        for i, s in enumerate(sections))
        parts.append(f"<nav><ul>{items}</ul></nav>")
    for i, s in enumerate(sections):
        level = min(max(s.level, 2), 6)
        parts.append(f'<section>\n<h{level} id="{_anchor(i, s.title)}">{html.escape(s.title)}</h{level}>')
        parts += [_block(b) for b in s.blocks]
        parts.append("</section>")
    if footer:
        parts.append("<footer>" + "\n".join(_block(b) for b in footer) + "</footer>")
    parts += ["</main>", "</body>", "</html>", ""]
    return "\n".join(parts)
