"""The training corpora beside Wikipedia: ``xnli_groups``, ``nli_triples``, ``bitext_pairs``.

Every corpus node — these and Wikipedia's ``hard_negatives`` (``flows/stages/wiki.py``) — takes the same leakage guard
(``corpora.leakage``, :func:`leakage_guard`): its settings and the evaluation files it reads enter each node's cache
key, and the nodes of one DAG share one index of the evaluation texts, read on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from contract import StageResult
from flows.config import PipelineConfig
from flows.graph import Node, canonical, portable
from pipelines.bitext.sampling import STAGE_VERSION as BITEXT_VERSION
from pipelines.bitext.sampling import BitextSettings, build_pairs
from pipelines.bitext.sources import MinedSource, ParquetSource
from pipelines.leakage import EvalTextIndex
from pipelines.nli.sources import NliFileSource
from pipelines.nli.triples import STAGE_VERSION as NLI_VERSION
from pipelines.nli.triples import NliTripleSettings, build_triples
from pipelines.xnli.groups import STAGE_VERSION as XNLI_VERSION
from pipelines.xnli.groups import XnliSettings, build_groups
from pipelines.xnli.sources import XnliSource
from warehouse.artifacts import ArtifactRef

# the stages whose tables are training corpora, by node name = table name, in DAG order (wiki's first): the
# tokenizer trains on them and the report counts them
CORPUS_STAGES = ("entities", "hard_negatives", "xnli_groups", "nli_triples", "bitext_pairs")


def corpus_tables(nodes: Mapping[str, Node]) -> dict[str, str]:
    """Corpus table → the node writing it, for the corpus nodes in ``nodes`` (in the order they were built)."""
    return {name: name for name, node in nodes.items() if node.stage in CORPUS_STAGES}


class BuiltOnce:
    """A value built on first call and kept, thread-safe; picklable (unlike a ``functools.cache``'d local function,
    which pickles by name and cannot be found) so the nodes that share it can be shipped to Dask workers — each
    worker process builds its own copy on first use."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build, self._value, self._lock = build, None, threading.Lock()

    def __call__(self) -> Any:
        with self._lock:
            if self._value is None:
                self._value = self._build()
            return self._value

    def __getstate__(self) -> dict[str, Any]:
        return {"build": self._build}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["build"])


def leakage_guard(cfg: PipelineConfig, upstream: Mapping[str, Node]) -> tuple[dict[str, Path], Any, BuiltOnce]:
    """The leakage guard a corpus node takes: the evaluation files its cache key hashes, the settings its key holds,
    and the index of evaluation texts, built on first use — the one an upstream corpus node of the same DAG already
    holds (Wikipedia's ``hard_negatives``), so the nodes of one DAG read the evaluation sets once."""
    leak = cfg.corpora.leakage
    shared = next((node.run.keywords["leakage"] for node in upstream.values()
                   if node.stage in CORPUS_STAGES and isinstance(node.run, partial)
                   and isinstance(node.run.keywords.get("leakage"), BuiltOnce)), None)
    return (leak.files() if leak.eval_sets else {}, portable(leak),
            shared or BuiltOnce(partial(EvalTextIndex.from_settings, leak)))


def run_xnli_groups(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *, settings: XnliSettings,
                    source: XnliSource, leakage: BuiltOnce) -> StageResult:
    return build_groups(settings, source, leakage(), out)


def run_nli_triples(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *,
                    settings: NliTripleSettings, xnli: XnliSource | None, files: list[NliFileSource],
                    leakage: BuiltOnce) -> StageResult:
    return build_triples(settings, xnli, files, leakage(), out)


def run_bitext_pairs(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], *, settings: BitextSettings,
                     sources: list[Any], leakage: BuiltOnce,
                     mined: Mapping[int, tuple[str, str, str]] | None = None) -> StageResult:
    """``mined``: source index → (mine node, source language, target language) for ``{format: mined}`` sources,
    read as the Parquet table their node wrote."""
    sources = list(sources)
    for i, (node, src, tgt) in (mined or {}).items():
        sources[i] = ParquetSource(format="parquet", path=up[node].table_path("mined_pairs"), src=src, tgt=tgt)
    return build_pairs(settings, sources, leakage(), out)


def corpora_nodes(cfg: PipelineConfig, upstream: Mapping[str, Node]) -> list[Node]:
    """The nodes of the configured XNLI, NLI and bitext sources (none for a source the config leaves out)."""
    src = cfg.sources
    leak_files, leak_cfg, leakage = leakage_guard(cfg, upstream)  # the DAG's corpus nodes share one index
    nodes = []

    if src.xnli is not None:
        xs = cfg.corpora.xnli_groups
        nodes.append(Node("xnli_groups", "xnli_groups", XNLI_VERSION,
                          {"settings": canonical(xs), "source": portable(src.xnli), "leakage": leak_cfg},
                          partial(run_xnli_groups, settings=xs, source=src.xnli, leakage=leakage),
                          files={**src.xnli.files(xs.splits, xs.read_languages()), **leak_files}))

    nt = cfg.corpora.nli_triples
    if nt is not None and (src.nli or (src.xnli is not None and nt.xnli_split is not None)):
        nli_files = list(src.nli)
        xnli = src.xnli if nt.xnli_split is not None else None
        files = dict(leak_files)
        if xnli is not None:
            assert isinstance(nt.languages, list) and nt.xnli_split is not None
            files.update(xnli.files([nt.xnli_split], sorted({"en", *nt.languages})))
        files.update({f"nli/{f.name}/{f.path.name}": f.path for f in nli_files if f.path is not None})
        nodes.append(Node("nli_triples", "nli_triples", NLI_VERSION,
                          {"settings": canonical(nt), "xnli": portable(xnli) if xnli else None,
                           "files": [portable(f) for f in nli_files], "leakage": leak_cfg},
                          partial(run_nli_triples, settings=nt, xnli=xnli, files=nli_files, leakage=leakage),
                          files=files))

    if src.bitext:
        bitext_sources, bs = list(src.bitext), cfg.corpora.bitext_pairs
        files = dict(leak_files)
        mined: dict[int, tuple[str, str, str]] = {}
        for i, b in enumerate(bitext_sources):
            files.update({f"bitext/{i}/{k}": p for k, p in b.input_files().items()})
            if isinstance(b, MinedSource):
                if f"mine.{b.mining}" not in upstream:
                    raise ValueError(f"sources.bitext.{i}: mining {b.mining!r} is not an entry of the mining section "
                                     f"(entries: {', '.join(sorted(cfg.mining)) or 'none'})")
                entry = cfg.mining[b.mining]
                mined[i] = (f"mine.{b.mining}", entry.src.language, entry.tgt.language)
        nodes.append(Node("bitext_pairs", "bitext_pairs", BITEXT_VERSION,
                          {"settings": canonical(bs), "sources": [portable(b) for b in bitext_sources],
                           "leakage": leak_cfg},
                          partial(run_bitext_pairs, settings=bs, sources=bitext_sources, leakage=leakage,
                                  mined=mined),
                          files=files, deps={node: node for node, _, _ in mined.values()}))
    return nodes
