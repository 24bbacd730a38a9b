"""Small line-per-sentence files (evaluation sets): read whole, BOM removed, any line ending, whitespace stripped."""

from __future__ import annotations

from pathlib import Path


def read_lines(path: Path) -> list[str]:
    """Lines of a text file: BOM removed, CRLF/LF/CR endings, surrounding whitespace stripped."""
    text = Path(path).read_text(encoding="utf-8-sig")
    return [ln.strip() for ln in text.splitlines()]
