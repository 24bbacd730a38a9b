"""The evaluation-task registry, pipelines side: what the pipeline knows of each evaluation task besides its scorer.

**Design.** An evaluation task (Tatoeba retrieval, BUCC mining, STS, …) is added like an objective: by writing its
module, and nothing else names it. Its definition spans two layers that may not import each other — ``pipelines``
never imports torch, ``models`` never imports polars, duckdb or pydantic (the evaluation runs on a bare GPU machine) —
so a task is **one module per layer**, both named for the task, linked by the name and by ``order`` (its place in
every list of tasks: the suite, the settings, the report, the card, the configuration reference; the nine built-in
tasks take 10, 20, … 90, and ``tests/test_eval_task_registry.py`` checks both sides agree):

* ``pipelines/eval_tasks/<name>.py`` (this registry's) declares one :class:`EvalTask`, as mteb's task files declare a
  ``TaskMetadata``: the evaluation set it reads (:class:`EvalSet`: its ``sources.eval`` entry, its reader, its tables'
  schemas and sort keys, its ``corpora.eval_sets`` settings), its report labels (:class:`Report`), its model-card line,
  its mapping onto mteb's tasks (:class:`Mteb`) and the figures the experiments' verdicts read from its rows
  (:class:`Figures`). The reader itself may live in the module, or in a format module of ``pipelines/eval_sets/``
  when other code reads the same files (the mteb hub copies, the leakage guard, the experiments' kits): the nine
  built-in tasks keep theirs there. A task may read another task's set (geometry reads Tatoeba's or xSIM's) and then
  declares none.
* ``models/evaluation/tasks/<name>.py`` (``models.evaluation.task_registry``): the task's ``evaluation.<name>``
  settings and its scorer; see that module.

A task with only a models part still runs and is reported under its name; one with only a pipelines part contributes
its set (and its labels, for rows some other code writes).

The registry imports every module of the ``pipelines.eval_tasks`` package (``pkgutil`` over its ``__path__``, names
starting with ``_`` skipped) the first time the tasks are asked for. What asks:

* the ``eval_sets`` stage: ``pipelines.eval_sets.settings`` builds ``EvalSources`` (one ``sources.eval`` key per set,
  then ``hub``) and ``EvalSetsSettings`` (each set's settings, then ``hub_subsets``) when first imported — so a task
  module must be on the package path by then — and ``pipelines.eval_sets.build`` reads each configured set into its
  tables;
* the report (``pipelines.report.results``): section titles, variant labels and their order, headline metrics,
  per-language charts, metric order and scales, a task's own figure;
* the model card (``pipelines.export.model_card``): the line naming the protocols, the tasks averaged by training
  exposure, the Hub dataset of each mteb task;
* the mteb export (``pipelines.export.mteb_results``): which of a task's rows are mteb's protocol and where they go;
* the experiments' figures (``experiments.figures``).

This module imports nothing of the project's stages, nor polars or pydantic: the declarations carry them as values.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TASKS_PACKAGE = "pipelines.eval_tasks"


@dataclass(frozen=True)
class Table:
    """A table of the ``eval_sets`` stage: its polars ``schema`` (column → dtype) and its sort order ``keys``, which is
    also its row key (a row key given twice — a set configured as a folder and as an mteb hub dataset — is an
    error)."""

    schema: Mapping[str, Any]
    keys: tuple[str, ...]


@dataclass(frozen=True)
class EvalSet:
    """An evaluation set the ``eval_sets`` stage reads.

    ``key``: its ``sources.eval.<key>`` entry, declared by ``source`` as pydantic takes a field, ``(annotation,
    Field(...))``; its default (None, an empty list) means "not configured": the set is read when ``bool(value)``.
    ``tables``: the tables it fills (name → :class:`Table`). ``read(value, settings, skipped)`` yields ``(table,
    frame)`` pairs for a configured ``value`` (``settings``: the whole ``corpora.eval_sets``; ``skipped``: the stage's
    ``pipelines.eval_sets.lines.Skipped``). ``files(value)``: every local input file keyed ``<key>/…`` (their content
    enters the stage's cache key), raising FileNotFoundError naming ``sources.eval.<key>`` (:func:`located`).
    ``settings``: the ``corpora.eval_sets`` fields it reads, ``{name: (annotation, Field(...))}``, named
    ``<key>_…``; ``key_when_set``: those of them added after configs were written, left out of the stage's cache key
    while they hold their default."""

    key: str
    source: tuple[Any, Any]
    tables: Mapping[str, Table]
    read: Callable[[Any, Any, Any], Iterable[tuple[str, Any]]]
    files: Callable[[Any], Mapping[str, Path]]
    settings: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    key_when_set: tuple[str, ...] = ()


@dataclass(frozen=True)
class Variant:
    """A protocol variant a task's rows name (``variant`` column): its label in the report's legend, and its ``rank``
    among all variants (the legend's order, and the order of a task's variant tables; unranked variants follow the
    ranked ones alphabetically). The nine built-in tasks' variants hold ranks 0–11."""

    label: str
    rank: float = math.inf


# variants several tasks' rows carry (a task lists its own in ``Report.variants``)
SHARED_VARIANTS = {
    "canonical": Variant("the project's recommended protocol (methods §7; cosine, real denominators)", 0),
    "mteb": Variant("mteb evaluator reproduced offline (methods §9; mteb BUCC is top-1 retrieval, not mining)", 2),
}


@dataclass(frozen=True)
class Report:
    """How the report shows a task's rows (``pipelines.report.results``).

    ``title``: its section's title. ``variants``: labels (and ranks) of the variants only this task writes.
    ``metrics``: the metric names this task adds to the report's metric order (a metric an earlier task placed keeps
    its place; unplaced metrics follow alphabetically). ``headline``: metric preference — per variant, the first one
    present is the headline (every one present with ``headline_every_metric``; none given: the alphabetically first).
    ``headline_mean``: per-language rows are summarised by the task's aggregate rows, or their mean. ``per_language``:
    what one subset is (``language``, ``language pair``): a per-subset chart of the headline metric is drawn.
    ``raw_metrics``: shown raw (4 decimals) rather than in points; ``lower_is_better``: marked so in charts and
    comparisons. ``figure(rows)``: a figure of the task's own (a ``pipelines.report.document.Figure`` or None)."""

    title: str
    variants: Mapping[str, Variant] = field(default_factory=dict)
    metrics: tuple[str, ...] = ()
    headline: tuple[str, ...] = ()
    headline_every_metric: bool = False
    headline_mean: bool = False
    per_language: str | None = None
    raw_metrics: frozenset[str] = frozenset()
    lower_is_better: frozenset[str] = frozenset()
    figure: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class MtebTarget:
    """Where one of our rows goes in mteb's results layout: mteb's task name, split and ``hf_subset``."""

    task: str
    split: str
    hf_subset: str


# our split names (file stems) → mteb's
MTEB_SPLITS = {"dev": "validation", "valid": "validation"}


@dataclass(frozen=True)
class Mteb:
    """A task's rows in mteb's terms (``pipelines.export.mteb_results``).

    ``target(variant, subset, languages, run)``: the :class:`MtebTarget` of a row group, or the reason it has none
    (``run``: the ``RunResults`` — the evaluate settings and eval_sets sources the rows were computed with). Only rows
    of ``variants`` (mteb's protocol) are asked. ``rename``: variant → our metric name → mteb's score key.
    ``datasets``: mteb task → the Hub dataset it scores (the card's ``model-index``)."""

    target: Callable[[str, str, str, Any], MtebTarget | str]
    variants: frozenset[str] = frozenset({"mteb"})
    rename: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    datasets: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Figures:
    """The figures the experiments' verdicts read from a task's rows (``experiments.figures``; names as
    ``question.yaml`` lists them).

    ``names``: the figures it computes whatever the data (more may come from the data, e.g. ``tatoeba.<lang>``);
    ``tables``: figure family (the name up to its first ``_`` or ``.``) → the kit tables the family is scored on;
    ``compute(rows, trained)``: figure → value from ``eval_results`` rows (dicts) and the trained Tatoeba languages;
    ``settings(families)``: the task's ``evaluation.<name>`` section that computes the figures of ``families`` and
    nothing else (as keyword arguments of its settings class); ``lower_is_better``: figures where lower wins."""

    names: tuple[str, ...]
    tables: Mapping[str, tuple[str, ...]]
    compute: Callable[[Sequence[Mapping[str, Any]], Sequence[str]], dict[str, float]]
    settings: Callable[[set[str]], Mapping[str, Any]]
    lower_is_better: frozenset[str] = frozenset()


@dataclass(frozen=True)
class EvalTask:
    """Everything the pipeline knows of one evaluation task (module docstring). ``card``: the phrase naming its
    protocol in the model card's results line (none: not named); ``exposure``: the card averages its per-language
    headline rows over the languages the run trained on and those it never saw."""

    name: str
    order: int
    report: Report
    set: EvalSet | None = None
    card: str = ""
    exposure: bool = False
    mteb: Mteb | None = None
    figures: Figures | None = None


_REGISTRY: dict[str, EvalTask] = {}
_LOCK = threading.RLock()
_importing = False  # True while ``discover`` imports task modules (guarded by _LOCK)
_listed: tuple[str, ...] | None = None  # the package path whose modules are all imported


def register_task(task: EvalTask, *, replace: bool = False) -> EvalTask:
    """Register ``task`` under its name (a name registered twice is refused unless ``replace``); a set key or table
    another task's set already has is refused."""
    old = _REGISTRY.get(task.name)
    if old is not None and not replace and old is not task:
        raise ValueError(f"evaluation task {task.name!r} is already registered")
    if task.set is not None:
        for other in _REGISTRY.values():
            if other.name == task.name or other.set is None:
                continue
            if other.set.key == task.set.key or set(other.set.tables) & set(task.set.tables):
                raise ValueError(f"evaluation task {task.name!r}: its set {task.set.key!r} (tables "
                                 f"{sorted(task.set.tables)}) clashes with task {other.name!r}'s")
    _REGISTRY[task.name] = task
    return task


def unregister_task(name: str) -> None:
    """Remove a task (a test's toy task, a plug-in unloaded)."""
    _REGISTRY.pop(name, None)


def discover() -> None:
    """Import every task module of the ``pipelines.eval_tasks`` package (each registers itself), once per package
    path. Refused while a task module is being imported by this thread: a task module that asks the registry, or
    imports a module that does (``pipelines.eval_sets.settings``), would see a half-filled table."""
    global _importing, _listed
    package = importlib.import_module(TASKS_PACKAGE)
    path = tuple(package.__path__)
    if path == _listed:
        return
    with _LOCK:
        if _importing:
            raise RuntimeError(f"the evaluation tasks were asked for while a module of {TASKS_PACKAGE} was being "
                               "imported: a task module must not import pipelines.eval_sets.settings nor ask the "
                               "registry at import time")
        _importing = True
        try:
            for info in pkgutil.iter_modules(package.__path__):
                if not info.name.startswith("_"):
                    importlib.import_module(f"{TASKS_PACKAGE}.{info.name}")
            _listed = path
        finally:
            _importing = False


def tasks() -> dict[str, EvalTask]:
    """name → task, in task order (``order``, then name)."""
    discover()
    return {t.name: t for t in sorted(_REGISTRY.values(), key=lambda t: (t.order, t.name))}


def task_of(name: str) -> EvalTask | None:
    """The task ``name``, or None when no module declares it (rows of a task without a pipelines part)."""
    return tasks().get(name)


def eval_sets() -> list[EvalSet]:
    """The evaluation sets, in task order."""
    return [t.set for t in tasks().values() if t.set is not None]


def located(key: str, find: Callable[..., Any], *args: Any) -> Any:
    """``find(*args)`` with a FileNotFoundError re-raised naming the ``sources.eval.<key>`` entry it came from."""
    try:
        return find(*args)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"sources.eval.{key}: {exc}") from None


def by_name(prefix: str, paths: Iterable[Path]) -> dict[str, Path]:
    """``{prefix/<file name>: path}`` for ``paths``, sorted by path (a set's input files, flat)."""
    return {f"{prefix}/{p.name}": p for p in sorted(Path(x) for x in paths)}
