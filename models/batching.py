"""Translation groups from corpus tables, and seeded in-batch sampling of positive pairs.

A group is a set of sentences with the same meaning: one XNLI N-way group (all its languages) or one bitext pair.
Each step draws B distinct groups and, from each, two members in different languages (anchor, positive); the other
groups' members are the in-batch negatives. Drawing distinct groups guarantees no same-meaning negative in a batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import torch


def load_groups(tables: Mapping[str, Path]) -> list[list[str]]:
    """Groups of ≥ 2 distinct texts from ``xnli_groups`` and/or ``bitext_pairs`` artifacts, in a fixed order."""
    groups: list[list[str]] = []
    if "xnli_groups" in tables:
        t = ds.dataset(str(tables["xnli_groups"]), format="parquet", partitioning="hive").to_table(
            columns=["group_id", "lang", "text"])
        t = t.sort_by([("group_id", "ascending"), ("lang", "ascending")])
        ids, texts = t.column("group_id").to_pylist(), t.column("text").to_pylist()
        current, members = None, []
        for gid, text in zip(ids, texts, strict=True):
            if gid != current:
                if len(set(members)) >= 2:
                    groups.append(list(dict.fromkeys(members)))
                current, members = gid, []
            members.append(text)
        if len(set(members)) >= 2:
            groups.append(list(dict.fromkeys(members)))
    if "bitext_pairs" in tables:
        t = ds.dataset(str(tables["bitext_pairs"]), format="parquet", partitioning="hive").to_table(
            columns=["pair_id", "pivot_text", "text"])
        t = t.take(pc.sort_indices(t, [("pair_id", "ascending")]))
        for a, b in zip(t.column("pivot_text").to_pylist(), t.column("text").to_pylist(), strict=True):
            if a != b:
                groups.append([a, b])
    return groups


class PairSampler:
    """Seeded sampler of (anchors, positives) batches over groups; reproducible for a seed."""

    def __init__(self, groups: list[list[str]], batch_size: int, seed: int) -> None:
        if len(groups) < 2:
            raise ValueError(f"need at least 2 translation groups to contrast, got {len(groups)}")
        self.groups = groups
        self.batch_size = min(batch_size, len(groups))
        self.gen = torch.Generator().manual_seed(seed)

    def sample(self) -> tuple[list[str], list[str]]:
        idx = torch.randperm(len(self.groups), generator=self.gen)[: self.batch_size].tolist()
        anchors, positives = [], []
        for i in idx:
            g = self.groups[i]
            a, b = torch.randperm(len(g), generator=self.gen)[:2].tolist()
            anchors.append(g[a])
            positives.append(g[b])
        return anchors, positives
