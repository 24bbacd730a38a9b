"""The training corpora, read straight from their Parquet artifacts with pyarrow (no pipeline code needed).

Each reader checks that the table exists, has the columns the objective needs and is not empty, and raises a
``CorpusError`` naming the table, its path and what was expected. Rows come back in a fixed order (sorted by their
ids), so a seed fully determines the batches.

- ``xnli_groups`` → ``Groups``: N-way translation groups (``group_id``, ``lang``, ``text``, ``negative_group_id``).
- ``bitext_pairs`` / ``xnli_single_pairs`` → ``Pairs``: translation pairs with meaning ids (pairs sharing a pivot
  sentence, or coming from one XNLI group, have the same meaning id).
- ``nli_triples`` → ``Triples`` (sent0, sent1, hard_neg) of one strategy.
- ``hard_negatives`` + ``entity_vectors`` → ``EntityPairs`` (EASE).
- any of them → ``Sentences`` (mSimCSE unsupervised).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    import pyarrow.compute as pc

log = logging.getLogger("polysent.models.corpus_tables")


class CorpusError(ValueError):
    """A training corpus that is missing, empty or lacks a column; the message names the table and path."""


def read_table(name: str, path: Path, columns: Sequence[str], *, optional: Sequence[str] = (),
               filter: pc.Expression | None = None) -> pa.Table:
    """``columns`` (+ those of ``optional`` that exist) of a Parquet file or hive-partitioned folder."""
    import pyarrow.dataset as ds  # here, not at import: it loads pandas (~0.2 s), and reading a config imports this

    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{name}: {path} does not exist")
    try:
        dataset = ds.dataset(str(path), format="parquet", partitioning="hive")
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorpusError(f"{name}: {path} is not a readable Parquet table ({exc})") from None
    have = set(dataset.schema.names)
    missing = [c for c in columns if c not in have]
    if missing:
        raise CorpusError(f"{name}: {path} lacks column(s) {missing}; it has {sorted(have)}")
    table = dataset.to_table(columns=[*columns, *(c for c in optional if c in have)], filter=filter)
    if table.num_rows == 0:
        what = f" matching {filter}" if filter is not None else ""
        raise CorpusError(f"{name}: {path} has no rows{what}; an empty corpus cannot be trained on")
    return table


def _strings(table: pa.Table, column: str) -> list[str]:
    return table.column(column).cast(pa.string()).to_pylist()


def meaning_ids(keys: Sequence[str]) -> np.ndarray:
    """Dense int64 ids, equal for equal keys, numbered in order of first appearance."""
    index: dict[str, int] = {}
    return np.fromiter((index.setdefault(k, len(index)) for k in keys), dtype=np.int64, count=len(keys))


# ---------------------------------------------------------------------------------------------- translation groups
@dataclass
class Groups:
    """N-way translation groups: ``members[g]`` = [(lang, text), …] sorted by language; ``negative[g]`` = index of
    the group holding the contradiction hypothesis (−1 when none)."""

    ids: list[str]
    members: list[list[tuple[str, str]]]
    negative: np.ndarray

    def __len__(self) -> int:
        return len(self.members)


def load_groups(path: Path, languages: Sequence[str] = (), name: str = "xnli_groups") -> Groups:
    """Groups of ≥ 2 distinct texts in ``languages`` (all when empty), ordered by group id."""
    import pyarrow.compute as pc

    t = read_table(name, path, ["group_id", "lang", "text"], optional=["negative_group_id"])
    if languages:
        t = t.filter(pc.is_in(t.column("lang").cast(pa.string()), pa.array(list(languages))))
        if t.num_rows == 0:
            raise CorpusError(f"{name}: {path} has no rows in languages {list(languages)}")
    t = t.sort_by([("group_id", "ascending"), ("lang", "ascending")])
    gids, langs, texts = _strings(t, "group_id"), _strings(t, "lang"), _strings(t, "text")
    negs = _strings(t, "negative_group_id") if "negative_group_id" in t.schema.names else [None] * len(gids)
    ids: list[str] = []
    members: list[list[tuple[str, str]]] = []
    neg_ids: list[str | None] = []
    dropped = 0
    i = 0
    while i < len(gids):
        j = i
        while j < len(gids) and gids[j] == gids[i]:
            j += 1
        seen: dict[str, tuple[str, str]] = {}  # first text per language, texts distinct within the group
        distinct: set[str] = set()
        for k in range(i, j):
            if texts[k] and texts[k] not in distinct and langs[k] not in seen:
                seen[langs[k]] = (langs[k], texts[k])
                distinct.add(texts[k])
        if len(seen) >= 2:
            ids.append(gids[i])
            members.append(sorted(seen.values()))
            neg_ids.append(negs[i])
        else:
            dropped += 1
        i = j
    if len(members) < 2:
        raise CorpusError(f"{name}: {path} has {len(members)} translation group(s) with ≥ 2 languages; need ≥ 2")
    where = {g: n for n, g in enumerate(ids)}
    negative = np.array([where.get(n, -1) if n else -1 for n in neg_ids], dtype=np.int64)
    log.info("%s: %d groups (%d dropped with < 2 distinct members), %d with a negative group", name, len(members),
             dropped, int((negative >= 0).sum()))
    return Groups(ids, members, negative)


# ---------------------------------------------------------------------------------------------- translation pairs
@dataclass
class Pairs:
    """Translation pairs (a ↔ b) with languages and meaning ids; ``negative`` optionally holds a hard-negative text
    for each row (None when the corpus has none)."""

    a: list[str]
    b: list[str]
    a_lang: list[str]
    b_lang: list[str]
    meaning: np.ndarray
    negative: list[str | None] | None = None

    def __len__(self) -> int:
        return len(self.a)

    def language_pairs(self) -> np.ndarray:
        """One int id per (a_lang, b_lang) combination, for language-pair-homogeneous batches."""
        return meaning_ids([f"{x}\t{y}" for x, y in zip(self.a_lang, self.b_lang, strict=True)])


def load_bitext_pairs(path: Path, name: str = "bitext_pairs") -> Pairs:
    """``bitext_pairs``: pivot side as a, the other language as b; pairs sharing a pivot text share a meaning id."""
    t = read_table(name, path, ["pair_id", "pivot_lang", "pivot_text", "text", "lang"])
    t = t.sort_by([("lang", "ascending"), ("pair_id", "ascending")])
    a, b = _strings(t, "pivot_text"), _strings(t, "text")
    keep = [i for i in range(len(a)) if a[i] and b[i] and a[i] != b[i]]
    if not keep:
        raise CorpusError(f"{name}: {path} has no pair with two distinct non-empty texts")
    la, lb = _strings(t, "pivot_lang"), _strings(t, "lang")
    a, b, la, lb = ([col[i] for i in keep] for col in (a, b, la, lb))
    return Pairs(a, b, la, lb, meaning_ids(a))


def load_single_pairs(groups_path: Path, pairs_path: Path, name: str = "xnli_single_pairs") -> Pairs:
    """MPCL's "+Single" corpus: each listed (group, lang_a, lang_b) as a pair of that group's texts."""
    t = read_table(name, pairs_path, ["group_id", "lang_a", "lang_b"], optional=["pair_index"])
    groups = load_groups(groups_path)
    text = {(g, lang): s for g, ms in zip(groups.ids, groups.members, strict=True) for lang, s in ms}
    a, b, la, lb, gid, missing = [], [], [], [], [], 0
    for g, x, y in zip(_strings(t, "group_id"), _strings(t, "lang_a"), _strings(t, "lang_b"), strict=True):
        if (g, x) in text and (g, y) in text:
            a.append(text[g, x])
            b.append(text[g, y])
            la.append(x)
            lb.append(y)
            gid.append(g)
        else:
            missing += 1
    if not a:
        raise CorpusError(f"{name}: {pairs_path}: none of its pairs has both texts in {groups_path}")
    if missing:
        log.info("%s: %d pairs skipped (a member not in xnli_groups)", name, missing)
    return Pairs(a, b, la, lb, meaning_ids(gid))


def pairs_from_groups(groups: Groups) -> Pairs:
    """Every group as its first two members (a fixed pairing; the contrastive objective redraws members per step)."""
    a = [m[0][1] for m in groups.members]
    b = [m[1][1] for m in groups.members]
    return Pairs(a, b, [m[0][0] for m in groups.members], [m[1][0] for m in groups.members],
                 np.arange(len(groups), dtype=np.int64))


# ---------------------------------------------------------------------------------------------- NLI triples
@dataclass
class Triples:
    sent0: list[str]
    sent1: list[str]
    hard_neg: list[str]
    meaning: np.ndarray

    def __len__(self) -> int:
        return len(self.sent0)


def load_triples(path: Path, strategy: str, name: str = "nli_triples") -> Triples:
    """``nli_triples`` rows of one strategy (``english`` or ``cross_lingual``)."""
    import pyarrow.compute as pc

    t = read_table(name, path, ["triple_id", "meaning_id", "sent0", "sent1", "hard_neg", "strategy"],
                   filter=pc.field("strategy") == strategy)
    t = t.sort_by([("triple_id", "ascending")])
    return Triples(_strings(t, "sent0"), _strings(t, "sent1"), _strings(t, "hard_neg"),
                   meaning_ids(_strings(t, "meaning_id")))


# ---------------------------------------------------------------------------------------------- EASE
@dataclass
class EntityPairs:
    """EASE examples: sentence ``text`` linking entity row ``entity[i]`` (1-based into ``vectors``; 0 = [PAD]) with
    type-based hard negative ``negative[i]`` (0 = none). ``vectors[k-1]`` is entity k's Wikipedia2Vec vector (NaN
    row when it has none)."""

    text: list[str]
    entity: np.ndarray
    negative: np.ndarray
    entities: list[str]
    vectors: np.ndarray

    def __len__(self) -> int:
        return len(self.text)


def load_entity_pairs(path: Path, vectors_path: Path, *, require_negative: bool,
                      name: str = "hard_negatives") -> EntityPairs:
    """``hard_negatives`` rows with their entity vocabulary (positives ∪ negatives, sorted) and vectors."""
    t = read_table(name, path, ["page_id", "sent_id", "link_no", "text", "entity", "negative", "lang"])
    t = t.sort_by([("lang", "ascending"), ("page_id", "ascending"), ("sent_id", "ascending"),
                   ("link_no", "ascending")])
    text, ent, neg = _strings(t, "text"), _strings(t, "entity"), _strings(t, "negative")
    if require_negative:
        keep = [i for i, n in enumerate(neg) if n]
        if not keep:
            raise CorpusError(f"{name}: {path}: no row has a hard negative (set hard_negatives: false)")
        if len(keep) < len(text):
            log.info("%s: %d of %d rows dropped without a hard negative", name, len(text) - len(keep), len(text))
        text, ent, neg = [text[i] for i in keep], [ent[i] for i in keep], [neg[i] for i in keep]
    vocab = sorted({*ent, *(n for n in neg if n)})
    row = {e: i + 1 for i, e in enumerate(vocab)}
    v = read_table("entity_vectors", vectors_path, ["entity", "vector"])
    found = dict(zip(_strings(v, "entity"), v.column("vector").to_pylist(), strict=True))
    dims = {len(x) for x in found.values() if x is not None}
    if len(dims) != 1:
        raise CorpusError(f"entity_vectors: {vectors_path}: vectors must share one dimension, found {sorted(dims)}")
    dim = dims.pop()
    vectors = np.full((len(vocab), dim), np.nan, dtype=np.float32)
    for i, e in enumerate(vocab):
        if found.get(e) is not None:
            vectors[i] = found[e]
    log.info("%s: %d examples, %d entities (%d with a Wikipedia2Vec vector of dim %d)", name, len(text), len(vocab),
             int((~np.isnan(vectors[:, 0])).sum()), dim)
    return EntityPairs(text, np.array([row[e] for e in ent], dtype=np.int64),
                       np.array([row.get(n, 0) if n else 0 for n in neg], dtype=np.int64), vocab, vectors)


# ---------------------------------------------------------------------------------------------- sentences
@dataclass
class Sentences:
    text: list[str]

    def __len__(self) -> int:
        return len(self.text)


def load_sentences(table: str, path: Path, language: str | None) -> Sentences:
    """Distinct sentences (first-appearance order) of a corpus table, in ``language`` when given."""
    import pyarrow.compute as pc

    if table == "bitext_pairs":
        t = read_table(table, path, ["pair_id", "pivot_lang", "pivot_text", "text", "lang"])
        t = t.sort_by([("lang", "ascending"), ("pair_id", "ascending")])
        texts = []
        for pivot_lang, pivot, lang, text in zip(_strings(t, "pivot_lang"), _strings(t, "pivot_text"),
                                                 _strings(t, "lang"), _strings(t, "text"), strict=True):
            texts += [x for x_lang, x in ((pivot_lang, pivot), (lang, text)) if language in (None, x_lang)]
    else:
        keys = {"hard_negatives": ["lang", "page_id", "sent_id"], "xnli_groups": ["group_id", "lang"]}[table]
        t = read_table(table, path, ["text", *keys])
        if language is not None:
            t = t.filter(pc.equal(t.column("lang").cast(pa.string()), language))
        t = t.sort_by([(k, "ascending") for k in keys])
        texts = _strings(t, "text")
    texts = list(dict.fromkeys(x for x in texts if x))
    if not texts:
        raise CorpusError(f"{table}: {path} has no sentence in language {language!r}")
    return Sentences(texts)
