"""BUCC 2018 bitext mining (methods §7.3) as LASER's ``mine_bitexts``: ratio margin over the k nearest neighbours,
"max" 1:1 retrieval, threshold search; per language pair and split of ``eval_bucc`` with its gold pairs
(``eval_bucc_gold``). Variants: ``oracle`` (tuned and scored on one split — what mSimCSE reports), ``held_out`` (tuned
on ``tune_split``, applied to ``test_split``), ``oracle_cosine`` (plain-cosine mining, as VMSST also reports),
``mteb`` (mteb's retrieval-style BUCC: top-1 per gold source, not mining). Maths: ``models.evaluation.bucc``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from models.evaluation.task_registry import (
    Task,
    Vectors,
    columns,
    evaluation_task,
    groups,
    metrics,
    pick,
    torch_device,
)
from models.settings import AtLeastOne

if TYPE_CHECKING:
    from models.evaluation.results import Results

log = logging.getLogger("polysent.models.evaluation")


@dataclass(frozen=True)
class BuccSettings:
    """BUCC mining F1 as LASER's ``mine_bitexts`` (methods §7.3): ratio margin over k nearest neighbours, "max" 1:1
    retrieval, threshold search. *oracle* = tuned and scored on each split; *held-out* = tuned on ``tune_split``,
    applied to ``test_split`` (when both have gold). ``cosine`` adds the plain-cosine mining VMSST also reports;
    ``mteb`` adds mteb's retrieval-style BUCC (top-1 per gold source; not mining)."""

    k: AtLeastOne = 4
    """nearest neighbours the margin compares a candidate pair with (LASER: 4)"""
    margin: Literal["ratio", "distance", "absolute"] = "ratio"
    """score of a candidate pair: ``ratio`` (LASER's ratio margin), ``distance`` (margin as a difference) or
    ``absolute`` (plain cosine)"""
    retrieval: Literal["max", "fwd", "bwd", "intersect"] = "max"
    """how candidate pairs are chosen: ``max`` (LASER's 1:1 "max" strategy), ``fwd`` (each source sentence's best
    target), ``bwd`` (each target's best source) or ``intersect`` (pairs both directions agree on)"""
    tune_split: str = "sample"
    """``held_out`` rows: the split whose gold pairs tune the threshold"""
    test_split: str = "training"
    """``held_out`` rows: the split the tuned threshold is applied to and scored on (when it has gold pairs)"""
    cosine: bool = True
    """add the ``oracle_cosine`` rows: mining with plain cosine instead of the margin, as VMSST also reports"""
    mteb: bool = True
    """add the ``mteb`` rows: mteb's retrieval-style BUCC (the top-1 target of each gold source; not mining),
    exported as mteb's BUCC"""


@evaluation_task(settings=BuccSettings, order=20, description=(
    "BUCC 2018 bitext mining F1 with LASER's margin, oracle and held-out thresholds (``eval_bucc``)"))
class Bucc(Task):
    """Reads ``eval_bucc`` (``pair``, ``split``, ``lang``, ``id``, ``text``) and ``eval_bucc_gold``; a split
    without gold (BUCC's hidden test split) is only a held-out target."""

    name = "bucc"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = columns(tables.get("eval_bucc"), "pair", "split", "lang", "id", "text")
        gold = columns(tables.get("eval_bucc_gold"), "pair", "split", "src_id", "tgt_id")
        self.gold: dict[tuple[str, str], list[tuple[str, str]]] = {}
        if gold:
            for p, s, a, b in zip(gold["pair"], gold["split"], gold["src_id"], gold["tgt_id"], strict=True):
                self.gold.setdefault((p, s), []).append((a, b))
        self.groups = groups(self.cols, "pair", "split", "lang") if self.cols else {}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from pick(self.cols, rows, "text")

    def _split(self, vec: Vectors, pair: str, split: str) -> Any:
        from models.evaluation.bucc import BuccSplit

        src_lang, tgt_lang = pair.split("-")
        src_rows, tgt_rows = self.groups[(pair, split, src_lang)], self.groups[(pair, split, tgt_lang)]
        src_texts, tgt_texts = pick(self.cols, src_rows, "text"), pick(self.cols, tgt_rows, "text")
        return BuccSplit(pick(self.cols, src_rows, "id"), src_texts, vec(src_texts),
                         pick(self.cols, tgt_rows, "id"), tgt_texts, vec(tgt_texts), self.gold.get((pair, split)))

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.bucc import bucc_mteb, evaluate_bucc

        s = self.settings
        device = torch_device()
        for pair in sorted({p for p, _, _ in self.groups}):
            splits = sorted({sp for p, sp, _ in self.groups if p == pair})
            for split in splits:
                data = self._split(vec, pair, split)
                if data.gold is None:
                    log.info("bucc %s/%s: no gold (hidden test split), only usable as a held-out target", pair, split)
                    continue
                held = s.test_split if split == s.tune_split and s.test_split in splits else None
                test = self._split(vec, pair, held) if held else None
                test = test if test is not None and test.gold is not None else None
                res = evaluate_bucc(data, test, k=s.k, margin=s.margin, retrieval=s.retrieval, device=device)
                n = len(data.gold)
                out.add("bucc", "oracle", f"{pair}/{split}", pair, metrics(res["oracle"]), n)
                if "held_out" in res and test is not None:
                    out.add("bucc", "held_out", f"{pair}/{held}", pair, metrics(res["held_out"]),
                            len(test.gold or ()))
                if s.cosine:
                    cos = evaluate_bucc(data, None, k=s.k, margin="absolute", retrieval=s.retrieval, device=device)
                    out.add("bucc", "oracle_cosine", f"{pair}/{split}", pair, metrics(cos["oracle"]), n)
                if s.mteb:
                    src_pos = {x: i for i, x in enumerate(data.src_ids)}
                    tgt_pos = {x: i for i, x in enumerate(data.tgt_ids)}
                    rows = [(src_pos[a], tgt_pos[b]) for a, b in data.gold]
                    out.add("bucc", "mteb", f"{pair}/{split}", pair,
                            metrics(bucc_mteb(data.src_emb, data.tgt_emb, rows)), n)
