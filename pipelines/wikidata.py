"""Streaming reader of Wikidata JSON dumps → entities, their sitelinks and their "instance of" (P31) types.

Accepts the dump shape (a JSON array with one entity per line, ``[`` and ``]`` on their own lines, lines ending in
``,``) and plain JSON lines, uncompressed, ``.bz2`` or ``.gz``. Only what the corpora need is kept: QID, labels in the
configured languages, sitelinks for the configured wikis, and P31 values. Titles map to QIDs by **sitelink** — never by
label, which is the homonym bug of the public EASE code (docs, methods §4.4).
"""

from __future__ import annotations

import bz2
import gzip
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import polars as pl
from pydantic import BaseModel, ConfigDict

from warehouse.artifacts import StageResult

log = logging.getLogger("polysent.pipelines.wikidata")
STAGE_VERSION = "1"


class WikidataSettings(BaseModel):
    """Which wikis' sitelinks and which languages' labels to keep."""

    model_config = ConfigDict(extra="forbid")
    wikis: list[str] = ["enwiki", "dewiki", "ruwiki"]
    label_languages: list[str] = ["en"]


class WikidataFormatError(ValueError):
    pass


def _open(path: Path) -> IO[str]:
    if path.suffix == ".bz2":
        return bz2.open(path, "rt", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def iter_entities(path: Path) -> Iterator[dict[str, Any]]:
    """Yield entity dicts one line at a time (bounded memory); errors name the file and line."""
    with _open(path) as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if line in ("", "[", "]"):
                continue
            if line.endswith(","):
                line = line[:-1]
            try:
                ent = json.loads(line)
            except json.JSONDecodeError as exc:
                raise WikidataFormatError(f"{path}:{lineno}: not a JSON entity ({exc.msg})") from exc
            if not isinstance(ent, dict) or "id" not in ent:
                raise WikidataFormatError(f"{path}:{lineno}: expected an entity object with an 'id'")
            yield ent


def _p31(ent: dict[str, Any]) -> list[str]:
    out = []
    for claim in ent.get("claims", {}).get("P31", []):
        snak = claim.get("mainsnak", {})
        if snak.get("snaktype") != "value" or claim.get("rank") == "deprecated":
            continue
        value = snak.get("datavalue", {}).get("value", {})
        qid = value.get("id") or (f"Q{value['numeric-id']}" if "numeric-id" in value else None)
        if qid:
            out.append(qid)
    return out


def build_entities(settings: WikidataSettings, dump: Path, out: Path) -> StageResult:
    wikis = set(settings.wikis)
    ents: list[dict[str, Any]] = []
    links: list[dict[str, str]] = []
    types: list[dict[str, str]] = []
    for ent in iter_entities(dump):
        qid = ent["id"]
        labels = ent.get("labels", {})
        row = {"qid": qid}
        for lang in settings.label_languages:
            row[f"label_{lang}"] = labels.get(lang, {}).get("value")
        ents.append(row)
        for site, sl in ent.get("sitelinks", {}).items():
            if site in wikis:
                links.append({"qid": qid, "wiki": site, "lang": site.removesuffix("wiki"), "title": sl["title"]})
        types.extend({"qid": qid, "type_qid": t} for t in _p31(ent))
    entities = pl.DataFrame(ents, schema={"qid": pl.Utf8, **{f"label_{lang}": pl.Utf8
                                                             for lang in settings.label_languages}})
    sitelinks = pl.DataFrame(links, schema={"qid": pl.Utf8, "wiki": pl.Utf8, "lang": pl.Utf8, "title": pl.Utf8})
    label_col = f"label_{settings.label_languages[0]}" if settings.label_languages else None
    entity_types = pl.DataFrame(types, schema={"qid": pl.Utf8, "type_qid": pl.Utf8})
    if label_col:
        entity_types = entity_types.join(
            entities.select(pl.col("qid").alias("type_qid"), pl.col(label_col).alias("type_label")),
            on="type_qid", how="left",
        )
    entities.sort("qid").write_parquet(out / "entities.parquet")
    sitelinks.sort("qid", "wiki").write_parquet(out / "entity_sitelinks.parquet")
    entity_types.sort("qid", "type_qid").write_parquet(out / "entity_types.parquet")
    log.info("read %d entities, %d sitelinks, %d P31 claims from %s", len(entities), len(sitelinks),
             len(entity_types), dump)
    return StageResult(
        tables={"entities": "entities.parquet", "entity_sitelinks": "entity_sitelinks.parquet",
                "entity_types": "entity_types.parquet"},
        stats={"entities": len(entities)},
    )
