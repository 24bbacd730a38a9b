"""The rules that turn ledger rows into verdicts; each ``RESULTS.md`` states them as written here.

The rules are calibrated: with no true difference, a claim "holds" at most 5 % of the time and "does not hold" at
most 5 % of the time, whatever the number of seeds (≥ 3) and figures; a true effect of 3 run standard deviations on
every figure holds at least half the time with 5 seeds (``tests/test_verdict_calibration.py`` simulates both through
``paired`` and ``claim_verdict``). The rule before issue 51 (ahead beyond max(2·se, 0.1), one behind figure refutes)
said "does not hold" in 32 % of null comparisons with 3 seeds.

**Figures.** Per figure, the difference A − B is taken seed by seed (the same seeds only, and only seeds whose two
rows ran on the same device with the same precision and training forward: a seed's runs share their batches and
initial weights, and a device or forward changes the rounding), with *higher is better* made to hold for every figure
(xSIM's error is negated). With n ≥ 3 paired seeds, mean difference d and standard error se = sd / √n, the figure's
**bar** at two-sided level α is the half-width of the t confidence interval, t(1 − α/2, n − 1) · se, and never less
than 0.1 points; A is **ahead** when d > bar, **behind** when d < −bar, else **tied** (a two-sided paired t-test).

**Claim** (``comparisons``: A beats B). The first figure is the claim's *primary* figure — the paper's. A is
**ahead** on it beyond its bar at α = 0.05; on every other figure, and for **behind** on every figure including the
primary, the bar is at α = 0.05 / k (Bonferroni over the claim's k figures). The claim **holds** when A is ahead on
the primary figure and behind on none; it **does not hold** when A is behind on at least one figure (B is shown
ahead: "A not shown ahead" is never a refutation); otherwise it is **inconclusive** (no difference shown either way).
With no true difference each of "holds" and "does not hold" then has probability at most 2.5 %. Fewer than 3 paired
seeds on a figure: **pending**.

**At least** (``rule: at_least``: A is not worse than B, the papers' "negligible" or "no loss"). Per figure, the
95 % confidence interval of d (two-sided, the usual non-inferiority test) against the claim's ``margin``
(points): **within** when its lower end is above −margin, **worse** when its upper end is below −margin, else
**unclear**. The claim **holds** when every figure is within (an intersection–union test: at most 2.5 % when A is
worse by the margin on one figure), **does not hold** when one is worse, else **inconclusive**.

**Keep** (``keeps``: a condition keeps the start's quality). Per figure, the condition's mean over n ≥ 3 seeds
against the start's value (one deterministic row), sign-adjusted, with the 95 % t confidence interval of that mean:
**kept** when its lower end is above −tolerance, **lost** when its upper end is below −tolerance, else
**unclear**. The claim **holds** when every figure is kept, **does not hold** when one is lost, else
**inconclusive**; fewer than 3 seeds, or no start row: **pending**.

**Decision** (``decision``: which candidate becomes the default). Each run's decision score is the mean of its
decision figures (sign-adjusted as above). A condition whose mean on a ``keep`` figure is below the start's by more
than ``tolerance`` points is set aside (a requirement on the default, not a claim: a recipe that must keep the
start's quality may not look worse than it). The candidate with the highest mean score replaces the incumbent when
ahead of it by the paired test at α = 0.05 / m, m the number of candidates it was selected from (the best of m is
the best partly by chance); otherwise the incumbent stays. When the incumbent is set aside, the best remaining
candidate is the default without the test. Until every condition has 3 seeds the decision is **pending**.

**Mechanism.** A question may state, per condition, the figure that shows its mechanism acted (``mechanism`` in
``question.yaml``; each row records ``mechanism: {figure, value, threshold, active}``, ``experiments.mechanism``). A
comparison one of whose conditions has a row with the mechanism inactive gets the verdict **mechanism inactive**,
never holds or does not hold: a null result where the mechanism did not act is no result.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from experiments.figures import higher_is_better

MIN_SEEDS = 3
MIN_DIFFERENCE = 0.1  # points: below this a difference is a tie whatever the seeds' spread
ALPHA = 0.05  # a claim's family-wise level
LIKE_WITH_LIKE = ("device", "precision", "forward")  # what two rows of a seed must share to be compared
MECHANISM_INACTIVE = "mechanism inactive"


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (scipy), cached: the simulations call it a million times with a handful of arguments."""
    from scipy.stats import t

    return float(t.ppf(p, df))


