"""The smallest encoder mteb's own tasks accept: it returns a precomputed row per text, so parity tests run mteb's
evaluators on exactly the embeddings polysent scores (shared by tests/test_eval_scoring.py and
tests/test_pair_classification.py)."""

from __future__ import annotations

import numpy as np


class PrecomputedEncoder:
    """Precomputed rows by text (a KeyError if mteb asks for another text), cosine similarity; ``seen`` lists the texts
    mteb asked for, in order."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table
        self.seen: list[str] = []

    def encode(self, inputs, **kwargs):
        rows = []
        for batch in inputs:
            self.seen.extend(batch["text"])
            rows.extend(self.table[text] for text in batch["text"])
        return np.stack(rows)

    def similarity(self, a, b):
        from mteb.similarity_functions import cos_sim

        return cos_sim(a, b)

    def similarity_pairwise(self, a, b):
        from mteb.similarity_functions import pairwise_cos_sim

        return pairwise_cos_sim(a, b)

    @property
    def mteb_model_meta(self):
        return None
