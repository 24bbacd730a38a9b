"""``polysent sql``: one query printed as a table, or an interactive shell, over the warehouse views — read-only.

The shell is a query interface for a researcher: it reads the warehouse views and any local file (``read_parquet``,
``read_csv``, ``read_json``, ``read_duckdb`` …), and it never writes a file, creates or changes a database, installs or
loads an extension, or touches the network. DuckDB closes most of that by configuration, applied after the views are
defined and then locked (``lock_configuration``), so no statement can reopen it:

* ``autoinstall_known_extensions`` / ``autoload_known_extensions`` / ``allow_community_extensions`` off — a query
  that needs an extension fails instead of downloading or loading one;
* ``disabled_filesystems`` lists the remote file systems (http(s), s3, gcs, r2, hf, azure) — a second wall should one
  be loaded anyway;
* the configuration lock refuses ``SET``/``PRAGMA`` of any option and the table functions that switch logging or
  profiling to a file (``enable_logging(storage='file')``, ``enable_profiling(save_location=…)``);
* ``python_enable_replacements`` off — a query cannot read the Python variables of this module.

What no setting closes (tried on DuckDB 2.0.1): ``COPY … TO``, ``EXPORT DATABASE``, ``ATTACH`` (which creates or
modifies a database file) and ``INSTALL`` (which downloads) are statements that only ``enable_external_access =
false`` would stop — and that also stops reading local files, the shell's purpose (``allowed_directories`` re-opens a
directory for writing as well as reading). So every statement is classified by DuckDB's own parser
(``extract_statements``) before anything runs, and only queries pass: ``SELECT`` (with ``WITH``, ``FROM``-first,
``VALUES``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``, ``PIVOT … IN (…)``, which DuckDB parses as SELECT) and ``EXPLAIN
[ANALYZE]`` of such a query. A script with one refused statement runs none of them.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

import duckdb

from warehouse.catalog import connect
from warehouse.layout import DataRoot

HELP = """Type SQL ending with ';'. Meta-commands: .tables  .schema TABLE  .help  .quit
Read-only: SELECT / WITH / FROM / VALUES / DESCRIBE / SHOW / SUMMARIZE / EXPLAIN SELECT over the views and local
files; COPY, ATTACH, CREATE, INSERT, INSTALL, LOAD, SET, PRAGMA, EXPORT and the like are refused."""

# the remote file systems of the httpfs and azure extensions (disabled even though they cannot be loaded)
REMOTE_FILESYSTEMS = ("HTTPFileSystem", "S3FileSystem", "GCSFileSystem", "R2FileSystem", "HuggingFaceFileSystem",
                      "AzureBlobStorageFileSystem", "AzureDfsStorageFileSystem")
_QUERY_TYPES = frozenset({duckdb.StatementType.SELECT})
_EXPLAIN = re.compile(r"(?:\s|/\*.*?\*/|--[^\n]*\n)*explain\s+(?:analy[sz]e\s+)?(?:\([^()]*\)\s*)?", re.I | re.S)
_NESTED_TYPES = frozenset({"list", "struct", "map", "array", "union"})


class ReadOnlyError(ValueError):
    """A statement ``polysent sql`` refuses to run (it would write, install, load or change settings)."""


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``con`` unable to install or load extensions, reach the network or change its settings (see the module
    docstring for what settings cannot close and ``check_read_only`` closes instead)."""
    spill = os.path.join(tempfile.gettempdir(), f"polysent-sql-{os.getpid()}")  # not ./.tmp in the user's folder
    for stmt in (
        "SET autoinstall_known_extensions = false",
        "SET autoload_known_extensions = false",
        "SET allow_community_extensions = false",
        f"SET disabled_filesystems = '{','.join(REMOTE_FILESYSTEMS)}'",
        "SET python_enable_replacements = false",
        f"SET temp_directory = '{spill.replace(chr(39), chr(39) * 2)}'",
        "SET lock_configuration = true",  # last: nothing above can be undone by a query
    ):
        con.execute(stmt)


