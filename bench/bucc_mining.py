"""Benchmark of BUCC-style margin mining (``models/evaluation/bucc.py``: ``mine``) at scale, in bounded memory.

Synthetic, seeded input: ``--n`` source and ``--n`` target embeddings of dimension ``--dim`` (float32, standard normal
rows), with ``--planted`` (default n/5) near-duplicate pairs — target row ``perm[i]`` = source row i + Gaussian
noise (σ ``--noise``, cosine ≈ 0.9 at the default) — and unique sentence texts and IDs on both sides. The data are
generated inside a fresh child process (in blocks, float32 throughout), which then runs ``mine(...)`` (LASER
``--mode mine --retrieval max --margin ratio -k 4``) once and reports the wall time of ``mine`` and its own peak
RSS (``VmHWM`` from ``/proc/self/status``, input arrays included). As a check that the search is exact, the planted
pairs are taken as gold and the oracle F1 of the mined candidates is printed.

The naive computation this avoids is the full n × n similarity matrix (n² × 4 bytes, 40 GB at 100k); the k-NN here
is chunked (4,096 × 16,384 blocks), so peak RSS is the inputs plus a few hundred MB. One line per figure is printed
and appended to the warehouse's ``bench_results`` (``anchor`` is the 3 GiB peak-RSS target; ``ratio`` = peak RSS /
target).

    python -m bench.bucc_mining [--n 100000] [--dim 768] [--planted N] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from bench.results import append_results
from bench.shared_data import REPO

TARGET_RSS = 3 * 1024 ** 3

_CHILD = """
import json, sys, time
from bench.bucc_mining import synthetic
from bench.translation_corpora import peak_rss
from models.evaluation.bucc import mine, optimize_threshold
n, dim, planted, noise, seed, device = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]),
                                        int(sys.argv[5]), sys.argv[6])
x, y, gold = synthetic(n, dim, planted, noise, seed)
rss_inputs = peak_rss()
src_ids = [f"src-{i:09d}" for i in range(n)]
tgt_ids = [f"tgt-{i:09d}" for i in range(n)]
src_texts = [f"source sentence {i}" for i in range(n)]
tgt_texts = [f"target sentence {i}" for i in range(n)]
stats = {}
t0 = time.perf_counter()
cands = mine(src_ids, src_texts, x, tgt_ids, tgt_texts, y, stats=stats, device=device)
seconds = time.perf_counter() - t0
threshold, f1, p, r = optimize_threshold(cands, [(src_ids[i], tgt_ids[j]) for i, j in gold])
print(json.dumps({"seconds": seconds, "rss": peak_rss(), "rss_inputs": rss_inputs, "candidates": len(cands),
                  "f1": f1, "precision": p, "recall": r, "threshold": threshold}))
"""


def synthetic(n: int, dim: int, planted: int, noise: float,
              seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """(x, y, gold rows): float32 standard-normal rows made in blocks; y[perm[i]] = x[i] + noise for i < planted."""
    rng = np.random.default_rng(seed)
    x = np.empty((n, dim), dtype=np.float32)
    y = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, 8192):
        hi = min(lo + 8192, n)
        rng.standard_normal((hi - lo, dim), dtype=np.float32, out=x[lo:hi])
        rng.standard_normal((hi - lo, dim), dtype=np.float32, out=y[lo:hi])
    targets = rng.permutation(n)[:planted]
    for lo in range(0, planted, 8192):
        hi = min(lo + 8192, planted)
        y[targets[lo:hi]] = x[lo:hi] + np.float32(noise) * rng.standard_normal((hi - lo, dim), dtype=np.float32)
    return x, y, list(zip(range(planted), targets.tolist(), strict=True))


def _child(n: int, dim: int, planted: int, noise: float, seed: int, device: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", _CHILD, str(n), str(dim), str(planted), str(noise), str(seed), device],
                       capture_output=True, text=True, env=env, cwd=REPO)
    if p.returncode:
        raise RuntimeError(f"benchmark child failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="sentences per side")
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--planted", type=int, default=None, help="near-duplicate pairs (default n/5)")
    ap.add_argument("--noise", type=float, default=0.5, help="σ of the noise added to planted targets")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="torch device of the k-NN matmuls (e.g. cuda)")
    ap.add_argument("--data-root", type=Path, default=REPO / "data")
    a = ap.parse_args(argv)
    planted = a.n // 5 if a.planted is None else a.planted
    mib = 1024 ** 2
    print(f"mining {a.n:,} × {a.n:,} × {a.dim} float32 ({planted:,} planted pairs) on {a.device}, "
          f"{os.cpu_count()} CPUs", flush=True)
    r = _child(a.n, a.dim, planted, a.noise, a.seed, a.device)
    naive = a.n * a.n * 4
    inputs = 2 * a.n * a.dim * 4
    print(f"bucc mine {a.n}x{a.n}x{a.dim}: wall {r['seconds']:.1f} s", flush=True)
    print(f"bucc mine {a.n}x{a.n}x{a.dim}: peak RSS {r['rss'] / mib:,.0f} MiB (target < {TARGET_RSS / mib:,.0f} MiB; "
          f"inputs {inputs / mib:,.0f} MiB, RSS after generating them {r['rss_inputs'] / mib:,.0f} MiB)", flush=True)
    print(f"bucc mine {a.n}x{a.n}x{a.dim}: naive full similarity matrix avoided {naive / mib:,.0f} MiB "
          f"({naive / 1e9:.1f} GB)", flush=True)
    print(f"bucc mine {a.n}x{a.n}x{a.dim}: {r['candidates']:,} candidates, planted pairs as gold: F1 {r['f1']:.2f} "
          f"(P {r['precision']:.2f}, R {r['recall']:.2f}, threshold {r['threshold']:.4f})", flush=True)
    append_results(a.data_root, "bucc_mining", [{
        "benchmark": f"bucc_mine_{a.n}x{a.n}x{a.dim}", "anchor": "target peak RSS 3 GiB",
        "polysent_seconds": r["seconds"], "peak_rss_bytes": r["rss"], "ratio": r["rss"] / TARGET_RSS,
        "items": a.n, "dim": a.dim, "planted": planted, "naive_matrix_bytes": naive, "input_bytes": inputs,
        "planted_f1": r["f1"], "device": a.device, "repeat": 1,
    }])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