@dataclass(frozen=True)
class Difference:
    figure: str
    n: int
    mean_a: float | None
    mean_b: float | None
    delta: float | None  # A − B in the figure's own direction (not sign-adjusted)
    bar: float | None  # max(t(1 − level/2, n − 1)·se, MIN_DIFFERENCE), or the at-least interval's half-width
    outcome: str  # ahead | behind | tied | pending (beats); within | worse | unclear | pending (at least)
    se: float | None = None  # the paired differences' standard error
    level: float = ALPHA  # the two-sided level of this figure's test for "ahead"
    behind_bar: float | None = None  # the bar for "behind" (at behind_level)
    behind_level: float = ALPHA  # the two-sided level of this figure's test for "behind"


def values(rows: Sequence[dict[str, Any]], condition: str, figure: str, scale: int) -> dict[int, float]:
    return {int(r["seed"]): float(r["metrics"][figure]) for r in rows
            if r["condition"] == condition and int(r["scale"]) == scale and r["metrics"].get(figure) is not None}


def ran_as(row: dict[str, Any]) -> tuple[str, str, str]:
    """(device, precision, forward) of a row; rows trained before issue 50 record no forward: the padded one."""
    return str(row.get("device")), str(row.get("precision")), str(row.get("forward") or "padded")


def like_with_like(rows: Sequence[dict[str, Any]], a: str, b: str, scale: int,
                   across: Iterable[str] = ()) -> tuple[set[int], list[str]]:
    """The seeds whose rows of ``a`` and ``b`` ran alike (device, precision and training forward, except the parts
    named in ``across`` — a claim *about* the forward compares forwards) and, for the others, why they are left out."""
    keep = [i for i, k in enumerate(LIKE_WITH_LIKE) if k not in set(across)]
    by = {c: {int(r["seed"]): ran_as(r) for r in rows if r["condition"] == c and int(r["scale"]) == scale}
          for c in (a, b)}
    same, out = set(), []
    for s in sorted(set(by[a]) & set(by[b])):
        ka, kb = ([by[c][s][i] for i in keep] for c in (a, b))
        if ka == kb:
            same.add(s)
        else:
            out.append(f"seed {s}: {'/'.join(by[a][s])} against {'/'.join(by[b][s])}")
    return same, out


def paired(a: dict[int, float], b: dict[int, float], figure: str, level: float = ALPHA) -> Difference:
    """A − B over the seeds both have, tested at two-sided ``level`` (the **Figures** rule)."""
    seeds = sorted(set(a) & set(b))
    mean_a = statistics.fmean(a.values()) if a else None
    mean_b = statistics.fmean(b.values()) if b else None
    if len(seeds) < MIN_SEEDS:
        delta = statistics.fmean(a[s] - b[s] for s in seeds) if seeds else None
        return Difference(figure, len(seeds), mean_a, mean_b, delta, None, "pending", level=level)
    diffs = [a[s] - b[s] for s in seeds]
    d = statistics.fmean(diffs)
    se = statistics.stdev(diffs) / math.sqrt(len(diffs))
    return at_level(Difference(figure, len(seeds), mean_a, mean_b, d, None, "tied", se=se), level)


def at_level(d: Difference, level: float, behind_level: float | None = None) -> Difference:
    """``d`` tested at two-sided ``level`` for *ahead* and ``behind_level`` (default: ``level``) for *behind*: its
    bars and outcome (ahead / behind / tied)."""
    behind_level = level if behind_level is None else behind_level
    if d.n < MIN_SEEDS or d.delta is None or d.se is None:
        return replace(d, outcome="pending", bar=None, level=level, behind_bar=None, behind_level=behind_level)
    bar = max(t_quantile(1 - level / 2, d.n - 1) * d.se, MIN_DIFFERENCE)
    behind_bar = max(t_quantile(1 - behind_level / 2, d.n - 1) * d.se, MIN_DIFFERENCE)
    x = d.delta if higher_is_better(d.figure) else -d.delta
    return replace(d, bar=bar, level=level, behind_bar=behind_bar, behind_level=behind_level,
                   outcome="ahead" if x > bar else "behind" if x < -behind_bar else "tied")


def within_margin(d: Difference, margin: float) -> Difference:
    """``d`` by the **At least** rule: the 95 % confidence interval of A − B against −``margin``."""
    if d.n < MIN_SEEDS or d.delta is None or d.se is None:
        return replace(d, outcome="pending", bar=None)
    half = t_quantile(1 - ALPHA / 2, d.n - 1) * d.se
    x = d.delta if higher_is_better(d.figure) else -d.delta
    outcome = "within" if x - half > -margin else "worse" if x + half < -margin else "unclear"
    return replace(d, bar=half, level=ALPHA, outcome=outcome)


