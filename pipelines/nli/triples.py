"""Stage ``nli_triples``: (anchor, positive, hard negative) triples for mSimCSE's supervised strategies.

Strategies (column ``strategy``):
- ``english``: English (premise, entailment hypothesis, contradiction hypothesis of the same premise) — from the English
  XNLI rows and from English NLI files (SNLI/MNLI pairs regrouped by premise, SimCSE's ``nli_for_simcse.csv``, hub
  datasets).
- ``cross_lingual``: the same triples with languages mixed. ``paper`` (mSimCSE paper, default): one row per English
  entailment example, each of the three sentences in a language drawn at random from the selected languages.
  ``code`` (``merge_multi_lingual.py``): 15 rows per example, the premise in every language, the entailment and
  contradiction hypotheses each in a random language.

Every row carries ``meaning_id``, a hash of the normalised English premise: rows built from one example (15 of them in
``code`` mode) and SNLI's several hypotheses per caption share it, so a batch sampler can keep same-meaning rows from
being each other's in-batch negatives — the false negatives mSimCSE's README blames for larger batches hurting.
Examples without a contradiction hypothesis are dropped and counted (the public code substitutes a random
contradiction, which is no hard negative). Random language choices are a seeded hash of (example, slot), so they are
reproducible and do not depend on row order.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipelines.leakage import EvalTextIndex, leakage_counts
from pipelines.nli.readers import read_nli_triplets
from pipelines.nli.sources import NliFileSource
from pipelines.partitioned import write_partitioned
from pipelines.text_normalise import normalise_series
from pipelines.xnli.groups import LANGUAGE_PRESETS, XnliSettings
from pipelines.xnli.readers import read_xnli, verify_alignment
from pipelines.xnli.sources import XnliSource
from warehouse.artifacts import StageResult

log = logging.getLogger("polysent.pipelines.nli")
STAGE_VERSION = "1"
COLUMNS = ("triple_id", "meaning_id", "strategy", "source", "sent0", "sent0_lang", "sent1", "sent1_lang", "hard_neg",
           "hard_neg_lang", "origin", "line")


class NliTripleSettings(BaseModel):
    """Which triples to build from XNLI (and from the English NLI files under ``sources.nli``)."""

    model_config = ConfigDict(extra="forbid")
    xnli_split: Literal["train", "dev", "test"] | None = Field(
        "dev", description="XNLI split the triples come from (the paper: train, i.e. XNLI-MT); null: none")
    languages: list[str] | str = Field("all", description=f"a list, or a preset: {', '.join(LANGUAGE_PRESETS)}")
    english: bool = True
    cross_lingual: Literal["paper", "code", "none"] = "paper"
    max_boundary_mismatch: float = Field(0.0, ge=0.0, le=1.0,
                                         description="fraction of rows whose premise boundaries may disagree")
    seed: int = 13

    @field_validator("languages")
    @classmethod
    def _languages(cls, v: list[str] | str) -> list[str]:
        return XnliSettings(languages=v).language_list


def meaning_ids(premises: pl.Series) -> pl.Series:
    """A seeded hash of the normalised English premise (20 decimal digits)."""
    h = pl.DataFrame({"n": normalise_series(premises)}).hash_rows(seed=0)
    return h.cast(pl.Utf8).str.zfill(20).alias("meaning_id")


def xnli_examples(frames: dict[str, pl.DataFrame]) -> tuple[pl.DataFrame, int]:
    """English entailment examples with the contradiction hypothesis of the same premise: (row, c_row) indices."""
    en = frames["en"].with_row_index("row")
    contra = (en.filter(pl.col("label") == "contradiction").group_by("premise")
              .agg(pl.col("row").min().alias("c_row")))
    ent = en.filter(pl.col("label") == "entailment").join(contra, on="premise", how="left", maintain_order="left")
    missing = int(ent["c_row"].null_count())
    return ent.filter(pl.col("c_row").is_not_null()).select("row", "c_row", "line"), missing


def _pick(keys: pl.DataFrame, seed: int, n_lang: int) -> pl.Series:
    return (keys.hash_rows(seed=seed) % n_lang).cast(pl.Int64)


def xnli_triples(settings: NliTripleSettings, frames: dict[str, pl.DataFrame], split: str,
                 origin: str) -> tuple[pl.DataFrame, dict[str, int]]:
    ex, missing = xnli_examples(frames)
    langs = settings.languages
    assert isinstance(langs, list)
    # texts per (lang, row): premise and hypothesis columns of every language, as one lookup frame
    lookup = pl.concat([frames[lang].with_row_index("row").select(
        pl.lit(lang).alias("lang"), pl.col("row").cast(pl.Int64), "premise", "hypothesis") for lang in frames])
    en = frames["en"]
    meaning = meaning_ids(en["premise"].gather(ex["row"].to_numpy()))
    base = ex.with_columns(pl.col("row").cast(pl.Int64), pl.col("c_row").cast(pl.Int64), meaning)
    out = []
    if settings.english:
        out.append(base.select(
            "row", "c_row", "meaning_id", "line", pl.lit("english").alias("strategy"),
            pl.lit("en").alias("sent0_lang"), pl.lit("en").alias("sent1_lang"), pl.lit("en").alias("hard_neg_lang")))
    if settings.cross_lingual != "none":
        lang_s = pl.Series(langs, dtype=pl.Utf8)
        if settings.cross_lingual == "paper":
            rows = base.with_columns(pl.lit(-1, pl.Int64).alias("_copy"))
        else:  # code: the premise in every language
            rows = base.join(pl.DataFrame({"_copy": range(len(langs))}, schema={"_copy": pl.Int64}), how="cross")
        picks = {}
        for slot in ("sent0", "sent1", "hard_neg"):
            k = rows.select("row", "_copy", pl.lit(slot).alias("slot"))
            picks[slot] = lang_s.gather(_pick(k, settings.seed, len(langs)).to_numpy())
        if settings.cross_lingual == "code":
            picks["sent0"] = lang_s.gather(rows["_copy"].to_numpy())
        out.append(rows.select("row", "c_row", "meaning_id", "line").with_columns(
            pl.lit("cross_lingual").alias("strategy"), picks["sent0"].alias("sent0_lang"),
            picks["sent1"].alias("sent1_lang"), picks["hard_neg"].alias("hard_neg_lang")))
    if not out:
        return pl.DataFrame(schema=dict.fromkeys(COLUMNS, pl.Utf8)), {"xnli_no_contradiction": missing}
    t = pl.concat(out)
    t = (t.join(lookup.select("lang", "row", pl.col("premise").alias("sent0")),
                left_on=["sent0_lang", "row"], right_on=["lang", "row"], how="left", maintain_order="left")
         .join(lookup.select("lang", "row", pl.col("hypothesis").alias("sent1")),
               left_on=["sent1_lang", "row"], right_on=["lang", "row"], how="left", maintain_order="left")
         .join(lookup.select("lang", pl.col("row").alias("c_row"), pl.col("hypothesis").alias("hard_neg")),
               left_on=["hard_neg_lang", "c_row"], right_on=["lang", "c_row"], how="left", maintain_order="left"))
    t = t.with_columns(pl.lit(f"xnli-{split}").alias("source"), pl.lit(origin).alias("origin"),
                       pl.col("line").cast(pl.Int64))
    return t, {"xnli_examples": ex.height + missing, "xnli_no_contradiction": missing}


def file_triples(src: NliFileSource) -> tuple[pl.DataFrame, dict[str, int]]:
    """English triples from one NLI file or hub dataset (pairs are regrouped by premise, SimCSE's construction)."""
    t = read_nli_triplets(src)
    t = t.with_columns(meaning_ids(t["sent0"]), pl.lit("english").alias("strategy"), pl.lit(src.name).alias("source"),
                       pl.lit("en").alias("sent0_lang"), pl.lit("en").alias("sent1_lang"),
                       pl.lit("en").alias("hard_neg_lang"), pl.col("line").cast(pl.Int64))
    return t, {f"{src.name}_triples": t.height}


def drop_leaks(t: pl.DataFrame, index: EvalTextIndex) -> tuple[pl.DataFrame, pl.DataFrame]:
    if not len(index):
        return t, leakage_counts("nli_triples", pl.DataFrame())
    members = pl.concat([t.select(pl.col("triple_id").alias("unit"), pl.col(f"{c}_lang").alias("lang"),
                                  normalise_series(t[c]).alias("norm")) for c in ("sent0", "sent1", "hard_neg")])
    matched = index.matches(members)
    return t.filter(~pl.col("triple_id").is_in(matched["unit"].unique().implode())), leakage_counts("nli_triples",
                                                                                                   matched)


def build_triples(settings: NliTripleSettings, xnli: XnliSource | None, files: list[NliFileSource],
                  index: EvalTextIndex, out: Path) -> StageResult:
    parts: list[pl.DataFrame] = []
    stats: dict[str, Any] = {}
    if xnli is not None and settings.xnli_split is not None:
        langs = settings.languages
        assert isinstance(langs, list)
        read = langs if "en" in langs else ["en", *langs]
        tables = read_xnli(xnli, settings.xnli_split, read)
        verify_alignment(tables, "en", max_boundary_mismatch=settings.max_boundary_mismatch)
        t, st = xnli_triples(settings, {lang: tb.frame for lang, tb in tables.items()}, settings.xnli_split,
                             tables["en"].origin)
        parts.append(t)
        stats.update(st)
    for src in files:
        t, st = file_triples(src)
        parts.append(t)
        stats.update(st)
    if not parts:
        raise ValueError("nli_triples has no input: set corpora.nli_triples.xnli_split with sources.xnli, "
                         "or list English NLI files under sources.nli")
    triples = pl.concat([p.select([c for c in COLUMNS if c != "triple_id"]) for p in parts if p.height])
    triples = triples.with_row_index("_i").with_columns(
        (pl.col("source") + "-" + pl.col("_i").cast(pl.Utf8).str.zfill(8)).alias("triple_id")).select(COLUMNS)
    n = triples.height
    triples, leak = drop_leaks(triples, index)
    stats.update({"triples": triples.height, "triples_leaked": n - triples.height,
                  **{f"triples_{k}": v for k, v in triples.group_by("strategy").len().iter_rows()}})
    write_partitioned(triples, out / "nli_triples", "strategy")
    leak.write_parquet(out / "leakage.parquet")
    log.info("nli_triples: %d triples (%s), %d removed for leakage", triples.height,
             ", ".join(f"{k[8:]} {v}" for k, v in sorted(stats.items())
                       if k.startswith("triples_") and k != "triples_leaked"),
             stats["triples_leaked"])
    return StageResult(tables={"nli_triples": "nli_triples", "leakage": "leakage.parquet"}, stats=stats)
