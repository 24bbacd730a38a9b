from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import SAMPLE

from pipelines.benchmarks import EvalSetsSettings, build_eval_sets


def test_eval_sets_read_all_three_formats(tmp_path: Path) -> None:
    r = build_eval_sets(EvalSetsSettings(), tmp_path, SAMPLE / "eval" / "tatoeba", SAMPLE / "eval" / "sts",
                        SAMPLE / "eval" / "clustering")
    assert r.stats == {"eval_tatoeba": 400, "eval_sts": 120, "eval_clustering": 120}
    sts = pl.read_parquet(tmp_path / "eval_sts.parquet")
    assert sts["score"].min() >= 0 and sts["score"].max() <= 5


def test_eval_sets_language_filter_errors_on_unknown(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no Tatoeba files for \['xho'\]"):
        build_eval_sets(EvalSetsSettings(tatoeba_languages=["xho"]), tmp_path, SAMPLE / "eval" / "tatoeba")
