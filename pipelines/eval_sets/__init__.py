"""Evaluation sets in their distribution formats (and mteb's hub copies) → Parquet tables (stage ``eval_sets``).

One reader module per format family: :mod:`.tatoeba`, :mod:`.bucc`, :mod:`.sts`, :mod:`.clustering`,
:mod:`.classification`, :mod:`.parallel`, :mod:`.langid`, :mod:`.pair_classification`, :mod:`.hub`; which set each
evaluation task reads, and how, is declared by the task (``pipelines/eval_tasks/<name>.py``, gathered by
``pipelines.eval_task_registry``). :mod:`.settings` builds the configuration models from those declarations and
:mod:`.build` is the stage function. The protocols these tables feed are specified in methods.md §7 and §9.

The package imports its stage modules when one of their names is first asked for (``EvalSources``, ``EvalSetsSettings``,
``build_eval_sets``): a task module imports a reader of this package while the registry fills, before the settings
can be built from it.
"""

from __future__ import annotations

from typing import Any

STAGE_VERSION = "3"  # 3 (issue 20): data-set language codes carried through; pair-classification tables

__all__ = ["STAGE_VERSION", "EvalSetsSettings", "EvalSources", "build_eval_sets"]


def __getattr__(name: str) -> Any:
    if name in ("EvalSetsSettings", "EvalSources"):
        from pipelines.eval_sets import settings

        return getattr(settings, name)
    if name == "build_eval_sets":
        from pipelines.eval_sets.build import build_eval_sets

        return build_eval_sets
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
