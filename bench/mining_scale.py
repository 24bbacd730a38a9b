"""Benchmark of k-NN mining at scale (``models/mining/index.py``: ``knn``): exact vs approximate vs LASER on faiss.

**Data** (synthetic, seeded, float32, ``--dim`` 384): ``--n`` source and ``--n`` target rows, written in blocks of
65,536 rows straight into ``.npy`` memmaps under ``--scratch`` (default ``<data root>/bench/mining_scale/``), reused
when a folder with the same parameters exists. Rows are clustered like sentence embeddings, not isotropic (the worst
case of any ANN index): 64 topic directions, ``--centres`` 4,096 cluster centres (unit; a centre = topic + an
independent unit direction, so two centres of one topic have cosine ≈ 0.5), cluster sizes log-normal (σ 1), a common
offset 0.5·m (anisotropy: unrelated rows are not orthogonal), and a row = 0.5·m + centre + ``--spread``·g/√dim with
g standard normal. A fraction ``--planted`` (0.2) of target rows are "translations": a source row plus noise scaled
so that the pair's expected cosine is ``--trans-cos`` (0.88). At the defaults the expected cosines are: unrelated
rows ≈ 0.07, same topic ≈ 0.21, same cluster ≈ 0.36, translation 0.88 (measured on each run and printed:
``cosines``); a non-planted query's nearest neighbour is a same-cluster row at cosine ≈ 0.46 (printed: ``exact``).
Neighbour structure inside a cluster is isotropic noise, hard for HNSW; the clusters themselves are easy for IVF's
k-means, so IVF recall here is an optimistic estimate for real embeddings (``--spread 2`` makes clusters overlap).

**What runs**, k = 4 (LASER's margin neighbourhood), each configuration in a fresh child process (its own peak RSS,
``VmHWM``, which counts memory-mapped file pages the process touched as well as its own memory), faiss on every core:

1. ``exact`` — polysent ``knn(kind="exact")`` on ``--sample`` (10,000) seeded source queries against all targets;
   the index build (normalised copy of the targets) is timed apart, the search extrapolated linearly to all queries.
   Its neighbours are the ground truth of recall@4 = |approx top-4 ∩ exact top-4| / 4, averaged over the sample.
2. ``laser`` — the anchor, LASER ``source/mine_bitexts.py`` (``knnCPU``): both matrices loaded whole (``np.load``,
   no mmap), ``faiss.normalize_L2`` in place, ``IndexFlatIP``, ``add(y)``, ``search(x, k)`` on the same queries,
   extrapolated the same way; its peak RSS holds the whole matrices, as LASER's does.
3. ``ivf`` — ``knn(kind="ivf")`` at the defaults over ALL queries (build + search measured, nothing extrapolated),
   then an ``nprobe`` sweep on the built index over the sample (printed, per query cost and recall).
4. ``hnsw`` — ``knn(kind="hnsw")`` at the defaults: full build, search of ``--hnsw-queries`` (100,000) queries
   extrapolated linearly to all; an ``ef_search`` sweep on the sample.

Mining needs k-NN both ways; one direction (source → target) is timed and every "both directions" figure is ×2 (the
two sides are the same size and distribution). Speedup = extrapolated exact time / approximate time, both ×2.

**Sharded over Dask** (``--dask-n`` 4M): the same data at 4M × 4M (6.1 GB per side), ``knn(kind="ivf",
shard_rows=--dask-shard-rows, threads=1, executor=Client)`` on a ``distributed.LocalCluster`` of ``--dask-workers``
(2) single-threaded worker processes, given the ``.npy`` paths: each worker builds its target shard's index in full
and searches a query sample (``--dask-queries``, 100,000, a file of its own); the parent merges the shards' top-k.
Each shard reports its build and search time (``search_shard`` with ``build_index`` timed) and each worker its
VmHWM (``client.run``); the merge is timed at full scale (``merge_topk`` over shards × n × k). Extrapolated wall time
for all queries = ⌈shards / workers⌉ × (mean shard build + mean per-query search × n) + merge. Exact at 4M is
measured on ``--dask-gt`` (2,000) queries (ground truth of the Dask recall) and extrapolated.

The machine may be shared: timings on a busy 2-core machine are noisy. One line per figure is printed and appended
to the warehouse's ``bench_results`` (``mining_scale``: ``polysent_seconds`` both directions, ``anchor_seconds`` the
exact / LASER time it is compared with, ``ratio`` = polysent / anchor, ``speedup`` = anchor / polysent).

    python -m bench.mining_scale [--n 1000000] [--dask-n 4000000] [--sample 10000] [--skip-hnsw] [--skip-dask]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.results import append_results
from bench.shared_data import REPO

GIB = 1024 ** 3
K = 4
GENERATOR_VERSION = 1
BLOCK = 65536

_CHILD = """
import json, sys
from bench.mining_scale import run_child
print(json.dumps(run_child(sys.argv[1], json.loads(sys.argv[2]))))
"""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- synthetic data -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Synth:
    n: int
    dim: int = 384
    seed: int = 0
    centres: int = 4096
    topics: int = 64
    spread: float = 1.5
    offset: float = 0.5
    trans_cos: float = 0.88
    planted: float = 0.2

    def folder(self, scratch: Path) -> Path:
        return scratch / f"n{self.n}_d{self.dim}_s{self.seed}_c{self.centres}_sp{self.spread:g}"


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _blocks(n: int, size: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, n, size):
        yield lo, min(lo + size, n)


def synthesize(spec: Synth, scratch: Path) -> dict[str, Any]:
    """Write (or reuse) ``src.npy``, ``tgt.npy``, ``partner.npy`` (each source row's planted target, or −1) and
    ``meta.json`` (parameters, cosine statistics) under the spec's folder; return the meta."""
    folder = spec.folder(scratch)
    params = {**asdict(spec), "version": GENERATOR_VERSION}
    meta_path = folder / "meta.json"
    if meta_path.exists() and all((folder / f).exists() for f in ("src.npy", "tgt.npy", "partner.npy")):
        meta = json.loads(meta_path.read_text())
        if meta.get("params") == params:
            log(f"reusing {folder}")
            return meta
    folder.mkdir(parents=True, exist_ok=True)
    meta_path.unlink(missing_ok=True)
    t0 = time.perf_counter()
    n, dim = spec.n, spec.dim
    rng = np.random.default_rng([spec.seed, 0])
    topics = _unit(rng.standard_normal((spec.topics, dim)))
    centres = _unit(topics[rng.integers(spec.topics, size=spec.centres)] + _unit(rng.standard_normal((spec.centres,
                                                                                                     dim))))
    base = (spec.offset * _unit(rng.standard_normal(dim)) + centres).astype(np.float32)
    weights = rng.lognormal(0.0, 1.0, spec.centres)
    weights /= weights.sum()
    norm2 = spec.offset ** 2 + 1.0 + spec.spread ** 2
    trans = math.sqrt(norm2 * (1.0 / spec.trans_cos ** 2 - 1.0))
    planted = round(n * spec.planted)
    pr = np.random.default_rng([spec.seed, 3])
    src_rows, tgt_rows = pr.permutation(n)[:planted], pr.permutation(n)[:planted]
    partner = np.full(n, -1, dtype=np.int64)
    partner[src_rows] = tgt_rows
    from_src = np.full(n, -1, dtype=np.int64)
    from_src[tgt_rows] = src_rows
    sigma, tsigma = np.float32(spec.spread / math.sqrt(dim)), np.float32(trans / math.sqrt(dim))
    labels = {}
    for side, name in ((1, "src"), (2, "tgt")):
        part = folder / f"{name}.part.npy"
        out = np.lib.format.open_memmap(part, mode="w+", dtype=np.float32, shape=(n, dim))
        lab_all = np.empty(n, dtype=np.int32)
        src = np.load(folder / "src.npy", mmap_mode="r") if side == 2 else None
        for b, (lo, hi) in enumerate(_blocks(n, BLOCK)):
            r = np.random.default_rng([spec.seed, side, b])
            lab = r.choice(spec.centres, size=hi - lo, p=weights).astype(np.int32)
            rows = base[lab]
            rows += sigma * r.standard_normal((hi - lo, dim), dtype=np.float32)
            if src is not None:
                p = from_src[lo:hi]
                m = p >= 0
                if m.any():
                    rows[m] = src[p[m]] + tsigma * r.standard_normal((int(m.sum()), dim), dtype=np.float32)
                    lab[m] = labels["src"][p[m]]
            out[lo:hi] = rows
            lab_all[lo:hi] = lab
        out.flush()
        del out
        os.replace(part, folder / f"{name}.npy")
        labels[name] = lab_all
        log(f"wrote {folder / name}.npy ({n:,} × {dim}) at {time.perf_counter() - t0:.0f} s")
    np.save(folder / "partner.npy", partner)
    meta = {"params": params, "seconds": time.perf_counter() - t0,
            "cosines": _cosines(folder, labels["src"], src_rows, tgt_rows, spec.seed)}
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta


def _cosines(folder: Path, lab: np.ndarray, src_rows: np.ndarray, tgt_rows: np.ndarray, seed: int) -> dict:
    """Mean (std) cosine of 20,000 unrelated source/target pairs, same-cluster source pairs and planted pairs."""
    x, y = np.load(folder / "src.npy", mmap_mode="r"), np.load(folder / "tgt.npy", mmap_mode="r")
    rng = np.random.default_rng([seed, 9])
    m = 20000

    def cos(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
        c = (_unit(np.asarray(a, dtype=np.float64)) * _unit(np.asarray(b, dtype=np.float64))).sum(1)
        return float(c.mean()), float(c.std())

    i, j = np.sort(rng.integers(0, len(x), m)), rng.integers(0, len(y), m)
    order = np.argsort(lab, kind="stable")
    same = np.flatnonzero(lab[order[:-1]] == lab[order[1:]])
    pick = rng.choice(same, size=min(m, len(same)), replace=False)
    planted = rng.choice(len(src_rows), size=min(m, len(src_rows)), replace=False)
    return {"unrelated": cos(x[i], y[j]), "same_cluster": cos(x[order[pick]], x[order[pick + 1]]),
            "planted": cos(x[src_rows[planted]], y[tgt_rows[planted]])}


def sample_rows(n: int, size: int, seed: int = 0) -> np.ndarray:
    """Sorted seeded sample of query rows; a smaller sample is always a subset of a larger one."""
    return np.sort(np.random.default_rng([seed, 11]).permutation(n)[:min(size, n)])


def sample_file(folder: Path, size: int) -> Path:
    """``src_sample_<size>.npy``: the source rows of :func:`sample_rows`, written once by the parent process (a
    gather from the memory-mapped source maps far more pages than it reads, which would count in a child's RSS)."""
    src = np.load(folder / "src.npy", mmap_mode="r")
    rows = sample_rows(len(src), size)
    path = folder / f"src_sample_{len(rows)}.npy"
    if not path.exists():
        part = folder / "sample.part.npy"
        out = np.lib.format.open_memmap(part, mode="w+", dtype=np.float32, shape=(len(rows), src.shape[1]))
        for lo, hi in _blocks(len(rows), BLOCK):
            out[lo:hi] = src[rows[lo:hi]]
        out.flush()
        del out
        os.replace(part, path)
    return path


def _size(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k"


def recall_at_k(approx: np.ndarray, exact: np.ndarray) -> float:
    k = exact.shape[1]
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(approx.tolist(), exact.tolist(), strict=True)]))


