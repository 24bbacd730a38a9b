"""A prepared kit ``me5_replication`` of tiny stand-in tables, for tests that replace the trainer or the scorers."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from experiments import kits


def stand_in_kit(root: Path, train: dict[str, str], report: dict[str, str] | None = None) -> Path:
    """Kit ``me5_replication`` under ``root``: one one-row Parquet file per table (``name → path`` in the kit), and a
    manifest naming them, with the training tables' hashes. Returns the kit's folder."""
    base = kits.kit_dir("me5_replication", root)
    base.mkdir(parents=True)
    report = report or {}
    for name, rel in {**train, **report}.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        pl.DataFrame({"x": [len(name)]}).write_parquet(base / rel)
    manifest = {"kit": "me5_replication", "scoring_sets": kits.SCORING_SETS["me5_replication"],
                "tables": {"train": train, "report": report},
                "hashes": {"train": kits.table_hashes({k: base / v for k, v in train.items()})}, "stats": {}}
    (base / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return base
