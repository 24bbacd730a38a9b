"""A frozen teacher encoder for soft-label distillation (IMASCL, methods §3.1).

The teacher never trains: its embeddings are L2-normalised float32 vectors (``normalize=False``: as the model outputs
them, for a loss that regresses raw embeddings) computed under ``inference_mode`` either
per batch or, with ``cache``, once for every distinct text of the corpus (token-length-sorted batches, the fast path of
``SentenceEncoder.encode``) and then looked up. ``prefix`` is prepended to teacher inputs only (the public code gives
its E5 teacher ``"query: "`` and the student nothing); it replaces the teacher model's own default prompt (a converted
multilingual-e5 folder records ``"query: "`` as its default, so ``prefix`` ``"query: "`` is not doubled), and an empty
``prefix`` leaves that default in place.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import numpy as np
import torch

from models.encoder import SentenceEncoder

log = logging.getLogger("polysent.models.teacher")


class Teacher:
    def __init__(self, encoder: SentenceEncoder, *, prefix: str = "", name: str = "teacher",
                 batch_size: int = 128, normalize: bool = True) -> None:
        self.encoder = encoder.eval()
        for p in self.encoder.parameters():
            p.requires_grad_(False)
        self.prefix, self.name, self.batch_size = prefix, name, batch_size
        self.normalize = normalize
        self._index: dict[str, int] | None = None
        self._table: torch.Tensor | None = None

    @property
    def dim(self) -> int:
        return self.encoder.dim

    def cache(self, texts: Iterable[str]) -> None:
        """Encode every distinct text once; later ``embed`` calls are lookups."""
        distinct = list(dict.fromkeys(texts))
        vecs = self.encoder.encode(distinct, batch_size=self.batch_size, prompt=self.prefix or None,
                                   normalize=self.normalize)
        self._index = {t: i for i, t in enumerate(distinct)}
        self._table = torch.from_numpy(np.ascontiguousarray(vecs))
        log.info("%s: cached %d distinct texts (dim %d)", self.name, len(distinct), vecs.shape[1])

    @torch.inference_mode()
    def embed(self, texts: Sequence[str], device: torch.device | str = "cpu") -> torch.Tensor:
        """Teacher embeddings of ``texts`` (len × dim, float32; normalised unless ``normalize`` is off) on
        ``device``."""
        if self._index is not None and self._table is not None:
            try:
                rows = torch.tensor([self._index[t] for t in texts], dtype=torch.long)
            except KeyError as exc:
                raise KeyError(f"{self.name}: text not in the teacher cache: {exc.args[0][:80]!r}") from None
            return self._table[rows].to(device)
        vecs = self.encoder.encode(list(texts), batch_size=self.batch_size, prompt=self.prefix or None,
                                   normalize=self.normalize)
        return torch.from_numpy(vecs).to(device)
