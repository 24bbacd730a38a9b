"""Report section ``Corpora``: rows per corpus table and language, the leakage guard's removals, drop counts.

Reads the upstream artifacts' tables with polars (Parquet files or hive-partitioned folders); no protocol beyond
counting. The counts are also the report artifact's ``report_counts`` table.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

from pipelines.report.document import Section, Table, Text

COUNTS_SCHEMA = {"table": pl.Utf8, "lang": pl.Utf8, "rows": pl.Int64}
# more languages than this and the counts table turns: a row per language, a column per table (a 128-language
# corpus as 128 columns is unreadable)
MAX_LANGUAGE_COLUMNS = 12


def corpus_counts(corpora: Mapping[str, Path]) -> pl.DataFrame:
    """Rows per (table, lang) of every corpus table (``lang`` = ``all`` for tables without a ``lang`` column, and
    for an empty table, which shows as one row of 0 so that the report says so instead of leaving it out);
    leakage and ``*_counts`` bookkeeping tables are not counted."""
    count_rows = []
    for table, path in sorted(corpora.items()):
        if table.startswith("leakage") or table.endswith("_counts"):
            continue
        path = Path(path)
        if path.is_dir() and not any(path.rglob("*.parquet")):
            # an empty table written before empty tables got a schema-only file: zero rows, not a failed report
            count_rows.append({"table": table, "lang": "all", "rows": 0})
            continue
        df = pl.scan_parquet(path / "**/*.parquet" if path.is_dir() else path, hive_partitioning=True)
        cols = df.collect_schema().names()
        counts = (df.group_by("lang").agg(pl.len().alias("rows")).sort("lang").collect() if "lang" in cols
                  else pl.DataFrame())
        if counts.height:
            count_rows += [{"table": table, "lang": r["lang"], "rows": r["rows"]} for r in counts.iter_rows(named=True)]
        else:
            count_rows.append({"table": table, "lang": "all", "rows": df.select(pl.len()).collect().item()})
    return pl.DataFrame(count_rows, schema=COUNTS_SCHEMA)


def corpora_section(corpora: Mapping[str, Path]) -> tuple[Section, pl.DataFrame]:
    """The ``Corpora`` section and the counts table it shows (long form)."""
    section = Section("Corpora")
    counts = corpus_counts(corpora)
    if counts.height:
        langs = sorted(set(counts["lang"]))
        if len(langs) <= MAX_LANGUAGE_COLUMNS:
            wide = (counts.pivot(on="lang", index="table", values="rows").select("table", *langs)
                    .with_columns(pl.col(lang).cast(pl.Utf8).fill_null("–") for lang in langs))
        else:
            tables = sorted(set(counts["table"]))
            wide = (counts.pivot(on="table", index="lang", values="rows").select("lang", *tables).sort("lang")
                    .with_columns(pl.col(t).cast(pl.Utf8).fill_null("–") for t in tables))
            totals = ", ".join(f"`{t}` {n:,} rows" for t, n in
                               counts.group_by("table").agg(pl.col("rows").sum()).sort("table").iter_rows())
            section.blocks.append(Text(f"{len(langs)} languages ({totals}); rows per language:"))
        section.blocks.append(Table(wide))
    else:
        section.blocks.append(Text("No corpus tables."))
    leakage = [pl.read_parquet(p) for t, p in sorted(corpora.items()) if t == "leakage" or t.startswith("leakage@")]
    leaks = pl.concat(leakage) if leakage else pl.DataFrame()
    if leaks.height:
        summary = (leaks.group_by("corpus", "eval_set").agg(pl.col("units_removed").sum())
                   .sort("corpus", "eval_set"))
        section.blocks += [Text("Removed for overlap with evaluation sets (leakage guard):"), Table(summary)]
    drops = [pl.read_parquet(p) for t, p in sorted(corpora.items()) if t.endswith("drop_counts")]
    if drops:
        d = pl.concat(drops, how="diagonal_relaxed").filter(pl.col("count") > 0)
        d_langs = sorted(set(d["lang"]))
        wide_d = (d.pivot(on="lang", index=["stage", "reason"], values="count", aggregate_function="sum")
                  .select("stage", "reason", *d_langs).sort("stage", "reason")
                  .with_columns(pl.col(lang).cast(pl.Utf8).fill_null("–") for lang in d_langs))
        section.blocks += [Text("Dropped on the way (EASE corpus: extraction, redirect resolution, hard negatives, "
                                "sampling):"), Table(wide_d)]
    return section, counts
