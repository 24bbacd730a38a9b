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
contradiction, which is no hard negative). Random language choices are a seeded splitmix64 hash of (example, copy,
slot): reproducible across library versions and independent of row order.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from contract import StageResult
from pipelines.leakage import EvalTextIndex, leakage_counts
from pipelines.nli.readers import read_nli_triplets
from pipelines.nli.sources import NliFileSource
from pipelines.partitioned import write_partitioned
from pipelines.seeded_hash import seeded_hash
from pipelines.text_normalise import normalise_series
from pipelines.xnli.languages import LANGUAGE_PRESETS, xnli_languages_validator
from pipelines.xnli.readers import read_xnli, verify_alignment
from pipelines.xnli.sources import XnliSource

log = logging.getLogger("polysent.pipelines.nli")
STAGE_VERSION = "3"  # 2: language draws and meaning ids by version-stable hashes; 3: no triple → a schema-only
#   nli_triples file
COLUMNS = ("triple_id", "meaning_id", "strategy", "source", "sent0", "sent0_lang", "sent1", "sent1_lang", "hard_neg",
           "hard_neg_lang", "origin", "line")
SCHEMA = {**dict.fromkeys(COLUMNS, pl.Utf8), "line": pl.Int64}  # the table's types, for a triple-less build


class NliTripleSettings(BaseModel):
    """Which triples to build from XNLI (and from the English NLI files under ``sources.nli``)."""

    model_config = ConfigDict(extra="forbid")
    xnli_split: Literal["train", "dev", "test"] | None = "dev"
    """XNLI split the triples come from (the paper: train, i.e. XNLI-MT); null: none"""
    languages: list[str] | str = Field("all", description=f"a list, or a preset: {', '.join(LANGUAGE_PRESETS)}")
    english: bool = True
    """build the ``english`` strategy's triples (premise, entailment, contradiction of the same premise, all English)
    from XNLI's English rows and ``sources.nli``"""
    cross_lingual: Literal["paper", "code", "none"] = "paper"
    """the ``cross_lingual`` strategy: ``paper`` (mSimCSE's paper: one row per English entailment example, each of its
    three sentences in a language drawn from ``languages``), ``code`` (its ``merge_multi_lingual.py``: one row per
    language, the premise in each, the hypotheses in random languages) or ``none``"""
    max_boundary_mismatch: float = Field(0.0, ge=0.0, le=1.0)
    """fraction of rows whose premise boundaries may disagree"""
    seed: int = 13
    """seeds the language draws (a hash of example, copy and slot: the same in every run and library version)"""

    _languages = xnli_languages_validator("corpora.nli_triples.languages")


def meaning_ids(premises: pl.Series) -> pl.Series:
    """The first 16 hex digits of the MD5 of the normalised English premise: the same id in every run, source and
    library version."""
    norm = normalise_series(premises)
    distinct = norm.unique()
    ids = pl.DataFrame({"n": distinct, "meaning_id": [hashlib.md5(t.encode("utf-8")).hexdigest()[:16]
                                                      for t in distinct.to_list()]})
    return pl.DataFrame({"n": norm}).join(ids, on="n", how="left", maintain_order="left")["meaning_id"]


def xnli_examples(frames: dict[str, pl.DataFrame]) -> tuple[pl.DataFrame, int]:
    """English entailment examples with the contradiction hypothesis of the same premise: (row, c_row) indices."""
    en = frames["en"].with_row_index("row")
    contra = (en.filter(pl.col("label") == "contradiction").group_by("premise")
              .agg(pl.col("row").min().alias("c_row")))
    ent = en.filter(pl.col("label") == "entailment").join(contra, on="premise", how="left", maintain_order="left")
    missing = int(ent["c_row"].null_count())
    return ent.filter(pl.col("c_row").is_not_null()).select("row", "c_row", "line"), missing


