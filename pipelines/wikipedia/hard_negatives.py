"""Stage ``hard_negatives``: EASE's training pairs — (sentence, positive entity, type-based hard negative) — sampled.

EASE (seed paper §3.2–3.3; docs methods §4.4, ``build_type_hardnegative_dataset.py`` and ``dataset_sampler.py``):

1. **Candidates per entity**, computed once: choose one of the entity's types at random, sample up to
   ``negatives_per_entity`` (K, default 10) vocabulary entities of that type, drop the entity itself.
   Implementation: the members of each type are put in a seeded random order and an entity takes the K members of a
   window starting at its own seeded random offset — marginally a uniform random K-subset, as ``random.sample``
   draws, but vectorised over millions of entities.
2. **Same-page exclusion**: for a sentence of page p, drop every candidate linked anywhere on p (including links of
   sentences the length filter removed) and p's own subject, the entity p is about (EASE's ``origin_entity``; the
   entity key is shared by every language's page of one Wikidata item). Pairs left without a candidate are counted
   and dropped (``all_candidates_linked_on_page``, which counts both causes) — unless ``without_negative: keep``.
3. **One negative** per pair, drawn once (EASE draws ``random.sample(candidates, 1)`` when the dataset is built and
   never resamples); the candidates are kept too.
4. **Sampling**: at most ``max_pairs_per_entity`` pairs per positive entity (default 10,000), then at most
   ``max_pairs_per_language`` per language (EASE: 1M for English; 50k per language for the 18-language model).

Every random choice is a splitmix64 hash of (seed, what is chosen), so the output depends only on the inputs and the
seed — not on shard order, process count or library versions. Positive entities must be in the vocabulary.

A link's entity is that of its target page (``entity_titles``) or, when the dump has no page for the target, that of
the target's Wikidata sitelink title (``entity_link_titles``, from the ``entities`` stage): EASE keeps a link to any
entity of its vocabulary, whether or not the target's page is in the processed dump. The same holds for the
same-page exclusion (every title linked on the page) and the types (Wikidata P31 of the QID, page or not). A link
whose target has neither a page nor a sitelink is dropped as ``link_target_missing`` (unless the ``entities`` stage
keyed it by its title: ``corpora.entities.unlinked_titles: title``).

``without_negative: keep`` (EASE's monolingual English setting without Wikidata, where most linked entities have no
page and so no infobox type): a pair whose positive has no type-based hard negative — no type, no other vocabulary
entity of its type, or every candidate linked on the sentence's page — is kept with a null ``negative`` and empty
``candidates`` (``type``: the chosen type, or null without one), sampled like the others, counted in the stats as
``pairs_without_negative``; the drop reasons ``positive_without_type_candidates`` and
``all_candidates_linked_on_page`` are then 0. The ``ease`` objective reads a null ``negative`` as "no hard negative"
(``models.training.corpus_tables.load_entity_pairs``): with its ``hard_negatives: true`` such rows are dropped when
training loads them (logged), with ``hard_negatives: false`` every row trains without hard negatives; it has no mode
that mixes rows with and without one.

**Leakage guard** (``pipelines.leakage``, the ``corpora.leakage`` sets every corpus node reads): a sentence whose
normalised text is an evaluation text — BUCC's sentences come from Wikipedia — gives no pair. Its links are removed
before sampling (so the quota fills from the rest), counted per evaluation set in the ``leakage`` table (units: the
sentence's links) and as the drop reason ``in_evaluation_set``; the same-page exclusion still sees them.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import polars as pl
from pydantic import ConfigDict, Field, field_validator

from contract import StageResult
from pipelines.key_defaults import KeyWhenSet
from pipelines.leakage import EvalTextIndex, leakage_counts
from pipelines.seeded_hash import seeded_hash, splitmix64
from pipelines.text_normalise import normalise_series
from pipelines.wikipedia.artifact_tables import scan_shards, scan_table, shard_files

log = logging.getLogger("polysent.pipelines.ease")
STAGE_VERSION = "8"  # 4: every draw of an entity is a column of its row (no positional alignment after a join);
#   5: a page's own subject (origin_entity) is never a hard negative of its sentences; 6: a language without pairs
#   writes a schema-only file with the table's columns (it wrote a column-less one when no language had a pair)
#   7: a link to a title the dump has no page for is a pair when the title has a Wikidata sitelink (entity_link_titles);
#   such titles linked on a page are excluded from its hard negatives too; 8: the leakage guard (a ``leakage`` table)


class HardNegativeSettings(KeyWhenSet):
    """Hard-negative candidates and sampling of EASE pairs."""

    model_config = ConfigDict(extra="forbid")
    negatives_per_entity: int = Field(10, ge=1)
    """K: candidates sampled from the entity's type"""
    max_pairs_per_entity: int = Field(10_000, ge=1)
    """cap of pairs per positive entity"""
    max_pairs_per_language: int | dict[str, int] = 1_000_000
    """total pairs per language (one number, or per language; EASE: 1M en, 50k each for 18)"""
    seed: int = 42
    """EASE uses random.seed(42)"""
    pages_per_chunk: int = Field(200_000, ge=1, exclude=True)
    """pages whose pairs are built at once (memory; never changes the output)"""
    without_negative: Literal["drop", "keep"] = "drop"
    """a pair whose positive entity has no type-based hard negative (no type, no other vocabulary entity of its type,
    or every candidate linked on the sentence's page): ``drop`` (default; EASE's dataset_sampler) or ``keep`` it with
    a null ``negative`` and empty ``candidates`` — the ``ease`` objective drops such rows while its
    ``hard_negatives`` is true and trains on all rows without hard negatives when it is false. Enters a cache key only
    when set"""
    # added after configs were written: out of the dump (and cache keys) while at its default
    KEY_WHEN_SET: ClassVar[tuple[str, ...]] = ("without_negative",)

    @field_validator("max_pairs_per_language")
    @classmethod
    def _positive_quota(cls, v: int | dict[str, int]) -> int | dict[str, int]:
        """A quota below 1 keeps nothing (and polars' ``head(-1)`` would quietly keep all rows but one)."""
        bad = {k: q for k, q in (v.items() if isinstance(v, dict) else [(None, v)]) if q < 1}
        if bad:
            which = ", ".join(f"{k}: {q}" if k is not None else str(q) for k, q in bad.items())
            raise ValueError(f"out of range (value {which}); expected a number of pairs ≥ 1")
        return v

    def quota(self, lang: str) -> int:
        q = self.max_pairs_per_language
        if isinstance(q, int):
            return q
        if lang not in q:
            raise ValueError(f"corpora.hard_negatives.max_pairs_per_language has no entry for {lang!r} "
                             f"(has {sorted(q)})")
        return q[lang]


