"""Prefect's local API database: a damaged one is moved aside before a run, so Prefect starts a fresh one.

Nothing a run needs lives in Prefect: tasks return small references and persist no results (``flows/pipeline.py``),
artifacts are verified by their own manifests. The ephemeral API database under ``PREFECT_HOME`` (``prefect.db``)
holds orchestration history only. When that SQLite file is damaged (a disk error, a copy taken mid-write, a truncated
backup), the API server fails at start-up and every ``polysent run`` that starts Prefect (one with something to build:
a no-op is recorded without it, ``flows/run.py:run_if_unchanged``) fails — with Prefect's own ephemeral server after
``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` (90 s) with "Timed out while attempting to connect to ephemeral
Prefect API server", the cause (``malformed database schema``) only in the server's traceback (found by
tests/faults/test_damage.py); with the server ``flows/prefect_server.py`` starts, at once, quoting the cause. Either way
no run gets through. ``quarantine_corrupt_database`` checks the file first (read-only ``PRAGMA quick_check``,
milliseconds on a small history) and renames a damaged one, with its ``-wal``/``-shm``, to
``prefect.db.corrupt-<UTC time>``, logging why. A database in use by another run is never touched: busy or locked is
not damage.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sqlite3
from pathlib import Path

log = logging.getLogger("polysent.flows")

_DAMAGED = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB


def prefect_database() -> Path | None:
    """The SQLite file of Prefect's ephemeral API, or None when Prefect talks to a server or another database."""
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url:  # a real Prefect server: its database is not ours to check
        return None
    url = settings.server.database.connection_url
    url = url.get_secret_value() if hasattr(url, "get_secret_value") else url
    if not url or not str(url).startswith("sqlite") or ":///" not in str(url):
        return None
    path = str(url).split(":///", 1)[1].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def database_problem(path: Path) -> str | None:
    """Why ``path`` is not a usable SQLite database, or None (also when it does not exist or is merely busy)."""
    if not path.exists():
        return None
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            rows = con.execute("PRAGMA quick_check").fetchall()
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        return str(exc) if code is not None and code & 0xFF in _DAMAGED else None
    if rows != [("ok",)]:
        return "; ".join(str(r[0]) for r in rows[:3])
    return None


def quarantine_corrupt_database(path: Path | None = None) -> Path | None:
    """Move a damaged Prefect database aside (see the module docstring); returns its new name, or None."""
    path = path if path is not None else prefect_database()
    if path is None:
        return None
    problem = database_problem(path)
    if problem is None:
        return None
    target = path.with_name(f"{path.name}.corrupt-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%S%f')}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{path}{suffix}")
        if src.exists():
            os.replace(src, f"{target}{suffix}")
    log.warning("Prefect's database %s is damaged (%s); moved it to %s — Prefect starts a fresh one (run history "
                "only: artifacts are verified by their manifests)", path, problem, target)
    return target
