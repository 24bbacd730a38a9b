"""Whether a row's mechanism acted (issue 51): the figure its question names for the condition (``mechanism`` in
``question.yaml``, ``experiments.question.MechanismSpec``), read from the row, against the stated threshold.

A comparison means something only where its mechanism acted: MPCL's loss saturated near 0 leaves no gradient, a
VMSST decoder that does not read μ_sem cannot separate semantics from language, an EASE entity term at the paper's
τ_e = 10 stays within 0.2 of ln N whatever is learnt, and mSimCSE's English-only training cannot show that it aligns
languages from a start that is aligned already. Each row records ``mechanism: {figure, value, threshold, active}``
(``None`` for a baseline without the mechanism) and ``experiments.verdicts`` reads a claim whose conditions' mechanism
is inactive as **mechanism inactive**.

Figures:

| figure | read from |
|---|---|
| ``train.loss_tail`` | the mean training loss over the last 20 % of the run (the last 2 of the row's 10 loss windows) |
| ``train.<column>`` | the row's metric of that name (``experiments.runner`` reads ``train_steps`` at the last probe) |
| ``start.<figure>`` | the start row's figure (a property of the start: mSimCSE's "is the start aligned already") |
| anything else | the row's own metric |
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from experiments.question import MechanismSpec, Question

TAIL_WINDOWS = 2  # of the row's 10 equal loss windows (``curve.loss``): the last 20 % of the steps


def figure_value(spec: MechanismSpec, row: dict[str, Any], start: dict[str, Any] | None) -> float | None:
    """The value of ``spec.figure`` for ``row`` (``None`` when the row does not hold it)."""
    if spec.figure == "train.loss_tail":
        curve = [x for x in (row.get("training") or {}).get("curve.loss") or [] if x is not None]
        return statistics.fmean(curve[-TAIL_WINDOWS:]) if len(curve) >= TAIL_WINDOWS else None
    if spec.figure.startswith("start."):
        value = (start or {}).get("metrics", {}).get(spec.figure.removeprefix("start."))
        return None if value is None else float(value)
    value = row.get("metrics", {}).get(spec.figure)
    return None if value is None else float(value)


def measure(spec: MechanismSpec | None, row: dict[str, Any],
            start: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """``{figure, value, threshold, active}`` for ``row`` under ``spec``; ``None`` for a condition without a
    mechanism; ``active`` is ``None`` (not measured) when the row does not hold the figure."""
    if spec is None:
        return None
    value = figure_value(spec, row, start)
    active = None if value is None else (value >= spec.threshold if spec.active_when == "above"
                                         else value < spec.threshold)
    return {"figure": spec.figure, "value": None if value is None else round(value, 6),
            "threshold": spec.threshold, "active": active}


def start_row(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    return next((r for r in rows if r["condition"] == "start"), None)


def recorded(q: Question, rows: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each non-start row of ``q`` whose condition the question still has, with the ``mechanism`` it should record
    (what ``experiments mechanism --write`` writes into rows trained before their question stated one)."""
    start = start_row(rows)
    by_name = {c.name: c for c in q.conditions}
    return [(r, measure(by_name[r["condition"]].mechanism, r, start)) for r in rows
            if r["condition"] != "start" and r["condition"] in by_name]