# --- instrumentation -------------------------------------------------------------------------------------------------

@contextmanager
def timed_builds(record: list[tuple[float, Any]]) -> Iterator[list[tuple[float, Any]]]:
    """``models.mining.index.build_index`` timed while inside: (seconds, index) per call appended to ``record``."""
    import models.mining.index as ix

    real = ix.build_index

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        index = real(*args, **kwargs)
        record.append((time.perf_counter() - t0, index))
        log(f"pid {os.getpid()}: index built in {record[-1][0]:.1f} s")
        return index

    ix.build_index = timed
    try:
        yield record
    finally:
        ix.build_index = real


_SHARD_LOG: list[dict[str, Any]] = []


def timed_search_shard(queries: Any, targets: Any, lo: int, hi: int, k: int, settings: Any) -> Any:
    """``search_shard`` in a Dask worker, its build and task time kept in the worker (read with ``client.run``)."""
    from bench.translation_corpora import peak_rss
    from models.mining.index import search_shard

    builds: list[tuple[float, Any]] = []
    t0 = time.perf_counter()
    with timed_builds(builds):
        out = search_shard(queries, targets, lo, hi, k, settings)
    task = time.perf_counter() - t0
    build = sum(s for s, _ in builds)
    builds.clear()
    _SHARD_LOG.append({"lo": lo, "hi": hi, "build_s": build, "search_s": task - build, "task_s": task,
                       "pid": os.getpid(), "rss": peak_rss()})
    return out


