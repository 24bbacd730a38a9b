"""Stage ``report``: Markdown + self-contained HTML report with SVG plots, and run-vs-run comparisons.

Modules: ``corpora`` (corpus counts, leakage, drops), ``results`` (evaluation sections from ``eval_results``),
``plots`` (matplotlib → SVG), ``document`` (the report model and its Markdown), ``html`` (the HTML page), ``build``
(the stage function), ``compare`` (``polysent report --compare``).
"""

from __future__ import annotations

from pipelines.report.build import STAGE_VERSION, ReportSettings, build_report

__all__ = ["STAGE_VERSION", "ReportSettings", "build_report"]