def string_hash(values: pl.Series) -> pl.Series:
    """64-bit hash of strings, stable across versions (BLAKE2b of each distinct value); mix in a seed and a salt
    with :func:`_salted` for each random choice, so one set of strings is hashed once."""
    uniq = values.unique()
    base = np.fromiter((int.from_bytes(hashlib.blake2b(v.encode("utf-8"), digest_size=8).digest(), "little")
                        for v in uniq.to_list()), dtype=np.uint64, count=len(uniq))
    lookup = pl.DataFrame({"v": uniq, "h": pl.Series(base, dtype=pl.UInt64)})
    return pl.DataFrame({"v": values}).join(lookup, on="v", how="left", maintain_order="left")["h"]


def _salted(base: pl.Series, seed: int, salt: str) -> pl.Series:
    return pl.Series(seeded_hash(base.to_numpy(), str(seed), salt), dtype=pl.UInt64)


def type_candidates(vocab_types: pl.DataFrame, k: int, seed: int) -> pl.DataFrame:
    """``[entity, type]`` rows of vocabulary entities → ``[entity, type, candidates]`` (one chosen type each)."""
    if vocab_types.is_empty():
        return pl.DataFrame(schema={"entity": pl.Utf8, "type": pl.Utf8, "candidates": pl.List(pl.Utf8)})
    vt = vocab_types.select("entity", "type").unique().sort("entity", "type")
    base = string_hash(vt["entity"])
    # every draw of an entity is a column of its row, so joins below cannot misalign them
    vt = vt.with_columns(_salted(base, seed, "type").alias("h_e"), _salted(base, seed, "member-order").alias("h_m"),
                         _salted(base, seed, "window").alias("h_w"),
                         pl.col("type").cum_count().over("entity").alias("i"),
                         pl.len().over("entity").alias("n_types"))
    # 1. one random type per entity
    chosen = vt.filter((pl.col("h_e") % pl.col("n_types").cast(pl.UInt64)) == (pl.col("i") - 1).cast(pl.UInt64))
    # 2. members of each type in a seeded random order
    members = vt.select("type", pl.col("entity").alias("member"), "h_m").sort("type", "h_m", "member")
    members = members.with_columns(pl.int_range(pl.len()).over("type").alias("rank"),
                                   pl.len().over("type").alias("n"))
    sizes = members.group_by("type").agg(pl.col("n").first())
    # 3. a window of K members at a random offset, the entity itself removed
    windows = (chosen.select("entity", "type", "h_w").join(sizes, on="type")
               .with_columns((pl.col("h_w") % pl.col("n").cast(pl.UInt64)).cast(pl.Int64).alias("offset"),
                             pl.min_horizontal(pl.col("n"), pl.lit(k)).alias("take"))
               .with_columns(pl.int_ranges(0, pl.col("take")).alias("j")).explode("j")
               .with_columns(((pl.col("offset") + pl.col("j")) % pl.col("n")).alias("rank")))
    picked = (windows.join(members.select("type", "rank", "member"), on=["type", "rank"])
              .filter(pl.col("member") != pl.col("entity")).sort("entity", "j")
              .group_by("entity", maintain_order=True)
              .agg(pl.col("type").first(), pl.col("member").alias("candidates")))
    no_cands = chosen.select("entity", "type").join(picked.select("entity"), on="entity", how="anti").with_columns(
        pl.lit([], pl.List(pl.Utf8)).alias("candidates"))
    return pl.concat([picked, no_cands]).sort("entity")


