"""The figures a verdict reads, from one ``eval_results`` table (``models.evaluation.suite``).

Figure names are what ``question.yaml`` lists under ``evaluation.report`` / ``decision`` / ``final`` and what a
ledger row's ``metrics`` hold (decision figures prefixed ``decision.``, full-set figures ``final.``). Higher is better
for every figure except ``xsim_error`` (``lower_is_better()``).

| figure | what |
|---|---|
| ``tatoeba_trained`` / ``tatoeba_untrained`` | Tatoeba accuracy (mean of xx→en, en→xx) over trained / other languages |
| ``tatoeba_mean`` | the same over every evaluated language; ``tatoeba.<lang>`` per language |
| ``bucc_f1`` | BUCC mining F1 (LASER ratio margin, oracle threshold), mean over language pairs |
| ``sts17``, ``sts17_mono``, ``sts17_cross`` | STS17 Spearman × 100: every track / tracks of one language / of two |
| ``stsb_mono``, ``stsb_cross`` | STS-B multi-mt Spearman × 100, monolingual / cross-lingual subsets |
| ``xsim_error`` | xSIM error rate % (ratio margin, x → en), mean over languages |
| ``mewsc_accuracy`` | MewsC-16 k-means + Hungarian accuracy (EASE's protocol), mean over languages (decision: |
| | on the topic sets' decision texts, ``experiments.topic_sets``) |
| ``topic_accuracy`` | topic probe on MewsC-16 texts outside the report's clustering: one logistic regression a |
| | language, accuracy in points, mean over languages (``experiments.topic_sets``) |
| ``train.<column>`` | a ``train_steps`` column read at the run's last probed update (``experiments.runner``) |
| ``entity_retrieval_acc`` | EASE's witness: sentence → entity top-1 % on the kit's held-out pairs, trained head |
| ``entity_retrieval_start`` | the same at the run's start: start encoder, the head as initialised (same W₀) |
| ``entity_retrieval_gain`` / ``_gain_se`` | acc − start (points; paired, same pairs) and its standard error |
| ``entity_retrieval_mrr`` | mean reciprocal rank × 100 of the trained head |
| ``entity_retrieval_chance`` / ``_blind`` | 1/candidates × 100; the held-out majority entity's share × 100 |
| ``entity_retrieval_balanced`` (``_start``, ``_gain``, ``_gain_se``) | top-1 per entity first (blind ranking: chance) |
| ``entity_head_movement`` | ‖W_trained − W_init‖_F / ‖W_init‖_F of the entity head (a fraction) |

Each evaluation task declares the figures read from its rows — their names, tables, computation and the settings
that compute them (``pipelines/eval_tasks/<name>.py``: ``Figures``, gathered by ``pipelines.eval_task_registry``);
this module asks the registry and names no task. The ``entity_*`` figures (``ENTITY_FIGURES``) are not scored by the
evaluation suite: ``experiments.entity_witness`` computes them from the run's entity head (``<run>/entity_head/``) and
the kit's ``eval_entity_pairs``; ``scored_by_suite`` tells the two kinds apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

ENTITY_FIGURES = ("entity_retrieval_acc", "entity_retrieval_start", "entity_retrieval_gain",
                  "entity_retrieval_gain_se", "entity_retrieval_balanced", "entity_retrieval_balanced_start",
                  "entity_retrieval_balanced_gain", "entity_retrieval_balanced_gain_se", "entity_retrieval_mrr",
                  "entity_retrieval_chance", "entity_retrieval_blind", "entity_head_movement")
ENTITY_TABLES = ("eval_entity_pairs",)  # the kit table the entity_* figures are scored on


def _task_figures() -> list[Any]:
    """The evaluation tasks' figure declarations (``pipelines.eval_task_registry``: ``Figures``), in task order."""
    from pipelines.eval_task_registry import tasks

    return [t.figures for t in tasks().values() if t.figures is not None]


def known() -> tuple[str, ...]:
    """Every figure name the suite's tasks compute whatever the data, then the entity witness's."""
    return (*(n for f in _task_figures() for n in f.names), *ENTITY_FIGURES)


def lower_is_better() -> frozenset[str]:
    """The figures where lower wins (``xsim_error``)."""
    return frozenset(n for f in _task_figures() for n in f.lower_is_better)


def __getattr__(name: str) -> Any:
    """``KNOWN`` and ``LOWER_IS_BETTER``, read from the registry when asked for."""
    if name == "KNOWN":
        return known()
    if name == "LOWER_IS_BETTER":
        return lower_is_better()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def family(figure: str) -> str:
    """The family of a figure (``tatoeba``, ``bucc``, ``sts17``, ``stsb``, ``xsim``, ``mewsc``, ``entity``): the
    figures one evaluation task computes from the same tables, e.g. ``tatoeba_untrained`` and ``tatoeba.deu``."""
    base = figure.removeprefix("decision.").removeprefix("final.")
    return base.split(".")[0].split("_")[0]


def _family_tables() -> dict[str, tuple[str, ...]]:
    return {**{fam: tables for f in _task_figures() for fam, tables in f.tables.items()}, "entity": ENTITY_TABLES}


def tables_of(figure: str) -> tuple[str, ...]:
    """The kit tables a figure is scored on (``eval_bucc`` and its gold pairs for ``bucc_f1``, …)."""
    try:
        return _family_tables()[family(figure)]
    except KeyError:
        raise ValueError(f"figure {figure!r}: no evaluation table known for it; expected one of "
                         f"{', '.join(known())} (decision./final. prefixes allowed)") from None


def scored_by_suite(figure: str) -> bool:
    """Whether the evaluation suite scores ``figure`` (``score`` in ``experiments.runner``): not a ``train.*`` figure
    (read from the training log) nor an ``entity_*`` one (``experiments.entity_witness``)."""
    return not figure.startswith("train.") and family(figure) != "entity"


def on_report_sets(figure: str) -> bool:
    """Whether a ledger figure name is scored on the report sets (not ``decision.*``, ``final.*`` or ``train.*``)."""
    return not figure.startswith(("decision.", "final.", "train."))


def higher_is_better(figure: str) -> bool:
    return figure.removeprefix("decision.").removeprefix("final.") not in lower_is_better()


def figures(results: Path, trained: Sequence[str]) -> dict[str, float]:
    """Every figure ``results`` (an ``eval_results.parquet``) supports; ``trained``: the trained Tatoeba languages.
    Each task computes its own (``Figures.compute``)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(results).to_pylist()
    out: dict[str, float] = {}
    for f in _task_figures():
        out.update(f.compute(rows, trained))
    return out


def evaluation_settings(names: Sequence[str], batch_size: int) -> object:
    """The evaluation suite's settings that compute ``names`` (and nothing else: each task costs encoding time): the
    section each task declares for the figure families asked of it (``Figures.settings``), every other task off."""
    from models.evaluation.settings import EvaluationSettings
    from models.evaluation.task_registry import tasks as scorers
    from pipelines.eval_task_registry import tasks

    base = {n.removeprefix("decision.").removeprefix("final.").split(".")[0] for n in names if scored_by_suite(n)}
    families = {family(n) for n in base}
    sections: dict[str, Any] = {name: None for name in scorers()}
    for name, task in tasks().items():
        wanted = families & set(task.figures.tables) if task.figures is not None else set()
        if wanted:
            sections[name] = scorers()[name].settings(**task.figures.settings(wanted))
    return EvaluationSettings(**sections, cache=False, batch_size=batch_size)
