"""Stage ``eval_sets``: every configured evaluation set → one Parquet table per kind, sorted deterministically.

Tables (each written only when it has rows): ``eval_tatoeba``, ``eval_bucc``, ``eval_bucc_gold``, ``eval_sts``,
``eval_clustering``, ``eval_classification``, ``eval_parallel``, ``eval_langid``, ``eval_pair_classification`` and
``eval_pair_classification_bad_rows`` (its skipped rows with their lines; columns: the reader modules). Local
files and mteb hub datasets feed the same tables; a row key given by two sources (say, Tatoeba as a folder and from the
hub) is an error. Stats: ``rows`` per table and ``skipped`` lines per table and reason (blank STS gold lines, STS17
track 6's unscored input lines, duplicated BUCC gold lines, NTREX second references, …).
"""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl

from contract import StageResult
from pipelines.eval_sets import bucc, classification, clustering, langid, pair_classification, parallel, sts, tatoeba
from pipelines.eval_sets.hub import Loader, load_hub
from pipelines.eval_sets.lines import Skipped
from pipelines.eval_sets.settings import EvalSetsSettings, EvalSources

log = logging.getLogger("polysent.pipelines.eval_sets")

SCHEMAS: dict[str, dict[str, pl.DataType | type[pl.DataType]]] = {
    "eval_tatoeba": tatoeba.SCHEMA,
    "eval_bucc": bucc.SCHEMA,
    "eval_bucc_gold": bucc.GOLD_SCHEMA,
    "eval_sts": sts.SCHEMA,
    "eval_clustering": clustering.SCHEMA,
    "eval_classification": classification.SCHEMA,
    "eval_parallel": parallel.SCHEMA,
    "eval_langid": langid.SCHEMA,
    pair_classification.TABLE: pair_classification.SCHEMA,
    pair_classification.BAD_TABLE: pair_classification.BAD_SCHEMA,
}
# the sort order of each table, which is also its row key (must be unique)
KEYS = {
    "eval_tatoeba": ["lang", "idx"],
    "eval_bucc": ["pair", "split", "lang", "line"],
    "eval_bucc_gold": ["pair", "split", "src_id", "tgt_id"],
    "eval_sts": ["dataset", "subset", "idx"],
    "eval_clustering": ["dataset", "lang", "idx"],
    "eval_classification": ["dataset", "lang", "split", "idx"],
    "eval_parallel": ["dataset", "lang", "idx"],
    "eval_langid": ["lang", "split", "idx"],
    pair_classification.TABLE: ["dataset", "lang", "split", "idx"],
    pair_classification.BAD_TABLE: ["dataset", "lang", "split", "line"],
}


def read_eval_sets(settings: EvalSetsSettings, sources: EvalSources, skipped: Skipped | None = None,
                   loader: Loader | None = None) -> dict[str, pl.DataFrame]:
    """Every configured set read into its table (empty tables included), sorted by :data:`KEYS`."""
    skipped = skipped if skipped is not None else Skipped()
    parts: dict[str, list[pl.DataFrame]] = {name: [] for name in SCHEMAS}
    if sources.tatoeba is not None:
        parts["eval_tatoeba"].append(tatoeba.read_tatoeba(sources.tatoeba, settings.tatoeba_languages, skipped))
    if sources.bucc is not None:
        sentences, gold = bucc.read_bucc(sources.bucc, settings.bucc_pairs, settings.bucc_splits, skipped)
        parts["eval_bucc"].append(sentences)
        parts["eval_bucc_gold"].append(gold)
    if sources.sts:
        parts["eval_sts"].append(sts.read_sts_sources(sources.sts, skipped))
    if sources.clustering is not None:
        parts["eval_clustering"].append(clustering.read_clustering(
            sources.clustering, settings.clustering_languages, settings.clustering_dataset,
            settings.clustering_empty_sentences, skipped, settings.clustering_max_per_language))
    parts["eval_classification"] += [classification.read_classification(c, skipped) for c in sources.classification]
    parts["eval_parallel"] += [parallel.read_parallel(p, skipped) for p in sources.parallel]
    for pc in sources.pair_classification:
        pairs, bad = pair_classification.read_pair_classification(pc, skipped)
        parts[pair_classification.TABLE].append(pairs)
        parts[pair_classification.BAD_TABLE].append(bad)
    if sources.langid is not None:
        parts["eval_langid"].append(langid.read_langid(sources.langid.path, sources.langid.languages,
                                                       sources.langid.max_per_language))
    for name in sources.hub:
        for table, df in load_hub(name, settings.hub_subsets.get(name, []), loader).items():
            parts[table].append(df)
    tables = {}
    for name, frames in parts.items():
        df = pl.concat(frames, how="vertical") if frames else pl.DataFrame(schema=SCHEMAS[name])
        tables[name] = _unique_sorted(name, df.cast(SCHEMAS[name]))  # type: ignore[arg-type]
    return tables


def _unique_sorted(name: str, df: pl.DataFrame) -> pl.DataFrame:
    keys = KEYS[name]
    dup = df.filter(pl.struct(keys).is_duplicated())
    if dup.height:
        row = dup.select(keys).row(0, named=True)
        raise ValueError(f"{name}: more than one row for {row}; an evaluation set is configured twice (e.g. as a "
                         "local folder and as an mteb hub dataset)")
    return df.sort(keys)


def build_eval_sets(settings: EvalSetsSettings, sources: EvalSources, out: Path,
                    loader: Loader | None = None) -> StageResult:
    """Write one Parquet file per non-empty table into ``out``; stats: rows per table and skipped lines."""
    skipped = Skipped()
    tables = read_eval_sets(settings, sources, skipped, loader)
    written: dict[str, str] = {}
    rows: dict[str, int] = {}
    for name, df in tables.items():
        if df.is_empty():
            continue
        df.write_parquet(Path(out) / f"{name}.parquet")
        written[name] = f"{name}.parquet"
        rows[name] = df.height
        log.info("%s: %d rows (%d lines skipped)", name, df.height, skipped.total(name))
    if not written:
        log.warning("eval_sets: no evaluation set configured or all were empty")
    return StageResult(tables=written, stats={"rows": rows, "skipped": skipped.as_dict()})
