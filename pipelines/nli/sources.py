"""English NLI files for mSimCSE's supervised strategies."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator


class NliFileSource(BaseModel):
    """
    - ``jsonl``: SNLI/MultiNLI ``*.jsonl`` (``sentence1``, ``sentence2``, ``gold_label``; ``captionID``/``promptID``).
    - ``tsv``: SNLI/MultiNLI ``*.txt``/``*.tsv`` with their header (same column names).
    - ``simcse_csv``: SimCSE's ``nli_for_simcse.csv`` (``sent0,sent1,hard_neg``): already triples.
    - ``hub``: ``hub_id`` with ``config``/``split``: pair datasets (``stanfordnlp/snli``, ``nyu-mll/multi_nli``:
      premise, hypothesis, label 0/1/2, -1 unlabelled) or triplet datasets (``sentence-transformers/all-nli``,
      config ``triplet``: anchor, positive, negative).
    """

    model_config = ConfigDict(extra="forbid")
    name: str
    """names the source: its triples' ``source`` column and the key of its row counts"""
    format: Literal["jsonl", "tsv", "simcse_csv", "hub"]
    """``jsonl``, ``tsv``, ``simcse_csv`` or ``hub`` (listed above)"""
    path: Path | None = None
    """the file (every format but hub)"""
    hub_id: str | None = None
    """hub: the dataset id"""
    config: str | None = None
    """hub: the dataset's config (``triplet`` for sentence-transformers/all-nli); null: its default"""
    split: str = "train"
    """hub: the split read"""

    @model_validator(mode="after")
    def _where(self) -> NliFileSource:
        if self.format == "hub" and not self.hub_id:
            raise ValueError("format hub needs hub_id")
        if self.format != "hub" and self.path is None:
            raise ValueError(f"format {self.format} needs path")
        return self
