"""Benchmark of the Wikidata dump reader (``pipelines/wikidata.py``) on realistic entities.

The input is ``Q42.json`` from the shared data (the API shape ``{"entities":{"Q42":{…}}}``, unwrapped into one dump
line of ~76 KB: 128 labels, 94 sitelinks, 61 properties of claims) replicated under new ids ``Q1000000+i`` into the
dump's array shape, once plain and once as ``.bz2`` (multistream, like the dumps Wikimedia publishes; written by
parallel processes). Each measurement runs in a fresh child process (its own peak RSS, from ``VmHWM``), ``--repeat``
times, and the median is reported:

* **polysent**: ``iter_records`` with the default ``WikidataSettings`` (labels ``en``; sitelinks ``enwiki``,
  ``dewiki``, ``ruwiki``; P31), everything it yields consumed;
* **anchor, same run**: the straightforward reader — Python's line iteration and ``json.loads`` of every line, keeping
  the same fields through the same ``EntityExtractor.from_dict`` — and the same with ``orjson.loads``.

The figures are entities per second of wall-clock time on one core (and per CPU-second, which a loaded, shared
machine disturbs less); the ``.bz2`` figures include decompression (Python's ``bz2``, one
core), which dominates them. One line per figure is printed and appended to the warehouse's ``bench_results``
(``ratio`` there is polysent seconds / anchor seconds, as for the other benchmarks; ``speedup`` is its inverse).

    python -m bench.wikidata_reader [--entities 20000] [--bz2-entities 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import bz2
import json
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.results import append_results
from bench.shared_data import REPO, SHARED

FIRST_ID = 1_000_000

_CHILD = """
import json, sys, time
from pathlib import Path
from bench.translation_corpora import peak_rss
from bench.wikidata_reader import anchor_count
from pipelines.wikidata import ReadStats, WikidataSettings, iter_records
kind, path = sys.argv[1], Path(sys.argv[2])
extra = {}
c0, t0 = time.process_time(), time.perf_counter()
if kind == "polysent":
    stats = ReadStats()
    n = sum(1 for _ in iter_records(path, WikidataSettings(), stats))
    extra = {"full_parses": stats.full_parses}
else:
    n = anchor_count(path, kind)