def _pair_hash(df: pl.DataFrame, seed: int, salt: str) -> pl.Series:
    page = df["page_id"].to_numpy().astype(np.uint64)
    sub = (df["sent_id"].to_numpy().astype(np.uint64) << np.uint64(16)) | df["link_no"].to_numpy().astype(np.uint64)
    h = splitmix64(seeded_hash(page, str(seed), salt) ^ sub)
    return pl.Series(h, dtype=pl.UInt64)


def leaking_sentences(shards: list[Path], lang: str, index: EvalTextIndex) -> pl.DataFrame:
    """The (``page_id``, ``sent_id``, ``eval_set``) of language ``lang``'s sentences whose normalised text is in
    ``index``, read one shard file at a time (memory bounded by a shard, not the dump)."""
    found = [pl.DataFrame(schema={"page_id": pl.Int64, "sent_id": pl.Int32, "eval_set": pl.Utf8})]
    if not len(index):
        return found[0]
    try:
        files = shard_files(shards, "wiki_sentences", lang)
    except FileNotFoundError:  # a language whose shards hold no sentence: nothing to leak
        return found[0]
    for f in files:
        sents = pl.read_parquet(f, columns=["page_id", "sent_id", "text"]).with_row_index("unit")
        matched = index.matches(sents.select("unit", pl.lit(lang).alias("lang"),
                                             normalise_series(sents["text"]).alias("norm")))
        found.append(sents.join(matched.select("unit", "eval_set"), on="unit")
                     .select(pl.col("page_id").cast(pl.Int64), pl.col("sent_id").cast(pl.Int32), "eval_set"))
    return pl.concat(found).unique().sort("page_id", "sent_id", "eval_set")


