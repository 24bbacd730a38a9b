"""Stage ``report``: Markdown + self-contained HTML report with SVG plots, and run-vs-run comparisons.

Modules: ``corpora`` (corpus counts, leakage, drops), ``training`` (start model, training languages and curves per
run), ``results`` (evaluation sections from ``eval_results``, trained runs beside their start models and peers),
``plots`` (matplotlib → SVG), ``document`` (the report model and its Markdown), ``html`` (the HTML page), ``build``
(the stage function), ``compare`` (``polysent report --compare``).
"""

from __future__ import annotations

from pipelines.report.build import STAGE_VERSION, ReportSettings, build_report
from pipelines.report.training import TrainedRun

__all__ = ["STAGE_VERSION", "ReportSettings", "TrainedRun", "build_report"]
