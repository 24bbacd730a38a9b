"""Stage ``bitext_pairs``: bitext from any reader → filtered, de-duplicated, leakage-free, pivot-sampled pairs.

Every pair is expressed as (pivot language, other language); pivots are configurable (VMSST: en and es; soft-label CL:
en). A pair whose two languages are both pivots takes the pivot listed first (``pipelines.bitext.pivots``, where the
tie-break is argued). Per (pivot, language) the stage keeps a quota of pairs: the same number for every language
(``equal``), or ``proportional`` to the pair count n_l with a temperature T, q_l = ⌊total · n_l^{1/T} / Σ_m n_m^{1/T}⌋
capped at n_l (T = 1 proportional, T → ∞ uniform).

Selection is a seeded **bottom-k**: each pair gets a 64-bit key, a seeded hash of its raw texts, and a language's
selection is the ``quota`` smallest keys among the pairs that pass the filters, counting pairs with the same normalised
texts once (the member with the smallest key stands for its group). That definition does not depend on file order or
on how the input is chunked, needs no shuffle of everything in memory, and streams. While reading, a pair costs a
length check and a hash: each language keeps a reserve of the 1.5 × quota smallest distinct keys (exact duplicates share
a key), and a pair whose key does not beat the reserve's largest can never be selected. At the end the reserve is
refined in key order — normalising, the leakage guard, language identification, normalised de-duplication — until the
quota is met, so only about quota pairs per language are ever normalised. If those filters use up a reserve (heavy
near-duplication), the stage reads again refining every chunk as it comes: same result, more work. Memory is two input
chunks plus the reserves (their strings compacted so they do not pin the chunks' buffers), flat in the input size.

Filters, in order: blank side; length in characters (Han, kana and Hangul count 3: ``text_length``); length ratio;
then, on candidates, the leakage guard (``pipelines.leakage``), optional language identification with pycld2 (the
detector polyglot uses), and exact + normalised de-duplication. Counts of everything dropped go to the
``bitext_filter_counts`` table; blank, length and ratio counts cover every pair read, the candidate-stage counts cover
the pairs that reached that stage (set ``leakage_scan: all`` to run the leakage guard on every pair and get a full
census, at the cost of normalising everything).

The key is polars' seeded row hash: reproducible for a given polars version (recorded in the stage stats), not
guaranteed across polars releases.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from contract import StageResult
from pipelines.bitext.pivots import Pivots, orient
from pipelines.bitext.readers import count_pairs, iter_chunks
from pipelines.language_codes import same_language
from pipelines.leakage import EvalTextIndex, leakage_counts
from pipelines.partitioned import write_partitioned
from pipelines.text_normalise import normalise_series

log = logging.getLogger("polysent.pipelines.bitext")
STAGE_VERSION = "4"  # 3: CJK-weighted lengths; 4: no surviving pair → a schema-only bitext_pairs file
COUNT_COLUMNS = ("read", "blank", "too_short", "too_long", "length_ratio", "leaked", "wrong_language", "duplicate",
                 "not_selected", "kept")


class BitextSettings(BaseModel):
    """Pivot sampling of bitext (defaults: VMSST's en/es pivots, equal quotas)."""

    model_config = ConfigDict(extra="forbid")
    pivots: list[str] = Field(default_factory=lambda: ["en", "es"], min_length=1)
    """every pair is kept as (pivot, other language), a pair of two pivots under the one listed first; a source whose
    two languages are no pivot is refused (an ``nway`` source reads only its pairs with a pivot); VMSST: en and es"""
    quota_mode: Literal["equal", "proportional"] = "equal"
    """pairs kept per (pivot, language): ``equal`` (``quota_per_language`` each) or ``proportional`` (``total_pairs``
    shared as q_l ∝ n_l^(1/T), at most n_l)"""
    quota_per_language: int = Field(1000, ge=1)
    """equal: pairs kept per (pivot, language)"""
    total_pairs: int = Field(100_000, ge=1)
    """proportional: pairs kept over all languages"""
    temperature: float = Field(1.0, gt=0.0)
    """proportional: q_l ∝ n_l^(1/T)"""
    min_chars: int = Field(3, ge=1)
    """a pair whose shorter side has fewer characters is dropped (Han, kana and Hangul count 3)"""
    max_chars: int = Field(500, ge=1)
    """a pair whose longer side has more characters is dropped (counted as ``min_chars``)"""
    max_length_ratio: float = Field(3.0, gt=1.0)
    """a pair whose longer side is more than this many times the shorter is dropped"""
    langid: bool = False
    """drop pairs whose side pycld2 identifies as another language"""
    langid_keep_unknown: bool = True
    """keep sides pycld2 cannot identify (short or mixed text)"""
    leakage_scan: Literal["candidates", "all"] = "candidates"
    """where the leakage guard runs: ``candidates`` (the pairs that reach selection, about the quota per language) or
    ``all`` (every pair read: a full census in ``bitext_filter_counts``, at the cost of normalising everything)"""
    chunk_rows: int = Field(1_000_000, ge=1000)
    """pairs read per chunk: memory is two chunks plus the reserves; never changes the output"""
    seed: int = 13
    """seeds the hash keys of the bottom-k selection (the same seed and polars version select the same pairs)"""
    _pivots: Pivots | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _limits(self) -> BitextSettings:
        if self.min_chars > self.max_chars:
            raise ValueError(f"min_chars {self.min_chars} > max_chars {self.max_chars}")
        self._pivots = Pivots(self.pivots, "corpora.bitext_pairs.pivots")
        return self

    @property
    def pivot_order(self) -> Pivots:
        """``pivots``, checked once (when the settings were validated; again only after a copy that changed them)."""
        if self._pivots is None or list(self._pivots) != self.pivots:
            self._pivots = Pivots(self.pivots, "corpora.bitext_pairs.pivots")
        return self._pivots


# -- lengths ----------------------------------------------------------------------------------------------------
DENSE_SCRIPT_LANGUAGES = frozenset({"zh", "ja", "yue", "wuu", "lzh", "cmn", "jpn", "zho", "ko", "kor"})
_DENSE = r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]"