def judged(diffs: Sequence[Difference], rule: str = "beats", margin: float = 0.5) -> list[Difference]:
    """Each figure's outcome at the levels the claim's rule gives it (``beats``: *ahead* at α on the first, primary
    figure and at α / k on the others, *behind* at α / k on every figure); every figure against the margin
    (``at_least``)."""
    if rule not in ("beats", "at_least"):
        raise ValueError(f"rule must be 'beats' or 'at_least', got {rule!r}")
    if rule == "at_least":
        return [within_margin(d, margin) for d in diffs]
    k = len(diffs)
    return [at_level(d, ALPHA if i == 0 else ALPHA / k, ALPHA / k) for i, d in enumerate(diffs)]


def claim_verdict(diffs: Sequence[Difference], rule: str = "beats", margin: float = 0.5) -> str:
    """The **Claim** (or **At least**) rule over one comparison's figures, the first being the primary figure;
    ``diffs`` from ``paired`` (re-tested here at the claim's levels)."""
    return verdict_of(judged(diffs, rule, margin), rule)


def verdict_of(ds: Sequence[Difference], rule: str = "beats") -> str:
    """The verdict over figures already tested at the claim's levels (``judged``)."""
    if not ds or any(d.outcome == "pending" for d in ds):
        return "pending"
    if rule == "at_least":
        if any(d.outcome == "worse" for d in ds):
            return "does not hold"
        return "holds" if all(d.outcome == "within" for d in ds) else "inconclusive"
    if any(d.outcome == "behind" for d in ds):
        return "does not hold"
    return "holds" if ds[0].outcome == "ahead" else "inconclusive"


def decision_scores(rows: Sequence[dict[str, Any]], condition: str, figures: Sequence[str],
                    scale: int) -> dict[int, float]:
    """Per seed: the mean of ``figures`` (sign-adjusted), for the seeds that have every figure."""
    per = [values(rows, condition, f, scale) for f in figures]
    seeds = set.intersection(*(set(p) for p in per)) if per else set()
    return {s: statistics.fmean((1 if higher_is_better(f) else -1) * p[s] for f, p in zip(figures, per, strict=True))
            for s in sorted(seeds)}


def falls_behind_start(rows: Sequence[dict[str, Any]], condition: str, keep: Sequence[str], tolerance: float,
                       scale: int, reference: str = "start") -> str | None:
    """Why ``condition`` is out of a decision with ``keep`` figures: the first figure whose mean is below the
    ``reference``'s (``start``, or the incumbent condition's name) by more than ``tolerance``; ``None`` when none is
    (or a figure is not measured yet)."""
    if condition == reference:
        return None
    for f in keep:
        k = kept(rows, condition, f, tolerance, scale, reference)
        if k.outcome == "pending" or k.delta is None:
            continue
        x = k.delta if higher_is_better(f) else -k.delta
        if x < -tolerance:
            whose = "the start's" if reference == "start" else f"{reference}'s"
            return f"{condition}: {f} {k.mean:.2f} against {whose} {k.start:.2f} (tolerance {tolerance:g})"
    return None


@dataclass(frozen=True)
class Kept:
    figure: str
    n: int
    mean: float | None
    start: float | None  # the reference's mean: the start's score, or the incumbent's mean over the same seeds
    delta: float | None  # mean − start in the figure's own direction (not sign-adjusted)
    outcome: str  # kept | lost | unclear | pending
    bound: float | None = None  # the half-width of the mean's 95 % confidence interval


def kept(rows: Sequence[dict[str, Any]], condition: str, figure: str, tolerance: float, scale: int,
         reference: str = "start") -> Kept:
    """``condition``'s mean on ``figure`` against the ``reference``'s by the **Keep** rule: the start's row
    (``start``, scored once), or another condition's runs at the same seeds (``reference`` its name: the differences
    are paired by seed, so the interval is the paired one)."""
    mine = values(rows, condition, figure, scale)
    if reference == "start":
        start = values(rows, "start", figure, 0).get(0)
        diffs = {} if start is None else {s: v - start for s, v in mine.items()}
    else:
        ref = values(rows, reference, figure, scale)
        mine = {s: v for s, v in mine.items() if s in ref}
        start = statistics.fmean(ref[s] for s in mine) if mine else None
        diffs = {s: v - ref[s] for s, v in mine.items()}
    mean = statistics.fmean(mine.values()) if mine else None
    delta = None if mean is None or start is None else mean - start
    if delta is None or len(mine) < MIN_SEEDS:
        return Kept(figure, len(mine), mean, start, delta, "pending")
    half = t_quantile(1 - ALPHA / 2, len(mine) - 1) * statistics.stdev(diffs.values()) / math.sqrt(len(mine))
    x = delta if higher_is_better(figure) else -delta
    outcome = "kept" if x - half > -tolerance else "lost" if x + half < -tolerance else "unclear"
    return Kept(figure, len(mine), mean, start, delta, outcome, half)


