"""The rules that turn ledger rows into verdicts; each ``RESULTS.md`` states them as written here.

**Claim** (``comparisons``: A beats B). Per figure, the difference A − B is taken seed by seed (the same seeds
only: a seed's runs share their batches and initial weights), with *higher is better* made to hold for every figure
(xSIM's error is negated). With n ≥ 3 paired seeds, mean difference d and its standard error se = sd / √n: A is
**ahead** when d > max(2·se, 0.1 points), **behind** when d < −max(2·se, 0.1), otherwise **tied**. The claim
**holds** when A is ahead on a majority of the figures and behind on none; it **does not hold** when A is behind on
at least one figure and ahead on fewer than a majority; otherwise (ties only, or ahead on some and behind on none
short of a majority) it is **inconclusive**. Fewer than 3 paired seeds: **pending**. A claim that A is *at least* B
(``rule: at_least``, e.g. the paper's "VMSST ≥ CONTRASTIVE on STS") **holds** when A is behind on none of its figures
(ties count) and **does not hold** when it is behind on one.

**Keep** (``keeps``: a condition keeps the start's quality). Per figure, the condition's mean over its seeds against
the start's value (one deterministic row), sign-adjusted: **kept** when not below it by more than ``tolerance``
points, else **lost**. The claim **holds** when every figure is kept and **does not hold** when one is lost; fewer
than 3 seeds, or no start row: **pending**.

**Decision** (``decision``: which candidate becomes the default). Each run's decision score is the mean of its
decision figures (sign-adjusted as above). The candidate with the highest mean score replaces the incumbent when its
paired difference to the incumbent passes the same bar (d > max(2·se, 0.1), n ≥ 3); otherwise the incumbent stays.
Until every candidate has 3 seeds the decision is **pending**. A decision with ``keep`` figures first sets aside every
condition whose mean on one of them is below the untrained start's by more than ``tolerance`` points (a recipe that
must keep the start's monolingual quality); when that sets aside the incumbent too, the best remaining candidate is
the default without the bar (the incumbent stays only when every condition is set aside).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from experiments.figures import higher_is_better

MIN_SEEDS = 3
MIN_DIFFERENCE = 0.1  # points: below this a difference is a tie whatever the seeds' spread


@dataclass(frozen=True)
class Difference:
    figure: str
    n: int
    mean_a: float | None
    mean_b: float | None
    delta: float | None  # A − B in the figure's own direction (not sign-adjusted)
    bar: float | None  # max(2·se, MIN_DIFFERENCE)
    outcome: str  # ahead | behind | tied | pending


def values(rows: Sequence[dict[str, Any]], condition: str, figure: str, scale: int) -> dict[int, float]:
    return {int(r["seed"]): float(r["metrics"][figure]) for r in rows
            if r["condition"] == condition and int(r["scale"]) == scale and r["metrics"].get(figure) is not None}


def paired(a: dict[int, float], b: dict[int, float], figure: str) -> Difference:
    seeds = sorted(set(a) & set(b))
    sign = 1.0 if higher_is_better(figure) else -1.0
    mean_a = statistics.fmean(a.values()) if a else None
    mean_b = statistics.fmean(b.values()) if b else None
    if len(seeds) < MIN_SEEDS:
        delta = statistics.fmean(a[s] - b[s] for s in seeds) if seeds else None
        return Difference(figure, len(seeds), mean_a, mean_b, delta, None, "pending")
    diffs = [a[s] - b[s] for s in seeds]
    d = statistics.fmean(diffs)
    se = statistics.stdev(diffs) / math.sqrt(len(diffs))
    bar = max(2 * se, MIN_DIFFERENCE)
    outcome = "ahead" if sign * d > bar else "behind" if sign * d < -bar else "tied"
    return Difference(figure, len(seeds), mean_a, mean_b, d, bar, outcome)


def claim_verdict(diffs: Sequence[Difference], rule: str = "beats") -> str:
    """The **Claim** rule over one comparison's figures; ``rule``: ``beats`` (A beats B) or ``at_least`` (A ≥ B)."""
    if rule not in ("beats", "at_least"):
        raise ValueError(f"rule must be 'beats' or 'at_least', got {rule!r}")
    if not diffs or any(d.outcome == "pending" for d in diffs):
        return "pending"
    ahead = sum(d.outcome == "ahead" for d in diffs)
    behind = sum(d.outcome == "behind" for d in diffs)
    if rule == "at_least":
        return "does not hold" if behind else "holds"
    majority = len(diffs) // 2 + 1
    if ahead >= majority and behind == 0:
        return "holds"
    if behind > 0 and ahead < majority:
        return "does not hold"
    return "inconclusive"


