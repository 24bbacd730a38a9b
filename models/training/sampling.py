"""Seeded batch plans over a corpus: each batch is a pure function of (seed, step), so a resumed run draws exactly
the batches it would have drawn, and any process of a distributed run can compute the global batch.

Epoch e is planned with ``numpy.random.default_rng([seed, e])``:

1. items are split into blocks (one block, or one per ``block`` key, e.g. a language pair: the soft-label paper's
   single-language-pair batches);
2. each block is permuted; a keyed block is padded to a multiple of the batch size with random duplicates from the
   same block (IMASCL's ``AMESampler``), an unkeyed corpus drops its last incomplete batch (a new permutation next
   epoch covers it);
3. length bucketing: inside windows of ``bucket`` batches the items are sorted by length (stable), so a batch holds
   sentences of similar length and pads little;
4. the epoch's batches are shuffled.

Batch t is batch ``t mod n`` of epoch ``t div n``. Meaning-group safety (no translation of an anchor as a plain
negative) is the objectives' job: they receive meaning ids and mask same-meaning candidates.
"""

from __future__ import annotations

import numpy as np


class BatchPlan:
    """Item indices of every batch of an endless, epoch-wise seeded schedule."""

    def __init__(self, n_items: int, batch_size: int, seed: int, *, blocks: np.ndarray | None = None,
                 lengths: np.ndarray | None = None, bucket: int = 64, what: str = "corpus") -> None:
        if batch_size < 1:
            raise ValueError(f"{what}: batch_size must be ≥ 1, got {batch_size}")
        if blocks is None and n_items < batch_size:
            raise ValueError(f"{what}: {n_items} training items, fewer than batch_size {batch_size}; lower the "
                             "batch size or add data")
        if blocks is not None and len(blocks) != n_items:
            raise ValueError(f"{what}: {len(blocks)} block keys for {n_items} items")
        if lengths is not None and len(lengths) != n_items:
            raise ValueError(f"{what}: {len(lengths)} lengths for {n_items} items")
        self.n, self.batch_size, self.seed = n_items, batch_size, seed
        self.blocks, self.lengths, self.bucket = blocks, lengths, bucket
        self._epoch: int | None = None
        self._batches: list[np.ndarray] = []
        self.per_epoch = len(self._plan(0))

    def batch(self, step: int) -> np.ndarray:
        """The item indices of batch ``step`` (0-based, across epochs)."""
        epoch, i = divmod(step, self.per_epoch)
        if epoch != self._epoch:
            self._batches, self._epoch = self._plan(epoch), epoch
        return self._batches[i]

    def _plan(self, epoch: int) -> list[np.ndarray]:
        rng = np.random.default_rng([self.seed, epoch])
        b = self.batch_size
        if self.blocks is None:
            members = [rng.permutation(self.n)]
            members[0] = members[0][: len(members[0]) // b * b]
        else:
            members = []
            for key in np.unique(self.blocks):
                idx = rng.permutation(np.flatnonzero(self.blocks == key))
                short = -len(idx) % b
                if short:
                    idx = np.concatenate([idx, rng.choice(idx, size=short, replace=True)])
                members.append(idx)
        batches: list[np.ndarray] = []
        for idx in members:
            if self.lengths is not None:
                window = self.bucket * b
                idx = np.concatenate([part[np.argsort(self.lengths[part], kind="stable")]
                                      for part in np.split(idx, range(window, len(idx), window))])
            batches += [idx[i:i + b] for i in range(0, len(idx), b)]
        return [batches[i] for i in rng.permutation(len(batches))]


def step_rng(seed: int, stream: int, step: int, salt: str = "") -> np.random.Generator:
    """The generator of per-step random choices (which group members, which anchor) of objective ``stream``;
    ``salt`` names an independent generator of the same step (e.g. a baseline's extra draws, kept out of the
    stream the compared method draws from)."""
    extra = [int.from_bytes(salt.encode("utf-8"), "little")] if salt else []
    return np.random.default_rng([seed, 1_000_003 + stream, step, *extra])
