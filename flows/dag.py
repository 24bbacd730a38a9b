"""The pipeline DAG as plain data: one ``Node`` per stage instance, built from a ``PipelineConfig``.

```
wiki_shard.* ─► wiki_extract.* ─► entities ─► hard_negatives, entity_vectors ┐   (flows/dag_wiki.py)
xnli_groups ──┬────────────────────┬──► tokenizer ──► train[run] ◄───────────┘ ──► evaluate[run] ──► report
bitext_pairs ─┤  (each objective of a run reads its own corpus) ──►┘  ▲ (dev)         ▲
nli_triples ──┘                                                       │               │
eval_sets ────────────────────────────────────────────────────────────┴───────────────┘
```
Each node knows its stage name and code version, its canonical config section (what enters the cache key besides
input hashes), its external input files, its upstream nodes, and a ``run`` callable. Stage code is imported lazily
inside ``run`` so that planning and SQL never pay for torch.
"""

from __future__ import annotations

import dataclasses
import graphlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flows.config import PipelineConfig
from models import stage_versions
from models.settings import objective_tables
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


def portable(settings: Any) -> Any:
    """``canonical`` with every path cut to its file name: where a file lives is not part of a cache key (its content
    enters through ``Node.files``), so a moved checkout or data folder keeps its cache."""
    if isinstance(settings, BaseModel):
        return _jsonable(settings.model_dump(mode="python"), path=lambda p: p.name)
    return canonical(settings)


def _jsonable(obj: Any, path: Callable[[Path], str] = str) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v, path) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v, path) for v in obj]
    if isinstance(obj, Path):
        return path(obj)
    return obj


def _folder_files(prefix: str, folder: Path) -> dict[str, Path]:
    """Every file of a local model folder as a node input (``prefix/relative/path`` → path): content in the key."""
    return {f"{prefix}/{p.relative_to(folder).as_posix()}": p for p in sorted(folder.rglob("*")) if p.is_file()}


def _model_folders(ts: Any) -> dict[str, Path]:
    """Local model folders a training run reads (a pretrained start point, a teacher): their files enter its key."""
    found = {"encoder": ts.encoder.pretrained} | {f"teacher{i}": o.teacher for i, o in enumerate(ts.objectives)
                                                  if getattr(o, "teacher", "self") != "self"}
    return {role: Path(v) for role, v in found.items() if v and Path(v).is_dir()}


def _model_name(model: str | None) -> str | None:
    """A model as the report names it: a hub id as it is; a local folder by its name (its parent's name for the
    ``model`` folder of a ``pkg:`` package); where a folder lives is no part of a cache key."""
    if model is None or not Path(model).exists():
        return model
    path = Path(model)
    return path.parent.name if path.name == "model" else path.name


def _start_label(model: str, taken: set[str]) -> str:
    """The run name under which a start model's results appear: ``start:<model name>`` (numbered when taken)."""
    label, i = f"start:{_model_name(model)}", 2
    while label in taken:
        label, i = f"start:{_model_name(model)}#{i}", i + 1
    return label


def _objective_languages(o: Any) -> tuple[str, ...]:
    """The languages an objective restricts itself to (empty: every language of its corpora)."""
    if getattr(o, "kind", "") == "simcse" and o.strategy == "unsupervised" and o.sentence_language:
        return (o.sentence_language,)
    return tuple(getattr(o, "languages", ()))


def portable_train(ts: Any) -> dict[str, Any]:
    """A training run's settings for its cache key, with local model folders cut to their names (their content
    enters through the node's files)."""
    data = canonical(ts)
    if data["encoder"].get("pretrained") and Path(data["encoder"]["pretrained"]).is_dir():
        data["encoder"]["pretrained"] = Path(data["encoder"]["pretrained"]).name
    for o in data["objectives"]:
        if o.get("teacher") not in (None, "self") and Path(o["teacher"]).is_dir():
            o["teacher"] = Path(o["teacher"]).name
    return data


