"""The monolingual sentences a mining run reads: plain line files, TSV columns, Parquet columns or warehouse tables.

One reader per format, each returning :class:`TextColumn` (IDs and texts, rows aligned, and a description of where
they came from for messages and logs):

* ``lines`` — one sentence per line (``.gz`` / ``.bz2`` / ``.xz`` read transparently, a BOM dropped, line endings
  stripped); the ID is the 1-based line number;
* ``tsv`` — tab-separated columns, by 0-based index or, with ``header``, by name (BUCC's ``ID\\tsentence`` files:
  ``column 1``, ``id_column 0``); quotes are text, as in every TSV of the corpora this project reads;
* ``parquet`` — a column of a Parquet file or folder, optionally filtered by a DuckDB ``WHERE`` expression;
* ``table`` — a table or view of the warehouse (``wiki_sentences``, ``bitext_pairs`` …) with the same filter.

The format is taken from the file name when not given (``.parquet`` → parquet; ``.tsv``, or a text file with a
column named → tsv; else lines, refusing a file whose lines mostly hold a tab); a folder is read only with format
parquet, as every ``.parquet`` file under it.
Bad input is a :class:`MiningInputError` naming the file and line, or the column and the columns there are.
"""

from __future__ import annotations

import io
import lzma
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from pipelines.text_lines import open_binary

Format = Literal["lines", "tsv", "parquet", "table"]
FORMATS: tuple[str, ...] = ("lines", "tsv", "parquet", "table")


class MiningInputError(ValueError):
    """An input of a mining run that cannot be read as asked."""


@dataclass(frozen=True)
class TextColumn:
    ids: list[str]
    texts: list[str]
    source: str


@dataclass(frozen=True)
class TextInput:
    """Where one side's sentences are: a ``path`` (lines, tsv, parquet) or a warehouse ``table``."""

    path: Path | None = None
    table: str | None = None
    format: Format | None = None
    column: str | int | None = None  # tsv: index (or name with header); parquet / table: name (default "text")
    id_column: str | int | None = None  # None: line numbers (lines, tsv) or row numbers (parquet, table)
    header: bool = False  # tsv: the first line names the columns
    where: str | None = None  # parquet / table: a DuckDB filter, e.g. "lang = 'de'"

    def resolved_format(self) -> str:
        if self.format is not None:
            if self.format not in FORMATS:
                raise MiningInputError(f"format: expected one of {', '.join(FORMATS)}, got {self.format!r}")
            return self.format
        if self.table is not None:
            return "table"
        assert self.path is not None
        name = self.path.name.lower()
        for suffix in (".gz", ".bz2", ".xz"):
            name = name.removesuffix(suffix)
        if self.path.is_dir():
            raise MiningInputError(f"{self.path}: is a folder; expected a file (lines, .tsv or .parquet), or format "
                                   "parquet to read every .parquet file under the folder as one table")
        if name.endswith(".parquet"):
            return "parquet"
        if name.endswith(".tsv") or self.column is not None or self.id_column is not None or self.header:
            return "tsv"  # a column of a text file: tab-separated (BUCC's files have no .tsv suffix)
        return "lines"


def _open_text(path: Path) -> IO[str]:
    raw = open_binary(path)
    return io.TextIOWrapper(io.BufferedReader(raw) if isinstance(raw, io.RawIOBase) else raw, encoding="utf-8-sig",
                            newline="")


def _lines(path: Path) -> list[str]:
    try:
        with _open_text(path) as fh:
            return [line.rstrip("\r\n") for line in fh]
    except FileNotFoundError:
        raise MiningInputError(f"{path}: no such file") from None
    except (UnicodeDecodeError, OSError, EOFError, lzma.LZMAError) as exc:
        raise MiningInputError(f"{path}: not a readable UTF-8 text file ({exc})") from None


TAB_SHARE = 0.5  # a file read as plain lines whose sampled lines have a tab this often is taken to be a TSV


def read_lines_input(path: Path, *, refuse_tabs: bool = False) -> TextColumn:
    """One sentence per line. ``refuse_tabs`` (the format was guessed from the name): a file whose lines mostly hold
    a tab is refused, since reading it as lines would keep its IDs and other columns in the text."""
    texts = _lines(path)
    if refuse_tabs:
        sample = [t for t in texts[:1000] if t.strip()]
        tabbed = sum("\t" in t for t in sample)
        if sample and tabbed >= TAB_SHARE * len(sample):
            raise MiningInputError(f"{path}: looks tab-separated ({tabbed} of its first {len(sample)} lines hold a "
                                   "tab); name the text column (0-based index, format tsv), or give format lines to "
                                   "read each whole line as one sentence")
    return TextColumn([str(i) for i in range(1, len(texts) + 1)], texts, str(path))


def read_tsv_input(path: Path, column: str | int | None, id_column: str | int | None, header: bool) -> TextColumn:
    lines = _lines(path)
    names: list[str] = lines[0].split("\t") if header and lines else []
    first = 1 if header else 0

    def index(col: str | int | None, what: str, default: int | None) -> int | None:
        if col is None:
            return default
        if isinstance(col, int) or (isinstance(col, str) and col.isdigit()):
            return int(col)
        if col not in names:
            raise MiningInputError(f"{path}: {what} {col!r} is not a column name (header: {names}); give a 0-based "
                                   "index, or header: true with a name")
        return names.index(col)

    if column is None:
        width = max((len(line.split("\t")) for line in lines[first:first + 1000] if line), default=1)
        if width > 1:
            raise MiningInputError(f"{path}: {width} tab-separated columns and no text column named; expected a "
                                   "column (0-based index, or a header name with header)")
    text_col = index(column, "column", 0)
    id_col = index(id_column, "id_column", None)
    need = max(text_col or 0, id_col if id_col is not None else 0) + 1
    ids, texts = [], []
    for n, line in enumerate(lines[first:], start=first + 1):
        if not line:
            ids.append(str(n))
            texts.append("")
            continue
        parts = line.split("\t")
        if len(parts) < need:
            raise MiningInputError(f"{path}:{n}: expected at least {need} tab-separated columns (text column "
                                   f"{text_col}{'' if id_col is None else f', ID column {id_col}'}), got {len(parts)}")
        texts.append(parts[text_col])
        ids.append(parts[id_col] if id_col is not None else str(n))
    return TextColumn(ids, texts, f"{path} (column {column if column is not None else 0})")