def text_length(column: str, lang: str) -> pl.Expr:
    """Length for the length and ratio filters: characters, with a Han, kana or Hangul character counted as 3.

    A Chinese sentence has about a third as many characters as its English translation, so plain character ratios
    drop most en-zh pairs (on NTREX-128, 909 of 1,997 at ratio 3). Weighted, the lengths of translations agree
    across scripts; the regex runs only for languages written in those scripts.
    """
    n = pl.col(column).str.len_chars()
    if lang.replace("_", "-").split("-")[0].lower() in DENSE_SCRIPT_LANGUAGES:
        return n + 2 * pl.col(column).str.count_matches(_DENSE)
    return n


# -- quotas -----------------------------------------------------------------------------------------------------
def quotas(settings: BitextSettings, counts: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    """Proportional quotas per (pivot, language): q_l = ⌊total · n_l^{1/T} / Σ_m n_m^{1/T}⌋ capped at n_l; ``counts``
    are pair counts per oriented (pivot, language). (``equal`` quotas need no counts: ``BottomK`` gives every
    language it meets ``quota_per_language``.)"""
    alpha = 1.0 / settings.temperature
    weights = {k: float(n) ** alpha for k, n in counts.items() if n > 0}
    z = sum(weights.values()) or 1.0
    return {k: min(counts[k], int(settings.total_pairs * weights.get(k, 0.0) / z)) for k in counts}


# -- selection --------------------------------------------------------------------------------------------------
class BottomK:
    """Streaming seeded bottom-k selection per (pivot, language), with de-duplication on normalised texts."""

    SLICE = 50_000
    RESERVE_MIN = 1000  # extra candidates kept beyond the quota, at least
    BEST_SCHEMA: ClassVar[dict[str, Any]] = {
        "key": pl.UInt64, "pivot_text": pl.Utf8, "text": pl.Utf8, "origin": pl.Utf8, "line": pl.Int64,
        "nkey": pl.UInt64}

    def __init__(self, settings: BitextSettings, quota: dict[tuple[str, str], int] | None,
                 index: EvalTextIndex, exact: bool = False) -> None:
        """``quota``: per (pivot, language); None: ``settings.quota_per_language`` for every language met.

        By default candidates are only hashed while reading: each language keeps a reserve of the 1.5 × quota
        smallest distinct raw keys, and ``finish`` refines the reserve (normalise, guard, de-duplicate) — so pairs
        displaced later are never normalised. Should normalised duplicates, leaks and wrong-language pairs eat the
        whole reserve, ``finish`` says which languages fell short and the caller reruns with ``exact=True``, which
        refines every chunk as it arrives (same result, more normalising).
        """
        self.exact = exact
        self.raw: dict[tuple[str, str], pl.DataFrame] = {}
        self.truncated: Counter[tuple[str, str]] = Counter()
        self.s = settings
        self.quota: dict[tuple[str, str], int] = dict(quota) if quota is not None else {}
        self.fixed_quota = None if quota is not None else settings.quota_per_language
        self.index = index
        self.best: dict[tuple[str, str], pl.DataFrame] = {}
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self.leaked: list[pl.DataFrame] = []
        self.reader_stats: Counter[str] = Counter()
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="normalise")  # polars kernels free the GIL

    def add(self, chunk: pl.DataFrame) -> None:
        """``chunk``: reader chunk columns (``src_lang``, ``tgt_lang``, ``src_text``, ``tgt_text``, ``origin``,
        ``line``).

        A chunk may hold many language pairs (an N-way set such as NTREX-128 is read as one chunk of 128 languages ×
        the pivots): it is split by one ``partition_by``, each pair's rows produced once in reading order, rather than
        by one filter of the whole chunk per pair, which costs pairs × rows and on NTREX-128 took 24 s and 9 GiB."""
        parts = chunk.partition_by(["src_lang", "tgt_lang"], maintain_order=True, as_dict=True)
        for key, part in parts.items():
            a, b = str(key[0]), str(key[1])
            pivot, lang = orient(a, b, self.s.pivot_order)
            if self.fixed_quota is not None:
                self.quota.setdefault((pivot, lang), self.fixed_quota)
            names = ("pivot_text", "text") if pivot == a else ("text", "pivot_text")
            self._add_pair((pivot, lang), part.select(pl.col("src_text").alias(names[0]),
                                                      pl.col("tgt_text").alias(names[1]), "origin", "line"))

    def _add_pair(self, pl_key: tuple[str, str], df: pl.DataFrame) -> None:
        s, c = self.s, self.counts
        pivot, lang = pl_key
        c[(pivot, lang, "read")] += df.height
        lens = df.select(text_length("pivot_text", pivot).alias("a"), text_length("text", lang).alias("b"))
        short, long_ = pl.min_horizontal("a", "b"), pl.max_horizontal("a", "b")
        flags = lens.select((short == 0).alias("blank"), short.lt(s.min_chars).alias("short"),
                            long_.gt(s.max_chars).alias("long"), long_.gt(s.max_length_ratio * short).alias("ratio"))
        blank, too_short = flags["blank"], flags["short"] & ~flags["blank"]
        too_long = flags["long"] & ~flags["short"]
        ratio = flags["ratio"] & ~flags["long"] & ~flags["short"]
        for what, mask in (("blank", blank), ("too_short", too_short), ("too_long", too_long),
                           ("length_ratio", ratio)):
            c[(pivot, lang, what)] += int(mask.sum())
        df = df.filter(~(flags["short"] | flags["long"] | flags["ratio"]))
        df = df.with_columns(df.select("pivot_text", "text").hash_rows(seed=s.seed).alias("key"))
        if s.leakage_scan == "all" and len(self.index):
            df = self._drop_leaks(pl_key, self._normalised(pl_key, df))
        if self.exact:
            self._refine(pl_key, df)
            if pl_key in self.best:
                self.best[pl_key] = compact(self.best[pl_key])
        else:
            self._buffer(pl_key, df)

    def _buffer(self, pl_key: tuple[str, str], df: pl.DataFrame) -> None:
        """Keep the ``reserve`` smallest distinct raw keys (exact duplicates share a key and are counted here)."""
        reserve = self._reserve(pl_key)
        old = self.raw.get(pl_key)
        if old is not None and old.height >= reserve:
            kept = df.filter(pl.col("key") < old["key"][-1])
            self.truncated[pl_key] |= kept.height < df.height
            df = kept
        pool = df if old is None else pl.concat([old, df], how="diagonal_relaxed")
        # order (key, reading order) on two integer columns only, then gather the few rows kept
        order = pool.select("key", pl.int_range(pl.len(), dtype=pl.UInt32).alias("_i")).sort("key", "_i")
        first = order.unique(subset=["key"], keep="first", maintain_order=True)
        self.counts[(*pl_key, "duplicate")] += order.height - first.height
        self.truncated[pl_key] |= first.height > reserve
        self.raw[pl_key] = compact(pool[first["_i"].head(reserve)])

    def _reserve(self, pl_key: tuple[str, str]) -> int:
        q = self.quota.get(pl_key, 0)
        return q + max(q // 2, self.RESERVE_MIN)

    def finish(self) -> list[tuple[str, str]]:
        """Refine the buffered candidates; the languages whose reserve ran out before their quota was met."""
        short = []
        for pl_key, raw in sorted(self.raw.items()):
            self._refine(pl_key, raw)
            best = self.best.get(pl_key)
            if (0 if best is None else best.height) < self.quota.get(pl_key, 0) and self.truncated[pl_key]:
                short.append(pl_key)
        self.raw.clear()
        self._pool.shutdown()
        return short

    def _refine(self, pl_key: tuple[str, str], df: pl.DataFrame) -> None:
        """Candidates in increasing key order, a slice at a time, through normalising, the leakage guard, language
        identification and de-duplication; after each slice the threshold tightens, so about quota (+ duplicates)
        pairs per language are normalised however large the input."""
        s = self.s
        df = self._below_threshold(pl_key, df).sort("key", maintain_order=True)
        while not df.is_empty():
            head, df = df.head(self.SLICE), df.slice(self.SLICE)
            if "nkey" not in head.columns:
                head = self._normalised(pl_key, head)
                if len(self.index):
                    head = self._drop_leaks(pl_key, head)
            if s.langid:
                head = self._drop_wrong_language(pl_key, head)
            self._merge(pl_key, head.select(list(self.BEST_SCHEMA)))
            df = self._below_threshold(pl_key, df)

    def _below_threshold(self, pl_key: tuple[str, str], df: pl.DataFrame) -> pl.DataFrame:
        """A pair must beat the k-th smallest key of a full selection to enter it."""
        best = self.best.get(pl_key)
        if best is None or best.height < self.quota.get(pl_key, 0) or df.is_empty():
            return df
        return df.filter(pl.col("key") < best["key"][-1])  # selections are kept in key order

    def _normalised(self, pl_key: tuple[str, str], df: pl.DataFrame) -> pl.DataFrame:
        pivot_norm, norm = self._pool.map(normalise_series, (df["pivot_text"], df["text"]))
        df = df.with_columns(pivot_norm.alias("pivot_norm"), norm.alias("norm"))
        return df.with_columns(df.select("pivot_norm", "norm").hash_rows(seed=self.s.seed).alias("nkey"))

    def _drop_leaks(self, pl_key: tuple[str, str], df: pl.DataFrame) -> pl.DataFrame:
        pivot, lang = pl_key
        members = pl.concat([df.select(pl.col("key").alias("unit"), pl.lit(pivot).alias("lang"),
                                       pl.col("pivot_norm").alias("norm")),
                             df.select(pl.col("key").alias("unit"), pl.lit(lang).alias("lang"), "norm")])
        matched = self.index.matches(members)
        if matched.is_empty():
            return df
        hit = pl.col("key").is_in(matched["unit"].unique().implode())
        self.counts[(pivot, lang, "leaked")] += df.filter(hit).height
        # the leakage table names the pair's non-pivot language, whichever side matched
        self.leaked.append(matched.select("unit", pl.lit(lang).alias("lang"), "eval_set"))
        return df.filter(~hit)

    def _drop_wrong_language(self, pl_key: tuple[str, str], df: pl.DataFrame) -> pl.DataFrame:
        pivot, lang = pl_key
        keep = self.s.langid_keep_unknown
        ok = pl.Series([langid_agrees(pt, pivot, keep) and langid_agrees(t, lang, keep)
                        for pt, t in df.select("pivot_text", "text").iter_rows()], dtype=pl.Boolean)
        self.counts[(pivot, lang, "wrong_language")] += int((~ok).sum())
        return df.filter(ok)

    def _merge(self, pl_key: tuple[str, str], df: pl.DataFrame) -> None:
        old = self.best.get(pl_key)
        # a stable sort by key: among exact duplicates (same key) the first read stands for them
        pool = (df if old is None else pl.concat([old, df])).sort("key", maintain_order=True)
        distinct = pool.unique(subset=["nkey"], keep="first", maintain_order=True)
        self.counts[(*pl_key, "duplicate")] += pool.height - distinct.height
        self.best[pl_key] = distinct.head(self.quota.get(pl_key, 0))

    def result(self) -> pl.DataFrame:
        parts = [b.select(pl.col("key").cast(pl.Utf8).str.zfill(20).alias("pair_id"), pl.lit(p).alias("pivot_lang"),
                          pl.lit(lang).alias("lang"), "pivot_text", "text", "origin", "line")
                 for (p, lang), b in sorted(self.best.items())]
        schema = {"pair_id": pl.Utf8, "pivot_lang": pl.Utf8, "lang": pl.Utf8, "pivot_text": pl.Utf8, "text": pl.Utf8,
                  "origin": pl.Utf8, "line": pl.Int64}
        return pl.concat(parts) if parts else pl.DataFrame(schema=schema)

    def leaked_units(self) -> pl.DataFrame:
        empty = pl.DataFrame(schema={"unit": pl.UInt64, "lang": pl.Utf8, "eval_set": pl.Utf8})
        return pl.concat([empty, *self.leaked]).unique()

    def count_table(self) -> pl.DataFrame:
        keys = sorted({(p, lang) for p, lang, _ in self.counts} | set(self.quota))
        rows = []
        for p, lang in keys:
            row: dict[str, Any] = {"pivot_lang": p, "lang": lang, "quota": self.quota.get((p, lang), 0)}
            for col in COUNT_COLUMNS:
                row[col] = self.counts.get((p, lang, col), 0)
            best = self.best.get((p, lang))
            row["kept"] = 0 if best is None else best.height
            dropped = sum(row[col] for col in ("blank", "too_short", "too_long", "length_ratio", "leaked",
                                               "wrong_language", "duplicate"))
            row["not_selected"] = row["read"] - dropped - row["kept"]
            rows.append(row)
        schema = {"pivot_lang": pl.Utf8, "lang": pl.Utf8, "quota": pl.Int64, **dict.fromkeys(COUNT_COLUMNS, pl.Int64)}
        return pl.DataFrame(rows, schema=schema, orient="row")


def compact(df: pl.DataFrame) -> pl.DataFrame:
    """A copy whose string columns own their bytes.

    polars' string columns are views into data buffers; filtering or gathering keeps the views and with them the whole
    buffers of the chunk the rows came from, so a selection holding a few rows of every chunk would keep every chunk
    alive and memory would grow with the input. Going through Arrow's contiguous string layout copies just the bytes
    in use (a few MB per language per chunk).
    """
    return pl.from_arrow(df.to_arrow(compat_level=pl.CompatLevel.oldest()))  # type: ignore[return-value]


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
    t0 = time.perf_counter()
    quota = None
    if settings.quota_mode == "proportional":  # quotas need every language's pair count first (a fast pass)
        counts: dict[tuple[str, str], int] = {}
        for src in sources:
            for (a, b), n in count_pairs(src, settings.pivot_order).items():
                key = orient(a, b, settings.pivot_order)
                counts[key] = counts.get(key, 0) + n
        quota = quotas(settings, counts)
        log.info("bitext: proportional quotas (T=%g): %s", settings.temperature,
                 ", ".join(f"{p}-{lang} {q}/{counts[(p, lang)]}" for (p, lang), q in sorted(quota.items())))
    sel, short = _run(BottomK(settings, quota, index), sources, settings, progress)
    if short:
        log.warning("bitext: duplicates, leaks or wrong-language pairs used up the candidate reserve of %s; "
                    "reading again with exact streaming refinement", ", ".join(f"{p}-{lang}" for p, lang in short))
        sel, _ = _run(BottomK(settings, quota, index, exact=True), sources, settings, progress)
    reader_stats = sel.reader_stats
    seconds = time.perf_counter() - t0
    pairs = sel.result()
    table = sel.count_table()
    stats = {"read": int(table["read"].sum()), "kept": pairs.height, "seconds": round(seconds, 3),
             "pairs_per_s": round(int(table["read"].sum()) / seconds) if seconds > 0 else None,
             "polars": pl.__version__, **{k: int(v) for k, v in reader_stats.items()}}
    for c in COUNT_COLUMNS[1:-2]:
        stats[c] = int(table[c].sum())
    return pairs, table, leakage_counts("bitext_pairs", sel.leaked_units()), stats


def _run(sel: BottomK, sources: list[Any], settings: BitextSettings,
         progress: bool) -> tuple[BottomK, list[tuple[str, str]]]:
    bar = _progress(progress)
    for src in sources:
        for chunk in prefetch(iter_chunks(src, settings.pivot_order, settings.chunk_rows, sel.reader_stats)):
            sel.add(chunk)
            bar.update(chunk.height)
    bar.close()
    return sel, sel.finish()


def _progress(enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(unit="pair", unit_scale=True, desc="bitext_pairs", disable=not enabled, mininterval=2.0)


def prefetch(chunks: Iterator[pl.DataFrame], depth: int = 1) -> Iterator[pl.DataFrame]:
    """Read the next chunk in a background thread while the current one is processed (both mostly outside the
    GIL: file reads, UTF-8 decoding and polars kernels). Memory: ``depth`` extra chunks."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    done = object()

    def work() -> None:
        try:
            for c in chunks:
                q.put(c)
        except BaseException as exc:
            q.put(exc)
            return
        q.put(done)

    t = threading.Thread(target=work, daemon=True, name="bitext-prefetch")
    t.start()
    while True:
        item = q.get()
        if item is done:
            break
        if isinstance(item, BaseException):
            raise item
        yield item
    t.join()


def build_pairs(settings: BitextSettings, sources: list[Any], index: EvalTextIndex, out: Path) -> StageResult:
    pairs, table, leak, stats = select_pairs(settings, sources, index)
    if pairs.is_empty():
        dropped = ", ".join(f"{stats[c]} {c.replace('_', ' ')}" for c in COUNT_COLUMNS[1:-2] if stats.get(c))
        log.warning("bitext: no pair survived (read %d; %s): bitext_pairs is empty, and an objective trained on it "
                    "is refused", stats["read"], dropped or "no input pairs")
    write_partitioned(pairs, out / "bitext_pairs", "lang")
    table.write_parquet(out / "bitext_filter_counts.parquet")
    leak.write_parquet(out / "leakage.parquet")
    log.info("bitext: read %d pairs; dropped %d blank, %d too short, %d too long, %d by length ratio, %d leaked, "
             "%d wrong language, %d duplicates; kept %d (%s pairs/s)", stats["read"], stats["blank"],
             stats["too_short"], stats["too_long"], stats["length_ratio"], stats["leaked"], stats["wrong_language"],
             stats["duplicate"], stats["kept"], stats["pairs_per_s"])
    return StageResult(tables={"bitext_pairs": "bitext_pairs", "bitext_filter_counts": "bitext_filter_counts.parquet",
                               "leakage": "leakage.parquet"}, stats=stats)
