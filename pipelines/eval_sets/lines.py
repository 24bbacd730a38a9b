"""Line-exact reading of evaluation-set files, ``file:line`` errors, and the count of skipped lines.

Every evaluation format here is line-oriented: line i of one file belongs with line i of another (Tatoeba, MewsC-16,
NTREX, SemEval STS input/gold), or one line is one record (BUCC, MTOP, MLDoc). A line break is therefore only ``\\n``
(a ``\\r`` before it is dropped; a UTF-8 BOM at the start is dropped). ``str.splitlines`` is *not* used — and neither
is ``pipelines.text_lines.read_lines``, which is built on it — because it also breaks at ``\\x1c``–``\\x1e``, ``\\x85``,
``\\u2028`` and ``\\u2029``, characters that occur inside real sentences (XNLI ``test-el.tsv`` has five ``\\x1d``):
one such character would shift every following line and silently misalign the pairs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

log = logging.getLogger("polysent.pipelines.eval_sets")


class EvalFormatError(ValueError):
    """A malformed evaluation file; the message names ``file:line`` (1-based) and what was expected."""


def read_text_lines(path: Path) -> list[str]:
    """The lines of ``path`` (UTF-8, BOM dropped), split at ``\\n`` only, ``\\r`` line ends removed, not stripped.

    A final line break does not start an empty last line. Invalid UTF-8 raises naming ``file:line``.
    """
    path = Path(path)
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise EvalFormatError(f"{path}:{line}: invalid UTF-8 (byte {data[exc.start]:#04x}); expected UTF-8 text") \
            from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def drop_trailing_blank(lines: list[str]) -> list[str]:
    """``lines`` without the blank (whitespace-only) lines at its end."""
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    return lines[:end]


def first_blank(lines: Sequence[str]) -> int | None:
    """0-based index of the first blank (whitespace-only) line, or None."""
    return next((i for i, ln in enumerate(lines) if not ln.strip()), None)


def aligned_lines(*paths: Path) -> list[list[str]]:
    """Line-aligned files (line i of each belongs together): their stripped lines, trailing blank lines dropped.

    Unequal line counts raise naming every file and its count. Blank lines inside are left to the caller, which
    knows whether they are errors (:func:`require_no_blank`) or skipped rows.
    """
    raw = [read_text_lines(p) for p in paths]
    # the row count is the longest non-blank extent; blank lines beyond it are padding, blank lines within it are
    # rows (so an empty last label is reported as an empty line, not as a count mismatch)
    n = max((len(drop_trailing_blank(t)) for t in raw), default=0)
    texts = [t[:n] if len(t) >= n else drop_trailing_blank(t) for t in raw]
    if any(len(t) != n for t in texts):
        listing = ", ".join(f"{p} has {len(t)}" for p, t in zip(paths, texts, strict=True))
        raise EvalFormatError(f"line counts differ: {listing} (trailing blank lines not counted); the files must be "
                              "line-aligned")
    return [[ln.strip() for ln in t] for t in texts]


def require_no_blank(path: Path, lines: Sequence[str], what: str) -> None:
    """Raise naming ``path:line`` at the first empty line of ``lines`` (``what`` says what the line should hold)."""
    i = first_blank(lines)
    if i is not None:
        raise EvalFormatError(f"{path}:{i + 1}: empty line; expected {what}")


def empty(schema: Mapping[str, pl.DataType | type[pl.DataType]]) -> pl.DataFrame:
    return pl.DataFrame(schema=dict(schema))


def concat(frames: Sequence[pl.DataFrame], schema: Mapping[str, pl.DataType | type[pl.DataType]]) -> pl.DataFrame:
    """Vertical concatenation; an empty list gives an empty frame with ``schema``."""
    return pl.concat(frames, how="vertical") if frames else empty(schema)


def short(path: Path) -> str:
    """``folder/file``: how skip reasons name a file (stats stay the same wherever the data lies)."""
    path = Path(path)
    return f"{path.parent.name}/{path.name}"


@dataclass
class Skipped:
    """Lines (or rows) a reader skipped on purpose, counted per table and reason; every skip is also logged."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, table: str, reason: str, n: int = 1) -> None:
        if n <= 0:
            return
        per_table = self.counts.setdefault(table, {})
        per_table[reason] = per_table.get(reason, 0) + n
        log.info("%s: skipped %d: %s", table, n, reason)

    def total(self, table: str) -> int:
        return sum(self.counts.get(table, {}).values())

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {t: dict(sorted(r.items())) for t, r in sorted(self.counts.items())}


def skipped_or_new(skipped: Skipped | None) -> Skipped:
    return skipped if skipped is not None else Skipped()