def decision_scores(rows: Sequence[dict[str, Any]], condition: str, figures: Sequence[str],
                    scale: int) -> dict[int, float]:
    """Per seed: the mean of ``figures`` (sign-adjusted), for the seeds that have every figure."""
    per = [values(rows, condition, f, scale) for f in figures]
    seeds = set.intersection(*(set(p) for p in per)) if per else set()
    return {s: statistics.fmean((1 if higher_is_better(f) else -1) * p[s] for f, p in zip(figures, per, strict=True))
            for s in sorted(seeds)}


def falls_behind_start(rows: Sequence[dict[str, Any]], condition: str, keep: Sequence[str], tolerance: float,
                       scale: int) -> str | None:
    """Why ``condition`` is out of a decision with ``keep`` figures: the first figure it loses by the **Keep** rule
    (``kept``); ``None`` when it keeps every figure (or a figure is not measured yet)."""
    for f in keep:
        k = kept(rows, condition, f, tolerance, scale)
        if k.outcome == "lost":
            return f"{condition}: {f} {k.mean:.2f} against the start's {k.start:.2f} (tolerance {tolerance:g})"
    return None


@dataclass(frozen=True)
class Kept:
    figure: str
    n: int
    mean: float | None
    start: float | None
    delta: float | None  # mean − start in the figure's own direction (not sign-adjusted)
    outcome: str  # kept | lost | pending


def kept(rows: Sequence[dict[str, Any]], condition: str, figure: str, tolerance: float, scale: int) -> Kept:
    """``condition``'s mean on ``figure`` against the start's, by the **Keep** rule."""
    start = values(rows, "start", figure, 0).get(0)
    mine = values(rows, condition, figure, scale)
    mean = statistics.fmean(mine.values()) if mine else None
    delta = None if mean is None or start is None else mean - start
    if delta is None or len(mine) < MIN_SEEDS:
        return Kept(figure, len(mine), mean, start, delta, "pending")
    sign = 1.0 if higher_is_better(figure) else -1.0
    return Kept(figure, len(mine), mean, start, delta, "lost" if sign * delta < -tolerance else "kept")


def keep_verdict(kepts: Sequence[Kept]) -> str:
    if not kepts or any(k.outcome == "pending" for k in kepts):
        return "pending"
    return "does not hold" if any(k.outcome == "lost" for k in kepts) else "holds"


def decide(rows: Sequence[dict[str, Any]], incumbent: str, candidates: Sequence[str], figures: Sequence[str],
           scale: int, keep: Sequence[str] = (),
           tolerance: float = 0.5) -> tuple[str, str, dict[str, dict[int, float]]]:
    """(default, why, scores per condition). ``keep``: figures on which a condition may not fall behind the start by
    more than ``tolerance`` (such a candidate cannot replace the incumbent, whatever its score; such an incumbent is
    replaced by the best candidate that keeps them)."""
    names = list(dict.fromkeys([incumbent, *candidates]))
    scores = {c: decision_scores(rows, c, figures, scale) for c in names}
    short = [c for c in names if len(scores[c]) < MIN_SEEDS]
    if short:
        return incumbent, f"pending: fewer than {MIN_SEEDS} seeds for {', '.join(short)}", scores
    if keep and not all(values(rows, "start", f, 0) for f in keep):
        return incumbent, "pending: the start's row has no " + ", ".join(keep), scores
    out = {c: why for c in names if (why := falls_behind_start(rows, c, keep, tolerance, scale))}
    left = [c for c in names if c not in out]
    dropped = f" (out: {'; '.join(out.values())})" if out else ""
    if not left:
        return incumbent, f"every condition falls behind the start, the incumbent stays{dropped}", scores
    best = max(left, key=lambda c: (statistics.fmean(scores[c].values()), c == incumbent))
    if incumbent in out:  # a default that loses the start's quality is no default: the best that keeps it replaces it
        return best, f"{best} has the best mean score of the conditions that keep the start's quality{dropped}", \
            scores
    if best == incumbent:
        return incumbent, f"the incumbent has the best mean decision score{dropped}", scores
    d = paired(scores[best], scores[incumbent], "score")
    if d.outcome == "ahead":
        return best, (f"{best} is ahead of the incumbent by {d.delta:+.2f} (bar {d.bar:.2f}, {d.n} paired seeds)"
                      f"{dropped}"), scores
    return incumbent, (f"{best} has the best mean score but is not ahead of the incumbent by the bar "
                       f"({d.delta:+.2f} against {d.bar:.2f}){dropped}"), scores