s, c = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"seconds": s, "cpu_seconds": c, "rss": peak_rss(), "entities": n, **extra}))
"""


def q42_line(shared: Path = SHARED) -> bytes:
    """``Q42.json`` unwrapped into one compact dump line, its bytes as in the file."""
    path = shared / "wikidata" / "Q42.json"
    if not path.exists():
        raise SystemExit(f"{path} not found: the benchmark needs the shared data (set POLYSENT_SHARED_DATA)")
    raw = path.read_bytes()
    start = raw.index(b'"Q42":') + len(b'"Q42":')
    line = raw[start:raw.rindex(b"}", 0, raw.rindex(b"}"))].strip()
    if json.loads(line) != json.loads(raw)["entities"]["Q42"]:
        raise SystemExit(f"{path}: unexpected shape")
    return line


def replica(line: bytes, i: int) -> bytes:
    qid = b"Q%d" % (FIRST_ID + i)
    return (line.replace(b'"id":"Q42"', b'"id":"' + qid + b'"', 1).replace(b'"Q42$', b'"' + qid + b"$")
            .replace(b'"q42$', b'"' + qid.lower() + b"$"))


def _lines(line: bytes, lo: int, hi: int, total: int) -> bytes:
    out = [b"[\n"] if lo == 0 else []
    out += [replica(line, i) + (b",\n" if i < total - 1 else b"\n") for i in range(lo, hi)]
    if hi == total:
        out.append(b"]\n")
    return b"".join(out)


def _bz2_chunk(args: tuple[bytes, int, int, int]) -> bytes:
    return bz2.compress(_lines(*args), 9)


def write_dumps(folder: Path, entities: int, bz2_entities: int) -> tuple[Path, Path]:
    line = q42_line()
    plain = folder / f"q42x{entities}.json"
    with plain.open("wb") as f:
        for lo in range(0, entities, 500):
            f.write(_lines(line, lo, min(lo + 500, entities), entities))
    packed = folder / f"q42x{bz2_entities}.json.bz2"
    chunks = [(line, lo, min(lo + 100, bz2_entities), bz2_entities) for lo in range(0, bz2_entities, 100)]
    with packed.open("wb") as f, ProcessPoolExecutor(os.cpu_count()) as pool:
        for stream in pool.map(_bz2_chunk, chunks):
            f.write(stream)
    return plain, packed


def anchor_count(path: Path, kind: str) -> int:
    """The straightforward reader: every line decoded in full, the same fields kept."""
    from pipelines.wikidata import SKIPPED, EntityExtractor, WikidataSettings

    if kind == "orjson":
        import orjson

        loads = orjson.loads
    else:
        loads = json.loads
    ex = EntityExtractor(WikidataSettings())
    n = 0
    with (bz2.open(path, "rb") if path.suffix == ".bz2" else path.open("rb")) as fh:
        for raw in fh:
            line = raw.strip()
            if line in (b"", b"[", b"]"):
                continue
            if ex.from_dict(loads(line.removesuffix(b","))) is not SKIPPED:
                n += 1
    return n


def _child(kind: str, path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", _CHILD, kind, str(path)], capture_output=True, text=True, env=env,
                       cwd=REPO)
    if p.returncode:
        raise RuntimeError(f"benchmark child failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _measure(kind: str, path: Path, repeat: int, expect: int) -> dict:
    runs = [_child(kind, path) for _ in range(repeat)]
    for r in runs:
        if r["entities"] != expect:
            raise RuntimeError(f"{kind} read {r['entities']} entities from {path}, expected {expect}")
    return {"seconds": statistics.median(r["seconds"] for r in runs),
            "cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs), "rss": max(r["rss"] for r in runs),
            "full_parses": max(r.get("full_parses", 0) for r in runs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entities", type=int, default=20_000, help="Q42 replicas in the plain dump")
    ap.add_argument("--bz2-entities", type=int, default=2_000,
                    help="Q42 replicas in the .bz2 dump (decompression runs at ~25 MB/s: ~330 entities/s)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-root", type=Path, default=REPO / "data")
    a = ap.parse_args(argv)
    try:
        import orjson  # noqa: F401

        anchors = ["json", "orjson"]
    except ImportError:
        anchors = ["json"]
    rows: list[dict] = []
    mib = 1024 ** 2
    with tempfile.TemporaryDirectory(prefix="wikidata-bench-") as tmp:
        print(f"writing Q42 x {a.entities:,} (plain) and x {a.bz2_entities:,} (.bz2) to {tmp}", flush=True)
        plain, packed = write_dumps(Path(tmp), a.entities, a.bz2_entities)
        for label, path, n in (("plain", plain, a.entities), ("bz2 (decompression included)", packed,
                                                               a.bz2_entities)):
            ours = _measure("polysent", path, a.repeat, n)
            ref = {kind: _measure(kind, path, a.repeat, n) for kind in anchors}
            rate = n / ours["seconds"]
            parts = [f"wikidata Q42×{n} {label}: polysent {rate:,.0f} ent/s ({n / ours['cpu_seconds']:,.0f} per CPU s)"]
            for kind in anchors:
                r = n / ref[kind]["seconds"]
                parts.append(f"anchor {kind}.loads {r:,.0f} ent/s, ratio {rate / r:.1f}×")
            target = "target >= 20,000 ent/s; " if path == plain else ""
            parts.append(f"peak RSS {ours['rss'] / mib:.0f} MiB ({target}{ours['full_parses']} lines decoded in full)")
            print(", ".join(parts), flush=True)
            for kind in anchors:
                rows.append({
                    "benchmark": f"wikidata_q42x{n}_{path.suffix.lstrip('.')}", "anchor": f"{kind}.loads",
                    "anchor_seconds": ref[kind]["seconds"], "polysent_seconds": ours["seconds"],
                    "ratio": ours["seconds"] / ref[kind]["seconds"], "speedup": ref[kind]["seconds"] / ours["seconds"],
                    "peak_rss_bytes": ours["rss"], "anchor_peak_rss_bytes": ref[kind]["rss"], "items": n,
                    "polysent_items_per_s": rate, "anchor_items_per_s": n / ref[kind]["seconds"],
                    "bytes": path.stat().st_size, "full_parses": ours["full_parses"],
                    "polysent_cpu_seconds": ours["cpu_seconds"], "anchor_cpu_seconds": ref[kind]["cpu_seconds"],
                })
    append_results(a.data_root, "wikidata_reader", [{**r, "repeat": a.repeat} for r in rows])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
