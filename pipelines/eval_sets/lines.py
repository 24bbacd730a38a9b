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


def aligned_lines(*paths: Path) -> list[list[str]]:
    """Line-aligned files (line i of each belongs together): their stripped lines, trailing blank lines dropped.

    Unequal line counts raise naming every file and its count, and a file with no non-blank line raises naming it:
    both are whole-file problems. Blank lines inside are rows, left to the caller: :class:`AlignedRows` drops such a
    row from every file at once.
    """
    raw = [read_text_lines(p) for p in paths]
    for path, t in zip(paths, raw, strict=True):
        if not drop_trailing_blank(t):  # the wrong file, not a set with a flaw: no row to align
            raise EvalFormatError(f"{path}: no readable row (the file is empty or blank); expected one row a line, "
                                  f"line-aligned with {', '.join(str(p) for p in paths if p != path)}")
    # the row count is the longest non-blank extent; blank lines beyond it are padding, blank lines within it are
    # rows (so an empty last label is a malformed row, not a count mismatch)
    n = max((len(drop_trailing_blank(t)) for t in raw), default=0)
    texts = [t[:n] if len(t) >= n else drop_trailing_blank(t) for t in raw]
    if any(len(t) != n for t in texts):
        counts = ", ".join(f"{p} has {len(t)}" for p, t in zip(paths, texts, strict=True))
        raise EvalFormatError(f"line counts differ: {counts} (trailing blank lines not counted); the files must be "
                              "line-aligned")
    return [[ln.strip() for ln in t] for t in texts]


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


def listing(numbers: Sequence[int], unit: str = "line", most: int = 5) -> str:
    """``line 3`` or ``lines 3, 7, …``: how a skip reason names what it covers (the first ``most`` numbers)."""
    shown = ", ".join(map(str, numbers[:most])) + (", …" if len(numbers) > most else "")
    return f"{unit}{'s' if len(numbers) > 1 else ''} {shown}"


class BadRows:
    """Malformed rows of one file: each is skipped, counted and reported with its file and line; a file none of whose
    rows is readable fails naming it.

    One bad line in a published set (a stray tab, a score typed as a word) should cost that row, not the whole run,
    and the count must say so: the stats get one entry per file and problem, naming the lines, and every row is
    logged as ``file:line: problem``. A file that yields nothing is no longer a data set with flaws but the wrong file.
    """

    MAX_LISTED = 5

    def __init__(self, path: Path, table: str, quiet: bool = False) -> None:
        self.path, self.table, self.quiet = Path(path), table, quiet
        self.lines: dict[str, list[int]] = {}

    def add(self, line: int, problem: str, detail: str = "") -> None:
        """Row at 1-based ``line`` is malformed; ``problem`` says what is wrong and what was expected, the same text for
        every such row (it is the count's key); ``detail`` is this row's own value, logged only."""
        self.lines.setdefault(problem, []).append(line)
        if not self.quiet:
            log.warning("%s:%d: %s%s; row skipped", self.path, line, problem, detail)

    def __len__(self) -> int:
        return sum(len(v) for v in self.lines.values())

    def report(self, good: int, skipped: Skipped) -> None:
        """Count the bad rows into ``skipped``; raise when the file had bad rows and no good one."""
        if not self.lines:
            return
        if not good:
            problem, lines = next(iter(self.lines.items()))
            raise EvalFormatError(f"{self.path}: no readable row ({len(self)} malformed; first {self.path}:{lines[0]}: "
                                  f"{problem})")
        for problem, lines in self.lines.items():
            shown = listing(lines, most=self.MAX_LISTED)
            skipped.add(self.table, f"{short(self.path)}: malformed row, {problem} ({shown})", len(lines))


class AlignedRows:
    """Rows matched by position across files (line i of each belongs with line i of the others): a malformed line
    drops its row from *every* file at once, counted and reported with its file and line.

    Dropping the bad line alone would pull every later line of that file onto the wrong partner — the silent
    misalignment these sets must never suffer. Dropping the whole row keeps every surviving row's position, its
    partners and its ``idx`` (the 0-based line, or the row number), so the gaps are the same in every file (xSIM pairs
    languages by sorting on ``idx``). The counts are lines, as every skip count of the stage: each malformed line gets a
    ``malformed row`` entry of its own file (:class:`BadRows`, one per file and problem, naming the lines), and the
    lines the other files lose with those rows get one entry for the set (``label``), naming the rows — one entry, not
    one per file, so a blank line in one of NTREX's 128 files does not bury the stats under 127 entries.

    A file none of whose rows is readable fails naming it (:meth:`BadRows.report`); rows each bad in *some* file,
    leaving none, fail naming every file. Unequal line counts — a whole-file problem — are :func:`aligned_lines`'s.
    """

    def __init__(self, files: Mapping[str, Path], table: str, label: str, rows: int,
                 lines: Mapping[str, Sequence[int]] | None = None, unit: str = "line") -> None:
        """``files``: key → path; ``rows``: the common row count; ``lines``: key → 1-based file line of each row
        (default: row + 1, one row a line); ``unit`` names the row numbers the set-wide entry lists."""
        self.files, self.table, self.label, self.rows, self.unit = dict(files), table, label, rows, unit
        self.lines = {k: list(v) for k, v in (lines or {}).items()}
        self.bad = {k: BadRows(p, table) for k, p in self.files.items()}
        self.bad_rows: dict[str, set[int]] = {k: set() for k in self.files}

    def line(self, key: str, row: int) -> int:
        return self.lines[key][row] if key in self.lines else row + 1

    def add(self, key: str, row: int, problem: str, detail: str = "") -> None:
        """Row ``row`` (0-based) is malformed in ``key``'s file: dropped from every file (see :meth:`BadRows.add`)."""
        if row not in self.bad_rows[key]:
            self.bad_rows[key].add(row)
            self.bad[key].add(self.line(key, row), f"{problem}; row dropped from all {len(self.files)} aligned files",
                              detail)

    def blank(self, key: str, texts: Sequence[str], expected: str) -> None:
        """Every empty entry of ``texts`` (``key``'s stripped lines) is a malformed row."""
        for row, text in enumerate(texts):
            if not text:
                self.add(key, row, f"empty line; expected {expected}")

    def report(self, skipped: Skipped) -> list[int]:
        """Count the dropped rows into ``skipped`` and return the kept rows (0-based, ascending); raise when a file
        has no readable row, or no row is readable in every file."""
        for key, bad in self.bad.items():
            bad.report(self.rows - len(self.bad_rows[key]), skipped)
        dropped = set().union(*self.bad_rows.values())
        kept = [r for r in range(self.rows) if r not in dropped]
        if self.rows and not kept:
            raise EvalFormatError(f"{self.label}: no row is readable in every aligned file ({len(dropped)} rows, each "
                                  f"malformed in one of {', '.join(map(str, self.files.values()))})")
        partner = sorted((r, k) for k in self.files for r in dropped - self.bad_rows[k])
        if partner:
            rows = sorted({r + 1 for r, _ in partner})
            skipped.add(self.table, f"{self.label}: line dropped with its row, malformed in another aligned file "
                                    f"({listing(rows, self.unit)})", len(partner))
        return kept
