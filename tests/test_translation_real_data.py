"""The translation corpora end to end on the real public data (``configs/examples/shared-data-corpora.yaml``):
XNLI dev in 15 languages, a real TMX file, NTREX-128 as an N-way set, Multi30k gzipped Moses files, and the leakage
guard against Tatoeba, STS17, BUCC and the XNLI test split."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import REPO, write_config

from flows.config import load_config
from flows.nodes import execute_local
from flows.run import run_pipeline
from pipelines.text_normalise import normalise_series
from warehouse.catalog import connect
from warehouse.layout import DataRoot


def _rebase(obj: object, shared: Path) -> object:
    if isinstance(obj, dict):
        return {k: _rebase(v, shared) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rebase(v, shared) for v in obj]
    if isinstance(obj, str) and obj.startswith("../../../shared/data"):
        return obj.replace("../../../shared/data", str(shared))
    return obj


@pytest.mark.slow
@pytest.mark.shared_data
def test_example_config_builds_the_translation_corpora_on_real_data(tmp_path: Path, shared_data: Path) -> None:
    raw = _rebase(yaml.safe_load((REPO / "configs" / "examples" / "shared-data-corpora.yaml").read_text()), shared_data)
    assert isinstance(raw, dict)
    raw["data_root"] = str(tmp_path / "data")
    path = write_config(tmp_path / "c.yaml", raw)
    summary = run_pipeline(load_config(path), path, execute_local)
    assert sorted(summary.executed) == ["bitext_pairs", "nli_triples", "report", "xnli_groups"]
    con = connect(DataRoot.at(tmp_path / "data"))

    en = pl.read_csv(shared_data / "xnli" / "dev-en.tsv", separator="\t", has_header=False, quote_char=None,
                     new_columns=["p", "h", "l"])
    n_groups = len(set(en["p"]) | set(en["h"]))
    langs, per_lang = con.sql(
        "select count(distinct lang), count(*) / count(distinct lang) from xnli_groups").fetchall()[0]
    leaked_groups = con.sql("select sum(units_removed) from (select eval_set, max(units_removed) units_removed "
                            "from leakage where corpus = 'xnli_groups' group by eval_set, lang)").fetchall()[0][0]
    assert langs == 15 and n_groups - 40 < per_lang <= n_groups and leaked_groups > 0
    # XNLI test sentences that reappear in dev are gone from the groups
    test_texts = pl.concat([pl.read_csv(p, separator="\t", has_header=False, quote_char=None,
                                        new_columns=["p", "h", "l"]).select(pl.concat_list("p", "h").explode())
                            .to_series() for p in sorted((shared_data / "xnli").glob("test-*.tsv"))])
    groups = con.sql("select text from xnli_groups").pl()["text"]
    assert not set(normalise_series(groups)) & set(normalise_series(test_texts))

    strategies = dict(con.sql("select strategy, count(*) from nli_triples group by 1").fetchall())
    # dev: 830 premises, each with one entailment and one contradiction hypothesis; a few rows leak
    assert set(strategies) == {"english", "cross_lingual"} and all(815 <= n <= 830 for n in strategies.values())

    kept = {(p, lang): (q, k) for p, lang, q, k in
            con.sql("select pivot_lang, lang, quota, kept from bitext_filter_counts").fetchall()}
    assert set(kept) == {("en", x) for x in ("de", "es", "fr", "ru", "zh")} | {("es", x) for x in ("de", "fr", "ru",
                                                                                                   "zh")}
    assert all(k == q for q, k in kept.values())  # Chinese lengths weighted: the ratio filter keeps en-zh pairs
    # Multi30k captions overlap STS17's caption pairs: found and removed
    sts = dict(((lang), n) for lang, n in con.sql(
        "select lang, units_removed from leakage where corpus = 'bitext_pairs' and eval_set = 'sts17'").fetchall())
    assert sts.get("de", 0) > 0
