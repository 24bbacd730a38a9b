"""Where things live under a data root.

```
<root>/artifacts/<stage>/<key>/     published artifacts (manifest.json + Parquet or a model folder)
<root>/tmp/                          artifacts being written (same filesystem: publication is a rename)
<root>/locks/                        one lock file per artifact key (overlapping runs build a node once)
<root>/runs/                         one Parquet file per pipeline run and per run's node outcomes
<root>/catalog/                      current.json (which artifact backs each table, paths relative to <root>), views.sql
<root>/warehouse.duckdb              the same views in a DuckDB file, replaced atomically after each run
<root>/reports/latest.md             copy of the newest report
```
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DataRoot:
    root: Path

    @classmethod
    def at(cls, root: Path | str) -> DataRoot:
        return cls(Path(root).expanduser().resolve())

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def trash(self) -> Path:
        return self.root / "tmp" / "trash"

    @property
    def locks(self) -> Path:
        return self.root / "locks"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def catalog(self) -> Path:
        return self.root / "catalog"

    @property
    def views_sql(self) -> Path:
        return self.catalog / "views.sql"

    @property
    def current(self) -> Path:
        return self.catalog / "current.json"

    @property
    def duckdb_file(self) -> Path:
        return self.root / "warehouse.duckdb"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def file_hashes(self) -> Path:
        return self.catalog / "file_hashes.json"

    def artifact_dir(self, stage: str, key: str) -> Path:
        return self.artifacts / stage / key[:20]

    def lock_file(self, stage: str, key: str) -> Path:
        return self.locks / f"{stage}-{key[:20]}.lock"

    def ensure(self) -> None:
        for p in (self.artifacts, self.tmp, self.locks, self.runs, self.catalog, self.reports):
            p.mkdir(parents=True, exist_ok=True)
