"""What a question still needs: its planned rows against its ledger — done, stale (trained with other settings than
the question now asks), pending — and the time each pending row is expected to take on 2 CPU cores and on one GPU.

An estimate is the median measured ``train_seconds + eval_seconds`` of the ledger's rows of the same condition and
scale on that kind of machine; failing that, of any condition of the question at that scale; failing that, the
scale's stated ``cpu_seconds`` / ``gpu_seconds`` (``question.yaml``). Rows measured while several jobs shared the
machine (``concurrent_jobs`` > 1) count their wall time divided by the jobs.
"""

from __future__ import annotations

import contextlib
import statistics
from dataclasses import dataclass
from typing import Any

from experiments.figures import on_report_sets, scored_by_suite
from experiments.ledger import RowKey, read_rows, row_key
from experiments.question import ConditionSpec, Question

# a row whose training took less than this shared another row's training (an interpolation sibling)
_TRAINED_SECONDS = 10.0


@dataclass(frozen=True)
class PlannedRow:
    question: str
    key: RowKey
    condition: ConditionSpec
    state: str  # done | stale | pending
    runs_on: str  # cpu | gpu: where the question's scale says the row runs
    cpu_seconds: float | None
    gpu_seconds: float | None
    why: str = ""  # a stale row: what changed (stale_reason)


def _machine(row: dict[str, Any]) -> str:
    return "gpu" if str(row.get("device", "")).startswith("cuda") else "cpu"


def _per_job(r: dict[str, Any], field: str) -> float:
    return float(r.get(field) or 0) / max(1, int(r.get("concurrent_jobs") or 1))


def _cost(row: dict[str, Any]) -> float:
    return _per_job(row, "train_seconds") + _per_job(row, "eval_seconds")


def _scored_on_report(row: dict[str, Any]) -> bool:
    return any(on_report_sets(k) for k in row.get("metrics") or {})


def _steps(q: Question, condition: ConditionSpec, scale: int) -> int:
    return condition.steps * scale if condition.steps else q.scale(scale).steps


def estimate(q: Question, rows: list[dict[str, Any]], condition: str, scale: int, machine: str, *,
             trains: bool = True) -> float | None:
    """A row's cost on ``machine``: the median scoring time of its condition's rows at this scale (else of the rows
    scored like it: on the report sets, or on the decision sets only, ``decision_only``) plus, when the row
    ``trains`` (not a sibling whose training another row keeps: ``experiments/shared_training.py``), the median
    training time per step of the rows that trained (its own, else those scored like it) times its steps. When no
    row is scored like it: for a row that only scores, the start's scoring time when the start has a row, else the
    scale's stated estimate."""
    spec = next((c for c in q.conditions if c.name == condition), None)
    report = not (spec.decision_only if spec is not None else False)
    on = [r for r in rows if r["scale"] == scale and _machine(r) == machine and r["condition"] != "start"]
    same = [r for r in on if r["condition"] == condition]
    scored_like = [r for r in on if _scored_on_report(r) == report]
    like = same or scored_like
    if not like:
        starts = [_per_job(r, "eval_seconds") for r in rows if r["condition"] == "start" and _machine(r) == machine]
        if not trains and starts:  # a sibling that only scores, before any row: about what scoring the start took
            return statistics.median(starts)
        s = q.scale(scale)
        return s.cpu_seconds if machine == "cpu" else s.gpu_seconds
    score = statistics.median(_per_job(r, "eval_seconds") for r in like)
    if not trains:
        return score

    def rates(rs: list[dict[str, Any]]) -> list[float]:
        # a row resumed from a checkpoint counts only the training after its stop (experiments.row_progress); at
        # step 0 that leaves out its pre-phase (VMSST's decoder warm-up)
        trained = [r for r in rs if r.get("steps") and float(r.get("train_seconds") or 0) >= _TRAINED_SECONDS
                   and r.get("resumed_from_step") in (None, r["steps"])]
        # rows that record their step time ran the current trainer (issue 50: about 2.5× faster a step than the
        # rows before it); once there are any, they alone set the rate
        current = [r for r in trained if r.get("step_seconds")] or trained
        return [_per_job(r, "train_seconds") / int(r["steps"]) for r in current]

    per_step = rates(same) or rates(scored_like)
    steps = _steps(q, spec, scale) if spec is not None else q.scale(scale).steps
    return score + (statistics.median(per_step) * steps if per_step else 0.0)


