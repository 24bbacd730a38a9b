"""The EASE corpus part of the DAG: Wikidata, dump shards, per-language resolution, entities, hard negatives, vectors.

```
wiki_shard.<lang>.<i> ──► wiki_extract.<lang> ──┬──► entities ──┬──► hard_negatives
wikidata ───────────────────────────────────────┴───────────────┴──► entity_vectors
```
``entity_vectors`` reads ``wikidata`` too: the sitelink title of a vocabulary entity whose page the dump lacks.
``hard_negatives`` takes the corpus nodes' leakage guard (``flows.stages.corpora.leakage_guard``).
A dump is cut into shards of ``corpora.wiki.shard_bytes`` (multistream byte ranges or page ranges of plain XML; one
shard for single-stream bz2/gz). Each shard is its own node — its own task, cache key and artifact — so a Dask task
runner spreads one dump, or many languages, over machines; ``wiki_extract.<lang>`` joins them and resolves redirects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from contract import StageResult
from flows.config import PipelineConfig
from flows.graph import Node, canonical, portable
from flows.stages.corpora import BuiltOnce, leakage_guard
from pipelines.wikidata import STAGE_VERSION as WIKIDATA_VERSION
from pipelines.wikidata import WikidataSettings, build_entities
from pipelines.wikipedia.dump_reader import dump_kind, sibling_index
from pipelines.wikipedia.entities import STAGE_VERSION as ENTITIES_VERSION
from pipelines.wikipedia.entities import EntitySettings, build_entity_tables
from pipelines.wikipedia.entity_vectors import STAGE_VERSION as VECTORS_VERSION
from pipelines.wikipedia.entity_vectors import EntityVectorSettings, build_entity_vectors
from pipelines.wikipedia.extract import STAGE_VERSION as SHARD_VERSION
from pipelines.wikipedia.extract import WikiSettings, build_wiki_shard, shard_ranges
from pipelines.wikipedia.hard_negatives import STAGE_VERSION as HARD_NEGATIVES_VERSION
from pipelines.wikipedia.hard_negatives import HardNegativeSettings, build_hard_negatives
from pipelines.wikipedia.resolve import STAGE_VERSION as RESOLVE_VERSION
from pipelines.wikipedia.resolve import build_wiki_language
from warehouse.artifacts import ArtifactRef


def multistream_index(dump: Path, explicit: Path | None) -> Path | None:
    """The index named in the config, else the sibling Wikipedia publishes (``…-multistream-index.txt.bz2``)."""
    return explicit if explicit is not None else sibling_index(dump)


def run_wikidata(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *, settings: WikidataSettings,
                 dump: Path) -> StageResult:
    return build_entities(settings, dump, out)


def run_wiki_shard(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *, settings: WikiSettings,
                   dump: Path, lang: str, rng: tuple[int, int], index: Path | None) -> StageResult:
    return build_wiki_shard(settings, dump, lang, rng, index, out)


def run_wiki_extract(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *, settings: WikiSettings,
                     lang: str, shards: list[str]) -> StageResult:
    dirs = [up[n].path for n in shards]
    counts = [json.loads((d / "shard_counts.json").read_text(encoding="utf-8")) for d in dirs]
    return build_wiki_language(lang, dirs, counts, settings.max_redirect_hops, out)


def run_entities(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *, settings: EntitySettings,
                 langs: list[str]) -> StageResult:
    return build_entity_tables(settings, {lang: up[f"wiki_extract.{lang}"].path for lang in langs},
                               up["wikidata"].path if "wikidata" in up else None, out)


def run_hard_negatives(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *,
                       settings: HardNegativeSettings, shards_of: dict[str, list[str]],
                       leakage: BuiltOnce) -> StageResult:
    return build_hard_negatives(settings, up["entities"].path,
                                {lang: up[f"wiki_extract.{lang}"].path for lang in shards_of},
                                {lang: [up[n].path for n in shards] for lang, shards in shards_of.items()}, out,
                                leakage())


def run_entity_vectors(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *,
                       settings: EntityVectorSettings, dump: Path | None, lang: str) -> StageResult:
    return build_entity_vectors(settings, dump, up["entities"].path, up[f"wiki_extract.{lang}"].path, out,
                                up["wikidata"].path if "wikidata" in up else None)


def dump_shards(cfg: PipelineConfig, lang: str, dump: Path) -> list[Node]:
    """One dump's ``wiki_shard.<lang>.<i>`` nodes."""
    src, wiki = cfg.sources.wikipedia, cfg.corpora.wiki
    assert src is not None
    files = {f"dump/{lang}/{dump.name}": dump}
    if not dump.is_file():
        # not downloaded yet: the shards depend on the file's size, so the language gets one placeholder shard
        # whose input is the missing file — `polysent plan` lists it as an error (downstream: blocked) and
        # `polysent run` refuses before building anything (flows.run.missing_inputs)
        index, kind, ranges = None, "missing", [(0, 0)]
    else:
        index = multistream_index(dump, src.indexes.get(lang))
        kind = dump_kind(dump)
        if index is not None and kind == "bz2-multistream":
            files[f"index/{lang}/{index.name}"] = index
        else:
            index = None
        ranges = shard_ranges(dump, wiki.shard_bytes, kind)
    wiki_cfg = canonical(wiki)  # processes, range and shard sizes are excluded: they never change rows
    return [Node(f"wiki_shard.{lang}.{i:04d}", "wiki_shard", SHARD_VERSION,
                 {"settings": wiki_cfg, "lang": lang, "kind": kind, "range": [a, b], "shard": [i, len(ranges)]},
                 partial(run_wiki_shard, settings=wiki, dump=dump, lang=lang, rng=(a, b), index=index), files=files)
            for i, (a, b) in enumerate(ranges)]