def shard_log() -> list[dict[str, Any]]:
    return list(_SHARD_LOG)


class TimedExecutor:
    """A Dask client seen by ``knn``: ``search_shard`` runs as :func:`timed_search_shard`, and the time ``knn``
    spends waiting on results is summed (the rest of its wall time is submission and merging)."""

    def __init__(self, client: Any) -> None:
        self.client, self.waited = client, 0.0

    def submit(self, fn: Any, *args: Any) -> Any:
        from models.mining.index import search_shard

        assert fn is search_shard, fn
        owner = self

        class _Future:
            def __init__(self, fut: Any) -> None:
                self.fut = fut

            def result(self) -> Any:
                t0 = time.perf_counter()
                try:
                    return self.fut.result()
                finally:
                    owner.waited += time.perf_counter() - t0

        return _Future(self.client.submit(timed_search_shard, *args, pure=False))


# --- measurements, each in a fresh child process ----------------------------------------------------------------------

def run_child(what: str, a: dict[str, Any]) -> dict[str, Any]:
    from bench.translation_corpora import peak_rss
    from models.mining.index import IndexSettings, knn

    folder = Path(a["folder"])
    src, tgt = folder / "src.npy", folder / "tgt.npy"
    n = len(np.load(src, mmap_mode="r"))
    sample = sample_rows(n, a["sample"])
    if what == "exact":
        q = np.load(folder / f"src_sample_{len(sample)}.npy")
        builds: list[tuple[float, Any]] = []
        t0 = time.perf_counter()
        with timed_builds(builds):
            scores, ids = knn(q, tgt, K, IndexSettings(kind="exact"))
        seconds = time.perf_counter() - t0
        builds_s = sum(s for s, _ in builds)
        builds.clear()
        np.save(folder / f"exact_{len(sample)}.npy", ids)
        partner = np.load(folder / "partner.npy")[sample]
        pl = partner >= 0
        return {"seconds": seconds, "build_s": builds_s, "search_s": seconds - builds_s, "rss": peak_rss(),
                "queries": len(sample), "top1_partner": float(np.mean(ids[pl, 0] == partner[pl])),
                "top1_cos_planted": float(scores[pl, 0].mean()), "top1_cos_other": float(scores[~pl, 0].mean()),
                "top4_cos_other": float(scores[~pl, 3].mean())}
    if what == "laser":
        import faiss

        t0 = time.perf_counter()
        x, y = np.load(src), np.load(tgt)
        faiss.normalize_L2(x)
        faiss.normalize_L2(y)
        index = faiss.IndexFlatIP(x.shape[1])
        index.add(y)
        fixed = time.perf_counter() - t0
        t1 = time.perf_counter()
        _, ids = index.search(x[sample], K)
        search = time.perf_counter() - t1
        exact = np.load(folder / f"exact_{len(sample)}.npy")
        return {"fixed_s": fixed, "search_s": search, "rss": peak_rss(), "queries": len(sample),
                "agreement": recall_at_k(ids, exact)}
    if what in ("ivf", "hnsw"):
        qrows = sample_rows(n, a["queries"])
        queries: Any = src if len(qrows) == n else np.load(folder / f"src_sample_{len(qrows)}.npy")
        settings = IndexSettings(kind=what)
        builds = []
        t0 = time.perf_counter()
        with timed_builds(builds):
            _, ids = knn(queries, tgt, K, settings)
        seconds = time.perf_counter() - t0
        rss = peak_rss()
        build, index = builds[0]
        exact = np.load(folder / f"exact_{len(sample)}.npy")
        recall = recall_at_k(ids[np.searchsorted(qrows, sample)], exact)
        del ids
        from models.mining.index import normalised

        q = normalised(np.load(folder / f"src_sample_{len(sample)}.npy"))
        sweep = []
        for value in a["sweep"]:
            if what == "ivf":
                index.nprobe = value
            else:
                index.hnsw.efSearch = value
            t1 = time.perf_counter()
            _, got = index.search(q, K)
            sweep.append({"value": value, "per_query_s": (time.perf_counter() - t1) / len(q),
                          "recall": recall_at_k(got, exact)})
        return {"seconds": seconds, "build_s": build, "search_s": seconds - build, "rss": rss, "queries": len(qrows),
                "recall": recall, "settings": asdict(settings), "sweep": sweep,
                "lists": settings.lists(n), "probes": settings.probes(n)}
    if what == "dask":
        return _dask_child(a, folder, n, sample)
    raise ValueError(what)


