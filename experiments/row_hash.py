"""A ledger row's content hash: what it trained and what it was scored on. A row whose hash differs from the one the
question now gives it is *stale*: ``experiments.plan`` lists it, the pages read no figure of it, and
``experiments run`` runs it again."""

from __future__ import annotations

import dataclasses
from typing import Any

from experiments import kits
from experiments.ledger import canonical_hash
from experiments.question import ConditionSpec, Question


def training_view(q: Question, condition: ConditionSpec, seed: int, scale: int,
                  tables: dict[str, str]) -> dict[str, Any]:
    """What a row trains: its full training settings (the start named by its id), the kit and the sha256 of every
    corpus table it reads (``tables``: kit table name → hash) — the part of ``trained_hash`` that names the weights.
    An objective table is hashed by the kit table that feeds it (the condition's ``corpora``); only a condition with
    ``corpora`` names the mapping, so the rows of every other condition keep their hashes, whatever else the kit
    holds."""
    from models.settings import key_view
    from models.settings_io import to_mapping

    settings = q.train_settings(condition, seed, scale, start=q.start, device="auto")
    return {"training": key_view(to_mapping(settings)), "kit": q.kit,
            "tables": {k: tables.get(condition.kit_table(k)) for k in settings.tables()},
            **({"corpora": dict(sorted(condition.corpora.items()))} if condition.corpora else {}),
            **({"tokenizer": q.tokenizer} if q.tokenizer else {})}


def scoring_sets(q: Question, decision: tuple[str, ...] | list[str], final: bool) -> dict[str, int]:
    """The version of the kit's decision and full sets a row is scored on (``kits.SCORING_SETS``) and of the topic
    sets and caption pairs (``experiments.topic_sets``, ``experiments.caption_sts``) when it reads them; empty for
    a row scored on none, whose hash this leaves as it was."""
    from experiments.caption_sts import CAPTION_SETS, uses_caption_sets
    from experiments.topic_sets import TOPIC_SETS, uses_topic_sets

    out = {"scoring_sets": kits.SCORING_SETS[q.kit]} if decision or final else {}
    figures = [*q.evaluation.report, *(f"decision.{f}" for f in decision),
               *((f"final.{f}" for f in q.evaluation.final) if final else ())]
    if uses_topic_sets(figures):
        out["topic_sets"] = TOPIC_SETS
    if uses_caption_sets(figures):
        out["caption_sets"] = CAPTION_SETS
    return out


def trained_hash(q: Question, condition: ConditionSpec, seed: int, scale: int, tables: dict[str, str]) -> str:
    """The content hash of what a row trains: the run's full training settings (the start named by its id, the
    scale's steps, batch and precision), the sha256 of every corpus table it reads (``tables``: name → hash), the
    figures it is scored on and the version of the decision and full sets they come from."""
    report = [] if condition.decision_only else sorted(q.evaluation.report)
    what = {**training_view(q, condition, seed, scale, tables), "figures": report,
            "decision": sorted(q.evaluation.decision)}
    if condition.final:
        what["final"] = sorted(q.evaluation.final)
    return canonical_hash({**what, **scoring_sets(q, q.evaluation.decision, condition.final)})


def start_hash(q: Question) -> str:
    """What the start's row scores: the start model, the kit, the encoder settings (a random init's size) and the
    version of the decision and full sets it is scored on."""
    encoder = {f.name: getattr(q.encoder, f.name) for f in dataclasses.fields(q.encoder)}
    return canonical_hash({"start": q.start, "kit": q.kit, "encoder": encoder,
                           **({"tokenizer": q.tokenizer} if q.tokenizer else {}),
                           **scoring_sets(q, q.evaluation.decision, any(c.final for c in q.conditions))})
