"""The long results table every evaluation task writes: ``eval_results``.

One row per (run, model, task, variant, subset, languages, metric): ``variant`` labels the protocol (``canonical``,
``xtreme``, ``mteb``, ``oracle``, ``held_out``, ``ease``, ``senteval``, ``zero_shot``, ``laser``…), ``subset`` the
language, track, split or aggregate (``xnli14``, ``xtreme36``, ``all``), ``n`` the number of items scored (languages for
an aggregate). Values are points ×100 for accuracies, F1, correlations and V-measure, percent for error rates, raw for
thresholds, alignment and uniformity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema([
    ("run", pa.string()), ("model", pa.string()), ("task", pa.string()), ("variant", pa.string()),
    ("subset", pa.string()), ("languages", pa.string()), ("metric", pa.string()), ("value", pa.float64()),
    ("n", pa.int64()),
])


@dataclass
class Results:
    run: str
    model: str
    rows: list[tuple] = field(default_factory=list)

    def add(self, task: str, variant: str, subset: str, languages: str, metrics: dict[str, float], n: int) -> None:
        for metric, value in metrics.items():
            self.rows.append((task, variant, subset, languages, metric, float(value), int(n)))

    def table(self) -> pa.Table:
        rows = sorted(self.rows, key=lambda r: r[:5])
        cols = list(zip(*rows, strict=True)) if rows else [[] for _ in range(7)]
        return pa.table([[self.run] * len(rows), [self.model] * len(rows), *map(list, cols)], schema=SCHEMA)

    def write(self, path: Path) -> None:
        pq.write_table(self.table(), path)