def build_hard_negatives(settings: HardNegativeSettings, entities_dir: Path, languages: Mapping[str, Path],
                         shards: Mapping[str, list[Path]], out: Path,
                         index: EvalTextIndex | None = None) -> StageResult:
    """``languages``: ``wiki_extract`` artifact per language; ``shards``: its ``wiki_shard`` artifacts (sentences);
    ``index``: the leakage guard's evaluation texts (None: no guard)."""
    index = index if index is not None else EvalTextIndex.empty()
    entities = pl.read_parquet(entities_dir / "entities.parquet")
    titles = pl.read_parquet(entities_dir / "entity_titles.parquet")
    link_titles = read_link_titles(entities_dir / "entity_link_titles.parquet")
    types = pl.read_parquet(entities_dir / "entity_types.parquet")
    vocab = entities.filter("in_vocab").select("entity")
    cands = type_candidates(types.join(vocab, on="entity"), settings.negatives_per_entity, settings.seed)
    cands.write_parquet(out / "entity_negative_candidates.parquet", compression="zstd")
    drops: list[dict] = []
    frames: list[pl.DataFrame] = []
    by_sitelink: dict[str, int] = {}
    leaked: list[pl.DataFrame] = []
    for lang, path in sorted(languages.items()):
        sampled, lang_drops, by_sitelink[lang], lang_leaked = _language_pairs(
            settings, lang, path, shards[lang], _EntityKeys.of(lang, titles, link_titles), vocab, cands,
            leaking_sentences(shards[lang], lang, index))
        frames.append(sampled)
        drops += lang_drops
        leaked.append(lang_leaked)
    leak = leakage_counts("hard_negatives", pl.concat(leaked))
    leak.write_parquet(out / "leakage.parquet")
    result = pl.concat(frames) if frames else pl.DataFrame(schema=PAIR_SCHEMA)
    folder = out / "hard_negatives"
    folder.mkdir(parents=True, exist_ok=True)
    for lang in sorted(languages):
        part = result.filter(pl.col("lang") == lang).drop("lang")
        d = folder / f"lang={lang}"
        d.mkdir(exist_ok=True)
        part.write_parquet(d / "part-00000.parquet", compression="zstd")
    # one table of everything dropped on the way: the extraction and resolution counts of each language, then ours
    earlier = [pl.read_parquet(path / "wiki_drop_counts" / f"lang={lang}") for lang, path in sorted(languages.items())
               if (path / "wiki_drop_counts" / f"lang={lang}").exists()]
    schema = {"lang": pl.Utf8, "stage": pl.Utf8, "reason": pl.Utf8, "count": pl.Int64}
    pl.concat([*(e.select(pl.col(c).cast(t) for c, t in schema.items()) for e in earlier),
               pl.DataFrame(drops, schema=schema)]).write_parquet(out / "ease_drop_counts.parquet")
    if result.is_empty():
        log.warning("hard_negatives: 0 EASE pairs in %s — %s; an EASE objective trained on them is refused",
                    ", ".join(sorted(languages)) or "no language", no_pairs_reason(drops, types, vocab))
    return StageResult(
        tables={"hard_negatives": "hard_negatives", "entity_negative_candidates": "entity_negative_candidates.parquet",
                "ease_drop_counts": "ease_drop_counts.parquet", "leakage": "leakage.parquet"},
        stats={"pairs": result.height,
               "links_leaked": sum(d["count"] for d in drops if d["reason"] == "in_evaluation_set"),
               "per_language": {lang: int((result["lang"] == lang).sum()) if result.height else 0
                                for lang in languages},
               "links_to_entities_without_page": by_sitelink, "drops": drops,
               **({"pairs_without_negative": {lang: int(((result["lang"] == lang) & result["negative"].is_null())
                                                         .sum()) if result.height else 0 for lang in languages}}
                  if settings.without_negative == "keep" else {})},
    )


_KEY = ["page_id", "sent_id", "link_no"]
PAIR_SCHEMA = {"lang": pl.Utf8, "page_id": pl.Int64, "sent_id": pl.Int32, "link_no": pl.Int32, "text": pl.Utf8,
               "start": pl.Int32, "end": pl.Int32, "surface": pl.Utf8, "entity": pl.Utf8, "negative": pl.Utf8,
               "candidates": pl.List(pl.Utf8), "type": pl.Utf8, "origin_entity": pl.Utf8}