def read_only_connection(root: DataRoot) -> duckdb.DuckDBPyConnection:
    """The warehouse views in an in-memory DuckDB (no lock on any file), locked down for ad hoc queries."""
    con = connect(root)
    try:
        lock_down(con)
    except BaseException:
        con.close()
        raise
    return con


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise ``ReadOnlyError`` unless every statement of ``sql`` is a query (DuckDB's parser classifies them).

    Parse errors are DuckDB's own (``duckdb.ParserException``), raised before anything runs.
    """
    for stmt in con.extract_statements(sql):
        if stmt.type in _QUERY_TYPES:
            continue
        if stmt.type == duckdb.StatementType.EXPLAIN and _explains_a_query(con, stmt.query):
            continue
        kind = {duckdb.StatementType.LOAD: "INSTALL/LOAD", duckdb.StatementType.EXPLAIN: "EXPLAIN of a non-query",
                duckdb.StatementType.MULTI: "multi-part (PIVOT without IN (…))"}.get(stmt.type, stmt.type.name)
        text = " ".join(stmt.query.split())
        raise ReadOnlyError(
            f"{kind} statement refused ({text[:80] + ('…' if len(text) > 80 else '')!r}): polysent sql is "
            "read-only — it runs queries (SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN SELECT) over "
            "the views and local files, and never writes files or databases, installs or loads extensions, or "
            "changes settings; nothing was run")


def _explains_a_query(con: duckdb.DuckDBPyConnection, text: str) -> bool:
    """``EXPLAIN ANALYZE`` runs its statement: accept it only when what follows is itself a query."""
    m = _EXPLAIN.match(text)
    if m is None:
        return False
    try:
        inner = con.extract_statements(text[m.end():])
    except duckdb.Error:
        return False
    return len(inner) == 1 and inner[0].type in _QUERY_TYPES


def execute(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.DuckDBPyRelation | None:
    """Run ``sql`` after ``check_read_only``; the relation of its last statement (None when it returns nothing)."""
    check_read_only(con, sql)
    return con.sql(sql)


def flat_for_csv(rel: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """CSV has no nested values: list, struct, map, array and union columns become their JSON text (``to_json``),
    BLOBs their escaped text; other columns are unchanged."""
    if not any(t.id in _NESTED_TYPES or t.id == "blob" for t in rel.types):
        return rel
    exprs = []
    for name, t in zip(rel.columns, rel.types, strict=True):
        col = '"' + name.replace('"', '""') + '"'
        if t.id in _NESTED_TYPES:
            exprs.append(f"to_json({col})::VARCHAR AS {col}")
        elif t.id == "blob":
            exprs.append(f"{col}::VARCHAR AS {col}")
        else:
            exprs.append(col)
    return rel.project(", ".join(exprs))


def run_query(root: DataRoot, sql: str, fmt: str = "table", max_rows: int = 1000) -> int:
    """Print the result of ``sql``; return 0, or 2 (bad input: ``flows.exit_codes``) with the refusal or the DuckDB
    error on stderr."""
    con = read_only_connection(root)
    try:
        rel = execute(con, sql)
        if rel is None:
            return 0
        if fmt == "csv":
            sys.stdout.write(flat_for_csv(rel).pl().write_csv())
        elif fmt == "json":
            sys.stdout.write(rel.pl().write_json() + "\n")
        else:
            rel.show(max_rows=max_rows, max_width=200)
        return 0
    except (duckdb.Error, ReadOnlyError) as exc:
        print(f"polysent sql: {exc}", file=sys.stderr)
        return 2
    finally:
        con.close()


def interactive(root: DataRoot) -> int:  # pragma: no cover - exercised by hand (tmux)
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history)
    con = read_only_connection(root)
    print(f"polysent warehouse at {root.root} (in-memory views, no lock, read-only). {HELP}")
    buf: list[str] = []
    while True:
        try:
            line = input("polysent> " if not buf else "      ...> ")
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        stripped = line.strip()
        if not buf and stripped.startswith("."):
            cmd, _, arg = stripped.partition(" ")
            if cmd in (".quit", ".exit"):
                return 0
            if cmd == ".help":
                print(HELP)
            elif cmd == ".tables":
                con.sql("SELECT table_name FROM information_schema.tables ORDER BY 1").show(max_rows=500)
            elif cmd == ".schema" and arg:
                try:
                    rel = execute(con, f"DESCRIBE {arg}")  # checked: the argument is user text
                    if rel is not None:
                        rel.show(max_rows=500)
                except (duckdb.Error, ReadOnlyError) as exc:
                    print(exc)
            else:
                print(f"unknown command {cmd!r}. {HELP}")
            continue
        buf.append(line)
        if stripped.endswith(";"):
            sql = "\n".join(buf)
            buf.clear()
            try:
                rel = execute(con, sql)
                if rel is not None:
                    rel.show(max_rows=200, max_width=200)
            except (duckdb.Error, ReadOnlyError) as exc:
                print(exc)
