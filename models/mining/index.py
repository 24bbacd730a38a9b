"""Cosine k-NN of every query row among the target rows, with faiss, in bounded memory.

The anchor is LASER ``source/mine_bitexts.py`` (``knnCPU``: ``faiss.IndexFlatIP`` over rows L2-normalised with
``faiss.normalize_L2``, the whole target in one index, ``index.search(x, k)``) and CCMatrix (Schwenk et al., ACL 2021:
compressed IVF indexes, sharded over machines, candidates merged). Three kinds of index, by faiss ``index_factory``
string, all over the inner product of L2-normalised rows (= cosine):

* ``exact`` — ``Flat``: brute force, the same neighbours as LASER;
* ``ivf`` — ``IVF{nlist},{codec}``: k-means coarse quantiser trained on a seeded sample of the target, ``nprobe``
  lists searched. Defaults: ``nlist`` = 4·√n rounded (faiss's guideline of 4–16·√n), clipped so that every list gets
  at least 39 training rows (faiss warns below that); ``nprobe`` = enough lists to scan about 4,096 vectors per query,
  at least 16 (:data:`SCAN_ROWS`; 17 of 4,000 lists at 1M rows, 105 of 348 at 13.5k); ``codec`` ``Flat`` (``SQ8``
  stores one byte per dimension: 4× less memory, recall slightly lower);
* ``hnsw`` — ``HNSW{m},{codec}``: graph index, ``m`` 32 links, ``ef_construction`` 80, ``ef_search`` 128.

The defaults were chosen on the BUCC zh-en sample with multilingual-e5-small (≤ 0.5 F1 from exact;
``tests/test_eval_retrieval.py`` checks it with all-MiniLM-L6-v2) and on the benchmark ``bench/mining_scale.py``
(recall@4 against exact neighbours on clustered synthetic 384-d data): at 1M × 1M on 2 idle cores, build included, ivf
at the default 17 probes has recall@4 0.9983 at 14.9× the speed of exact, peak RSS 1.26× the two matrices (the sweep on
the built index: 8 / 16 / 32 probes 0.996 / 0.998 / 0.9997 at 23 / 18 / 12×; 64 probes 1.000 at 5.3× in an earlier run);
sharded at 4M × 4M (four 1M shards, two single-threaded Dask workers) 0.9992 at 15.3×; hnsw at its defaults 0.918 at
9.0× (``ef_search`` 256: 0.951 at 6.6×; measured on a busy machine, where its build took 585 s and ivf's 170 s), so ivf
is the index for corpus-scale mining. Why the probes are counted in vectors scanned, not lists: real sentence embeddings
are less clustered than that synthetic data. On the BUCC zh-en sample (13.5k English targets, 348 lists)
multilingual-e5-small's recall@4 both ways is 0.874 / 0.951 / 0.988 at 32 / 64 / 128 probes, and mining F1 85.71 / 86.92
/ 87.45 against exact's 87.45 (88 probes: 87.29; 105: 87.45); a fixed 32 probes scans 9 % of the lists there but 0.8 %
at 1M. Scanning about 4,096 vectors is 17 probes at 1M and 105 at BUCC's size (F1 = exact's, with the Flat and the SQ8
codec); hnsw's defaults give exact's F1 there too. Synthetic data cannot say how many probes real embeddings need at 1M,
so every approximate mining run measures its own recall@k against exact search on a sample of its queries
(:func:`models.mining.mine.sampled_recall`) and warns below 0.95.

Memory. The target is cut into shards of ``shard_rows`` rows; each shard is one index (a normalised copy of its rows
plus the structure), searched by every query in chunks of ``query_chunk`` normalised rows, and the per-shard top-k
lists are merged into the running top-k of every query. Peak memory is one shard's index + one query chunk + the
results (n × k × 12 bytes), never the corpus: the inputs may be memory-mapped ``.npy`` files, read a chunk at a time,
and they are never modified (``faiss.normalize_L2`` only ever sees copies, pitfall D.6.7). Shards are independent, so
an executor (``concurrent.futures`` or a Dask ``Client``: anything with ``submit``) can search them in parallel, each
worker reading its slice of the shared memory-mapped files (:func:`search_shard` takes paths).

Order. Each row's neighbours are sorted by score descending, equal scores by the lower target index (the rule of
:mod:`models.evaluation.knn`); shards are merged with a stable sort in shard order. Where an approximate index returns
fewer than k neighbours (an IVF probe of near-empty lists), the missing places hold index −1 and score −inf.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from models.evaluation.knn import blocks

IndexKind = Literal["exact", "ivf", "hnsw"]
KINDS: tuple[str, ...] = ("exact", "ivf", "hnsw")
#: rows of a query chunk: a normalised copy of 16,384 × 384 float32 is 24 MiB
QUERY_CHUNK = 16384
#: rows of a target shard: 1M × 384 float32 is 1.5 GiB (flat index) or 0.4 GiB (SQ8)
SHARD_ROWS = 1_000_000

#: ivf's default probes scan about this many vectors per query (and at least MIN_PROBES lists)
SCAN_ROWS = 4096
MIN_PROBES = 16

ArrayRef = np.ndarray | str | Path  # an array, or the path of a .npy file read memory-mapped


class MissingFaiss(ImportError):
    """faiss is not installed (the extra ``mining``)."""


def faiss_module() -> Any:
    """``import faiss``, or an error saying which extra installs it."""
    try:
        import faiss
    except ImportError as exc:
        raise MissingFaiss("mining needs faiss: pip install 'polysent[mining]' (faiss-cpu; faiss-gpu works the "
                           f"same) — {exc}") from None
    return faiss


@dataclass(frozen=True)
class IndexSettings:
    """Which faiss index searches each target shard, and its parameters (module docstring: the defaults and why)."""

    kind: IndexKind = "exact"
    """``exact`` (faiss ``Flat``: brute force, LASER's neighbours), ``ivf`` (``IVF{nlist},{codec}``: the index for
    corpus-scale mining) or ``hnsw`` (``HNSW{m},{codec}``); docs/mining.md#scale"""
    nlist: int | None = None
    """ivf: inverted lists per shard (null: 4·√rows rounded); always capped so that every list has at least 39 of
    the shard's rows to train on"""
    nprobe: int | None = None
    """ivf: lists searched per query (null: enough lists to scan about 4,096 vectors, at least 16; at most the
    shard's lists)"""
    train_rows: int | None = None
    """ivf: rows of the shard the coarse quantiser is trained on, a seeded sample (null: 64 per list; at most the
    shard)"""
    m: int = 32
    """hnsw: links per node"""
    ef_construction: int = 80
    """hnsw: the candidate list while the graph is built (faiss ``efConstruction``)"""
    ef_search: int = 128
    """hnsw: the candidate list of a search (faiss ``efSearch``; raised to k where k is larger)"""
    codec: Literal["Flat", "SQ8"] = "Flat"
    """ivf / hnsw: how vectors are stored: ``Flat`` float32, or ``SQ8`` one byte per dimension (4× less memory,
    recall slightly lower)"""
    shard_rows: int = SHARD_ROWS
    """target rows per shard: each shard is one index, searched by every query and merged into the running top-k
    (peak memory is one shard's index, not the corpus)"""
    query_chunk: int = QUERY_CHUNK
    """query rows normalised and searched at once (and target rows added to an index at once)"""
    seed: int = 0
    """ivf: the training sample and the k-means of the coarse quantiser"""
    threads: int | None = None
    """faiss OpenMP threads (null: faiss's default, every core)"""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"index: expected one of {', '.join(KINDS)}, got {self.kind!r}")
        for name in ("m", "ef_construction", "ef_search", "shard_rows", "query_chunk"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"index {name}: expected a positive integer, got {getattr(self, name)!r}")
        for name in ("nlist", "nprobe", "train_rows", "threads"):
            value = getattr(self, name)
            if value is not None and int(value) < 1:
                raise ValueError(f"index {name}: expected a positive integer, got {value!r}")
        if self.codec not in ("Flat", "SQ8"):
            raise ValueError(f"index codec: expected Flat or SQ8, got {self.codec!r}")

    def lists(self, rows: int) -> int:
        """ivf: the number of inverted lists for a shard of ``rows`` rows."""
        cap = max(1, rows // 39)
        return max(1, min(self.nlist if self.nlist is not None else round(4 * math.sqrt(rows)), cap))

    def probes(self, rows: int) -> int:
        """ivf: the lists searched per query in a shard of ``rows`` rows."""
        lists = self.lists(rows)
        if self.nprobe is not None:
            return min(self.nprobe, lists)
        return min(lists, max(MIN_PROBES, math.ceil(SCAN_ROWS * lists / max(rows, 1))))

    def factory(self, rows: int) -> str:
        """faiss ``index_factory`` string for a shard of ``rows`` rows."""
        if self.kind == "exact":
            return "Flat"
        if self.kind == "ivf":
            return f"IVF{self.lists(rows)},{self.codec}"
        return f"HNSW{self.m},{self.codec}"


def load_rows(ref: ArrayRef) -> np.ndarray:
    """An array as given, or a ``.npy`` file memory-mapped read-only."""
    if isinstance(ref, str | Path):
        return np.load(ref, mmap_mode="r")
    return ref


def normalised(rows: np.ndarray) -> np.ndarray:
    """A C-contiguous float32 copy of ``rows``, each row L2-normalised (zero rows stay zero); the input is untouched."""
    out = np.array(rows, dtype=np.float32, order="C", copy=True)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def build_index(targets: np.ndarray, settings: IndexSettings, *,
                progress: Callable[[int], None] | None = None) -> Any:
    """A faiss index over the normalised rows of ``targets`` (one shard), trained where the kind needs it."""
    faiss = faiss_module()
    if settings.threads is not None:
        faiss.omp_set_num_threads(settings.threads)
    n, dim = targets.shape
    index = faiss.index_factory(dim, settings.factory(n), faiss.METRIC_INNER_PRODUCT)
    if settings.kind == "hnsw":
        index.hnsw.efConstruction = settings.ef_construction
    if not index.is_trained:
        lists = settings.lists(n)
        want = settings.train_rows if settings.train_rows is not None else 64 * lists
        rng = np.random.default_rng(settings.seed)
        sample = np.sort(rng.choice(n, size=min(n, want), replace=False))
        train = np.concatenate([normalised(targets[sample[lo:hi]]) for lo, hi in blocks(len(sample), 65536)])
        if settings.kind == "ivf":
            index.cp.seed = settings.seed  # the k-means of the coarse quantiser (faiss.ClusteringParameters)
            index.cp.max_points_per_centroid = max(256, math.ceil(len(train) / lists))
        index.train(train)
        del train
    for lo, hi in blocks(n, settings.query_chunk):
        index.add(normalised(targets[lo:hi]))
        if progress is not None:
            progress(hi - lo)
    return index


def _sorted_rows(scores: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row by (−score, index); missing results (faiss id −1) last with score −inf."""
    scores = np.where(ids < 0, -np.inf, scores).astype(np.float32)
    order = np.lexsort((np.where(ids < 0, np.iinfo(np.int64).max, ids), -scores), axis=-1)
    return np.take_along_axis(scores, order, 1), np.take_along_axis(ids, order, 1)


def search_shard(queries: ArrayRef, targets: ArrayRef, lo: int, hi: int, k: int, settings: IndexSettings,
                 progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of every query row among target rows ``lo:hi`` (global indices): (scores float32 [nq, k'], indices
    int64 [nq, k'], k' = min(k, hi − lo)). Takes paths so that a worker process reads its slice of shared files;
    ``progress(rows)`` after each block of queries (here, not in a worker)."""
    q_rows, t_rows = load_rows(queries), load_rows(targets)
    index = build_index(t_rows[lo:hi], settings)
    kk = min(k, hi - lo)
    if settings.kind == "ivf":
        index.nprobe = settings.probes(hi - lo)
    elif settings.kind == "hnsw":
        index.hnsw.efSearch = max(settings.ef_search, kk)
    scores = np.empty((len(q_rows), kk), dtype=np.float32)
    ids = np.empty((len(q_rows), kk), dtype=np.int64)
    for qlo, qhi in blocks(len(q_rows), settings.query_chunk):
        s, i = index.search(normalised(q_rows[qlo:qhi]), kk)
        i = np.where(i >= 0, i + lo, -1)
        scores[qlo:qhi], ids[qlo:qhi] = _sorted_rows(s, i)
        if progress is not None:
            progress(qhi - qlo)
    return scores, ids


def merge_topk(current: tuple[np.ndarray, np.ndarray] | None, shard: tuple[np.ndarray, np.ndarray],
               k: int) -> tuple[np.ndarray, np.ndarray]:
    """The running top-k merged with a later shard's (stable: on equal scores the earlier shard's lower indices
    stay first)."""
    if current is None:
        return shard
    cat_s = np.concatenate([current[0], shard[0]], axis=1)
    cat_i = np.concatenate([current[1], shard[1]], axis=1)
    order = np.argsort(-cat_s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(cat_s, order, 1), np.take_along_axis(cat_i, order, 1)


def knn(queries: ArrayRef, targets: ArrayRef, k: int, settings: IndexSettings = IndexSettings(), *,
        executor: Any = None, progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Cosine top-k of every query among the targets: (scores float32 [nq, k'], indices int64 [nq, k']),
    k' = min(k, number of targets). ``executor``: anything with ``submit(fn, *args)`` returning a future (a Dask
    ``Client``, a ``ProcessPoolExecutor``) searches the shards in parallel — pass paths then, not arrays; without one
    the shards run here in turn. ``progress(rows)`` is called with the query rows done: per block of queries when
    the shards run here, per shard on an executor."""
    if not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    q_rows, t_rows = load_rows(queries), load_rows(targets)
    if q_rows.ndim != 2 or t_rows.ndim != 2 or q_rows.shape[1] != t_rows.shape[1]:
        raise ValueError(f"queries {q_rows.shape} and targets {t_rows.shape} must be matrices of the same dimension")
    if len(t_rows) == 0:
        raise ValueError("targets are empty: nothing to search")
    kk = min(int(k), len(t_rows))
    shards = list(blocks(len(t_rows), settings.shard_rows))
    if executor is None:
        results = (search_shard(queries, targets, lo, hi, kk, settings, progress) for lo, hi in shards)
    else:
        futures = [executor.submit(search_shard, queries, targets, lo, hi, kk, settings) for lo, hi in shards]
        results = (f.result() for f in futures)
    merged = None
    for shard in results:  # in shard order, so the merge is stable by index
        merged = merge_topk(merged, shard, kk)
        if progress is not None and executor is not None:
            progress(len(q_rows))
    assert merged is not None
    return merged
