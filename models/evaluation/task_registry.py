"""The evaluation-task registry, models side: the base of every task's scorer, and the table of tasks.

An evaluation task is what ``evaluate.<run>`` scores a model on (Tatoeba retrieval, BUCC mining, STS, …). Like an
objective (``models.objective_registry``) it is added by writing its module, and nothing else names it; unlike an
objective, a task has a part in each of two layers that may not import each other (``pipelines`` never imports torch,
``models`` never imports polars, duckdb or pydantic: the evaluation runs on a bare GPU machine). So a task is **one
module per layer**, both named for the task and linked by that name:

* ``models/evaluation/tasks/<name>.py`` (this registry's): the task's settings (the frozen dataclass read from the
  config's ``evaluation.<name>``) and its scorer — a :class:`Task` subclass, registered with ``@evaluation_task``,
  that lists the sentences it needs (``texts``) and scores them from their embeddings into ``eval_results`` rows
  (``score``); the protocol maths it calls (``models/evaluation/bitext.py``, ``sts.py`` …) stay importable on their
  own, as sentence-transformers' evaluators call its ``util``.
* ``pipelines/eval_tasks/<name>.py`` (``pipelines.eval_task_registry``): the evaluation set it reads (its
  ``sources.eval`` entry, reader, table schemas and ``corpora.eval_sets`` settings), its report labels, its
  model-card line, its mapping onto mteb's tasks and the experiments' figures read from its rows.

The two sides share only the name and ``order`` (the place of the task in the suite, the settings, the report and the
configuration reference; the nine built-in tasks take 10, 20, … 90); ``tests/test_eval_task_registry.py`` checks that
the built-in tasks have both parts in the same order. A task without a pipelines part still runs and is reported
under its own name (no title, card line or mteb mapping); one without a models part only contributes its set.

The registry imports every module of the ``models.evaluation.tasks`` package (``pkgutil`` over its ``__path__``,
names starting with ``_`` skipped) the first time the tasks are asked for. What asks:

* ``models.evaluation.settings.EvaluationSettings``: one optional section per task, in task order, built when that
  module is first imported (so a task's module must be on the package path by then);
* ``models.evaluation.suite.evaluate_model``: runs every task whose section is set.

A task module must import neither torch nor anything heavy at import time (the config loader reads the settings
without loading torch): its scorer imports the protocol modules and torch inside ``score``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from models.evaluation.results import Results

TASKS_PACKAGE = "models.evaluation.tasks"
T = TypeVar("T", bound="type[Task]")


@dataclass
class Vectors:
    """Text → embedding (raw model output, unnormalised) for every sentence of the run."""

    index: dict[str, int]
    matrix: np.ndarray

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return self.matrix[[self.index[t] for t in texts]]


class Task:
    """Base of every task's scorer. ``name``: the task's name (its ``evaluation.<name>`` section and the ``task``
    column of its rows). Constructed by the suite as ``(settings, tables)`` — the task's settings and every
    ``eval_sets`` table (name → Parquet path) — it returns the sentences it needs from ``texts`` (phase 1: the suite
    encodes every task's sentences at once) and writes its rows into ``out`` from ``score`` (phase 2)."""

    name = ""

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        self.settings = settings
        self.tables = tables

    def texts(self) -> Iterable[str]:
        """Every sentence the task will look up in ``score`` (repeats allowed: the suite encodes each once)."""
        return ()

    def score(self, vec: Vectors, out: Results) -> None:
        """Score the task from ``vec`` (text → embedding of every sentence of ``texts``) into ``out``
        (``Results.add(task, variant, subset, languages, metrics, n)``)."""
        raise NotImplementedError


@dataclass(frozen=True)
class TaskSpec:
    """What the suite knows of one task: its scorer class, its settings dataclass, its place (``order``) and what its
    ``evaluation.<name>`` section is, in a line (``description``: the configuration reference's text of the key)."""

    name: str
    scorer: type[Task]
    settings: type
    order: int
    description: str = ""


_REGISTRY: dict[str, TaskSpec] = {}


def register_task(scorer: T, *, settings: type, order: int, description: str = "", replace: bool = False) -> T:
    """Register the :class:`Task` subclass ``scorer`` under its ``name`` with its settings dataclass. A name
    registered twice by different classes is refused unless ``replace``."""
    if not (isinstance(scorer, type) and issubclass(scorer, Task)) or not scorer.name:
        raise TypeError(f"{scorer!r}: an evaluation task is a subclass of models.evaluation.task_registry.Task with "
                        "a name")
    if not isinstance(settings, type) or not hasattr(settings, "__dataclass_fields__"):
        raise TypeError(f"evaluation task {scorer.name!r}: its settings must be a dataclass, got {settings!r}")
    old = _REGISTRY.get(scorer.name)
    if old is not None and not replace and old.scorer is not scorer:
        raise ValueError(f"evaluation task {scorer.name!r} is already registered ({old.scorer.__module__}."
                         f"{old.scorer.__name__})")
    _REGISTRY[scorer.name] = TaskSpec(scorer.name, scorer, settings, order, description)
    return scorer


def evaluation_task(*, settings: type, order: int, description: str = "") -> Callable[[T], T]:
    """``register_task`` as a class decorator."""
    return lambda scorer: register_task(scorer, settings=settings, order=order, description=description)


def unregister_task(name: str) -> None:
    """Remove a task (a test's toy task, a plug-in unloaded)."""
    _REGISTRY.pop(name, None)


def discover() -> None:
    """Import every task module of the ``models.evaluation.tasks`` package (each registers itself); a module already
    imported is not imported again."""
    package = importlib.import_module(TASKS_PACKAGE)
    for info in pkgutil.iter_modules(package.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{TASKS_PACKAGE}.{info.name}")


def tasks() -> dict[str, TaskSpec]:
    """name → spec of every registered task, in task order (``order``, then name)."""
    discover()
    return {s.name: s for s in sorted(_REGISTRY.values(), key=lambda s: (s.order, s.name))}


# -- what the scorers share ---------------------------------------------------------------------------------------
def columns(path: Path | None, *names: str) -> dict[str, list] | None:
    """The columns ``names`` of the Parquet table at ``path`` as lists; None when there is no table."""
    if path is None or not Path(path).exists():
        return None
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=list(names))
    return {n: table.column(n).to_pylist() for n in names}


def groups(cols: Mapping[str, list], *keys: str) -> dict[tuple, list[int]]:
    """Row numbers of ``cols`` by the values of the columns ``keys``, in first-seen order."""
    out: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(*(cols[k] for k in keys), strict=True)):
        out.setdefault(key, []).append(i)
    return out


def pick(cols: Mapping[str, list], rows: list[int], name: str) -> list:
    """The values of column ``name`` at ``rows``."""
    col = cols[name]
    return [col[i] for i in rows]


def metrics(result: Mapping[str, Any], skip: Iterable[str] = ("n",)) -> dict[str, float]:
    """The scores of a protocol function's result: numbers in points, without mteb's duplicate [0, 1] values
    (``mteb_*``) and bookkeeping counts."""
    drop = {*skip, "k", "inertia", "n_experiments"}
    return {k: float(v) for k, v in result.items()
            if k not in drop and not k.startswith(("mteb_", "n_")) and isinstance(v, int | float)}


@contextmanager
def one_thread() -> Iterator[None]:
    """scikit-learn's k-means and solvers under one OpenMP/BLAS thread: on a busy 2-core machine idle worker threads
    spin and make MiniBatchKMeans 10–100× slower, and the thread count changes its results in the last bits."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


def torch_device() -> str:
    """``cuda`` when torch sees a GPU, else ``cpu``: where the retrieval tasks run their k-NN search."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
