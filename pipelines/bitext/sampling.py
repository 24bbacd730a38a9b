"""Stage ``bitext_pairs``: bitext from any reader → filtered, de-duplicated, leakage-free, pivot-sampled pairs.

Every pair is expressed as (pivot language, other language); pivots are configurable (VMSST: en and es; soft-label CL:
en). A pair whose two languages are both pivots takes the pivot listed first. Per (pivot, language) the stage keeps a
quota of pairs: the same number for every language (``equal``), or ``proportional`` to the pair count n_l with a
temperature T, q_l = ⌊total · n_l^{1/T} / Σ_m n_m^{1/T}⌋ capped at n_l (T = 1 proportional, T → ∞ uniform).

Selection is a seeded **bottom-k**: each pair gets a 64-bit key, a seeded hash of its raw texts, and a language's
selection is the ``quota`` smallest keys among the pairs that pass the filters, counting pairs with the same normalised
texts once (the member with the smallest key stands for its group). That definition does not depend on file order or
on how the input is chunked, needs no shuffle of everything in memory, and streams: the stage keeps only the current
best ``quota`` pairs per language, and a new pair whose key is not below the current k-th key can never be selected, so
the costly per-pair work (normalising, the leakage guard, language identification) runs on those few candidates only.
Memory is one input chunk plus the selections, flat in the input size.

Filters, in order: blank side; length in characters; length ratio; then, on candidates, the leakage guard
(``pipelines.leakage``), optional language identification with pycld2 (the detector polyglot uses), and exact +
normalised de-duplication. Counts of everything dropped go to the ``bitext_filter_counts`` table; blank, length and
ratio counts cover every pair read, the candidate-stage counts cover the pairs that reached that stage (set
``leakage_scan: all`` to run the leakage guard on every pair and get a full census, at the cost of normalising
everything).

The key is polars' seeded row hash: reproducible for a given polars version (recorded in the stage stats), not
guaranteed across polars releases.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipelines.bitext.readers import count_pairs, iter_chunks
from pipelines.language_codes import check_language, same_language
from pipelines.leakage import EvalTextIndex, leakage_counts
from pipelines.partitioned import write_partitioned
from pipelines.text_normalise import normalise_series
from warehouse.artifacts import StageResult

log = logging.getLogger("polysent.pipelines.bitext")
STAGE_VERSION = "2"
COUNT_COLUMNS = ("read", "blank", "too_short", "too_long", "length_ratio", "leaked", "wrong_language", "duplicate",
                 "not_selected", "kept")


class BitextSettings(BaseModel):
    """Pivot sampling of bitext (defaults: VMSST's en/es pivots, equal quotas)."""

    model_config = ConfigDict(extra="forbid")
    pivots: list[str] = Field(default_factory=lambda: ["en", "es"], min_length=1)
    quota_mode: Literal["equal", "proportional"] = "equal"
    quota_per_language: int = Field(1000, ge=1, description="equal: pairs kept per (pivot, language)")
    total_pairs: int = Field(100_000, ge=1, description="proportional: pairs kept over all languages")
    temperature: float = Field(1.0, gt=0.0, description="proportional: q_l ∝ n_l^(1/T)")
    min_chars: int = Field(3, ge=1)
    max_chars: int = Field(500, ge=1)
    max_length_ratio: float = Field(3.0, gt=1.0)
    langid: bool = Field(False, description="drop pairs whose side pycld2 identifies as another language")
    langid_keep_unknown: bool = Field(True, description="keep sides pycld2 cannot identify (short or mixed text)")
    leakage_scan: Literal["candidates", "all"] = "candidates"
    chunk_rows: int = Field(1_000_000, ge=1000)
    seed: int = 13

    @model_validator(mode="after")
    def _limits(self) -> BitextSettings:
        if self.min_chars > self.max_chars:
            raise ValueError(f"min_chars {self.min_chars} > max_chars {self.max_chars}")
        for p in self.pivots:
            check_language(p, "corpora.bitext_pairs.pivots")
        return self


# -- quotas -----------------------------------------------------------------------------------------------------
def orient(src: str, tgt: str, pivots: list[str]) -> tuple[str, str]:
    """(pivot, other) for a language pair; the pivot listed first wins when both are pivots."""
    ranks = [pivots.index(x) if x in pivots else len(pivots) for x in (src, tgt)]
    if min(ranks) == len(pivots):
        raise ValueError(f"bitext {src}-{tgt} has no pivot language (pivots: {pivots})")
    return (src, tgt) if ranks[0] <= ranks[1] else (tgt, src)


def quotas(settings: BitextSettings, counts: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    """Per (pivot, language) quota; ``counts`` are pair counts per oriented (pivot, language)."""
    if settings.quota_mode == "equal":
        return {k: settings.quota_per_language for k in counts}
    alpha = 1.0 / settings.temperature
    weights = {k: float(n) ** alpha for k, n in counts.items() if n > 0}
    z = sum(weights.values()) or 1.0
    return {k: min(counts[k], int(settings.total_pairs * weights.get(k, 0.0) / z)) for k in counts}


# -- selection --------------------------------------------------------------------------------------------------
class BottomK:
    """Streaming seeded bottom-k selection per (pivot, language), with de-duplication on normalised texts."""

    BEST_SCHEMA: ClassVar[dict[str, Any]] = {
        "pivot_lang": pl.Utf8, "lang": pl.Utf8, "key": pl.UInt64, "pivot_text": pl.Utf8, "text": pl.Utf8,
        "origin": pl.Utf8, "line": pl.Int64, "pivot_norm": pl.Utf8, "norm": pl.Utf8}

    def __init__(self, settings: BitextSettings, quota: dict[tuple[str, str], int], index: EvalTextIndex) -> None:
        self.s = settings
        self.quota = pl.DataFrame(
            {"pivot_lang": [k[0] for k in quota], "lang": [k[1] for k in quota],
             "quota": pl.Series([q for q in quota.values()], dtype=pl.UInt32)},
            schema={"pivot_lang": pl.Utf8, "lang": pl.Utf8, "quota": pl.UInt32})
        self.index = index
        self.best = pl.DataFrame(schema=self.BEST_SCHEMA)
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self.leaked = pl.DataFrame(schema={"unit": pl.UInt64, "lang": pl.Utf8, "eval_set": pl.Utf8})

    def _count(self, frame: pl.DataFrame, what: str) -> None:
        if frame.is_empty():
            return
        for pivot, lang, n in frame.group_by("pivot_lang", "lang").len().iter_rows():
            self.counts[(pivot, lang, what)] += n

    def _thresholds(self) -> pl.DataFrame:
        """Per language: the k-th smallest key when the selection is full (a pair must beat it to enter)."""
        full = (self.best.group_by("pivot_lang", "lang").agg(pl.col("key").max().alias("threshold"),
                                                              pl.len().alias("n"))
                .join(self.quota, on=["pivot_lang", "lang"]).filter(pl.col("n") >= pl.col("quota")))
        return full.select("pivot_lang", "lang", "threshold")

    def add(self, chunk: pl.DataFrame) -> None:
        """``chunk``: reader chunk columns (``src_lang``, ``tgt_lang``, ``src_text``, ``tgt_text``, ``origin``,
        ``line``)."""
        s = self.s
        df = self._oriented(chunk)
        self._count(df, "read")
        blank = (pl.col("pivot_text") == "") | (pl.col("text") == "")
        plen, tlen = pl.col("pivot_text").str.len_chars(), pl.col("text").str.len_chars()
        df = df.with_columns(plen.alias("_pl"), tlen.alias("_tl"))
        status = (pl.when(blank).then(pl.lit("blank"))
                  .when(pl.min_horizontal("_pl", "_tl") < s.min_chars).then(pl.lit("too_short"))
                  .when(pl.max_horizontal("_pl", "_tl") > s.max_chars).then(pl.lit("too_long"))
                  .when(pl.max_horizontal("_pl", "_tl") > s.max_length_ratio * pl.min_horizontal("_pl", "_tl"))
                  .then(pl.lit("length_ratio")).otherwise(pl.lit("ok")))
        df = df.with_columns(status.alias("_status"))
        for pivot, lang, st, n in df.group_by("pivot_lang", "lang", "_status").len().iter_rows():
            if st != "ok":
                self.counts[(pivot, lang, st)] += n
        df = df.filter(pl.col("_status") == "ok").drop("_pl", "_tl", "_status")
        df = df.with_columns(df.select("pivot_text", "text").hash_rows(seed=s.seed).alias("key"))
        if s.leakage_scan == "all" and len(self.index):
            df = self._drop_leaks(self._normalised(df))
        thresholds = self._thresholds()
        if not thresholds.is_empty():
            df = (df.join(thresholds, on=["pivot_lang", "lang"], how="left")
                  .filter(pl.col("threshold").is_null() | (pl.col("key") < pl.col("threshold"))).drop("threshold"))
        if df.is_empty():
            return
        if "norm" not in df.columns:
            df = self._normalised(df)
            if len(self.index):
                df = self._drop_leaks(df)
        if s.langid:
            df = self._drop_wrong_language(df)
        self._merge(df.select(list(self.BEST_SCHEMA)))

    def _oriented(self, chunk: pl.DataFrame) -> pl.DataFrame:
        pairs = chunk.select("src_lang", "tgt_lang").unique()
        mapping = {(a, b): orient(a, b, self.s.pivots) for a, b in pairs.iter_rows()}
        src_is_pivot = pl.DataFrame(
            {"src_lang": [k[0] for k in mapping], "tgt_lang": [k[1] for k in mapping],
             "_src_pivot": [v[0] == k[0] for k, v in mapping.items()]},
            schema={"src_lang": pl.Utf8, "tgt_lang": pl.Utf8, "_src_pivot": pl.Boolean})
        sp = pl.col("_src_pivot")
        return chunk.join(src_is_pivot, on=["src_lang", "tgt_lang"], how="left", maintain_order="left").select(
            pl.when(sp).then("src_lang").otherwise("tgt_lang").alias("pivot_lang"),
            pl.when(sp).then("tgt_lang").otherwise("src_lang").alias("lang"),
            pl.when(sp).then("src_text").otherwise("tgt_text").alias("pivot_text"),
            pl.when(sp).then("tgt_text").otherwise("src_text").alias("text"),
            "origin", "line")

    @staticmethod
    def _normalised(df: pl.DataFrame) -> pl.DataFrame:
        return df.with_columns(normalise_series(df["pivot_text"]).alias("pivot_norm"),
                               normalise_series(df["text"]).alias("norm"))

    def _drop_leaks(self, df: pl.DataFrame) -> pl.DataFrame:
        members = pl.concat([df.select(pl.col("key").alias("unit"), pl.col("pivot_lang").alias("lang"),
                                       pl.col("pivot_norm").alias("norm")),
                             df.select(pl.col("key").alias("unit"), "lang", "norm")])
        matched = self.index.matches(members)
        if matched.is_empty():
            return df
        leaked_keys = matched["unit"].unique()
        hit = df.filter(pl.col("key").is_in(leaked_keys.implode()))
        self._count(hit, "leaked")
        # the leakage table names the pair's non-pivot language, whichever side matched
        by_key = hit.select(pl.col("key").alias("unit"), "lang")
        self.leaked = pl.concat([self.leaked, matched.select("unit", "eval_set").join(by_key, on="unit")
                                .select("unit", "lang", "eval_set")]).unique()
        return df.filter(~pl.col("key").is_in(leaked_keys.implode()))

    def _drop_wrong_language(self, df: pl.DataFrame) -> pl.DataFrame:
        ok = [langid_agrees(pt, pl_, self.s.langid_keep_unknown) and langid_agrees(t, lg, self.s.langid_keep_unknown)
              for pt, pl_, t, lg in df.select("pivot_text", "pivot_lang", "text", "lang").iter_rows()]
        mask = pl.Series(ok, dtype=pl.Boolean)
        self._count(df.filter(~mask), "wrong_language")
        return df.filter(mask)

    def _merge(self, df: pl.DataFrame) -> None:
        pool = pl.concat([self.best, df]).sort("key", "pivot_text", "text", "origin", "line")
        distinct = pool.unique(subset=["pivot_lang", "lang", "pivot_norm", "norm"], keep="first", maintain_order=True)
        # duplicates are counted when they meet; a pair already selected that is later displaced is "not selected"
        self._count_duplicates(pool, distinct)
        ranked = distinct.join(self.quota, on=["pivot_lang", "lang"], how="left").with_columns(
            pl.col("key").rank("ordinal").over("pivot_lang", "lang").alias("_rank"))
        self.best = ranked.filter(pl.col("_rank") <= pl.col("quota")).select(list(self.BEST_SCHEMA))

    def _count_duplicates(self, pool: pl.DataFrame, distinct: pl.DataFrame) -> None:
        if pool.height == distinct.height:
            return
        n_pool = pool.group_by("pivot_lang", "lang").len()
        n_dist = distinct.group_by("pivot_lang", "lang").len().rename({"len": "d"})
        for pivot, lang, n, d in n_pool.join(n_dist, on=["pivot_lang", "lang"]).iter_rows():
            if n > d:
                self.counts[(pivot, lang, "duplicate")] += n - d

    def result(self) -> pl.DataFrame:
        return (self.best.sort("pivot_lang", "lang", "key")
                .select(pl.col("key").cast(pl.Utf8).str.zfill(20).alias("pair_id"),
                        "pivot_lang", "lang", "pivot_text", "text", "origin", "line"))

    def count_table(self) -> pl.DataFrame:
        keys = sorted({(p, lang) for p, lang, _ in self.counts} | set(self.quota.select("pivot_lang", "lang")
                                                                       .iter_rows()))
        kept = dict(((p, lang), n) for p, lang, n in self.best.group_by("pivot_lang", "lang").len().iter_rows())
        quota = {(p, lang): q for p, lang, q in self.quota.iter_rows()}
        rows = []
        for p, lang in keys:
            row: dict[str, Any] = {"pivot_lang": p, "lang": lang, "quota": quota.get((p, lang), 0)}
            for c in COUNT_COLUMNS:
                row[c] = self.counts.get((p, lang, c), 0)
            row["kept"] = kept.get((p, lang), 0)
            dropped = sum(row[c] for c in ("blank", "too_short", "too_long", "length_ratio", "leaked",
                                           "wrong_language", "duplicate"))
            row["not_selected"] = row["read"] - dropped - row["kept"]
            rows.append(row)
        schema = {"pivot_lang": pl.Utf8, "lang": pl.Utf8, "quota": pl.Int64, **{c: pl.Int64 for c in COUNT_COLUMNS}}
        return pl.DataFrame(rows, schema=schema, orient="row")


def langid_agrees(text: str, lang: str, keep_unknown: bool) -> bool:
    """pycld2's best guess for ``text`` has ``lang``'s primary subtag (``zh-Hant`` counts as ``zh``)."""
    try:
        import pycld2
    except ImportError as exc:  # pragma: no cover - pycld2 is a declared dependency
        raise RuntimeError("corpora.bitext_pairs.langid needs pycld2 (pip install pycld2)") from exc
    try:
        _, _, details = pycld2.detect(text, bestEffort=True)
    except pycld2.error:
        return keep_unknown
    guess = details[0][1]
    if guess in ("un", "xxx"):
        return keep_unknown
    return same_language(guess, lang)


# -- the stage --------------------------------------------------------------------------------------------------
def select_pairs(settings: BitextSettings, sources: Iterable[Any], index: EvalTextIndex | None = None,
                 progress: bool = True) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """Run the selection over ``sources``: (pairs, filter counts, leakage rows, stats)."""
    sources = list(sources)
    index = index or EvalTextIndex.empty()
    counts: dict[tuple[str, str], int] = {}
    for src in sources:
        for (a, b), n in count_pairs(src, settings.pivots).items():
            key = orient(a, b, settings.pivots)
            counts[key] = counts.get(key, 0) + n
    quota = quotas(settings, counts)
    sel = BottomK(settings, quota, index)
    reader_stats: Counter[str] = Counter()
    total = sum(counts.values())
    t0 = time.perf_counter()
    bar = _progress(total, progress)
    for src in sources:
        for chunk in iter_chunks(src, settings.pivots, settings.chunk_rows, reader_stats):
            sel.add(chunk)
            bar.update(chunk.height)
    bar.close()
    seconds = time.perf_counter() - t0
    pairs = sel.result()
    table = sel.count_table()
    stats = {"read": int(table["read"].sum()), "kept": pairs.height, "seconds": round(seconds, 3),
             "pairs_per_s": round(int(table["read"].sum()) / seconds) if seconds > 0 else None,
             "polars": pl.__version__, **{k: int(v) for k, v in reader_stats.items()}}
    for c in COUNT_COLUMNS[1:-2]:
        stats[c] = int(table[c].sum())
    return pairs, table, leakage_counts("bitext_pairs", sel.leaked), stats


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit="pair", unit_scale=True, desc="bitext_pairs", disable=not enabled or total < 2e6)


def build_pairs(settings: BitextSettings, sources: list[Any], index: EvalTextIndex, out: Path) -> StageResult:
    pairs, table, leak, stats = select_pairs(settings, sources, index)
    write_partitioned(pairs, out / "bitext_pairs", "lang")
    table.write_parquet(out / "bitext_filter_counts.parquet")
    leak.write_parquet(out / "leakage.parquet")
    log.info("bitext: read %d pairs; dropped %d blank, %d too short, %d too long, %d by length ratio, %d leaked, "
             "%d wrong language, %d duplicates; kept %d (%s pairs/s)", stats["read"], stats["blank"],
             stats["too_short"], stats["too_long"], stats["length_ratio"], stats["leaked"], stats["wrong_language"],
             stats["duplicate"], stats["kept"], stats["pairs_per_s"])
    return StageResult(tables={"bitext_pairs": "bitext_pairs", "bitext_filter_counts": "bitext_filter_counts.parquet",
                               "leakage": "leakage.parquet"}, stats=stats)
