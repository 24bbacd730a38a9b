"""Run-vs-run comparison of ``eval_results`` (``polysent report --compare RUN_A RUN_B``).

Joins the two runs' rows on (task, variant, subset, languages, metric); ``delta = value_b − value_a`` in the metric's
own scale (docs/methods.md §7: points, percent for xSIM error, raw for alignment/uniformity/threshold). Rows that only
one run has are kept with a null on the other side. ``write_comparison`` writes Markdown + self-contained HTML with a
run-A-vs-run-B scatter (``pipelines/report/plots.py``).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipelines.report import plots
from pipelines.report.build import write_report
from pipelines.report.document import Figure, Section, Table, Text, safe_name
from pipelines.report.results import (
    KEY,
    SCALES,
    check_unique,
    empty_results,
    format_value,
    headlines,
    lower_is_better,
    normalise_results,
    ordered,
    raw_metrics,
)

COMPARISON_SCHEMA: dict[str, pl.DataType] = {**{k: pl.Utf8() for k in KEY}, "value_a": pl.Float64(),
                                             "value_b": pl.Float64(), "delta": pl.Float64()}


class UnknownRunError(ValueError):
    def __init__(self, unknown: list[str], known: list[str]) -> None:
        self.unknown, self.known = unknown, known
        super().__init__(f"unknown run(s) {', '.join(map(repr, unknown))}; known runs: "
                         f"{', '.join(known) if known else '(none: no evaluation results)'}")


def known_runs(results: pl.DataFrame) -> list[str]:
    return sorted(set(results["run"].drop_nulls()))


def _one_run(results: pl.DataFrame, run: str, value: str) -> pl.DataFrame:
    return results.filter(pl.col("run") == run).select(*KEY, pl.col("value").alias(value))


def compare_runs(results: pl.DataFrame, run_a: str, run_b: str) -> pl.DataFrame:
    """[task, variant, subset, languages, metric, value_a, value_b, delta] for every key either run has, in report
    order; ``delta = value_b − value_a`` (null when one side is missing). Raises UnknownRunError for an unknown run
    and ValueError when a run has two values for one key."""
    if run_a == run_b:
        raise ValueError(f"compare two different runs (got {run_a!r} twice)")
    known = known_runs(results)
    unknown = [r for r in dict.fromkeys((run_a, run_b)) if r not in known]
    if unknown:
        raise UnknownRunError(unknown, known)
    check_unique(results.filter(pl.col("run").is_in([run_a, run_b])))
    joined = _one_run(results, run_a, "value_a").join(_one_run(results, run_b, "value_b"), on=list(KEY), how="full",
                                                      coalesce=True, nulls_equal=True)
    return ordered(joined.with_columns(delta=pl.col("value_b") - pl.col("value_a")).select(*COMPARISON_SCHEMA))


def latest_per_run(frame: pl.DataFrame, created_at: str = "created_at", source: str = "source") -> pl.DataFrame:
    """Rows of warehouse history (``eval_results_all`` + each row's artifact ``source`` and its ``created_at``) →
    ``eval_results``: per (run, task, variant) only the rows of the most recent artifact (ties: the larger source
    path; artifacts without a time count as oldest). Legacy rows are converted as in ``read_results``."""
    if frame.height == 0:
        return empty_results()
    parts = []
    for src, grp in frame.group_by(source, maintain_order=True):
        parts.append(normalise_results(grp.drop(source, created_at), f"eval_results_all ({src[0]})")
                     .with_columns(pl.lit(grp[created_at][0], dtype=frame.schema[created_at]).alias(created_at),
                                   pl.lit(src[0]).alias(source)))
    rows = pl.concat(parts)
    best = (rows.select("run", "task", "variant", created_at, source).unique()
            .sort(created_at, source, nulls_last=False)
            .group_by("run", "task", "variant").agg(pl.col(source).last()))
    return rows.join(best, on=["run", "task", "variant", source], how="semi").drop(created_at, source)


def largest_differences(comparison: pl.DataFrame, n: int = 15) -> pl.DataFrame:
    """The ``n`` rows with both values and the largest |delta| (ties in report order)."""
    both = ordered(comparison.filter(pl.col("delta").is_not_null()))
    return both.with_columns(_abs=pl.col("delta").abs()).sort("_abs", descending=True, maintain_order=True,
                                                              nulls_last=True).head(n).drop("_abs")


def _shown(comparison: pl.DataFrame, run_a: str, run_b: str) -> pl.DataFrame:
    """Formatted table: key, run A, run B, Δ, and which direction is better for the metric."""
    metric = comparison["metric"]
    cols = {
        run_a: [format_value(m, v) for m, v in zip(metric, comparison["value_a"], strict=True)],
        run_b: [format_value(m, v) for m, v in zip(metric, comparison["value_b"], strict=True)],
        f"Δ ({run_b} − {run_a})": [format_value(m, v) for m, v in zip(metric, comparison["delta"], strict=True)],
    }
    better = pl.when(pl.col("metric").is_in(lower_is_better())).then(pl.lit("lower")).otherwise(pl.lit("higher"))
    return comparison.select(*KEY).with_columns(*(pl.Series(k, v, dtype=pl.Utf8) for k, v in cols.items()),
                                                better.alias("better"))


def write_comparison(results: pl.DataFrame, run_a: str, run_b: str, out_dir: Path) -> tuple[Path, Path]:
    """Write ``compare_<A>_vs_<B>.md`` / ``.html`` (+ ``plots/compare_<A>_vs_<B>.svg``) into ``out_dir``."""
    cmp = compare_runs(results, run_a, run_b)
    stem = f"compare_{safe_name(run_a)}_vs_{safe_name(run_b)}"
    two = results.filter(pl.col("run").is_in([run_a, run_b]))
    # headlines over the rows both runs have, so that a computed mean averages the same subsets on both sides
    shared = two.join(cmp.filter(pl.col("delta").is_not_null()).select(*KEY), on=list(KEY), how="semi",
                      nulls_equal=True)
    head = compare_runs(headlines(shared), run_a, run_b) if shared.height else cmp.clear()
    models = {r: ", ".join(sorted(set(two.filter(pl.col("run") == r)["model"].drop_nulls()))) or "–"
              for r in (run_a, run_b)}
    preamble = [Text(f"Run A `{run_a}` (model {models[run_a]}) against run B `{run_b}` (model {models[run_b]}); "
                     f"Δ = B − A. " + SCALES)]
    sections = [Section("Headline numbers", [Text("Over the rows both runs have (a `mean` averages their common "
                                                  "subsets)."), Table(_shown(head, run_a, run_b))]),
                Section("Largest differences", [Table(_shown(largest_differences(cmp), run_a, run_b))])]
    points = cmp.filter(pl.col("delta").is_not_null() & ~pl.col("metric").is_in(raw_metrics()))
    if plots.available() and points.height:
        caption = f"{run_b} against {run_a}, one point per task, variant, subset and metric (points; xSIM error in %)"
        svg = plots.scatter_runs(points, x="value_a", y="value_b", hue="task", title=f"{run_b} vs {run_a}",
                                 xlabel=run_a, ylabel=run_b)
        sections[1].blocks.append(Figure(stem, svg, caption))
    sections.append(Section("All results", [Table(_shown(cmp.filter(pl.col("delta").is_not_null()), run_a,
                                                         run_b))]))
    for run, col in ((run_a, "value_b"), (run_b, "value_a")):
        only = cmp.filter(pl.col(col).is_null())
        if only.height:
            sections.append(Section(f"Only in {run}", [Table(_shown(only, run_a, run_b))]))
    return write_report(out_dir, stem, f"Comparison: {run_a} vs {run_b}", preamble, sections)