def _result(d: dict) -> StageResult:
    return StageResult(tables=d.get("tables", {}), stats=d.get("stats", {}))


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


def build_dag(cfg: PipelineConfig) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    src = cfg.sources
    corpus_tables: dict[str, str] = {}  # input name → node, for the tokenizer and the report

    def add(node: Node) -> None:
        nodes[node.name] = node

    if src.wikipedia is not None:
        from flows.dag_wiki import add_wiki_nodes

        add_wiki_nodes(cfg, src.wikipedia, add, corpus_tables)

    # every corpus node takes the same leakage guard: its evaluation files enter each node's cache key
    leak = cfg.corpora.leakage
    leak_files = leak.files() if leak.eval_sets else {}
    leak_cfg = portable(leak)

    def read_leakage_index() -> Any:
        from pipelines.leakage import EvalTextIndex

        return EvalTextIndex.from_settings(leak)

    leakage_index = BuiltOnce(read_leakage_index)  # the corpus nodes of one run read the evaluation sets once

    if src.xnli is not None:
        xsrc = src.xnli
        xs = cfg.corpora.xnli_groups

        def run_xnli(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from pipelines.xnli.groups import build_groups

            return build_groups(xs, xsrc, leakage_index(), out)

        from pipelines.xnli.groups import STAGE_VERSION as XNLI_V

        add(Node("xnli_groups", "xnli_groups", XNLI_V,
                 {"settings": canonical(xs), "source": portable(xsrc), "leakage": leak_cfg}, run_xnli,
                 files={**xsrc.files(xs.splits, xs.read_languages()), **leak_files}))
        corpus_tables["xnli_groups"] = "xnli_groups"

    nt = cfg.corpora.nli_triples
    if nt is not None and (src.nli or (src.xnli is not None and nt.xnli_split is not None)):
        nli_files = list(src.nli)
        xnli_for_triples = src.xnli if nt.xnli_split is not None else None

        def run_triples(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from pipelines.nli.triples import build_triples

            return build_triples(nt, xnli_for_triples, nli_files, leakage_index(), out)

        from pipelines.nli.triples import STAGE_VERSION as NLI_V

        files = dict(leak_files)
        if xnli_for_triples is not None:
            assert isinstance(nt.languages, list) and nt.xnli_split is not None
            files.update(xnli_for_triples.files([nt.xnli_split], sorted({"en", *nt.languages})))
        files.update({f"nli/{f.name}/{f.path.name}": f.path for f in nli_files if f.path is not None})
        add(Node("nli_triples", "nli_triples", NLI_V,
                 {"settings": canonical(nt), "xnli": portable(xnli_for_triples) if xnli_for_triples else None,
                  "files": [portable(f) for f in nli_files], "leakage": leak_cfg}, run_triples, files=files))
        corpus_tables["nli_triples"] = "nli_triples"

    if src.bitext:
        bitext_sources = list(src.bitext)

        def run_bitext(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from pipelines.bitext.sampling import build_pairs

            return build_pairs(cfg.corpora.bitext_pairs, bitext_sources, leakage_index(), out)

        from pipelines.bitext.sampling import STAGE_VERSION as BT_V
        from pipelines.bitext.sources import source_files

        files = dict(leak_files)
        for i, b in enumerate(bitext_sources):
            files.update({f"bitext/{i}/{k}": p for k, p in source_files(b).items()})
        add(Node("bitext_pairs", "bitext_pairs", BT_V,
                 {"settings": canonical(cfg.corpora.bitext_pairs), "sources": [portable(b) for b in bitext_sources],
                  "leakage": leak_cfg}, run_bitext, files=files))
        corpus_tables["bitext_pairs"] = "bitext_pairs"

    ev = src.eval
    if ev.configured():
        def run_eval_sets(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from pipelines.eval_sets import build_eval_sets

            return build_eval_sets(cfg.corpora.eval_sets, ev, out)

        from pipelines.eval_sets import STAGE_VERSION as EV_V

        add(Node("eval_sets", "eval_sets", EV_V,
                 {"settings": canonical(cfg.corpora.eval_sets), "sources": portable(ev)}, run_eval_sets,
                 files=ev.files()))

    if any(ts.encoder.pretrained is None for ts in cfg.training.values()):
        tok_inputs = dict(corpus_tables)

        def run_tokenizer(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from models.tokenizer import train_tokenizer

            return _result(train_tokenizer(cfg.tokenizer, {t: up[t].table_path(t) for t in up}, out))

        add(Node("tokenizer", "tokenizer", stage_versions.TOKENIZER, canonical(cfg.tokenizer), run_tokenizer,
                 deps=tok_inputs))

    # corpus table → the node writing it (xnli_groups also writes MPCL's "+Single" pairs)
    table_nodes = {**corpus_tables, "xnli_single_pairs": "xnli_groups"}
    if "entity_vectors" in nodes:
        table_nodes["entity_vectors"] = "entity_vectors"
    for run_name, ts in sorted(cfg.training.items()):
        missing = [t for t in ts.tables() if table_nodes.get(t) not in nodes]
        if missing:
            raise ValueError(f"training.{run_name}.objectives use {missing}, but no source produces them")
        if ts.dev is not None and "eval_sets" not in nodes:
            raise ValueError(f"training.{run_name}.dev needs evaluation sets (sources.eval)")
        deps = {table_nodes[t]: table_nodes[t] for t in ts.tables()}
        if ts.encoder.pretrained is None:
            deps["tokenizer"] = "tokenizer"
        if ts.dev is not None:
            deps["eval_sets"] = "eval_sets"
        files = {k: v for role, folder in _model_folders(ts).items()
                 for k, v in _folder_files(f"model/{role}", folder).items()}

        def run_train(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any], ts=ts,
                      run_name=run_name) -> StageResult:
            from models.components import refuse_empty_corpora
            from models.train import train
            from warehouse.hashing import hash_obj
            from warehouse.manifest import TIMINGS_DIR

            tables = {t: up[table_nodes[t]].table_path(t) for t in ts.tables()}
            refuse_empty_corpora(ts, tables, run_name)  # before the model, teachers or a teacher cache load
            dev = ({t: up["eval_sets"].table_path(t) for t in up["eval_sets"].tables
                    if t in ("eval_tatoeba", "eval_sts")} if ts.dev is not None else {})
            # checkpoints outside the artifact, keyed by everything the run depends on: a killed run resumes
            key = hash_obj({"settings": canonical(ts), "inputs": {n: r.content_hash for n, r in sorted(up.items())}})
            return _result(train(ts, tables, out, run_name=run_name,
                                 tokenizer_dir=up["tokenizer"].path / "tokenizer" if "tokenizer" in up else None,
                                 dev_tables=dev, checkpoint_dir=cfg.data_root / "cache" / "checkpoints"
                                 / f"{run_name}-{key[:16]}", keep_checkpoints_after=False, tables_dir=TIMINGS_DIR))

        add(Node(f"train.{run_name}", "train", stage_versions.TRAIN,
                 {"run": run_name, "settings": portable_train(ts)}, run_train, files=files, deps=deps))

    evaluations: dict[str, str] = {}
    ecfg = cfg.evaluation
    eval_settings = {k: v for k, v in canonical(ecfg).items() if k != "models"}

    def add_evaluation(name: str, deps: dict[str, str], files: dict[str, Path], model: str | None) -> None:
        def run_evaluate(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from models.evaluation.suite import evaluate_model

            tables = {t: up["eval_sets"].table_path(t) for t in up["eval_sets"].tables}
            if model is None:  # a model trained by this pipeline: its artifact's content hash names it
                path, content, key = up["model"].path / "model", up["model"].content_hash, up["model"].key
            else:  # an external model: a local folder (hashed by the stage) or a hub id
                path, content, key = Path(model) if Path(model).exists() else model, None, None
            return _result(evaluate_model(ecfg, path, tables, out, run=name, model_hash=content, model_key=key,
                                          cache_root=cfg.data_root / "cache" / "embeddings" if ecfg.cache else None))

        node = f"evaluate.{name}"
        add(Node(node, "evaluate", stage_versions.EVALUATE,
                 {"run": name, "model": None if model is None else Path(model).name if Path(model).exists() else model,
                  "settings": eval_settings},
                 run_evaluate, files=files, deps={"eval_sets": "eval_sets", **deps}))
        evaluations[node] = node

    by_model: dict[str, str] = {}  # model → the run name its evaluation carries
    if "eval_sets" in nodes:
        for run_name in sorted(cfg.training):
            add_evaluation(run_name, {"model": f"train.{run_name}"}, {}, None)
        for name, model in sorted(ecfg.models.items()):
            if name in cfg.training:
                raise ValueError(f"evaluation.models.{name}: the name is already a training run")
            folder = Path(model)
            files = _folder_files("model", folder) if folder.is_dir() else {}
            add_evaluation(name, {}, files, model)
        # each run's start model (encoder.pretrained) is evaluated once: by the evaluation.models peer naming the same
        # model, else by one node per model (its files in the key), shared by every run that starts from it
        by_model.update({model: name for name, model in sorted(ecfg.models.items())})
        for _, ts in sorted(cfg.training.items()):
            model = ts.encoder.pretrained
            if model is not None and model not in by_model:
                taken = {*cfg.training, *ecfg.models, *by_model.values()}
                by_model[model] = _start_label(model, taken)
                folder = Path(model)
                add_evaluation(by_model[model], {}, _folder_files("model", folder) if folder.is_dir() else {}, model)

    def start_of(ts: Any) -> str | None:
        return None if ts.encoder.pretrained is None or "eval_sets" not in nodes else by_model[ts.encoder.pretrained]

    # what the report says of each trained run: its start model, and per objective the corpora it reads and the
    # languages it keeps (its training languages come from those corpora)
    trained = {name: {"start": start_of(ts), "pretrained": _model_name(ts.encoder.pretrained),
                      "sources": [[list(objective_tables(o)), list(_objective_languages(o))] for o in ts.objectives]}
               for name, ts in sorted(cfg.training.items())}
    report_deps = {**{f"corpus:{t}": n for t, n in corpus_tables.items()}, **{f"eval:{e}": e for e in evaluations},
                   **{f"train:{r}": f"train.{r}" for r in trained}}
    if report_deps:
        def run_report(out: Path, up: Mapping[str, ArtifactRef], ctx: Mapping[str, Any]) -> StageResult:
            from pipelines.report import TrainedRun, build_report

            corpora = {}
            for name, ref in up.items():
                if name.startswith("corpus:"):
                    for table, rel in ref.tables.items():
                        # several corpus nodes write a ``leakage`` table: keep each under its own name
                        corpora[f"leakage@{name}" if table == "leakage" else table] = ref.path / rel
            evals = {name: ref.table_path("eval_results") for name, ref in up.items() if name.startswith("eval:")}
            runs = {name: TrainedRun(t["start"], t["pretrained"], {k: up[f"train:{name}"].path / rel for k, rel
                                                                   in up[f"train:{name}"].tables.items()},
                                     [(tuple(tables), tuple(langs)) for tables, langs in t["sources"]])
                    for name, t in trained.items()}
            return build_report(cfg.report, corpora, evals, cfg.name, out, runs, sorted(ecfg.models))

        from pipelines.report import STAGE_VERSION as REP_V

        add(Node("report", "report", REP_V, {"settings": canonical(cfg.report), "pipeline": cfg.name,
                                             "runs": trained, "peers": sorted(ecfg.models)}, run_report,
                 deps=report_deps))
    return nodes


def topological(nodes: Mapping[str, Node]) -> list[Node]:
    order = graphlib.TopologicalSorter({n.name: set(n.deps.values()) for n in nodes.values()}).static_order()
    return [nodes[n] for n in order]
