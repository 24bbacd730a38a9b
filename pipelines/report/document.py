"""The report as data — sections of text, tables and figures — and its Markdown rendering.

One document model feeds both outputs, so ``report.md`` and ``report.html`` always carry the same sections: Markdown
here (figures as relative links to ``plots/<name>.svg`` written next to it), HTML in ``pipelines/report/html.py``
(figures inlined). Text blocks use a tiny Markdown subset (```code```, ``_emphasis_``, ``**strong**``) that the HTML
renderer converts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

PLOTS_DIR = "plots"


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Table:
    """A table as shown: cells are printed as they are (floats with 4 decimals, null as ``–``)."""

    frame: pl.DataFrame


@dataclass(frozen=True)
class Figure:
    """An SVG figure; ``name`` is its file stem under ``plots/`` (letters, digits, ``_``, ``-``, ``.``)."""

    name: str
    svg: str
    caption: str


Block = Text | Table | Figure


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2


_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(text: str) -> str:
    """A file-name-safe stem for a figure (runs of other characters become ``_``)."""
    return _SAFE_NAME.sub("_", text).strip("_.") or "figure"


def cell_text(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def markdown_table(df: pl.DataFrame) -> str:
    cols = df.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.iter_rows():
        lines.append("| " + " | ".join(cell_text(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines)


def figures(sections: Sequence[Section]) -> list[Figure]:
    return [b for s in sections for b in s.blocks if isinstance(b, Figure)]


def render_markdown(title: str, preamble: Sequence[Block], sections: Sequence[Section],
                    footer: Sequence[Block] = ()) -> str:
    """Markdown text: ``# title``, the preamble blocks, each section, the footer; one blank line after each block."""
    parts = [f"# {title}", ""]

    def block(b: Block) -> None:
        if isinstance(b, Text):
            parts.append(b.text)
        elif isinstance(b, Table):
            parts.append(markdown_table(b.frame))
        else:
            parts.append(f"![{b.caption}]({PLOTS_DIR}/{b.name}.svg)")
        parts.append("")

    for b in preamble:
        block(b)
    for s in sections:
        parts += ["#" * s.level + " " + s.title, ""]
        for b in s.blocks:
            block(b)
    for b in footer:
        block(b)
    return "\n".join(parts)
