"""The pipeline DAG as plain data: one ``Node`` per stage instance, built from a ``PipelineConfig``.

```
wikidata ──► wiki_extract ─────────┐
xnli_groups ──┬────────────────────┼──► tokenizer ──► train[run] ──► evaluate_tatoeba[run] ──► report
bitext_pairs ─┘                    │                     ▲                ▲
eval_sets ─────────────────────────┴─────────────────────┼────────────────┘
```
Each node knows its stage name and code version, its canonical config section (what enters the cache key besides
input hashes), its external input files, its upstream nodes, and a ``run`` callable. Stage code is imported lazily
inside ``run`` so that planning and SQL never pay for torch.
"""

from __future__ import annotations

import dataclasses
import graphlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flows.config import PipelineConfig
from models import stage_versions
from warehouse.artifacts import ArtifactRef, StageResult

RunFn = Callable[[Path, Mapping[str, ArtifactRef], Mapping[str, Any]], StageResult]


@dataclass
class Node:
    name: str
    stage: str
    version: str
    config: dict[str, Any]
    run: RunFn
    files: dict[str, Path] = field(default_factory=dict)
    deps: dict[str, str] = field(default_factory=dict)  # input name → upstream node name


def canonical(settings: Any) -> dict[str, Any]:
    """Settings → plain JSON-able dict (the config part of a cache key)."""
    if isinstance(settings, BaseModel):
        return settings.model_dump(mode="json")
    if dataclasses.is_dataclass(settings):
        return _jsonable(dataclasses.asdict(settings))
    return _jsonable(settings)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _result(d: dict) -> StageResult:
    return StageResult(tables=d.get("tables", {}), stats=d.get("stats", {}))


