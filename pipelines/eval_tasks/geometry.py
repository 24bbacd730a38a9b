"""Alignment and uniformity, pipelines part (scorer: ``models/evaluation/tasks/geometry.py``).

No set of its own: the translation pairs come from Tatoeba's ``eval_tatoeba`` or xSIM's ``eval_parallel``. Rows:
``wang_isola`` alignment and uniformity per language pair (raw values, lower is better; both are headlines, summarised
by the mean over pairs); the report adds a scatter of the two per run. No mteb counterpart.
"""

from __future__ import annotations

from typing import Any

from pipelines.eval_task_registry import EvalTask, Report, Variant, register_task


def alignment_uniformity_figure(rows: Any) -> Any:
    """Alignment against uniformity per run and language pair (a ``pipelines.report.document.Figure``), from the
    task's per-pair rows; None when there are none."""
    import polars as pl

    from pipelines.report import plots
    from pipelines.report.document import Figure
    from pipelines.report.results import is_aggregate

    data = (rows.filter(~is_aggregate() & pl.col("metric").is_in(["alignment", "uniformity"]))
            .pivot(on="metric", on_columns=["alignment", "uniformity"], index=["run", "variant", "subset"],
                   values="value")
            .drop_nulls(["alignment", "uniformity"]).sort("run", "variant", "subset"))
    if not data.height:
        return None
    title = "Alignment vs uniformity per run and language pair (lower is better on both axes)"
    return Figure("geometry_alignment_uniformity", plots.alignment_uniformity(data), title)


TASK = register_task(EvalTask(
    name="geometry", order=70,
    report=Report(
        title="Alignment and uniformity",
        variants={"wang_isola": Variant("Wang & Isola (2020): alignment of translation pairs, uniformity of both sides "
                                        "(lower is better)", 10)},
        metrics=("alignment", "uniformity"), headline=("alignment", "uniformity"), headline_every_metric=True,
        headline_mean=True, raw_metrics=frozenset({"alignment", "uniformity"}),
        lower_is_better=frozenset({"alignment", "uniformity"}), figure=alignment_uniformity_figure)))
