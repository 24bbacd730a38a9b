"""Benchmarks of the translation corpora (issue: XNLI groups, pivot-sampled bitext).

1. **Regrouping** 392,702 rows × 15 languages (synthetic XNLI-MT files in the real format): read, verify alignment,
   group, +Single pairs, write — target < 10 s and < 4 GiB peak RSS. Also with the leakage guard on (Tatoeba).
2. **Pivot sampling** over synthetic Moses bitext at growing sizes (default 2.5M, 5M, 10M pairs) and over the same
   10M pairs as Parquet: read-and-select pairs/s (target ≥ 1M/s on 2 cores) and peak RSS (≤ 2 GiB, flat as the input
   grows). The anchor in the same run is ``wc -l`` over the same files (C line counting: the floor for touching
   every byte once).

Every measurement runs in a fresh child process (its own peak RSS), ``--repeat`` times; medians are printed as one line
per figure and appended to the warehouse's ``bench_results``.

    python -m bench.translation_corpora [--sizes 2.5 5 10] [--repeat 3] [--work data/bench-inputs]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.results import append_results
from bench.shared_data import REPO

PAIR_LANGS = [("en", "de"), ("en", "ru"), ("es", "de"), ("es", "ru")]

_CHILD_GROUPS = """
import json, sys, time, tempfile
from pathlib import Path
from bench.translation_corpora import peak_rss
from pipelines.leakage import EvalSetSpec, EvalTextIndex, LeakageSettings
from pipelines.xnli.groups import XnliSettings, build_groups
from pipelines.xnli.sources import XnliSource
src, tatoeba = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
index = (EvalTextIndex.from_settings(LeakageSettings(eval_sets=[EvalSetSpec(name="tatoeba", path=Path(tatoeba))]))
         if tatoeba != "-" else EvalTextIndex.empty())
with tempfile.TemporaryDirectory() as out:
    r = build_groups(XnliSettings(languages="all", splits=["train"]), XnliSource(format="xnli_mt", path=Path(src)),
                     index, Path(out))
s = time.perf_counter() - t0
print(json.dumps({"seconds": s, "rss": peak_rss(),
                  "groups": r.stats["groups"], "leaked": r.stats["groups_leaked"]}))
"""

_CHILD_PIVOT = """
import json, sys, time
from pathlib import Path
from bench.translation_corpora import peak_rss
from pipelines.bitext.sampling import BitextSettings, select_pairs
from pipelines.bitext.sources import MosesSource, ParquetSource
kind, folder, quota = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
langs = [tuple(p.split("-")) for p in sys.argv[4].split(",")]
if kind == "moses":
    sources = [MosesSource(src=a, tgt=b, src_file=folder / f"{a}-{b}.{a}", tgt_file=folder / f"{a}-{b}.{b}")
               for a, b in langs]
else:
    sources = [ParquetSource(format="parquet", path=folder / f"{a}-{b}.parquet", src=a, tgt=b) for a, b in langs]
t0 = time.perf_counter()
pairs, counts, _, stats = select_pairs(BitextSettings(quota_per_language=quota), sources, progress=False)
s = time.perf_counter() - t0
print(json.dumps({"seconds": s, "rss": peak_rss(),
                  "read": stats["read"], "kept": pairs.height}))
