"""Benchmark: kit ``me5_replication``'s training corpora at six languages against all the languages the data holds.

Both are built from the shared data (``--data``, ``$POLYSENT_SHARED_DATA``, default ``../shared/data``) by the kit's
own functions, each in a fresh child process (its own peak RSS, from ``VmHWM``), ``--repeat`` times interleaved, the
median reported:

* **six languages** (``experiments.kits.me5_corpora``): XNLI dev + test groups and NLI triples in en de fr es ru zh,
  and the en/es-pivot bitext from NTREX-128's training documents in those languages, Multi30k and the TMX file;
* **all languages** (``experiments.kits.all_language_corpora``): the same bitext stage over NTREX-128's training
  documents in all its 128 languages (423,534 pairs) and XNLI's groups in its 15 languages.

The bitext stage dominates the wider build, and its memory is where a chunk holding many language pairs costs most
(an N-way source is read as one chunk of every language × the pivots: ``BottomK.add`` splits it once by language
pair), so its seconds are printed apart. One line per build is printed, then the ratios, and the figures are appended
to the warehouse's ``bench_results`` (``ratio``: all-language seconds / six-language seconds).

    python -m bench.corpus_width [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.results import append_results
from bench.shared_data import REPO, SHARED, warn_if_loaded

NEEDS = ("xnli", "tatoeba", "bucc2018", "sts/sts17", "sts/stsb-multi-mt", "mewsc16", "parallel/ntrex128",
         "parallel/multi30k", "parallel/tmx")

_CHILD = """
import json, sys, time
from pathlib import Path
from bench.translation_corpora import peak_rss
from experiments import kits
width, data, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
t0 = time.perf_counter()
if width == "six":
    built = kits.me5_corpora(data, work)
    stats = {"pairs": built["bitext"].stats["kept"], "bitext_seconds": built["bitext"].stats["seconds"],
             "groups": built["xnli"].stats["groups"], "xnli_languages": len(built["xnli"].stats["languages"])}
else:
    built = kits.all_language_corpora(data, work)
    s = built["stats"]
    stats = {"pairs": s["bitext_all"]["kept"], "bitext_seconds": s["bitext_seconds"], "groups": s["xnli_all"]["groups"],
             "xnli_languages": len(s["xnli_all"]["languages"])}
seconds = time.perf_counter() - t0
import polars as pl
pairs = pl.read_parquet(work / ("bitext" if width == "six" else "bitext_all") / "bitext_pairs" / "**/*.parquet",
                        hive_partitioning=True)
print(json.dumps({"seconds": seconds, "rss": peak_rss(), "languages": pairs["lang"].n_unique(), **stats}))
"""


def _child(width: str, data: Path) -> dict:
    """One build of ``width`` (``six`` or ``all``) in a fresh process, in a temporary folder removed afterwards."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(prefix=f"corpus-width-{width}-") as tmp:
        p = subprocess.run([sys.executable, "-c", _CHILD, width, str(data), tmp], capture_output=True, text=True,
                           env=env, cwd=REPO)
    if p.returncode:
        raise RuntimeError(f"benchmark child ({width}) failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _median(runs: list[dict]) -> dict:
    out = dict(runs[0])
    for k in ("seconds", "bitext_seconds"):
        out[k] = statistics.median(r[k] for r in runs)
    out["rss"] = max(r["rss"] for r in runs)
    for r in runs[1:]:  # the same inputs build the same corpora every time
        if (r["pairs"], r["groups"]) != (out["pairs"], out["groups"]):
            raise RuntimeError(f"builds differ: {r} vs {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=SHARED, help="the shared data folder (POLYSENT_SHARED_DATA)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-root", type=Path, default=REPO / "data", help="where bench_results is appended")
    a = ap.parse_args(argv)
    missing = [str(a.data / sub) for sub in NEEDS if not (a.data / sub).exists()]
    if missing:
        print(f"not found: {', '.join(missing)}: the benchmark needs the shared data (--data or "
              "POLYSENT_SHARED_DATA)", file=sys.stderr)
        return 2
    warn_if_loaded("cpu", "the timings include the other work's share of the 2 cores")
    runs: dict[str, list[dict]] = {"six": [], "all": []}
    for _ in range(a.repeat):
        for width in runs:  # interleaved, so a change of load shifts both alike
            runs[width].append(_child(width, a.data))
    six, every = _median(runs["six"]), _median(runs["all"])
    gib = 1024 ** 3
    for label, r in (("six languages (me5_corpora)", six), ("all languages (all_language_corpora)", every)):
        print(f"corpus width, {label}: {r['seconds']:.1f} s (bitext {r['bitext_seconds']:.1f} s), peak RSS "
              f"{r['rss'] / gib:.2f} GiB; {r['pairs']:,} bitext pairs in {r['languages']} languages, "
              f"{r['groups']:,} XNLI groups in {r['xnli_languages']} languages", flush=True)
    ratio, rss_ratio = every["seconds"] / six["seconds"], every["rss"] / six["rss"]
    print(f"corpus width, all / six languages: {ratio:.2f}× time, {rss_ratio:.2f}× peak RSS "
          f"(median of {a.repeat}, fresh process each)", flush=True)
    append_results(a.data_root, "corpus_width", [{
        "benchmark": "corpus_width", "anchor": "six languages (me5_corpora)", "anchor_seconds": six["seconds"],
        "polysent_seconds": every["seconds"], "ratio": ratio, "peak_rss_bytes": every["rss"],
        "anchor_peak_rss_bytes": six["rss"], "rss_ratio": rss_ratio, "items": every["pairs"],
        "anchor_items": six["pairs"], "bitext_seconds": every["bitext_seconds"],
        "anchor_bitext_seconds": six["bitext_seconds"], "repeat": a.repeat}])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
