"""The EASE corpus part of the DAG: Wikidata, dump shards, per-language resolution, entities, hard negatives, vectors.

```
wiki_shard.<lang>.<i> ──► wiki_extract.<lang> ──┬──► entities ──► hard_negatives
wikidata ───────────────────────────────────────┘        └──────► entity_vectors
```
A dump is cut into shards of ``corpora.wiki.shard_bytes`` (multistream byte ranges or page ranges of plain XML; one
shard for single-stream bz2/gz). Each shard is its own node — its own task, cache key and artifact — so a Dask task
runner spreads one dump, or many languages, over machines; ``wiki_extract.<lang>`` joins them and resolves redirects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from flows.config import PipelineConfig, WikipediaSource
from warehouse.artifacts import ArtifactRef, StageResult


def multistream_index(dump: Path, explicit: Path | None) -> Path | None:
    """The index named in the config, else the sibling Wikipedia publishes (``…-multistream-index.txt.bz2``)."""
    from pipelines.wikipedia.dump_reader import sibling_index

    return explicit if explicit is not None else sibling_index(dump)


def add_wiki_nodes(cfg: PipelineConfig, src: WikipediaSource, add: Callable[[Any], None],
                   corpus_tables: dict[str, str]) -> None:
    from flows.dag import Node, canonical, portable
    from pipelines.wikipedia.dump_reader import dump_kind
    from pipelines.wikipedia.entities import STAGE_VERSION as ENT_V
    from pipelines.wikipedia.extract import STAGE_VERSION as SHARD_V
    from pipelines.wikipedia.extract import shard_ranges
    from pipelines.wikipedia.hard_negatives import STAGE_VERSION as HN_V
    from pipelines.wikipedia.resolve import STAGE_VERSION as RES_V

    wiki = cfg.corpora.wiki
    wiki_cfg = canonical(wiki)  # processes, range and shard sizes are excluded: they never change rows
    has_wikidata = src.wikidata is not None
    if has_wikidata:
        wd = src.wikidata
        assert wd is not None

        def run_wikidata(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from pipelines.wikidata import build_entities

            return build_entities(cfg.corpora.wikidata, wd, out)

        from pipelines.wikidata import STAGE_VERSION as WD_V

        add(Node("wikidata", "wikidata", WD_V, canonical(cfg.corpora.wikidata), run_wikidata,
                 files={f"wikidata/{wd.name}": wd}))

    shards_of: dict[str, list[str]] = {}
    for lang, dump in sorted(src.dumps.items()):
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
        names = []
        for i, (a, b) in enumerate(ranges):
            name = f"wiki_shard.{lang}.{i:04d}"

            def run_shard(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], dump: Path = dump,
                          lang: str = lang, rng: tuple[int, int] = (a, b), index: Path | None = index) -> StageResult:
                from pipelines.wikipedia.extract import build_wiki_shard

                return build_wiki_shard(wiki, dump, lang, rng, index, out)

            add(Node(name, "wiki_shard", SHARD_V,
                     {"settings": wiki_cfg, "lang": lang, "kind": kind, "range": [a, b], "shard": [i, len(ranges)]},
                     run_shard, files=files))
            names.append(name)
        shards_of[lang] = names

        def run_lang(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], lang: str = lang,
                     names: list[str] = names) -> StageResult:
            from pipelines.wikipedia.resolve import build_wiki_language

            dirs = [up[n].path for n in names]
            counts = [json.loads((d / "shard_counts.json").read_text(encoding="utf-8")) for d in dirs]
            return build_wiki_language(lang, dirs, counts, wiki.max_redirect_hops, out)

        add(Node(f"wiki_extract.{lang}", "wiki_extract", RES_V, {"settings": wiki_cfg, "lang": lang}, run_lang,
                 deps={n: n for n in names}))

    langs = sorted(src.dumps)
    ent = cfg.corpora.entities

    def run_entities(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
        from pipelines.wikipedia.entities import build_entity_tables

        return build_entity_tables(ent, {lang: up[f"wiki_extract.{lang}"].path for lang in langs},
                                   up["wikidata"].path if "wikidata" in up else None, out)

    ent_deps = {f"wiki_extract.{lang}": f"wiki_extract.{lang}" for lang in langs}
    if has_wikidata:
        ent_deps["wikidata"] = "wikidata"
    add(Node("entities", "entities", ENT_V,
             {"settings": canonical(ent), "type_source": ent.type_source(has_wikidata), "languages": langs},
             run_entities, deps=ent_deps))
    corpus_tables["entities"] = "entities"

    hn = cfg.corpora.hard_negatives

    def run_hard_negatives(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
        from pipelines.wikipedia.hard_negatives import build_hard_negatives

        return build_hard_negatives(hn, up["entities"].path, {lang: up[f"wiki_extract.{lang}"].path for lang in langs},
                                    {lang: [up[n].path for n in shards_of[lang]] for lang in langs}, out)

    for lang in langs:
        hn.quota(lang)  # a per-language quota must name every language: fail at planning, not after hours
    add(Node("hard_negatives", "hard_negatives", HN_V, {"settings": canonical(hn), "languages": langs},
             run_hard_negatives,
             deps={"entities": "entities", **{f"wiki_extract.{lang}": f"wiki_extract.{lang}" for lang in langs},
                   **{n: n for lang in langs for n in shards_of[lang]}}))
    corpus_tables["hard_negatives"] = "hard_negatives"

    vec = cfg.corpora.entity_vectors
    if vec.mode != "none":
        from pipelines.wikipedia.entity_vectors import STAGE_VERSION as VEC_V

        vlang = vec.language
        if vec.mode == "train" and vlang not in src.dumps:
            raise ValueError(f"corpora.entity_vectors.language is {vlang!r}, but sources.wikipedia.dumps has no "
                             f"dump for it (has {langs})")
        vfiles = ({f"dump/{vlang}/{src.dumps[vlang].name}": src.dumps[vlang]} if vec.mode == "train"
                  else {f"model/{vec.pretrained.name}": vec.pretrained} if vec.pretrained else {})

        def run_vectors(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from pipelines.wikipedia.entity_vectors import build_entity_vectors

            return build_entity_vectors(vec, src.dumps.get(vlang), up["entities"].path,
                                        up[f"wiki_extract.{vlang}"].path, out)

        add(Node("entity_vectors", "entity_vectors", VEC_V, {"settings": portable(vec)}, run_vectors,
                 files=vfiles, deps={"entities": "entities", f"wiki_extract.{vlang}": f"wiki_extract.{vlang}"}))