def no_pairs_reason(drops: list[dict], types: pl.DataFrame, vocab: pl.DataFrame) -> str:
    """Why no EASE pair survived, for the warning: the cause upstream when there is one, else the largest drop."""
    if vocab.is_empty():
        return "the entity vocabulary is empty (no entity has more than corpora.entities.min_link_count links)"
    if types.is_empty():
        return ("no entity has a type (corpora.entities.types: none, or no infobox / Wikidata type was found), so no "
                "entity has a type-based hard-negative candidate")
    totals: dict[str, int] = {}
    for d in drops:
        totals[d["reason"]] = totals.get(d["reason"], 0) + int(d["count"])
    worst = max(totals.items(), key=lambda kv: kv[1], default=("no_links", 0))
    if worst[1] == 0:
        return "the articles have no links"
    return f"most links were dropped as {worst[0]} ({worst[1]})"


def read_link_titles(path: Path) -> pl.DataFrame:
    """The ``entities`` stage's ``entity_link_titles`` (``lang``, ``title``, ``entity``), with an error naming the
    file when it is missing or lacks a column (an ``entities`` artifact written before its version 2)."""
    if not path.is_file():
        raise FileNotFoundError(f"hard negatives: the entity_link_titles table is missing: {path} (the entities "
                                f"stage writes it from version 2 on)")
    have = pl.read_parquet_schema(path)
    missing = [c for c in ("lang", "title", "entity") if c not in have]
    if missing:
        raise ValueError(f"hard negatives: {path} (entity_link_titles) has no column(s) {missing}; "
                         f"it has {sorted(have)}")
    return pl.read_parquet(path, columns=["lang", "title", "entity"])


class _EntityKeys:
    """One language's ways from a link target to its entity: by the target's page id, or by its title where the
    dump has no page for it."""

    def __init__(self, by_page: pl.DataFrame, by_title: pl.DataFrame) -> None:
        self.by_page, self.by_title = by_page, by_title

    @classmethod
    def of(cls, lang: str, titles: pl.DataFrame, link_titles: pl.DataFrame) -> _EntityKeys:
        return cls(titles.filter(pl.col("lang") == lang).select("page_id", "entity"),
                   link_titles.filter(pl.col("lang") == lang).select("title", "entity")
                   .unique("title", keep="first", maintain_order=True))

    def resolve(self, df: pl.DataFrame, name: str = "entity") -> pl.DataFrame:
        """``df`` (with ``target``, ``target_page_id``) and column ``name``: the entity of the target's page, or of
        its title when ``target_page_id`` is null; null when neither is known. Rows and their order are kept."""
        return (df.join(self.by_page.select(pl.col("page_id").alias("target_page_id"), pl.col("entity").alias("_p")),
                        on="target_page_id", how="left", maintain_order="left")
                .join(self.by_title.select(pl.col("title").alias("target"), pl.col("entity").alias("_t")),
                      on="target", how="left", maintain_order="left")
                .with_columns(pl.when(pl.col("target_page_id").is_null()).then(pl.col("_t")).otherwise(pl.col("_p"))
                              .alias(name))
                .drop("_p", "_t"))


