"""Runs the EASE corpus stages in order without Prefect or the DAG (what ``flows/dag_wiki.py`` wires), for tests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from pipelines.wikidata import WikidataSettings, build_entities
from pipelines.wikipedia.entities import EntitySettings, build_entity_tables
from pipelines.wikipedia.extract import WikiSettings, build_wiki_shard, shard_ranges
from pipelines.wikipedia.hard_negatives import HardNegativeSettings, build_hard_negatives
from pipelines.wikipedia.resolve import build_wiki_language


def build_chain(dumps: Mapping[str, Path], out: Path, wikidata: Path | None = None,
                wiki: WikiSettings | None = None, entities: EntitySettings | None = None,
                hard_negatives: HardNegativeSettings | None = None,
                wikidata_settings: WikidataSettings | None = None) -> dict[str, Path]:
    """Artifacts as folders under ``out``: ``shard-<lang>-<i>``, ``lang-<lang>``, ``wikidata``, ``entities``, ``hn``."""
    wiki = wiki or WikiSettings()
    dirs: dict[str, Path] = {}
    wd_dir = None
    if wikidata is not None:
        wd_dir = out / "wikidata"
        wd_dir.mkdir(parents=True)
        build_entities(wikidata_settings or WikidataSettings(wikis=[f"{lang}wiki" for lang in dumps]), wikidata,
                       wd_dir)
        dirs["wikidata"] = wd_dir
    langs: dict[str, Path] = {}
    shards: dict[str, list[Path]] = {}
    for lang, dump in sorted(dumps.items()):
        shards[lang] = []
        for i, rng in enumerate(shard_ranges(dump, wiki.shard_bytes)):
            d = out / f"shard-{lang}-{i}"
            d.mkdir(parents=True)
            build_wiki_shard(wiki, dump, lang, rng, None, d)
            shards[lang].append(d)
            dirs[d.name] = d
        d = out / f"lang-{lang}"
        d.mkdir()
        counts = [json.loads((s / "shard_counts.json").read_text()) for s in shards[lang]]
        build_wiki_language(lang, shards[lang], counts, wiki.max_redirect_hops, d)
        langs[lang] = dirs[d.name] = d
    ent = out / "entities"
    ent.mkdir()
    build_entity_tables(entities or EntitySettings(), langs, wd_dir, ent)
    hn = out / "hn"
    hn.mkdir()
    build_hard_negatives(hard_negatives or HardNegativeSettings(), ent, langs, shards, hn)
    dirs.update(entities=ent, hn=hn)
    return dirs