def _query(con: Any, relation: str, column: str, id_column: str | None, where: str | None, what: str) -> TextColumn:
    import duckdb

    try:
        cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()]
    except duckdb.Error as exc:
        raise MiningInputError(f"{what}: cannot be read ({str(exc).splitlines()[0]})") from None
    for name, label in ((column, "column"), (id_column, "id_column")):
        if name is not None and name not in cols:
            raise MiningInputError(f"{what}: {label} {name!r} does not exist; its columns: {', '.join(cols)}")
    ident = f'CAST("{id_column}" AS VARCHAR)' if id_column is not None else "CAST(row_number() OVER () AS VARCHAR)"
    sql = f'SELECT {ident} AS id, CAST("{column}" AS VARCHAR) AS text FROM {relation}'
    if where:
        sql += f" WHERE {where}"
    try:
        table = con.sql(sql).to_arrow_table()
    except duckdb.Error as exc:
        raise MiningInputError(f"{what}: the filter {where!r} failed ({str(exc).splitlines()[0]})") from None
    texts = [t if t is not None else "" for t in table.column("text").to_pylist()]
    return TextColumn(table.column("id").to_pylist(), texts, what + (f" where {where}" if where else ""))


def read_parquet_input(path: Path, column: str | None, id_column: str | None, where: str | None) -> TextColumn:
    import duckdb

    if not path.exists():
        raise MiningInputError(f"{path}: no such file or folder")
    if path.is_dir() and not any(path.rglob("*.parquet")):
        raise MiningInputError(f"{path}: a folder without .parquet files; expected a Parquet file or a folder of them")
    pattern = str(path / "**" / "*.parquet") if path.is_dir() else str(path)
    con = duckdb.connect(":memory:")
    try:
        relation = f"read_parquet('{pattern.replace(chr(39), chr(39) * 2)}', hive_partitioning = true)"
        return _query(con, relation, column or "text", id_column, where, str(path))
    finally:
        con.close()


def read_table_input(table: str, column: str | None, id_column: str | None, where: str | None,
                     data_root: Path) -> TextColumn:
    from warehouse.catalog import connect
    from warehouse.layout import DataRoot

    if not table.replace("_", "").isalnum():
        raise MiningInputError(f"table {table!r}: expected a warehouse table name (letters, digits, _)")
    con = connect(DataRoot.at(data_root))
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if table not in tables:
            raise MiningInputError(f"table {table!r} is not in the warehouse at {data_root} (tables: "
                                   f"{', '.join(sorted(tables)) or 'none — run the pipeline first'})")
        return _query(con, f'"{table}"', column or "text", id_column, where, f"warehouse table {table}")
    finally:
        con.close()


def read_input(spec: TextInput, data_root: Path | None = None) -> TextColumn:
    """One side's sentences as the spec says (module docstring)."""
    fmt = spec.resolved_format()
    if fmt == "table":
        if spec.table is None or data_root is None:
            raise MiningInputError("a warehouse table needs table: NAME and a data root")
        return read_table_input(spec.table, _name(spec.column), _name(spec.id_column), spec.where, data_root)
    if spec.path is None:
        raise MiningInputError(f"format {fmt} needs a path")
    if fmt == "parquet":
        return read_parquet_input(spec.path, _name(spec.column), _name(spec.id_column), spec.where)
    if spec.where is not None:
        raise MiningInputError(f"{spec.path}: where filters Parquet files and warehouse tables only, not {fmt} files")
    if fmt == "tsv":
        return read_tsv_input(spec.path, spec.column, spec.id_column, spec.header)
    if spec.column is not None or spec.id_column is not None:
        raise MiningInputError(f"{spec.path}: a plain line file has no columns; name a .tsv file or give format tsv")
    return read_lines_input(spec.path, refuse_tabs=spec.format is None)


def _name(col: str | int | None) -> str | None:
    return None if col is None else str(col)


def read_wiki_sentences(paths: list[Path], lang: str, max_sentences: int | None = None) -> TextColumn:
    """The ``wiki_sentences`` of one Wikipedia language (the table folders of its dump shards) in document order
    (page, then sentence); the ID is ``<page_id>:<sent_id>``."""
    import duckdb

    files = [f for p in paths for f in (sorted(Path(p).rglob("*.parquet")) if Path(p).is_dir() else [Path(p)])]
    if not files:
        raise MiningInputError(f"{', '.join(map(str, paths))}: no wiki_sentences Parquet file for {lang}")
    con = duckdb.connect(":memory:")
    try:
        listing = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
        sql = (f"SELECT CAST(page_id AS VARCHAR) || ':' || CAST(sent_id AS VARCHAR) AS id, text "
               f"FROM read_parquet([{listing}], hive_partitioning = false) ORDER BY page_id, sent_id")
        if max_sentences is not None:
            sql += f" LIMIT {int(max_sentences)}"
        table = con.sql(sql).to_arrow_table()
    finally:
        con.close()
    return TextColumn(table.column("id").to_pylist(), [t or "" for t in table.column("text").to_pylist()],
                      f"wiki_sentences of {lang}")