def wiki_nodes(cfg: PipelineConfig, upstream: Mapping[str, Node]) -> list[Node]:
    """The EASE corpus nodes of ``sources.wikipedia`` (none without it)."""
    src, corpora = cfg.sources.wikipedia, cfg.corpora
    if src is None:
        return []
    nodes: list[Node] = []
    if src.wikidata is not None:
        nodes.append(Node("wikidata", "wikidata", WIKIDATA_VERSION, canonical(corpora.wikidata),
                          partial(run_wikidata, settings=corpora.wikidata, dump=src.wikidata),
                          files={f"wikidata/{src.wikidata.name}": src.wikidata}))

    shards_of: dict[str, list[str]] = {}
    for lang, dump in sorted(src.dumps.items()):
        shards = dump_shards(cfg, lang, dump)
        shards_of[lang] = [n.name for n in shards]
        nodes += [*shards, Node(f"wiki_extract.{lang}", "wiki_extract", RESOLVE_VERSION,
                                {"settings": canonical(corpora.wiki), "lang": lang},
                                partial(run_wiki_extract, settings=corpora.wiki, lang=lang, shards=shards_of[lang]),
                                deps={n: n for n in shards_of[lang]})]

    langs = sorted(src.dumps)
    extracts = {f"wiki_extract.{lang}": f"wiki_extract.{lang}" for lang in langs}
    ent = corpora.entities
    nodes.append(Node("entities", "entities", ENTITIES_VERSION,
                      {"settings": canonical(ent), "type_source": ent.type_source(src.wikidata is not None),
                       "languages": langs},
                      partial(run_entities, settings=ent, langs=langs),
                      deps={**extracts, **({"wikidata": "wikidata"} if src.wikidata is not None else {})}))

    hn = corpora.hard_negatives
    for lang in langs:
        hn.quota(lang)  # a per-language quota must name every language: fail at planning, not after hours
    leak_files, leak_cfg, leakage = leakage_guard(cfg, upstream)
    nodes.append(Node("hard_negatives", "hard_negatives", HARD_NEGATIVES_VERSION,
                      {"settings": canonical(hn), "languages": langs, "leakage": leak_cfg},
                      partial(run_hard_negatives, settings=hn, shards_of=shards_of, leakage=leakage),
                      files=leak_files,
                      deps={"entities": "entities", **extracts, **{n: n for lang in langs for n in shards_of[lang]}}))

    vec = corpora.entity_vectors
    if vec.mode != "none":
        vlang = vec.language
        if vec.mode == "train" and vlang not in src.dumps:
            raise ValueError(f"corpora.entity_vectors.language is {vlang!r}, but sources.wikipedia.dumps has no "
                             f"dump for it (has {langs})")
        vfiles = ({f"dump/{vlang}/{src.dumps[vlang].name}": src.dumps[vlang]} if vec.mode == "train"
                  else {f"model/{vec.pretrained.name}": vec.pretrained} if vec.pretrained else {})
        nodes.append(Node("entity_vectors", "entity_vectors", VECTORS_VERSION, {"settings": portable(vec)},
                          partial(run_entity_vectors, settings=vec, dump=src.dumps.get(vlang), lang=vlang),
                          files=vfiles,
                          # wikidata: the title of a vocabulary entity whose page the dump lacks is its sitelink
                          deps={"entities": "entities", f"wiki_extract.{vlang}": f"wiki_extract.{vlang}",
                                **({"wikidata": "wikidata"} if src.wikidata is not None else {})}))
    return nodes
