"""What a model card states, as data: the facts ``model_card.card_facts`` gathers from the warehouse, written beside
the card as ``polysent_card.json`` and read by every part that writes the card (``model_card``, ``limitations``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ObjectiveInfo:
    """One objective of the run: its settings as trained, the corpus tables it reads, the languages it keeps (empty:
    every language of those tables) and the paper it follows (``citation``, one line, and ``citation_url``; empty: it
    names none), as the objective's own module registers it."""

    kind: str
    settings: dict[str, Any]
    tables: list[str]
    languages: list[str] = field(default_factory=list)
    citation: str = ""
    citation_url: str = ""


@dataclass
class InputFile:
    """A file a corpus was built from: the manifest's name for it, its sha256, and the public source it is."""

    name: str
    sha256: str | None
    source: dict[str, Any]


@dataclass
class Corpus:
    """One corpus artifact the run trained on: rows per language of each table read, leakage removals
    (``corpus``, ``eval_set``, ``lang``, ``units_removed`` rows), its content hash and its input files."""

    stage: str
    key: str
    content_hash: str
    rows: dict[str, dict[str, int]]
    leakage: list[dict[str, Any]]
    inputs: list[InputFile]
    built_from: list[str] = field(default_factory=list)  # the stages of the artifacts it was built from
    stats: dict[str, Any] = field(default_factory=dict)  # its manifest's stats (a tokenizer's vocabulary size …)


@dataclass
class CardFacts:
    """Everything the card states (``polysent_card.json``); numbers as the warehouse holds them."""

    run: str
    model_name: str
    train_key: str
    train_content_hash: str
    created_at: str | None
    base_model: dict[str, Any]
    settings: dict[str, Any]
    stats: dict[str, Any]
    hardware: dict[str, Any]
    objectives: list[ObjectiveInfo]
    corpora: list[Corpus]
    languages: list[str]
    curve: list[dict[str, Any]]
    start_run: str | None = None
    peers: list[str] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)  # headline rows: KEY + one value per model
    exposure: list[dict[str, Any]] = field(default_factory=list)  # per-language means, trained vs never trained
    model_index: list[dict[str, Any]] = field(default_factory=list)
    mteb_skipped: dict[str, int] = field(default_factory=dict)
    license: str = "unknown"
    license_note: str = ""
    datasets: list[str] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    prompt: str | None = None
    dev: list[dict[str, Any]] = field(default_factory=list)  # evaluation artifacts read to select the checkpoint
    lengths: dict[str, int | None] = field(default_factory=dict)  # trained, tokenizer and position limits
    interpolation: dict[str, Any] | None = None  # the WiSE-FT lineage of interpolated weights
    limitations: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False, default=str, sort_keys=False) + "\n"
