"""``polysent sql``: one query printed as a table, or an interactive shell, over the warehouse views."""

from __future__ import annotations

import contextlib
import sys

import duckdb

from warehouse.catalog import connect
from warehouse.layout import DataRoot

HELP = """Type SQL ending with ';'. Meta-commands: .tables  .schema TABLE  .help  .quit"""


def run_query(root: DataRoot, sql: str, fmt: str = "table", max_rows: int = 1000) -> int:
    """Print the result of ``sql``; return 0, or 1 with the DuckDB error on stderr."""
    con = connect(root)
    try:
        rel = con.sql(sql)
        if rel is None:
            return 0
        if fmt == "csv":
            df = rel.pl()
            sys.stdout.write(df.write_csv())
        elif fmt == "json":
            df = rel.pl()
            sys.stdout.write(df.write_json() + "\n")
        else:
            rel.show(max_rows=max_rows, max_width=200)
        return 0
    except duckdb.Error as exc:
        print(f"polysent sql: {exc}", file=sys.stderr)
        return 1
    finally:
        con.close()


def interactive(root: DataRoot) -> int:  # pragma: no cover - exercised by hand (tmux)
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history)
    con = connect(root)
    print(f"polysent warehouse at {root.root} (in-memory views, no lock). {HELP}")
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
                    con.sql(f"DESCRIBE {arg}").show(max_rows=500)
                except duckdb.Error as exc:
                    print(exc)
            else:
                print(f"unknown command {cmd!r}. {HELP}")
            continue
        buf.append(line)
        if stripped.endswith(";"):
            sql = "\n".join(buf)
            buf.clear()
            try:
                rel = con.sql(sql)
                if rel is not None:
                    rel.show(max_rows=200, max_width=200)
            except duckdb.Error as exc:
                print(exc)
