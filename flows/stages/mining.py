"""Mining: one ``mine.<name>`` node per ``mining`` entry — two monolingual corpora and a model → ``mined_pairs``.

A side is the ``wiki_sentences`` of a Wikipedia language (inputs: its ``wiki_shard.<lang>.<i>`` nodes) or a file (its
content in the key). The model is an external id (a local folder's files in the key) or a training run of this
config (input: its ``train.<run>`` node, so the loop closes: train, mine with the trained model, train on the mined
pairs through a ``{format: mined}`` bitext source). The table is written as ``mined_pairs/mining=<name>/`` so the
warehouse view ``mined_pairs`` holds every entry's pairs with a ``mining`` column. Embedding files are kept under
``<data root>/cache/mining/``, named by a hash of model and texts: a side that several entries share (English against
three languages) is encoded once, and a changed threshold or index searches again without encoding again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from contract import StageResult
from flows.config import MiningEntry, MiningSide, PipelineConfig
from flows.graph import Node, canonical, folder_files, portable
from warehouse.artifacts import ArtifactRef

STAGE_VERSION = "1"
TABLE = "mined_pairs"


def _side(side: MiningSide, up: Mapping[str, ArtifactRef]) -> Any:
    from models.mining.mine import Side
    from pipelines.mining_inputs import TextInput, read_input, read_wiki_sentences

    if side.wiki is not None:
        shards = [ref.table_path("wiki_sentences") for name, ref in sorted(up.items())
                  if name.startswith(f"wiki_shard.{side.wiki}.")]
        col = read_wiki_sentences(shards, side.wiki, side.max_sentences)
    else:
        col = read_input(TextInput(path=side.path, format=side.format, column=side.column, id_column=side.id_column,
                                   header=side.header, where=side.where))
        if side.max_sentences is not None:
            col = type(col)(col.ids[:side.max_sentences], col.texts[:side.max_sentences], col.source)
    return Side(col.ids, col.texts, col.source)


def run_mine(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *, name: str, entry: MiningEntry,
             workdir: Path) -> StageResult:
    from models.mining.mine import Encoder, mine_corpora

    model = str(up["model"].path / "model") if entry.run is not None else entry.model
    assert model is not None
    src, tgt = _side(entry.src, up), _side(entry.tgt, up)
    encoder = Encoder(model, device=entry.device, max_length=entry.max_length)
    settings = entry.settings()
    rel = f"{TABLE}/mining={name}/part-0.parquet"
    meta = {"polysent": json.dumps({"mining": name, "model": (entry.run and f"run:{entry.run}") or entry.model,
                                    "settings": canonical(settings)})}
    stats = mine_corpora(src, tgt, encoder, settings, Path(out) / rel, workdir=workdir, shared=True, progress=True,
                         metadata=meta, constants={"src_lang": entry.src.language, "tgt_lang": entry.tgt.language})
    return StageResult(tables={TABLE: TABLE}, stats=stats)


def mining_nodes(cfg: PipelineConfig, upstream: Mapping[str, Node]) -> list[Node]:
    """``mine.<name>`` per ``mining`` entry; a ``ValueError`` names the entry whose Wikipedia language or training
    run this config does not have."""
    nodes = []
    for name, entry in sorted(cfg.mining.items()):
        deps: dict[str, str] = {}
        files: dict[str, Path] = {}
        for role, side in (("src", entry.src), ("tgt", entry.tgt)):
            if side.wiki is not None:  # the sentences are written by the language's dump shards
                shards = [n for n in upstream if n.startswith(f"wiki_shard.{side.wiki}.")]
                if not shards:
                    raise ValueError(f"mining.{name}.{role}.wiki: {side.wiki!r} is not a language of "
                                     "sources.wikipedia.dumps")
                deps.update({n: n for n in shards})
            else:
                assert side.path is not None
                files[f"{role}/{side.path.name}"] = side.path
        if entry.run is not None:
            if entry.run not in cfg.training:
                raise ValueError(f"mining.{name}.run: {entry.run!r} is not a training run of this config "
                                 f"(training: {', '.join(sorted(cfg.training)) or 'none'})")
            deps["model"] = f"train.{entry.run}"
        elif entry.model is not None and Path(entry.model).is_dir():
            files.update(folder_files("model", Path(entry.model)))
        config = portable(entry)
        if entry.model is not None and Path(entry.model).is_dir():
            config["model"] = Path(entry.model).name
        nodes.append(Node(f"mine.{name}", "mine", STAGE_VERSION, {"name": name, "entry": config},
                          partial(run_mine, name=name, entry=entry,
                                  workdir=cfg.data_root / "cache" / "mining"),
                          files=files, deps=deps))
    return nodes
