"""MewsC-16's topic sets: a classification probe (``topic_accuracy``) and a decision clustering set
(``decision.mewsc_accuracy``) drawn from MewsC-16's news sentences *outside* the report's clustering texts.

MewsC-16 (EASE's multilingual news clustering set) gives every sentence its Wikinews category. The report's
``mewsc_accuracy`` clusters 500 hash-chosen texts of each language (``kits.cap_clustering``); the texts left over
carry the same labels and are what a decision may select on without reading a report text:

- each language's remaining texts (de-duplicated on the text) in the order of the SHA-1 of the text, positions
  ``DECISION`` the decision set, ``REPORT`` the report set, ``FULL`` the full sets (a superset of the report's, as
  the other full sets are);
- within each set every ``TRAIN_EVERY``-th text (from the set's first) trains the probe, the others test it;
- the decision set's texts (train and test) also form the decision ``eval_clustering`` (k-means on 600 texts a
  language, the report's protocol).

The labels are each language's own category names (``Themenportal Sport``, ``Sports``, ``スポーツ``…), so the probe is
in-language; zero-shot transfer skips languages whose labels it never saw
(``models/evaluation/tasks/classification.py``). A language with too few texts left gets what there is (Turkish:
none; the 500 report texts take all 458). ``TOPIC_SETS`` versions how the sets are drawn: a row scored on them names
it in its hash (``experiments.row_hash``).
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl


log = logging.getLogger("polysent.experiments.topic_sets")

TOPIC_SETS = 1
DATASET = "mewsc16-topic"
DECISION = (0, 600)
REPORT = (600, 1200)
FULL = (600, 2100)
TRAIN_EVERY = 3
# the figures scored on these sets: a row asking for one of them names TOPIC_SETS in its hash
FAMILIES = ("topic",)
DECISION_FIGURES = ("decision.mewsc_accuracy",)


def uses_topic_sets(figures: list[str] | tuple[str, ...]) -> bool:
    """Whether any of ``figures`` (ledger names) is scored on the topic sets."""
    from experiments.figures import family

    return any(family(f) in FAMILIES or f in DECISION_FIGURES for f in figures)


def ranked(whole: pl.DataFrame, report: pl.DataFrame) -> pl.DataFrame:
    """MewsC-16 (``eval_clustering`` rows, every text) without the report's texts, de-duplicated on (lang, text), with
    ``pos``: the text's rank in its language by SHA-1 of the text (ties: idx)."""
    import polars as pl

    seen = report.select("lang", "text").unique()
    rest = whole.join(seen, on=["lang", "text"], how="anti").unique(["lang", "text"], keep="first",
                                                                   maintain_order=True)
    digest = pl.Series("_h", [hashlib.sha1(t.encode("utf-8")).hexdigest() for t in rest["text"].to_list()],
                       dtype=pl.String)
    return (rest.with_columns(digest).sort("lang", "_h", "idx")
            .with_columns(pos=pl.int_range(pl.len()).over("lang")).drop("_h"))


def probe_set(rows: pl.DataFrame, span: tuple[int, int]) -> pl.DataFrame:
    """``eval_classification`` rows of the texts ranked in ``span``: every ``TRAIN_EVERY``-th the train split."""
    import polars as pl

    from pipelines.eval_sets.classification import SCHEMA

    lo, hi = span
    part = rows.filter((pl.col("pos") >= lo) & (pl.col("pos") < hi))
    split = pl.when((pl.col("pos") - lo) % TRAIN_EVERY == 0).then(pl.lit("train")).otherwise(pl.lit("test"))
    return part.select(pl.lit(DATASET).alias("dataset"), "lang", split.alias("split"), "idx", "text",
                       "label").cast(SCHEMA).sort("lang", "split", "idx")


def write_topic_sets(mewsc: Path, report_clustering: Path, out: dict[str, Path]) -> dict[str, Any]:
    """Write the topic sets: ``out`` names the files ``report``, ``decision`` and ``full`` (``eval_classification``)
    and ``decision_clustering`` (``eval_clustering``). ``mewsc``: the MewsC-16 folder; ``report_clustering``: the
    report's ``eval_clustering`` (the texts to leave out). Returns rows per set and language."""
    import polars as pl

    from pipelines.eval_sets.clustering import SCHEMA as CLUSTERING
    from pipelines.eval_sets.clustering import read_clustering

    whole = read_clustering(mewsc, empty_sentences="skip")
    rows = ranked(whole, pl.read_parquet(report_clustering))
    stats: dict[str, Any] = {"version": TOPIC_SETS}
    for which, span in (("decision", DECISION), ("report", REPORT), ("full", FULL)):
        table = probe_set(rows, span)
        _write(table, out[which])
        stats[which] = {lang: n for lang, n in table.group_by("lang").len().sort("lang").rows()}
    lo, hi = DECISION
    clustering = rows.filter((pl.col("pos") >= lo) & (pl.col("pos") < hi)).select(
        pl.lit("mewsc16").alias("dataset"), "lang", "idx", "text", "label").cast(CLUSTERING).sort("lang", "idx")
    _write(clustering, out["decision_clustering"])
    stats["decision_clustering"] = clustering.height
    log.info("topic sets from %s: %s", mewsc, {k: sum(v.values()) if isinstance(v, dict) else v
                                               for k, v in stats.items()})
    return stats


def _write(table: pl.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    table.write_parquet(tmp)
    tmp.replace(path)


def files(folder: Path) -> dict[str, Path]:
    """Where a kit keeps its topic sets."""
    return {"report": folder / "report" / "eval_classification.parquet",
            "decision": folder / "decision" / "eval_classification.parquet",
            "full": folder / "full" / "eval_classification.parquet",
            "decision_clustering": folder / "decision" / "eval_clustering.parquet"}


def tables(out: dict[str, Path]) -> dict[str, dict[str, Path]]:
    """The kit's tables (``which`` → table name → file) the topic sets add."""
    return {"report": {"eval_classification": out["report"]}, "full": {"eval_classification": out["full"]},
            "decision": {"eval_classification": out["decision"], "eval_clustering": out["decision_clustering"]}}
