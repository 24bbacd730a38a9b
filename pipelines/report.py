"""Stage ``report``: a Markdown summary of corpus counts and evaluation metrics.

Reads the upstream artifacts' tables with polars and writes ``report.md`` plus the metrics it shows as
``report_metrics.parquet``. Plots and the full evaluation suite come with the evaluation issue.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ConfigDict

from warehouse.artifacts import StageResult

STAGE_VERSION = "1"


class ReportSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = "polysent pipeline report"


def _md_table(df: pl.DataFrame) -> str:
    cols = df.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.iter_rows():
        lines.append("| " + " | ".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in row) + " |")
    return "\n".join(lines)


def build_report(settings: ReportSettings, corpora: Mapping[str, Path], evaluations: Mapping[str, Path],
                 pipeline: str, out: Path) -> StageResult:
    """``corpora``: table name → Parquet file or hive folder; ``evaluations``: node → ``eval_results.parquet``."""
    parts = [f"# {settings.title}", "", f"Pipeline `{pipeline}`.", "", "## Corpora", ""]
    count_rows = []
    for table, path in sorted(corpora.items()):
        df = pl.scan_parquet(Path(path) / "**/*.parquet" if Path(path).is_dir() else path,
                             hive_partitioning=True)
        cols = df.collect_schema().names()
        if "lang" in cols:
            counts = df.group_by("lang").agg(pl.len().alias("rows")).sort("lang").collect()
            count_rows += [{"table": table, "lang": r["lang"], "rows": r["rows"]} for r in counts.iter_rows(named=True)]
        else:
            count_rows.append({"table": table, "lang": "*", "rows": df.select(pl.len()).collect().item()})
    counts = pl.DataFrame(count_rows, schema={"table": pl.Utf8, "lang": pl.Utf8, "rows": pl.Int64})
    wide = counts.pivot(on="lang", index="table", values="rows").fill_null(0)
    parts += [_md_table(wide), "", "## Evaluation", ""]
    metrics = pl.concat([pl.read_parquet(p) for p in evaluations.values()]) if evaluations else pl.DataFrame()
    if metrics.height:
        summary = (metrics.filter(pl.col("metric") == "accuracy")
                   .pivot(on="direction", index=["train_run", "task", "lang"], values="value")
                   .sort("train_run", "task", "lang"))
        parts += [_md_table(summary), ""]
        means = metrics.filter(pl.col("metric") == "accuracy").group_by("train_run", "task").agg(
            pl.col("value").mean().alias("mean_accuracy")).sort("train_run", "task")
        parts += ["Mean accuracy over languages and both directions:", "", _md_table(means), ""]
    else:
        parts += ["No evaluation results.", ""]
    parts += [f"_Generated {dt.date.today().isoformat()} by polysent._", ""]
    (out / "report.md").write_text("\n".join(parts), encoding="utf-8")
    counts.write_parquet(out / "report_counts.parquet")
    return StageResult(tables={"report_counts": "report_counts.parquet"}, stats={"report": "report.md"})