"""


def peak_rss() -> int:
    """This process's peak resident set in bytes: ``VmHWM``, which starts afresh at exec. (``ru_maxrss`` does not:
    Linux carries it across fork and exec, so a child of a big parent would report the parent's peak.)"""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _child(code: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=REPO)
    if p.returncode:
        raise RuntimeError(f"benchmark child failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _wc(files: list[Path]) -> float:
    t0 = time.perf_counter()
    subprocess.run(["wc", "-l", *map(str, files)], check=True, capture_output=True)
    return time.perf_counter() - t0


def prepare_moses(work: Path, pairs: int) -> Path:
    from bench.synthetic import write_moses

    folder = work / f"moses-{pairs}"
    if not (folder / ".done").exists():
        print(f"generating {pairs:,} synthetic pairs in {folder}", flush=True)
        per = pairs // len(PAIR_LANGS)
        for i, (a, b) in enumerate(PAIR_LANGS):
            write_moses(folder, f"{a}-{b}", a, b, per, seed=i)
        (folder / ".done").touch()
    return folder


def prepare_parquet(moses: Path) -> Path:
    import polars as pl

    folder = moses.with_name(moses.name + "-parquet")
    if not (folder / ".done").exists():
        folder.mkdir(parents=True, exist_ok=True)
        for a, b in PAIR_LANGS:
            df = pl.DataFrame({"src": (moses / f"{a}-{b}.{a}").read_text("utf-8").split("\n")[:-1],
                               "tgt": (moses / f"{a}-{b}.{b}").read_text("utf-8").split("\n")[:-1]})
            df.write_parquet(folder / f"{a}-{b}.parquet", row_group_size=500_000)
        (folder / ".done").touch()
    return folder


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=float, nargs="+", default=[2.5, 5.0, 10.0], help="millions of pairs")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quota", type=int, default=100_000, help="pairs kept per (pivot, language)")
    ap.add_argument("--work", type=Path, default=REPO / "data" / "bench-inputs")
    ap.add_argument("--data-root", type=Path, default=REPO / "data")
    ap.add_argument("--skip-groups", action="store_true")
    ap.add_argument("--skip-pivot", action="store_true")
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    gib = 1024 ** 3

    if not a.skip_groups:
        from bench.synthetic import write_xnli_mt

        xdir = a.work / "xnli-mt"
        if not (xdir / ".done").exists():
            print("generating synthetic XNLI-MT (392,702 rows × 15 languages)", flush=True)
            write_xnli_mt(xdir)
            (xdir / ".done").touch()
        src = xdir / "XNLI-MT-1.0"
        shared_tatoeba = REPO.parent / "shared" / "data" / "tatoeba"
        tatoeba = shared_tatoeba if shared_tatoeba.exists() else REPO / "sample" / "eval" / "tatoeba"
        for label, leak in (("regroup", "-"), ("regroup+leakage", str(tatoeba))):
            runs = [_child(_CHILD_GROUPS, str(src), leak) for _ in range(a.repeat)]
            sec, rss = _median(runs, "seconds"), max(r["rss"] for r in runs)
            print(f"{label} xnli_mt 392,702 rows x 15 languages -> {runs[0]['groups']:,} groups: polysent {sec:.2f} s "
                  f"(target < 10 s, ratio to target {sec / 10:.2f}), peak RSS {rss / gib:.2f} GiB (target < 4 GiB)",
                  flush=True)
            rows.append({"benchmark": label, "anchor": "target 10 s", "anchor_seconds": 10.0,
                         "polysent_seconds": sec, "ratio": sec / 10.0, "peak_rss_bytes": rss, "items": 392_702 * 15})

    if not a.skip_pivot:
        langs = ",".join(f"{x}-{y}" for x, y in PAIR_LANGS)
        largest = None
        for size in a.sizes:
            n = int(size * 1_000_000)
            folder = prepare_moses(a.work, n)
            largest = folder
            files = [folder / f"{x}-{y}.{z}" for x, y in PAIR_LANGS for z in (x, y)]
            runs = [_child(_CHILD_PIVOT, "moses", str(folder), str(a.quota), langs) for _ in range(a.repeat)]
            wc = statistics.median(_wc(files) for _ in range(a.repeat))
            sec, rss = _median(runs, "seconds"), max(r["rss"] for r in runs)
            rate = runs[0]["read"] / sec
            print(f"pivot moses {runs[0]['read']:,} pairs: polysent {sec:.2f} s = {rate / 1e6:.2f}M pairs/s "
                  f"(target >= 1M/s), peak RSS {rss / gib:.2f} GiB (target <= 2 GiB) | anchor wc -l {wc:.2f} s | "
                  f"ratio {sec / wc:.1f}", flush=True)
            rows.append({"benchmark": f"pivot_moses_{size:g}M", "anchor": "wc -l", "anchor_seconds": wc,
                         "polysent_seconds": sec, "ratio": sec / wc, "peak_rss_bytes": rss,
                         "items": runs[0]["read"]})
        if largest is not None:
            pq_folder = prepare_parquet(largest)
            runs = [_child(_CHILD_PIVOT, "parquet", str(pq_folder), str(a.quota), langs) for _ in range(a.repeat)]
            sec, rss = _median(runs, "seconds"), max(r["rss"] for r in runs)
            rate = runs[0]["read"] / sec
            print(f"pivot parquet {runs[0]['read']:,} pairs: polysent {sec:.2f} s = {rate / 1e6:.2f}M pairs/s "
                  f"(target >= 1M/s), peak RSS {rss / gib:.2f} GiB (target <= 2 GiB)", flush=True)
            rows.append({"benchmark": f"pivot_parquet_{a.sizes[-1]:g}M", "anchor": "target 1M pairs/s",
                         "anchor_seconds": runs[0]["read"] / 1e6, "polysent_seconds": sec,
                         "ratio": sec / (runs[0]["read"] / 1e6), "peak_rss_bytes": rss, "items": runs[0]["read"]})
    append_results(a.data_root, "translation_corpora", [{**r, "repeat": a.repeat} for r in rows])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
