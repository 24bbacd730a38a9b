"""EASE's training corpus from the real Wikipedia samples: the tables the trainer's ``ease`` objective reads.

:func:`prepare_ease` runs the EASE part of the pipeline's DAG (``flows/stages/wiki.py``) without Prefect, the DAG or the
artifact cache, calling the same stage functions with the same arguments in the same order::

    wikidata ─────────────────────────────────────────┐
    wiki_shard.<lang>.<i> ─► wiki_extract.<lang> ─────┴─► entities ─► hard_negatives
                                                                  └──► entity_vectors

(``entity_vectors`` also reads ``wikidata``: the sitelink title of a vocabulary entity whose page the dump lacks.)

Inputs: the five dumps ``<data>/wikipedia/{en,ja,el,uk,vi}wiki-sample.xml.bz2`` (``data`` is the shared data folder,
``../shared/data`` or ``POLYSENT_SHARED_DATA``) and the repo's Wikidata fixture
``tests/fixtures/wikidata/sample-pages.jsonl``. Settings: the ``corpora`` section of
``configs/examples/shared-data-ease.yaml``, read from the file and validated by the stages' own settings classes
(``wikidata``: the five wikis, English labels; ``entities``: more than 10 links, Wikidata types;
``hard_negatives``: K = 10, 10,000 pairs per entity, 50,000 per language, seed 42; ``wiki``: defaults). The dump and
Wikidata file names come from the config's ``sources.wikipedia`` too; only their folder is replaced by ``data``.

Entity vectors: that config sets no ``corpora.entity_vectors``, so its mode is the default ``none`` and the pipeline
itself would build no ``entity_vectors`` table (a training run with an ``ease`` objective is refused: "no source
produces them"). Here the stage runs with :data:`FALLBACK_VECTORS` instead (Wikipedia2Vec trained on the English
sample, 768 dimensions as EASE's ``enwiki`` vectors, one worker so the vectors are reproducible) unless the config
sets a mode or ``vectors`` is passed.

Every stage writes into its own folder under ``out`` (named as the DAG's nodes: ``wikidata``, ``wiki_shard.en.0000``,
``wiki_extract.en``, ``entities``, ``hard_negatives``, ``entity_vectors``); the returned paths are the tables as the
DAG hands them to training (``ArtifactRef.table_path``): ``hard_negatives/hard_negatives`` (hive-partitioned by
``lang``) and ``entity_vectors/entity_vectors.parquet``, read by ``models.training.corpus_tables.load_entity_pairs``.

Held-out pairs (:func:`hold_out_entity_pairs`, the kit's ``eval_entity_pairs``): the entity term's witness is
sentence → entity retrieval on pairs never trained on (``models.evaluation.entity_retrieval``). Whole pages are held
out — every :data:`HELD_OUT_PAGES_EVERY`-th page of each language in ``page_id`` order (the 5th, 10th, …; as
NTREX's every 5th document for xSIM) — so no held-out sentence, nor any other sentence of its page, is trained on;
a row of a training page whose text also occurs on a held-out page goes to the held-out side too, so the two sides
share no sentence. Deterministic (no draw), per language (each keeps about a fifth of its pages).

    python -m experiments.ease_corpus [--data DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import yaml

from contract import StageResult
from experiments.paths import REPO, SHARED, WORK
from pipelines.leakage import EvalTextIndex, LeakageSettings
from pipelines.wikidata import WikidataSettings, build_entities
from pipelines.wikipedia.dump_reader import dump_kind, sibling_index
from pipelines.wikipedia.entities import EntitySettings, build_entity_tables
from pipelines.wikipedia.entity_vectors import EntityVectorSettings, build_entity_vectors
from pipelines.wikipedia.extract import WikiSettings, build_wiki_shard, shard_ranges
from pipelines.wikipedia.hard_negatives import HardNegativeSettings, build_hard_negatives
from pipelines.wikipedia.resolve import build_wiki_language

CONFIG = REPO / "configs" / "examples" / "shared-data-ease.yaml"

FALLBACK_VECTORS = EntityVectorSettings(mode="train", language="en", dim=768, pool_size=1)
"""Used when the config's ``corpora.entity_vectors`` is mode ``none``: EASE's dimension, wikipedia2vec training
defaults of the project (5 iterations, window 5, 5 negatives, min counts 5, link graph and mention DB on,
``word_neg_power`` 0.75), one worker (bit-reproducible, and it leaves a core to other jobs)."""

log = logging.getLogger("polysent.experiments.ease_corpus")
HELD_OUT_PAGES_EVERY = 5  # every 5th page of a language (page_id order) is held out of EASE's training pairs


def _config(config: Path) -> dict[str, Any]:
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ValueError(f"{config}: expected a mapping at the top level")
    return raw


def _stage(out: Path, name: str) -> Path:
    d = out / name
    d.mkdir(parents=True)
    return d


def _rows(path: Path) -> int:
    return ds.dataset(str(path), format="parquet", partitioning="hive").count_rows()


def prepare_ease(data: Path, out: Path, *, vectors: EntityVectorSettings | None = None,
                 config: Path = CONFIG, leakage: EvalTextIndex | None = None) -> dict[str, Path]:
    """Build EASE's ``hard_negatives`` and ``entity_vectors`` tables from the samples under ``data`` into ``out``.

    Args:
        data: the shared data folder (holds ``wikipedia/<lang>wiki-sample.xml.bz2``).
        out: work folder, removed first if it exists; each stage's artifact is a folder in it.
        vectors: entity-vector settings; None = the config's ``corpora.entity_vectors``, or :data:`FALLBACK_VECTORS`
            where that is mode ``none``.
        config: the pipeline config whose ``corpora`` settings and ``sources.wikipedia`` file names are used.
        leakage: the evaluation texts no training sentence may be (``pipelines.leakage``); None = the config's
            ``corpora.leakage``, as the DAG's ``hard_negatives`` node reads it (the kits pass their own sets).

    Returns:
        ``{"hard_negatives": <hive-partitioned folder>, "entity_vectors": <Parquet file>}``, the paths the DAG gives
        the trainer (``models.objectives.ease.EaseComponent`` → ``models.training.corpus_tables.load_entity_pairs``).
    """
    t_start = time.perf_counter()
    data, out = Path(data), Path(out)
    corpora, dumps, wd_file = _inputs(config, data)
    wd_cfg, wiki, ent, hn, vectors = _settings(config, corpora, dumps, wd_file, vectors)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    seconds: dict[str, float] = {}

    t = time.perf_counter()
    wd_dir: Path | None = None
    if wd_file is not None:
        wd_dir = _stage(out, "wikidata")
        build_entities(wd_cfg, wd_file, wd_dir)
    seconds["wikidata"] = time.perf_counter() - t

    shards, languages = _build_wiki(out, wiki, dumps, seconds)

    t = time.perf_counter()
    ent_dir = _stage(out, "entities")
    build_entity_tables(ent, languages, wd_dir, ent_dir)
    seconds["entities"] = time.perf_counter() - t

    t = time.perf_counter()
    hn_dir = _stage(out, "hard_negatives")
    if leakage is None:
        leakage = EvalTextIndex.from_settings(LeakageSettings.model_validate(corpora.get("leakage") or {}))
    hn_result: StageResult = build_hard_negatives(hn, ent_dir, languages, shards, hn_dir, leakage)
    seconds["hard_negatives"] = time.perf_counter() - t

    t = time.perf_counter()
    vec_dir = _stage(out, "entity_vectors")
    vec_result: StageResult = build_entity_vectors(vectors, dumps.get(vectors.language), ent_dir,
                                                   languages[vectors.language], vec_dir, wd_dir)
    seconds["entity_vectors"] = time.perf_counter() - t

    paths = {"hard_negatives": hn_dir / hn_result.tables["hard_negatives"],
             "entity_vectors": vec_dir / vec_result.tables["entity_vectors"]}
    _print_summary(paths, hn_result, vec_result, vectors, seconds, t_start)
    return paths


def _inputs(config: Path, data: Path) -> tuple[dict[str, Any], dict[str, Path], Path | None]:
    """The config's ``corpora`` section, its dumps by language (the config's file names in ``data``) and its Wikidata
    file (relative to the config); ``FileNotFoundError`` naming every input that is missing."""
    raw = _config(config)
    corpora: dict[str, Any] = raw.get("corpora") or {}
    src: dict[str, Any] = raw["sources"]["wikipedia"]
    # the config's file names, in the given data folder (the wikidata fixture stays relative to the config)
    dumps = {lang: data / "wikipedia" / Path(p).name for lang, p in src["dumps"].items()}
    wd_file = (config.parent / src["wikidata"]).resolve() if src.get("wikidata") else None
    missing = [str(p) for p in [*dumps.values(), *([wd_file] if wd_file else [])] if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"EASE inputs not found: {missing}")
    return corpora, dumps, wd_file


def _settings(config: Path, corpora: dict[str, Any], dumps: dict[str, Path], wd_file: Path | None,
              vectors: EntityVectorSettings | None) -> tuple[WikidataSettings, WikiSettings, EntitySettings,
                                                             HardNegativeSettings, EntityVectorSettings]:
    """Each stage's settings from ``corpora`` (the entity vectors: ``vectors`` when given, else the config's, else
    :data:`FALLBACK_VECTORS`), checked against the inputs as the DAG checks them."""
    wd_cfg = WikidataSettings.model_validate(corpora.get("wikidata") or {})
    wiki = WikiSettings.model_validate(corpora.get("wiki") or {})
    ent = EntitySettings.model_validate(corpora.get("entities") or {})
    hn = HardNegativeSettings.model_validate(corpora.get("hard_negatives") or {})
    if vectors is None:
        vectors = EntityVectorSettings.model_validate(corpora.get("entity_vectors") or {})
        if vectors.mode == "none":
            log.warning("%s sets no corpora.entity_vectors (mode none): training Wikipedia2Vec with %s", config.name,
                        FALLBACK_VECTORS.model_dump(exclude_defaults=True))
            vectors = FALLBACK_VECTORS
    if vectors.mode == "none":
        raise ValueError("entity_vectors mode 'none' builds no table; EASE's trainer needs one")
    langs = sorted(dumps)
    for lang in langs:
        hn.quota(lang)  # as the DAG: a per-language quota must name every language
    if vectors.mode == "train" and vectors.language not in dumps:
        raise ValueError(f"entity_vectors.language is {vectors.language!r}, but there is no dump for it ({langs})")
    ent.type_source(wd_file is not None)
    return wd_cfg, wiki, ent, hn, vectors


def _build_wiki(out: Path, wiki: WikiSettings, dumps: dict[str, Path],
                seconds: dict[str, float]) -> tuple[dict[str, list[Path]], dict[str, Path]]:
    """Every language's ``wiki_shard.<lang>.<i>`` and ``wiki_extract.<lang>`` stages, in the DAG's order: the shard
    folders and the language folder of each language (its seconds added to ``seconds``)."""
    shards: dict[str, list[Path]] = {}
    languages: dict[str, Path] = {}
    for lang in sorted(dumps):  # the DAG's sorted(src.dumps.items())
        dump = dumps[lang]
        t = time.perf_counter()
        kind = dump_kind(dump)
        index = sibling_index(dump) if kind == "bz2-multistream" else None
        shards[lang] = []
        for i, rng in enumerate(shard_ranges(dump, wiki.shard_bytes, kind)):
            d = _stage(out, f"wiki_shard.{lang}.{i:04d}")
            build_wiki_shard(wiki, dump, lang, rng, index, d)
            shards[lang].append(d)
        d = _stage(out, f"wiki_extract.{lang}")
        counts = [json.loads((s / "shard_counts.json").read_text(encoding="utf-8")) for s in shards[lang]]
        build_wiki_language(lang, shards[lang], counts, wiki.max_redirect_hops, d)
        languages[lang] = d
        seconds[f"wiki.{lang}"] = time.perf_counter() - t
    return shards, languages


def _print_summary(paths: dict[str, Path], hn_result: StageResult, vec_result: StageResult,
                   vectors: EntityVectorSettings, seconds: dict[str, float], t_start: float) -> None:
    """One line: the two tables' rows (per language, with a hard negative), the vectors' dimension and vocabulary,
    the seconds since ``t_start`` (``time.perf_counter``) and those of every stage."""
    per_lang = hn_result.stats.get("per_language", {})
    with_negative = ds.dataset(str(paths["hard_negatives"]), format="parquet", partitioning="hive").count_rows(
        filter=ds.field("negative").is_valid() & (ds.field("negative") != ""))
    vocab = vec_result.stats.get("vocabulary", "?")
    print(f"ease corpus: hard_negatives {_rows(paths['hard_negatives']):,} rows "
          f"({', '.join(f'{k} {v:,}' for k, v in sorted(per_lang.items()))}; {with_negative:,} with a hard negative), "
          f"entity_vectors {_rows(paths['entity_vectors']):,} rows of dim {vectors.dim} (vocabulary {vocab}), "
          f"{time.perf_counter() - t_start:.0f} s "
          f"({', '.join(f'{k} {v:.0f}' for k, v in seconds.items())})", flush=True)


def held_out_rows(langs: list[str], pages: list[int], texts: list[str],
                  every: int = HELD_OUT_PAGES_EVERY) -> list[bool]:
    """Which rows are held out: those of every ``every``-th page of their language (sorted ``page_id``s, the
    ``every``-th, ``2·every``-th, …) and those whose text occurs on such a page (module docstring)."""
    if every < 2:
        raise ValueError(f"every must be ≥ 2 (1 would hold out every page), got {every}")
    by_lang: dict[str, list[int]] = {}
    for lang, page in sorted(set(zip(langs, pages, strict=True))):
        by_lang.setdefault(lang, []).append(page)
    held_pages = {(lang, p) for lang, ps in by_lang.items() for p in ps[every - 1::every]}
    on_held = {t for t, lang, p in zip(texts, langs, pages, strict=True) if (lang, p) in held_pages}
    return [(lang, p) in held_pages or t in on_held for t, lang, p in zip(texts, langs, pages, strict=True)]


def hold_out_entity_pairs(hard_negatives: Path, train_out: Path, held_out: Path,
                          every: int = HELD_OUT_PAGES_EVERY) -> dict[str, Any]:
    """Split EASE's ``hard_negatives`` table into training pairs and held-out pairs (:func:`held_out_rows`).

    Args:
        hard_negatives: the table (hive-partitioned by ``lang``, or a Parquet file with a ``lang`` column).
        train_out: folder written with the training rows in the stage's layout (``lang=<xx>/part-00000.parquet``,
            read by ``models.training.corpus_tables.load_entity_pairs``); must not exist.
        held_out: Parquet file written with the held-out rows (every column, ``lang`` included), the witness's
            ``eval_entity_pairs``.
        every: every ``every``-th page of a language is held out (default 5).

    Returns:
        Counts: rows, pages and distinct texts on each side, held-out rows per language, the held-out entities and
        how many of them have no training pair (their head row is then trained as a negative only, or not at all).
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = ds.dataset(str(hard_negatives), format="parquet", partitioning="hive").to_table()
    t = t.set_column(t.schema.get_field_index("lang"), "lang", t.column("lang").cast(pa.string()))
    langs, pages, texts = t.column("lang").to_pylist(), t.column("page_id").to_pylist(), t.column("text").to_pylist()
    mask = pa.array(held_out_rows(langs, pages, texts, every))
    train, held = t.filter(pc.invert(mask)), t.filter(mask)
    if train.num_rows == 0 or held.num_rows == 0:
        raise ValueError(f"{hard_negatives}: holding out every {every}th page leaves {train.num_rows} training and "
                         f"{held.num_rows} held-out rows; both sides need rows")
    train_out.mkdir(parents=True)
    for lang in sorted(set(train.column("lang").to_pylist())):
        part = train.filter(pc.equal(train.column("lang"), lang)).drop_columns(["lang"])
        (train_out / f"lang={lang}").mkdir()
        pq.write_table(part, train_out / f"lang={lang}" / "part-00000.parquet")
    held_out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(held, held_out)
    trained_entities = set(train.column("entity").to_pylist())
    held_entities = sorted(set(held.column("entity").to_pylist()))

    def side(x: pa.Table) -> dict[str, int]:
        return {"rows": x.num_rows, "pages": len(set(zip(x.column("lang").to_pylist(),
                                                         x.column("page_id").to_pylist(), strict=True))),
                "texts": len(set(x.column("text").to_pylist()))}

    stats = {"every": every, "train": side(train), "held_out": side(held),
             "held_out_per_language": dict(sorted(Counter(held.column("lang").to_pylist()).items())),
             "held_out_entities": len(held_entities),
             "held_out_entities_without_training_pair": [e for e in held_entities if e not in trained_entities]}
    log.info("EASE held-out pairs: every %dth page of each language: %s held out, %s left to train", every,
             stats["held_out"], stats["train"])
    return stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--data", type=Path, default=SHARED, help="the shared data folder (POLYSENT_SHARED_DATA)")
    p.add_argument("--out", type=Path, default=WORK / "ease-corpus",
                   help="work folder (replaced)")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if not (a.data / "wikipedia").is_dir():
        print(f"skipped: the shared data is absent ({a.data}; --data or POLYSENT_SHARED_DATA)", file=sys.stderr)
        return 0
    print(json.dumps({k: str(v) for k, v in prepare_ease(a.data, a.out).items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