def _dask_child(a: dict[str, Any], folder: Path, n: int, gt_rows: np.ndarray) -> dict[str, Any]:
    from distributed import Client, LocalCluster

    from bench.translation_corpora import peak_rss
    from models.mining.index import IndexSettings, knn, merge_topk

    qrows = sample_rows(n, a["queries"])
    qpath = folder / f"src_sample_{len(qrows)}.npy"
    settings = IndexSettings(kind="ivf", shard_rows=a["shard_rows"], threads=1)
    cluster = LocalCluster(n_workers=a["workers"], threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, Client(cluster) as client:
        log(f"dask: {a['workers']} workers; {math.ceil(n / settings.shard_rows)} shards of {settings.shard_rows:,} "
            f"target rows ({settings.lists(settings.shard_rows)} lists, {settings.probes(settings.shard_rows)} "
            f"probes), {len(qrows):,} queries")
        executor = TimedExecutor(client)
        t0 = time.perf_counter()
        _, ids = knn(str(qpath), str(folder / "tgt.npy"), K, settings, executor=executor)
        seconds = time.perf_counter() - t0
        shards = sorted((r for rs in client.run(shard_log).values() for r in rs), key=lambda r: r["lo"])
        workers_rss = list(client.run(peak_rss).values())
    rss = peak_rss()
    exact = np.load(folder / f"exact_{len(gt_rows)}.npy")
    recall = recall_at_k(ids[np.searchsorted(qrows, gt_rows)], exact)
    # the merge at full scale: every shard's top-k of all n queries (sorted rows), merged in shard order
    rng = np.random.default_rng(0)
    parts = [(-np.sort(-rng.random((n, K), dtype=np.float32), axis=1), rng.integers(0, n, (n, K)))
             for _ in shards]
    t1 = time.perf_counter()
    merged = None
    for part in parts:
        merged = merge_topk(merged, part, K)
    merge_full = time.perf_counter() - t1
    return {"seconds": seconds, "waited_s": executor.waited, "shards": shards, "workers_rss": workers_rss,
            "rss": rss, "queries": len(qrows), "recall": recall, "gt_queries": len(gt_rows),
            "merge_full_s": merge_full, "settings": asdict(settings), "workers": a["workers"]}


def child(what: str, **a: Any) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log(f"child {what} {json.dumps(a)}")
    p = subprocess.run([sys.executable, "-c", _CHILD, what, json.dumps(a)], stdout=subprocess.PIPE, text=True, env=env,
                       cwd=REPO)
    if p.returncode:
        raise RuntimeError(f"benchmark child {what} failed (exit {p.returncode})")
    return json.loads(p.stdout.strip().splitlines()[-1])


# --- main -------------------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="rows per side of the single-process part")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--centres", type=int, default=4096)
    ap.add_argument("--spread", type=float, default=1.5, help="within-cluster noise (larger: clusters overlap)")
    ap.add_argument("--sample", type=int, default=10_000, help="queries of the exact and LASER runs (ground truth)")
    ap.add_argument("--ivf-queries", type=int, default=None, help="queries of the ivf run (default all)")
    ap.add_argument("--hnsw-queries", type=int, default=100_000, help="queries of the hnsw run (extrapolated)")
    ap.add_argument("--nprobe-sweep", type=int, nargs="*", default=[8, 16, 32, 64])
    ap.add_argument("--ef-sweep", type=int, nargs="*", default=[64, 128, 256])
    ap.add_argument("--skip-single", action="store_true", help="skip the --n part (exact, laser, ivf, hnsw)")
    ap.add_argument("--skip-hnsw", action="store_true")
    ap.add_argument("--skip-dask", action="store_true")
    ap.add_argument("--dask-n", type=int, default=4_000_000)
    ap.add_argument("--dask-shard-rows", type=int, default=1_000_000)
    ap.add_argument("--dask-workers", type=int, default=2)
    ap.add_argument("--dask-queries", type=int, default=100_000, help="queries of the sharded run (extrapolated)")
    ap.add_argument("--dask-gt", type=int, default=2000, help="queries of the exact ground truth at --dask-n")
    ap.add_argument("--data-root", type=Path, default=REPO / "data")
    ap.add_argument("--scratch", type=Path, default=None, help="synthetic embeddings (default <data root>/bench/"
                                                                "mining_scale)")
    a = ap.parse_args(argv)
    scratch = a.scratch or a.data_root / "bench" / "mining_scale"
    print(f"mining k-NN k={K}, {a.dim}-d float32, {os.cpu_count()} CPUs; one direction timed, both = ×2", flush=True)
    rows: list[dict[str, Any]] = []
    table: list[tuple[str, float | None, float | None, float, float | None, float | None, float, float]] = []

    def add(tag: str, n: int, kind: str, build: float | None, search: float | None, total1: float, anchor: float,
            anchor_name: str, recall: float | None, rss: float, queries: int, **extra: Any) -> None:
        matrices = 2 * n * a.dim * 4
        speed = anchor / total1 if kind != "exact" else None
        table.append((tag, build, search, 2 * total1, speed, recall, rss / GIB, rss / matrices))
        rows.append({"benchmark": f"mining_{tag}", "anchor": anchor_name, "polysent_seconds": 2 * total1,
                     "anchor_seconds": 2 * anchor, "ratio": total1 / anchor, "speedup": anchor / total1,
                     "peak_rss_bytes": int(rss), "rss_over_matrices": rss / matrices, "recall": recall,
                     "build_seconds": build, "search_seconds": search, "items": n, "dim": a.dim, "k": K,
                     "kind": kind, "queries_timed": queries, "directions": "1 timed, x2", "repeat": 1, **extra})

    if not a.skip_single:
        spec = Synth(n=a.n, dim=a.dim, seed=a.seed, centres=a.centres, spread=a.spread)
        meta = synthesize(spec, scratch)
        folder = str(spec.folder(scratch))
        for size in (a.sample, a.hnsw_queries, a.ivf_queries or a.n):
            if size < a.n:
                sample_file(spec.folder(scratch), size)
        c = meta["cosines"]
        print(f"data {a.n:,}x{a.n:,}x{a.dim}: cosines mean (std) unrelated {c['unrelated'][0]:.3f} "
              f"({c['unrelated'][1]:.3f}), same cluster {c['same_cluster'][0]:.3f} ({c['same_cluster'][1]:.3f}), "
              f"planted translation {c['planted'][0]:.3f} ({c['planted'][1]:.3f})", flush=True)
        tag = f"{_size(a.n)}x{_size(a.n)}"
        ex = child("exact", folder=folder, sample=a.sample)
        exact1 = ex["build_s"] + ex["search_s"] * a.n / ex["queries"]
        print(f"{tag} exact: {ex['queries']:,} queries in {ex['seconds']:.1f} s (build {ex['build_s']:.1f} s); "
              f"all {a.n:,} queries extrapolated {exact1:,.0f} s one direction, {2 * exact1:,.0f} s both; peak RSS "
              f"{ex['rss'] / GIB:.2f} GiB; top-1 = planted translation for {ex['top1_partner']:.4f} of planted "
              f"queries (cos {ex['top1_cos_planted']:.3f}); other queries top-1 cos {ex['top1_cos_other']:.3f}, "
              f"top-4 {ex['top4_cos_other']:.3f}", flush=True)
        la = child("laser", folder=folder, sample=a.sample)
        laser1 = la["fixed_s"] + la["search_s"] * a.n / la["queries"]
        print(f"{tag} laser (faiss IndexFlatIP, whole matrices): load+normalise+add {la['fixed_s']:.1f} s, "
              f"{la['queries']:,} queries {la['search_s']:.1f} s; all extrapolated {laser1:,.0f} s one direction; "
              f"peak RSS {la['rss'] / GIB:.2f} GiB; same neighbours as polysent exact {la['agreement']:.4f}",
              flush=True)
        print(f"{tag} anchor: polysent exact / LASER time {exact1 / laser1:.2f}, peak RSS {ex['rss'] / la['rss']:.2f} "
              f"(polysent exact on {a.sample:,} queries; LASER holds both whole matrices)", flush=True)
        add(f"{tag}_exact", a.n, "exact", ex["build_s"], ex["search_s"] * a.n / ex["queries"], exact1, laser1,
            "LASER knnCPU faiss IndexFlatIP (extrapolated)", None, ex["rss"], ex["queries"], extrapolated=True)
        table.append((f"{tag}_laser", la["fixed_s"], la["search_s"] * a.n / la["queries"], 2 * laser1, None, None,
                      la["rss"] / GIB, la["rss"] / (2 * a.n * a.dim * 4)))
        for kind in ("ivf", "hnsw"):
            if kind == "hnsw" and a.skip_hnsw:
                continue
            queries = (a.ivf_queries or a.n) if kind == "ivf" else a.hnsw_queries
            r = child(kind, folder=folder, sample=a.sample, queries=queries,
                      sweep=a.nprobe_sweep if kind == "ivf" else a.ef_sweep)
            search1 = r["search_s"] * a.n / r["queries"]
            total1 = r["build_s"] + search1
            s = r["settings"]
            params = (f"nlist {r['lists']} nprobe {r['probes']}" if kind == "ivf"
                      else f"m {s['m']} ef_construction {s['ef_construction']} ef_search {s['ef_search']}")
            label = "measured" if r["queries"] == a.n else f"{r['queries']:,} queries extrapolated"
            print(f"{tag} {kind} ({params}): build {r['build_s']:.1f} s, search {search1:,.0f} s ({label}), total "
                  f"{total1:,.0f} s one direction, {2 * total1:,.0f} s both; {exact1 / total1:.1f}× faster than exact; "
                  f"recall@{K} {r['recall']:.4f}; peak RSS {r['rss'] / GIB:.2f} GiB = "
                  f"{r['rss'] / (2 * a.n * a.dim * 4):.2f}× both matrices", flush=True)
            for sw in r["sweep"]:
                t = r["build_s"] + sw["per_query_s"] * a.n
                name = "nprobe" if kind == "ivf" else "ef_search"
                print(f"{tag} {kind} sweep {name} {sw['value']}: {sw['per_query_s'] * 1e3:.3f} ms/query, recall@{K} "
                      f"{sw['recall']:.4f}, build + all queries {t:,.0f} s → {exact1 / t:.1f}× faster than exact",
                      flush=True)
            add(f"{tag}_{kind}", a.n, kind, r["build_s"], search1, total1, exact1, "polysent exact (extrapolated)",
                r["recall"], r["rss"], r["queries"], extrapolated=r["queries"] != a.n, params=params,
                sweep=json.dumps(r["sweep"]))
        append_results(a.data_root, "mining_scale", rows)

    if not a.skip_dask:
        n = a.dask_n
        spec = Synth(n=n, dim=a.dim, seed=a.seed, centres=a.centres, spread=a.spread)
        synthesize(spec, scratch)
        folder = str(spec.folder(scratch))
        for size in (a.dask_gt, a.dask_queries):
            sample_file(spec.folder(scratch), size)
        tag = f"{_size(n)}x{_size(n)}"
        ex = child("exact", folder=folder, sample=a.dask_gt)
        exact1 = ex["build_s"] + ex["search_s"] * n / ex["queries"]
        print(f"{tag} exact: {ex['queries']:,} queries in {ex['seconds']:.1f} s (builds {ex['build_s']:.1f} s); all "
              f"{n:,} extrapolated {exact1:,.0f} s one direction, {2 * exact1:,.0f} s both", flush=True)
        d = child("dask", folder=folder, sample=a.dask_gt, queries=a.dask_queries, shard_rows=a.dask_shard_rows,
                  workers=a.dask_workers)
        shards = d["shards"]
        build = float(np.mean([s["build_s"] for s in shards]))
        per_q = float(np.mean([s["search_s"] for s in shards])) / d["queries"]
        rounds = math.ceil(len(shards) / d["workers"])
        merge_sample = d["seconds"] - d["waited_s"]
        total1 = rounds * (build + per_q * n) + d["merge_full_s"]
        workers_rss = d["workers_rss"]
        for s in shards:
            print(f"{tag} dask shard {s['lo']:,}:{s['hi']:,} (pid {s['pid']}): build {s['build_s']:.1f} s, search "
                  f"{s['search_s']:.1f} s for {d['queries']:,} queries ({s['search_s'] / d['queries'] * 1e3:.3f} "
                  f"ms/query), worker peak RSS so far {s['rss'] / GIB:.2f} GiB", flush=True)
        rss_sum = sum(workers_rss) + d["rss"]
        print(f"{tag} dask ivf ({len(shards)} shards, {d['workers']} workers × 1 thread): measured "
              f"{d['seconds']:.1f} s for {d['queries']:,} queries (merge and submission {merge_sample:.2f} s); "
              f"merge of {len(shards)} × {n:,} × {K} at full scale {d['merge_full_s']:.1f} s", flush=True)
        print(f"{tag} dask ivf: all {n:,} queries extrapolated {rounds} rounds × ({build:.0f} s build + "
              f"{per_q * 1e3:.3f} ms × {n:,}) + merge = {total1:,.0f} s one direction, {2 * total1:,.0f} s both; "
              f"{exact1 / total1:.1f}× faster than exact; recall@{K} {d['recall']:.4f} ({d['gt_queries']:,} queries)",
              flush=True)
        print(f"{tag} dask ivf: peak RSS per worker {', '.join(f'{r / GIB:.2f}' for r in workers_rss)} GiB, parent "
              f"{d['rss'] / GIB:.2f} GiB; sum {rss_sum / GIB:.2f} GiB = {rss_sum / (2 * n * a.dim * 4):.2f}× both "
              f"matrices", flush=True)
        add(f"{tag}_exact", n, "exact", ex["build_s"], ex["search_s"] * n / ex["queries"], exact1, exact1,
            "itself", None, ex["rss"], ex["queries"], extrapolated=True)
        add(f"{tag}_ivf_dask", n, "ivf", rounds * build, rounds * per_q * n, total1, exact1,
            "polysent exact (extrapolated)", d["recall"], sum(workers_rss) + d["rss"], d["queries"],
            extrapolated=True, shards=len(shards), workers=d["workers"], shard_build_seconds=build,
            shard_search_seconds_per_query=per_q, merge_seconds=d["merge_full_s"],
            worker_peak_rss_bytes=int(max(workers_rss)))
        append_results(a.data_root, "mining_scale", rows[-2:])

    def f(v: float | None, fmt: str) -> str:
        return "—" if v is None else format(v, fmt)

    print(f"\n{'config':<18} {'build s 1dir':>12} {'search s 1dir':>13} {'total s 2dirs':>14} {'speedup':>8} "
          f"{'recall@4':>9} {'peak RSS GiB':>13} {'RSS/2 mats':>11}")
    for tag, build, search, total, speed, recall, rss, ratio in table:
        print(f"{tag:<18} {f(build, ',.0f'):>12} {f(search, ',.0f'):>13} {total:>14,.0f} {f(speed, '.1f'):>8} "
              f"{f(recall, '.4f'):>9} {rss:>13.2f} {ratio:>11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
