"""The model card's *Limitations*: what the warehouse knows that a user should read before using the model.

Every sentence is generated from the card's facts (``card_facts.CardFacts``) and the run's ``eval_results`` rows,
never typed by hand:

* scale — a toy model (a small encoder trained from random weights: below ``TOY_PARAMETERS``) or a toy-scale run
  (fewer than ``TOY_UNITS`` training units seen: steps × accumulation × the objectives' batches), with the size of
  its training tables;
* languages — those it trained on against those it was evaluated in: evaluated but never trained (transfer, not
  training), trained but never evaluated (untested), and everything else untested;
* length — inputs beyond the trained ``max_seq_length`` are truncated (the encoder could read more, untested);
* the start — headline results where it scores below its start model (error rates: above);
* evidence — a run that was not evaluated, or exported weights (an interpolation at export) that were not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from pipelines.export.card_facts import CardFacts

TOY_PARAMETERS = 10_000_000  # below this, an encoder trained from random weights is a toy (all-MiniLM-L6: 22.7M)
TOY_UNITS = 100_000  # fewer training units seen than this is a toy-scale run (a pair, a group or a sentence each)
LOWER_IS_BETTER = ("error",)  # metric names holding these are better when lower (xSIM error rate)


def _list(items: Sequence[str], limit: int = 40) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def training_units(facts: CardFacts) -> int | None:
    """Training units the run saw: steps × gradient accumulation × the sum of its objectives' batch sizes."""
    s = facts.settings
    try:
        per_step = sum(int(o.settings.get("batch_size") or 0) for o in facts.objectives)
        return int(s.get("steps") or 0) * int(s.get("grad_accumulation") or 1) * per_step
    except (TypeError, ValueError):
        return None


def scale(facts: CardFacts) -> list[str]:
    rows = sum(n for c in facts.corpora for per in c.rows.values() for n in per.values())
    params = facts.stats.get("parameters")
    units = training_units(facts)
    scratch = not (facts.settings.get("encoder") or {}).get("pretrained")
    steps = facts.settings.get("steps")
    out = []
    if scratch and isinstance(params, int) and params < TOY_PARAMETERS:
        out.append(f"**A toy model.** A {params:,}-parameter encoder trained from randomly initialised weights for "
                   f"{steps} steps on training tables of {rows:,} rows: it shows the pipeline working, it is not a "
                   "usable sentence encoder (compare its results in this card with any pretrained peer).")
    elif units is not None and units < TOY_UNITS:
        out.append(f"**A toy-scale run.** {steps} steps saw {units:,} training units in all (the training tables "
                   f"hold {rows:,} rows), fewer than {TOY_UNITS:,}: its results, and its differences from its start, "
                   "say what so short a run does, not what its objectives can do.")
    return out


def evaluated_languages(rows: pl.DataFrame | None) -> list[str]:
    """ISO 639-3 codes of every language the run's evaluation rows name (pairs split, aggregates skipped)."""
    from pipelines.report.training import subset_languages

    if rows is None or rows.height == 0 or "languages" not in rows.columns:
        return []
    found: set[str] = set()
    for value in rows["languages"].drop_nulls().unique().to_list():
        found |= set(subset_languages(str(value)))
    return sorted(found)


def languages(facts: CardFacts, rows: pl.DataFrame | None) -> list[str]:
    from pipelines.report.training import iso3

    trained = sorted({iso3(x) for x in facts.languages})
    evaluated = evaluated_languages(rows)
    if not trained:
        return ["The languages it trained on are unknown (its training tables carry no language column)."]
    if not evaluated:
        return [f"It trained on {len(trained)} language(s) (ISO 639-3: {_list(trained)}) and was evaluated in none."]
    transfer = [x for x in evaluated if x not in trained]
    untested = [x for x in trained if x not in evaluated]
    out = [f"It trained on {len(trained)} language(s) (ISO 639-3: {_list(trained)}) and was evaluated in "
           f"{len(evaluated)}" + (f"; {len(transfer)} of them never appear in its training data "
                                  f"({_list(transfer)}): results there measure transfer, not training" if transfer
                                  else "") + "."]
    if untested:
        out.append(f"It was never evaluated in {len(untested)} of its training language(s): {_list(untested)}.")
    out.append("Languages in neither list are untested.")
    return out


def length(facts: CardFacts) -> list[str]:
    trained = facts.lengths.get("trained")
    limit = facts.lengths.get("tokenizer") or facts.lengths.get("positions")
    if not trained:
        return []
    text = (f"Inputs longer than {trained} tokens (`max_seq_length`, the length it was trained at) are truncated: "
            "only their beginning is embedded.")
    if limit and limit > trained:
        text += f" The encoder can read up to {limit}; raising `max_seq_length` to that is untested."
    return [text]


def below_start(facts: CardFacts) -> list[str]:
    if not facts.start_run or not facts.results:
        return []
    worse, compared = [], 0
    for r in facts.results:
        d = r.get("delta")
        if d is None:
            continue
        compared += 1
        lower_better = any(w in str(r.get("metric")) for w in LOWER_IS_BETTER)
        if (d > 0 if lower_better else d < 0):
            worse.append((abs(d), r))
    if not worse:
        return []
    worst = max(worse, key=lambda x: x[0])[1]
    where = " ".join(str(worst[k]) for k in ("task", "variant", "subset", "metric") if worst.get(k) is not None)
    return [f"It scores below its start model `{facts.start_run}` on {len(worse)} of {compared} headline results "
            f"(the largest drop: {where}, Δ {worst['delta']:+.2f}); check the table for the tasks you need."]


def evidence(facts: CardFacts) -> list[str]:
    ip = facts.interpolation
    if ip and not ip.get("evaluated"):
        return [f"The exported weights (the interpolation at α = {ip['alpha']:g}) were not evaluated: the results "
                "in this card are their parents'."]
    if not facts.results:
        return ["The run was not evaluated: nothing in this card measures how well it embeds."]
    return []


def limitations(facts: CardFacts, rows: pl.DataFrame | None) -> list[str]:
    """Every limitation sentence, in the order of the module docstring; ``rows``: the run's ``eval_results`` (None
    when it was not evaluated)."""
    out: list[Any] = [*scale(facts), *languages(facts, rows), *length(facts), *below_start(facts), *evidence(facts)]
    return [str(x) for x in out]
