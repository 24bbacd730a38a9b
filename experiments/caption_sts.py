"""STS17-like decision pairs: STS-B multi-mt *train* captions in every language pair of en, de, es, fr.

Why: issue 40's search selected on STS-B multi-mt dev pairs (``decision.stsb_*``), which did not predict STS17's
monolingual tracks under distillation. STS17's tracks are image and video captions (SNLI-derived) scored by human
annotators in one language (en-en, es-es, ar-ar) or across two. STS-B's own captions (the first 2,000 pairs of its
train split: MSRvid and image captions; news and forums follow) are the closest text kind that is neither a report
set nor the dev pairs already drawn, and stsb-multi-mt gives them in four languages, row-parallel, so the pairs
can cross languages like STS17's cross tracks.

- every ``EVERY``-th caption pair (500 of 2,000), in all 16 ordered language pairs (``subset`` ``a-b``: s1 in a,
  s2 in b) — 4 monolingual, 12 cross-lingual;
- a pair whose text (any language's version, normalised as the leakage guard normalises) occurs in a training
  table of the kit is dropped in every language pair (Multi30k is Flickr captions; STS-B's captions include
  Flickr's): the set stays parallel and no candidate is selected on text it trained on;
- dataset ``stsb-captions``, appended to the kit's decision ``eval_sts`` (``decision.captions_mono`` /
  ``decision.captions_cross``: Spearman × 100, ``pipelines/eval_tasks/sts.py``). ``CAPTION_SETS`` versions how they
  are drawn (a row scored on them names it in its hash, ``experiments.row_hash``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl


log = logging.getLogger("polysent.experiments.caption_sts")

CAPTION_SETS = 1
DATASET = "stsb-captions"
CAPTIONS = 2000  # STS-B train lines 1–2,000 are captions (MSRvid, images); news and forums follow
EVERY = 4
LANGUAGES = ("en", "de", "es", "fr")
FAMILIES = ("captions",)


def uses_caption_sets(figures: list[str] | tuple[str, ...]) -> bool:
    """Whether any of ``figures`` (ledger names) is scored on the caption pairs."""
    from experiments.figures import family

    return any(family(f) in FAMILIES for f in figures)


def caption_pairs(stsb: Path, languages: tuple[str, ...] = LANGUAGES) -> pl.DataFrame:
    """``eval_sts`` rows of every ``EVERY``-th caption pair of STS-B multi-mt's train split, all language pairs."""
    import polars as pl

    from pipelines.eval_sets.sts import StsbMultiMtSts, read_sts_sources

    t = read_sts_sources([StsbMultiMtSts(format="stsb_multi_mt", path=stsb, languages=list(languages),
                                         split="train")])
    # ``idx`` is the reader's 1-based line number: lines 4, 8, …, 2000
    return (t.filter((pl.col("idx") <= CAPTIONS) & (pl.col("idx") % EVERY == 0))
            .with_columns(pl.lit(DATASET).alias("dataset")))


def seen_texts(train: Mapping[str, Path]) -> pl.Series:
    """Every string cell of the kit's training tables (Parquet files or folders of them), normalised and unique."""
    import polars as pl

    from pipelines.text_normalise import normalise_series

    out = []
    for name, path in sorted(train.items()):
        files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path] if path.suffix == ".parquet" else []
        for f in files:
            lf = pl.scan_parquet(f)
            cols = [c for c, dtype in lf.collect_schema().items() if dtype == pl.String]
            if cols:
                texts = lf.select(pl.concat_list(cols).alias("t")).explode("t").collect()["t"].drop_nulls()
                out.append(normalise_series(texts.unique()))
        log.debug("caption pairs: read the texts of training table %s", name)
    return pl.concat(out).unique() if out else pl.Series("norm", [], dtype=pl.String)


def without_seen(pairs: pl.DataFrame, seen: pl.Series) -> tuple[pl.DataFrame, list[int]]:
    """``pairs`` without every pair (by ``idx``, in all language pairs) one of whose texts is in ``seen``."""
    import polars as pl

    from pipelines.text_normalise import normalise_series

    texts = pl.concat([pairs.select("idx", pl.col("s1").alias("t")), pairs.select("idx", pl.col("s2").alias("t"))])
    texts = texts.with_columns(normalise_series(texts["t"]).alias("norm"))
    hit = texts.filter(pl.col("norm").is_in(seen.implode()))["idx"].unique().sort().to_list()
    return pairs.filter(~pl.col("idx").is_in(hit)), hit


def write_caption_sts(stsb: Path, train: Mapping[str, Path], decision_sts: Path, out: Path) -> dict[str, Any]:
    """The decision ``eval_sts`` (``decision_sts``) with the caption pairs appended, written to ``out`` (a temporary
    name, then a rename). Returns what was kept and dropped."""
    import polars as pl

    from pipelines.eval_sets.sts import SCHEMA

    pairs, dropped = without_seen(caption_pairs(stsb), seen_texts(train))
    base = pl.read_parquet(decision_sts)
    if base.filter(pl.col("dataset") == DATASET).height:
        raise ValueError(f"{decision_sts}: already holds dataset {DATASET!r} rows")
    table = pl.concat([base, pairs.select(list(SCHEMA)).cast(SCHEMA)])
    tmp = out.with_name(f".{out.name}.tmp")
    table.write_parquet(tmp)
    tmp.replace(out)
    per_pair = pairs.group_by("subset").len()["len"]
    stats = {"version": CAPTION_SETS, "pairs_per_language_pair": int(per_pair.min()) if len(per_pair) else 0,
             "language_pairs": len(per_pair), "dropped_seen_in_training": len(dropped)}
    log.info("caption pairs from %s: %s", stsb, stats)
    return stats
