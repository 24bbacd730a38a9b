"""Evaluation sets in their distribution formats (and mteb's hub copies) → Parquet tables (stage ``eval_sets``).

One module per format family: :mod:`.tatoeba`, :mod:`.bucc`, :mod:`.sts`, :mod:`.clustering`, :mod:`.classification`,
:mod:`.parallel`, :mod:`.langid`, :mod:`.hub`; :mod:`.settings` holds the configuration models and :mod:`.build` the
stage function. The protocols these tables feed are specified in methods.md §7 and §9.
"""

from __future__ import annotations

from pipelines.eval_sets.build import build_eval_sets
from pipelines.eval_sets.settings import EvalSetsSettings, EvalSources

STAGE_VERSION = "3"  # 3 (issue 20): data-set language codes carried through; pair-classification tables

__all__ = ["STAGE_VERSION", "EvalSetsSettings", "EvalSources", "build_eval_sets"]
