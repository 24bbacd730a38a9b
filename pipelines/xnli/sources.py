"""Where XNLI comes from: every form a user has, told apart by ``format`` (default ``xtreme``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

XNLI_LANGUAGES = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")
LABELS = ("entailment", "neutral", "contradiction")


class XnliSource(BaseModel):
    """
    - ``xtreme``: ``dir`` holds ``{split}-{lang}.tsv`` (premise, hypothesis, label; no header) — XTREME's layout.
    - ``xnli10``: ``path`` is ``XNLI-1.0.zip``, its unpacked folder, or ``xnli.{dev,test}.tsv``: one file for all
      languages with a ``language`` column and ``pairID`` (rows aligned by pairID).
    - ``xnli_mt``: ``path`` is ``XNLI-MT-1.0.zip`` or its folder with ``multinli/multinli.train.{lang}.tsv``
      (header ``premise hypo label``, label ``contradictory``): the 392,702-row machine-translated train split.
    - ``hub``: ``hub_id`` (``facebook/xnli``, one config per language; splits train/validation/test).
    """

    model_config = ConfigDict(extra="forbid")
    format: Literal["xtreme", "xnli10", "xnli_mt", "hub"] = "xtreme"
    """the form XNLI comes in (listed above): ``xtreme``, ``xnli10``, ``xnli_mt`` (the machine-translated train split
    only) or ``hub``"""
    dir: Path | None = None
    """xtreme: the folder with ``{split}-{lang}.tsv`` files"""
    path: Path | None = None
    """xnli10: ``XNLI-1.0.zip``, its folder or an ``xnli.{dev,test}.tsv`` file; xnli_mt: ``XNLI-MT-1.0.zip`` or its
    folder"""
    hub_id: str = "facebook/xnli"
    """hub: the dataset id (one config per language; the split ``dev`` is read as ``validation``)"""

    @model_validator(mode="after")
    def _where(self) -> XnliSource:
        if self.format == "xtreme" and self.dir is None:
            raise ValueError("format xtreme needs dir: the folder with {split}-{lang}.tsv files")
        if self.format in ("xnli10", "xnli_mt") and self.path is None:
            raise ValueError(f"format {self.format} needs path: the zip file or its unpacked folder")
        return self

    def files(self, splits: list[str], languages: list[str]) -> dict[str, Path]:
        """The local files this source reads for ``splits`` × ``languages`` (they enter the cache key)."""
        if self.format == "xtreme":
            assert self.dir is not None
            return {f"xnli/{s}-{lang}.tsv": self.dir / f"{s}-{lang}.tsv" for s in splits for lang in languages}
        if self.format == "hub":
            return {}
        assert self.path is not None
        if self.path.is_file():
            return {f"xnli/{self.path.name}": self.path}
        return {f"xnli/{p.relative_to(self.path)}": p for p in sorted(self.path.rglob("*.tsv"))}