def _language_pairs(settings: HardNegativeSettings, lang: str, path: Path, shards: list[Path], keys: _EntityKeys,
                    vocab: pl.DataFrame, cands: pl.DataFrame,
                    leaking: pl.DataFrame) -> tuple[pl.DataFrame, list[dict], int, pl.DataFrame]:
    """One language's sampled pairs, processed ``pages_per_chunk`` pages at a time.

    Memory stays bounded at full-dump scale: a chunk's links are exploded against the candidates and the same-page
    links, then only the rows that can still be sampled are kept. That pruning is exact: the per-entity cap keeps
    each entity's smallest hashes and the quota the smallest hashes overall, and a row cut by either can never come
    back (a later row that evicts a survivor has a smaller hash, so the survivors below any hash never decrease).
    The third value counts the links whose target has no page in the dump but an entity by its sitelink; the fourth
    is the links of the ``leaking`` sentences (``leaking_sentences``), removed before any pair is built, as
    (``unit``, ``lang``, ``eval_set``) for ``leakage_counts``.
    """
    cap, quota = settings.max_pairs_per_entity, settings.quota(lang)
    links_lf = scan_table(path / "wiki_links").select(*_KEY, "start", "end", "surface", "target", "target_page_id")
    targets_lf = scan_table(path / "wiki_page_targets").select("page_id", "target", "target_page_id")
    bounds = links_lf.select(pl.col("page_id").min().alias("lo"), pl.col("page_id").max().alias("hi"),
                             pl.len().alias("n")).collect().row(0, named=True)
    n = {"leaked": 0, "links": 0, "missing": 0, "by_sitelink": 0, "pairs": 0, "in_vocab": 0, "with_cands": 0, "kept": 0,
         "without_negative": 0}
    per_entity: dict[str, int] = {}
    survivors: pl.DataFrame | None = None
    leaked = [pl.DataFrame(schema={"unit": pl.Utf8, "lang": pl.Utf8, "eval_set": pl.Utf8})]
    leaking_keys = leaking.select("page_id", "sent_id").unique()
    if bounds["n"]:
        lo, hi = int(bounds["lo"]), int(bounds["hi"])
        step = max(1, (hi - lo + 1) * settings.pages_per_chunk // max(1, _n_pages(path)))
        for start in range(lo, hi + 1, step):
            in_range = (pl.col("page_id") >= start) & (pl.col("page_id") < start + step)
            links = links_lf.filter(in_range).collect()
            if leaking.height:
                hit = links.join(leaking, on=["page_id", "sent_id"])
                leaked.append(hit.select(pl.concat_str(*(pl.col(k).cast(pl.Utf8) for k in _KEY),
                                                       separator=":").alias("unit"),
                                         pl.lit(lang).alias("lang"), "eval_set"))
                n["leaked"] += hit.select(_KEY).n_unique()
                links = links.join(leaking_keys, on=["page_id", "sent_id"], how="anti")
            if links.is_empty():
                continue
            kept = _chunk_pairs(settings, links, targets_lf.filter(in_range).collect(), keys, vocab, cands, n)
            for e, c in kept.group_by("entity").len().iter_rows():
                per_entity[e] = per_entity.get(e, 0) + c
            pool = kept if survivors is None else pl.concat([survivors, kept])
            survivors = (pool.sort("h").filter(pl.int_range(pl.len()).over("entity") < cap).head(quota))
    sampled = survivors if survivors is not None else pl.DataFrame()
    if sampled.height:
        sents = scan_shards(shards, "wiki_sentences", lang).select("page_id", "sent_id", "text")
        sampled = (sampled.lazy().join(sents, on=["page_id", "sent_id"], how="inner").collect()
                   .select(pl.lit(lang).alias("lang"), *_KEY, "text", "start", "end", "surface", "entity",
                           "negative", "candidates", "type", "origin_entity")
                   .sort(*_KEY))
    else:
        sampled = pl.DataFrame(schema=PAIR_SCHEMA)
    capped = sum(min(c, cap) for c in per_entity.values())
    keep = settings.without_negative == "keep"  # then those pairs are kept (with no negative), not dropped
    with_negative = n["kept"] - n["without_negative"]
    drops = [{"lang": lang, "stage": "hard_negatives", "reason": reason, "count": int(v)} for reason, v in (
        ("in_evaluation_set", n["leaked"]),
        ("link_target_missing", n["missing"]),
        ("target_without_entity", n["links"] - n["missing"] - n["pairs"]),
        ("positive_not_in_vocabulary", n["pairs"] - n["in_vocab"]),
        ("positive_without_type_candidates", 0 if keep else n["in_vocab"] - n["with_cands"]),
        ("all_candidates_linked_on_page", 0 if keep else n["with_cands"] - with_negative),
        ("over_entity_cap", n["kept"] - capped),
        ("over_language_quota", capped - sampled.height))]
    log.info("%s: %d links (%d to a title without a page, keyed by its Wikidata sitelink or title) → %d pairs with "
             "hard negatives → %d sampled (cap %d per entity, quota %d)", lang, n["links"], n["by_sitelink"],
             with_negative, sampled.height, cap, quota)
    if keep:
        log.info("%s: without_negative: keep — %d of those pairs have no type-based hard negative (%d of an untyped "
                 "positive, %d whose type has no other entity or whose candidates are all linked on the page); %d of "
                 "the %d sampled",
                 lang, n["without_negative"], n["in_vocab"] - n["with_cands"], n["with_cands"] - with_negative,
                 int(sampled["negative"].is_null().sum()) if sampled.height else 0, sampled.height)
    if n["leaked"]:
        log.info("%s: %d links of sentences that are evaluation texts removed (leakage guard)", lang, n["leaked"])
    return sampled, drops, n["by_sitelink"], pl.concat(leaked)


def _n_pages(path: Path) -> int:
    return int(scan_table(path / "wiki_pages").select(pl.len()).collect().item())


def _chunk_pairs(settings: HardNegativeSettings, links: pl.DataFrame, page_targets: pl.DataFrame,
                 keys: _EntityKeys, vocab: pl.DataFrame, cands: pl.DataFrame, n: dict[str, int]) -> pl.DataFrame:
    """The pairs of one chunk of pages that keep a candidate after the same-page exclusion (the entities linked on
    the page — by their page or their sitelink title — and the page's own subject), with their negative."""
    links = keys.resolve(links)
    no_page = links["target_page_id"].is_null()
    n["links"] += links.height
    n["missing"] += int((no_page & links["entity"].is_null()).sum())
    n["by_sitelink"] += int((no_page & links["entity"].is_not_null()).sum())
    pairs = (links.drop_nulls("entity").drop("target", "target_page_id")
             .join(keys.by_page.rename({"entity": "origin_entity"}), on="page_id", how="left"))
    in_vocab = pairs.join(vocab, on="entity", how="semi")
    with_cands = in_vocab.join(cands, on="entity", how="inner")
    linked = keys.resolve(page_targets, "candidate").drop_nulls("candidate").select("page_id", "candidate")
    subject = (links.select("page_id").unique()
               .join(keys.by_page.rename({"entity": "candidate"}), on="page_id").select("page_id", "candidate"))
    page_entities = pl.concat([linked, subject]).unique()
    exploded = (with_cands.select(*_KEY, "candidates").with_columns(
        pl.int_ranges(0, pl.col("candidates").list.len()).alias("pos")).explode("candidates", "pos")
        .rename({"candidates": "candidate"}).drop_nulls("candidate")
        .join(page_entities, on=["page_id", "candidate"], how="anti")
        .sort(*_KEY, "pos")
        .group_by(_KEY, maintain_order=True).agg(pl.col("candidate").alias("candidates")))
    kept = with_cands.drop("candidates").join(exploded, on=_KEY, how="inner")
    if settings.without_negative == "keep":
        # the pairs left without a candidate: their entity's chosen type (null without one), no candidates
        bare = (in_vocab.join(kept.select(_KEY), on=_KEY, how="anti")
                .join(cands.select("entity", "type"), on="entity", how="left")
                .with_columns(pl.lit([], pl.List(pl.Utf8)).alias("candidates")))
        n["without_negative"] += bare.height
        kept = pl.concat([kept, bare.select(kept.columns)]).sort(_KEY)
    n["pairs"] += pairs.height
    n["in_vocab"] += in_vocab.height
    n["with_cands"] += with_cands.height
    n["kept"] += kept.height
    kept = kept.with_columns(_pair_hash(kept, settings.seed, "negative").alias("h_neg"),
                             _pair_hash(kept, settings.seed, "sample").alias("h"))
    # no candidate (without_negative: keep): index 0 of an empty list, out of bounds → a null negative
    return kept.with_columns(pl.col("candidates").list.get(
        (pl.col("h_neg") % pl.col("candidates").list.len().clip(lower_bound=1).cast(pl.UInt64)).cast(pl.Int64),
        null_on_oob=True).alias("negative")).drop("h_neg")