def xnli_triples(settings: NliTripleSettings, frames: dict[str, pl.DataFrame], split: str,
                 origin: str) -> tuple[pl.DataFrame, dict[str, int]]:
    ex, missing = xnli_examples(frames)
    langs = settings.languages
    assert isinstance(langs, list)
    n = frames["en"].height
    # every language's premises (hypotheses) end to end: row r of language i is at i * n + r (no text is copied)
    order = list(frames)
    position = pl.Series(order, dtype=pl.Utf8)
    premises = pl.concat([frames[lang]["premise"] for lang in order])
    hypotheses = pl.concat([frames[lang]["hypothesis"] for lang in order])
    rows, c_rows = ex["row"].cast(pl.Int64).to_numpy(), ex["c_row"].cast(pl.Int64).to_numpy()
    meaning = meaning_ids(frames["en"]["premise"].gather(rows))
    parts = []

    def part(strategy: str, idx: np.ndarray, l0: np.ndarray, l1: np.ndarray, l2: np.ndarray) -> pl.DataFrame:
        """``idx`` picks examples; ``l0``/``l1``/``l2`` are positions in ``order`` of each sentence's language."""
        r, c = rows[idx], c_rows[idx]
        return pl.DataFrame({
            "meaning_id": meaning.gather(idx), "strategy": pl.Series([strategy] * len(idx), dtype=pl.Utf8),
            "sent0": premises.gather(l0 * n + r), "sent0_lang": position.gather(l0),
            "sent1": hypotheses.gather(l1 * n + r), "sent1_lang": position.gather(l1),
            "hard_neg": hypotheses.gather(l2 * n + c), "hard_neg_lang": position.gather(l2),
            "line": ex["line"].gather(idx).cast(pl.Int64)})

    all_ex = np.arange(ex.height)
    if settings.english:
        en = np.full(ex.height, order.index("en"))
        parts.append(part("english", all_ex, en, en, en))
    if settings.cross_lingual != "none":
        chosen = np.array([order.index(lang) for lang in langs])
        copies = 1 if settings.cross_lingual == "paper" else len(langs)
        idx = np.repeat(all_ex, copies)
        copy = np.tile(np.arange(copies), ex.height)
        key = rows[idx].astype(np.uint64) * np.uint64(64) + copy.astype(np.uint64)
        pick = {slot: chosen[(seeded_hash(key, f"{settings.seed}/{split}", slot) % np.uint64(len(langs)))
                             .astype(np.int64)] for slot in ("sent0", "sent1", "hard_neg")}
        if settings.cross_lingual == "code":  # the premise in every language
            pick["sent0"] = chosen[copy]
        parts.append(part("cross_lingual", idx, pick["sent0"], pick["sent1"], pick["hard_neg"]))
    if not parts:
        return pl.DataFrame(schema=dict.fromkeys(COLUMNS, pl.Utf8)), {"xnli_no_contradiction": missing}
    t = pl.concat(parts).with_columns(pl.lit(f"xnli-{split}").alias("source"), pl.lit(origin).alias("origin"))
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
    non_empty = [p.select([c for c in COLUMNS if c != "triple_id"]) for p in parts if p.height]
    triples = pl.concat(non_empty) if non_empty else pl.DataFrame(schema={c: t for c, t in SCHEMA.items()
                                                                          if c != "triple_id"})
    triples = triples.with_row_index("_i").with_columns(
        (pl.col("source") + "-" + pl.col("_i").cast(pl.Utf8).str.zfill(8)).alias("triple_id")).select(COLUMNS)
    n = triples.height
    triples, leak = drop_leaks(triples, index)
    stats.update({"triples": triples.height, "triples_leaked": n - triples.height,
                  **{f"triples_{k}": v for k, v in triples.group_by("strategy").len().iter_rows()}})
    if triples.is_empty():
        log.warning("nli_triples: no triple (%s): the table is empty, and an objective trained on it is refused",
                    ", ".join(f"{k} {v}" for k, v in sorted(stats.items()) if k != "triples") or "no input")
    write_partitioned(triples, out / "nli_triples", "strategy")
    leak.write_parquet(out / "leakage.parquet")
    log.info("nli_triples: %d triples (%s), %d removed for leakage", triples.height,
             ", ".join(f"{k[8:]} {v}" for k, v in sorted(stats.items())
                       if k.startswith("triples_") and k != "triples_leaked"),
             stats["triples_leaked"])
    return StageResult(tables={"nli_triples": "nli_triples", "leakage": "leakage.parquet"}, stats=stats)
