"""The stage contract: what a stage function in ``pipelines/`` or ``models/`` returns.

A stage writes its files into the folder it is given (``out``) and returns a ``StageResult``: which of those files
are tables (name → path relative to ``out``: a Parquet file or a folder of Parquet parts) and free-form stats. The
artifact store (``warehouse.artifacts.ArtifactStore``) checks that each declared table exists, counts its rows from
the Parquet footers and records both in the artifact's manifest; ``flows/`` never looks inside.

The result is checked when it is made, so a stage that names a table badly fails at its own ``return`` line with the
table's name and what was expected, rather than after publishing: a table path must be relative and stay inside the
artifact folder (``out / "/abs"`` would silently point elsewhere), and stats keys must be strings (they become JSON
object keys in the manifest).

Standard library only (see ``contract/__init__.py`` for why this lives in a package of its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any


@dataclass(frozen=True)
class StageResult:
    """What a stage function returns: its tables (name → path relative to the artifact folder) and free stats.

    ``tables`` may be empty (the tokenizer writes a model folder, no table); ``stats`` go to the manifest as JSON.
    Both are copied on construction, so a stage that keeps mutating its own dicts cannot change a returned result.
    """

    tables: Mapping[str, str] = field(default_factory=dict)
    stats: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.tables, Mapping):
            raise TypeError(f"StageResult.tables: expected a mapping of table name → relative path, "
                            f"got {type(self.tables).__name__}")
        if not isinstance(self.stats, Mapping):
            raise TypeError(f"StageResult.stats: expected a mapping of str → value, got {type(self.stats).__name__}")
        for name, rel in self.tables.items():
            _check_table(name, rel)
        bad = [k for k in self.stats if not isinstance(k, str)]
        if bad:
            raise TypeError(f"StageResult.stats: keys must be strings (they become JSON keys), got {bad[:3]!r}")
        object.__setattr__(self, "tables", dict(self.tables))
        object.__setattr__(self, "stats", dict(self.stats))


def _check_table(name: object, rel: object) -> None:
    if not isinstance(name, str) or not name:
        raise TypeError(f"StageResult.tables: a table name must be a non-empty string, got {name!r}")
    if not isinstance(rel, str) or not rel:
        raise TypeError(f"StageResult.tables[{name!r}]: expected a non-empty path relative to the artifact folder "
                        f"as a string, got {rel!r}")
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts:
        raise ValueError(f"StageResult.tables[{name!r}] = {rel!r}: expected a path relative to the artifact folder "
                         "that stays inside it (no leading '/', no '..')")