def build_dag(cfg: PipelineConfig) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    src = cfg.sources
    corpus_tables: dict[str, str] = {}  # input name → node, for the tokenizer and the report

    def add(node: Node) -> None:
        nodes[node.name] = node

    if src.wikipedia is not None:
        wiki_deps: dict[str, str] = {}
        if src.wikipedia.wikidata is not None:
            wd = src.wikipedia.wikidata

            def run_wikidata(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
                from pipelines.wikidata import build_entities

                return build_entities(cfg.corpora.wikidata, wd, out)

            from pipelines.wikidata import STAGE_VERSION as WD_V

            add(Node("wikidata", "wikidata", WD_V, canonical(cfg.corpora.wikidata), run_wikidata,
                     files={f"wikidata/{wd.name}": wd}))
            wiki_deps["entities"] = "wikidata"
        dumps = dict(src.wikipedia.dumps)

        def run_wiki(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from pipelines.wikipedia.extract import build_wiki

            return build_wiki(cfg.corpora.wiki, dumps, out, up["entities"].path if "entities" in up else None)

        from pipelines.wikipedia.extract import STAGE_VERSION as WIKI_V

        add(Node("wiki_extract", "wiki_extract", WIKI_V,
                 {"settings": canonical(cfg.corpora.wiki), "languages": sorted(dumps)}, run_wiki,
                 files={f"dump/{lang}/{p.name}": p for lang, p in sorted(dumps.items())}, deps=wiki_deps))
        corpus_tables["wiki_sentences"] = "wiki_extract"

    if src.xnli is not None:
        xdir = src.xnli.dir
        xs = cfg.corpora.xnli_groups

        def run_xnli(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from pipelines.xnli import build_groups

            return build_groups(xs, xdir, out)

        from pipelines.xnli import STAGE_VERSION as XNLI_V

        add(Node("xnli_groups", "xnli_groups", XNLI_V, canonical(xs), run_xnli,
                 files={f"xnli/{s}-{lang}.tsv": xdir / f"{s}-{lang}.tsv" for s in xs.splits for lang in xs.languages}))
        corpus_tables["xnli_groups"] = "xnli_groups"

    if src.bitext:
        sources = [b.model_dump() for b in src.bitext]

        def run_bitext(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from pipelines.bitext import build_pairs

            return build_pairs(cfg.corpora.bitext_pairs, sources, out)

        from pipelines.bitext import STAGE_VERSION as BT_V

        files = {}
        for b in src.bitext:
            files[f"bitext/{b.src}-{b.tgt}/{b.src}/{b.src_file.name}"] = b.src_file
            files[f"bitext/{b.src}-{b.tgt}/{b.tgt}/{b.tgt_file.name}"] = b.tgt_file
        add(Node("bitext_pairs", "bitext_pairs", BT_V,
                 {"settings": canonical(cfg.corpora.bitext_pairs),
                  "pairs": [[b.src, b.tgt] for b in src.bitext]}, run_bitext, files=files))
        corpus_tables["bitext_pairs"] = "bitext_pairs"

    ev = src.eval
    if any((ev.tatoeba, ev.sts, ev.clustering)):
        def run_eval_sets(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from pipelines.benchmarks import build_eval_sets

            return build_eval_sets(cfg.corpora.eval_sets, out, ev.tatoeba, ev.sts, ev.clustering)

        from pipelines.benchmarks import STAGE_VERSION as EV_V

        files = {}
        for kind, folder in (("tatoeba", ev.tatoeba), ("sts", ev.sts), ("clustering", ev.clustering)):
            if folder is not None:
                if not folder.is_dir():
                    raise FileNotFoundError(f"sources.eval.{kind}: {folder} is not a folder")
                files.update({f"{kind}/{p.name}": p for p in sorted(folder.iterdir()) if p.is_file()})
        add(Node("eval_sets", "eval_sets", EV_V,
                 {"settings": canonical(cfg.corpora.eval_sets),
                  "kinds": [k for k in ("tatoeba", "sts", "clustering") if getattr(ev, k)]}, run_eval_sets,
                 files=files))

    if cfg.training:
        tok_inputs = dict(corpus_tables)

        def run_tokenizer(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from models.tokenizer import train_tokenizer

            return _result(train_tokenizer(cfg.tokenizer, {t: up[t].table_path(t) for t in up}, out))

        add(Node("tokenizer", "tokenizer", stage_versions.TOKENIZER, canonical(cfg.tokenizer), run_tokenizer,
                 deps=tok_inputs))

    evaluations: dict[str, str] = {}
    for run_name, ts in sorted(cfg.training.items()):
        missing = [t for t in ts.data if t not in nodes]
        if missing:
            raise ValueError(f"training.{run_name}.data uses {missing}, but no source produces them")

        def run_train(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], ts=ts,
                      run_name=run_name) -> StageResult:
            from models.training import train

            tables = {t: up[t].table_path(t) for t in ts.data}
            return _result(train(ts, tables, up["tokenizer"].path / "tokenizer", out, run_name))

        add(Node(f"train.{run_name}", "train", stage_versions.TRAIN, {"run": run_name, "settings": canonical(ts)},
                 run_train,
                 deps={"tokenizer": "tokenizer", **{t: t for t in ts.data}}))
        if cfg.evaluation.tatoeba is not None and ev.tatoeba is not None:
            tset = cfg.evaluation.tatoeba

            def run_tatoeba(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], tset=tset,
                            run_name=run_name) -> StageResult:
                from models.evaluation.tatoeba import evaluate_tatoeba

                return _result(evaluate_tatoeba(tset, up["model"].path / "model",
                                                up["eval_sets"].table_path("eval_tatoeba"), out, run_name,
                                                up["model"].key))

            name = f"evaluate_tatoeba.{run_name}"
            add(Node(name, "evaluate_tatoeba", stage_versions.EVALUATE_TATOEBA,
                     {"run": run_name, "settings": canonical(tset)}, run_tatoeba,
                     deps={"model": f"train.{run_name}", "eval_sets": "eval_sets"}))
            evaluations[name] = name

    report_deps = {**{f"corpus:{t}": n for t, n in corpus_tables.items()}, **{f"eval:{e}": e for e in evaluations}}
    if report_deps:
        def run_report(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from pipelines.report import build_report

            corpora = {}
            for name, ref in up.items():
                if name.startswith("corpus:"):
                    for table, rel in ref.tables.items():
                        corpora[table] = ref.path / rel
            evals = {name: ref.table_path("eval_results") for name, ref in up.items() if name.startswith("eval:")}
            return build_report(cfg.report, corpora, evals, cfg.name, out)

        from pipelines.report import STAGE_VERSION as REP_V

        add(Node("report", "report", REP_V, {"settings": canonical(cfg.report), "pipeline": cfg.name}, run_report,
                 deps=report_deps))
    return nodes


def topological(nodes: Mapping[str, Node]) -> list[Node]:
    order = graphlib.TopologicalSorter({n.name: set(n.deps.values()) for n in nodes.values()}).static_order()
    return [nodes[n] for n in order]