def keep_verdict(kepts: Sequence[Kept]) -> str:
    if not kepts or any(k.outcome == "pending" for k in kepts):
        return "pending"
    if any(k.outcome == "lost" for k in kepts):
        return "does not hold"
    return "holds" if all(k.outcome == "kept" for k in kepts) else "inconclusive"


def decide(rows: Sequence[dict[str, Any]], incumbent: str, candidates: Sequence[str], figures: Sequence[str],
           scale: int, keep: Sequence[str] = (), tolerance: float = 0.5,
           keep_against: str = "start") -> tuple[str, str, dict[str, dict[int, float]]]:
    """(default, why, scores per condition) by the **Decision** rule; ``keep_against``: whose ``keep`` figures a
    candidate may not fall below by more than ``tolerance`` — the start's (a search from a pretrained start) or the
    ``incumbent``'s (a setting decided from a random init, whose start is no quality to keep)."""
    names = list(dict.fromkeys([incumbent, *candidates]))
    scores = {c: decision_scores(rows, c, figures, scale) for c in names}
    short = [c for c in names if len(scores[c]) < MIN_SEEDS]
    if short:
        return incumbent, f"pending: fewer than {MIN_SEEDS} seeds for {', '.join(short)}", scores
    reference = "start" if keep_against == "start" else incumbent
    if keep and reference == "start" and not all(values(rows, "start", f, 0) for f in keep):
        return incumbent, "pending: the start's row has no " + ", ".join(keep), scores
    out = {c: why for c in names if (why := falls_behind_start(rows, c, keep, tolerance, scale, reference))}
    left = [c for c in names if c not in out]
    dropped = f" (out: {'; '.join(out.values())})" if out else ""
    if not left:
        return incumbent, f"every condition falls behind the start, the incumbent stays{dropped}", scores
    best = max(left, key=lambda c: (statistics.fmean(scores[c].values()), c == incumbent))
    if incumbent in out:  # a default that loses the start's quality is no default: the best that keeps it
        return best, f"{best} has the best mean score of the conditions that keep the start's quality{dropped}", \
            scores
    if best == incumbent:
        return incumbent, f"the incumbent has the best mean decision score{dropped}", scores
    m = max(1, len([c for c in left if c != incumbent]))
    seeds, _ = like_with_like(rows, best, incumbent, scale)
    d = paired({s: v for s, v in scores[best].items() if s in seeds},
               {s: v for s, v in scores[incumbent].items() if s in seeds}, "score", level=ALPHA / m)
    if d.outcome == "pending":
        return incumbent, (f"pending: {d.n} seeds of {best} and the incumbent ran alike (device, precision, "
                           f"forward); {MIN_SEEDS} are needed"), scores
    if d.outcome == "ahead":
        return best, (f"{best} is ahead of the incumbent by {d.delta:+.2f} (bar {d.bar:.2f} at α {ALPHA:g}/{m}, "
                      f"{d.n} paired seeds){dropped}"), scores
    return incumbent, (f"{best} has the best mean score but is not shown ahead of the incumbent "
                       f"({_signed(d.delta)} against the bar {_num(d.bar)} at α {ALPHA:g}/{m}, {d.n} paired seeds)"
                       f"{dropped}"), scores


def _signed(x: float | None) -> str:
    return "—" if x is None else f"{x:+.2f}"


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def mechanism_state(rows: Sequence[dict[str, Any]], condition: str, scale: int, seeds: Iterable[int]) -> str:
    """``active`` when every one of ``condition``'s rows at ``seeds`` records its mechanism active, ``inactive``
    when one records it inactive, ``none`` when the condition has no mechanism (``mechanism: null``, a baseline) or
    its rows record none, ``unknown`` when a row did not measure it (no ``mechanism``, or ``active: null``)."""
    want = set(seeds)
    recs = [r.get("mechanism") for r in rows
            if r["condition"] == condition and int(r["scale"]) == scale and int(r["seed"]) in want]
    if not any(recs):
        return "none"
    if any(m and m.get("active") is False for m in recs):
        return "inactive"
    return "active" if all(m and m.get("active") for m in recs) else "unknown"