def plan(q: Question, rows: list[dict[str, Any]] | None = None, *, against_kit: bool = True) -> list[PlannedRow]:
    """Every planned row of ``q`` with its state and estimates (the start's scores first when the question has
    them). ``against_kit``: a row is also stale when the prepared kit's tables differ from those it read (``status``
    and ``run``); the committed pages pass False, so they are a view of the ledger alone and read the same on a
    machine with or without a prepared kit (CI has none)."""
    from experiments import kits
    from experiments.row_hash import start_hash, trained_hash
    from experiments.shared_training import training_key

    rows = read_rows(q.results) if rows is None else rows
    current: dict[str, str] | None = None
    if against_kit:
        # the prepared kit's corpus hashes; without the kit, each row's own (its corpus is taken as unchanged)
        with contextlib.suppress(FileNotFoundError):
            current = kits.load_manifest(q.kit)["hashes"]["train"]
    done = {row_key(r): r for r in rows}
    out = []
    if q.score_start:
        key = RowKey("start", 0, 0)
        start = ConditionSpec(name="start", objectives=())
        ev = [_cost(r) for r in rows if r["condition"] == "start"]
        # the start's row holds what the evaluation suite scores: no train.* figure (no training) and no entity_*
        # one (the witness scores a trained run against its own start)
        need = {*(x for x in q.evaluation.report if scored_by_suite(x)),
                *(f"decision.{x}" for x in q.evaluation.decision if scored_by_suite(x)),
                *((f"final.{x}" for x in q.evaluation.final if scored_by_suite(x))
                  if any(c.final for c in q.conditions) else ())}
        row = done.get(key)
        same = row is not None and row.get("trained_hash") == start_hash(q)
        state = "pending" if row is None else ("done" if same and need <= set(row["metrics"]) else "stale")
        why = "" if state != "stale" else ("a figure the question now reports is missing" if same else
                                           "the start, the kit or the scoring sets changed")
        out.append(PlannedRow(q.name, key, start, state, "cpu", statistics.median(ev) if ev else 300.0, None, why))
    states = []
    for c, seed, scale in q.planned():
        key = RowKey(c.name, seed, scale)
        row = done.get(key)
        why = ""
        if row is None:
            state = "pending"
        else:
            tables = current if current is not None else dict(row.get("tables") or {})
            state = "done" if row.get("trained_hash") == trained_hash(q, c, seed, scale, tables) else "stale"
            if state == "stale":
                why = stale_reason(q, c, row, current)
        states.append((c, scale, key, state, training_key(q, c, seed, scale, current or {}), why))
    # rows that differ only in interpolate_start train once (experiments/shared_training.py): the first to run
    # trains, unless a done sibling's training is kept for them; the others only score
    trained = {group for *_, state, group, _ in states if state == "done"}
    for c, scale, key, state, group, why in states:
        trains = state == "done" or group not in trained
        trained.add(group)
        out.append(PlannedRow(q.name, key, c, state, q.scale(scale).runs_on,
                              estimate(q, rows, c.name, scale, "cpu", trains=trains),
                              estimate(q, rows, c.name, scale, "gpu", trains=trains), why))
    return out


def stale_reason(q: Question, c: ConditionSpec, row: dict[str, Any], current: dict[str, str] | None) -> str:
    """Why a trained row is stale: the kit's tables it read were rebuilt with other bytes (the row's own hash still
    matches its recorded tables), or the question now trains or scores it otherwise. Rebuilt tables are the case of
    a kit prepared on another machine whose trained tables (Wikipedia2Vec vectors) round differently."""
    from experiments.row_hash import trained_hash

    recorded = dict(row.get("tables") or {})
    if current is not None and recorded and row.get("trained_hash") == trained_hash(
            q, c, int(row["seed"]), int(row["scale"]), recorded):
        changed = sorted(k for k, v in recorded.items() if current.get(k) != v)
        return "the kit's " + ", ".join(changed) + (" was" if len(changed) == 1 else " were") + \
            " rebuilt with other bytes"
    return "its training settings or scoring sets changed"


def format_seconds(s: float | None) -> str:
    if s is None:
        return "?"
    return f"{s / 3600:.1f} h" if s >= 5400 else f"{s / 60:.0f} min"


def status_lines(q: Question, planned: list[PlannedRow]) -> list[str]:
    todo = [p for p in planned if p.state != "done"]
    cpu = sum(p.cpu_seconds or 0 for p in todo if p.runs_on == "cpu")
    gpu = sum(p.gpu_seconds or 0 for p in todo if p.runs_on == "gpu")
    lines = [f"{q.name}: {sum(p.state == 'done' for p in planned)} done, {sum(p.state == 'stale' for p in planned)} "
             f"stale, {sum(p.state == 'pending' for p in planned)} pending — CPU rows "
             f"{format_seconds(cpu)} on 2 cores, GPU rows {format_seconds(gpu)}"]
    lines.append(f"  {'state':<7} {'runs on':<7} {'row':<44} {'CPU (2 cores)':>13} {'GPU':>7}")
    for p in planned:
        lines.append(f"  {p.state:<7} {p.runs_on:<7} {p.key!s:<44} {format_seconds(p.cpu_seconds):>13} "
                     f"{format_seconds(p.gpu_seconds):>7}" + (f"  ({p.why})" if p.why else ""))
    return lines
