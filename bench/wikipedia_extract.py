"""Benchmark of the Wikipedia sentence–entity pair extraction against wikiextractor and wikipedia2vec (same run).

Input: the English sample (``../shared/data/wikipedia/enwiki-sample.xml.bz2``, 206 pages, 6.1 MB XML) replicated
``--copies`` times by ``bench.synthetic_wiki`` (new ids, titles and in-dump links per copy) as a real
``pages-articles-multistream.xml.bz2`` with its index, under ``<work>/wiki/``. Every tool reads that same file.

Issue targets, 2 processes, ×10 (61 MB XML): polysent (cleaning + ICU sentence splitting + link resolution + Parquet)
≥ 2× faster than ``wikiextractor --links`` and ≥ 5× faster than ``wikipedia2vec build-dump-db``; peak RSS ≤ 1 GiB and
flat from ×10 to ×50. Anchors (10× only unless ``--anchor-copies`` says more):

* ``bzcat FILE > /dev/null`` (decompression only, one core: the floor);
* ``python -m wikiextractor.WikiExtractor FILE --links -o OUT --processes P -q`` (PyPI ``wikiextractor`` 3.1);
* ``wikipedia2vec build-dump-db FILE OUT.db --pool-size P`` (PyPI ``wikipedia2vec`` 2.0.0, the venv's entry point).

polysent runs ``pipelines.wikipedia.extract.extract_pairs(dump, lang, out, processes=P, index=INDEX)``.

Every run is a fresh child process (wall time from spawn to exit, interpreter start included for every tool),
``--repeat`` times, interleaved across tools; the median is reported. Memory: every 20 ms the bench sums the resident
set (VmRSS) of the child and all its descendants (worker processes): the peak of that sum is "peak RSS tree" (shared
pages count once per process, so it over-states a forked pool); the child's own ``VmHWM`` is reported beside it
(polysent's child reports its own at exit; for the anchors it is the last value sampled). Rows go to the warehouse's
``bench_results`` (benchmark ``wikipedia_extract``).

    python -m bench.wikipedia_extract [--copies 10 50] [--repeat 3] [--processes 2] [--skip-anchors]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.results import append_results
from bench.shared_data import REPO

DEFAULT_SRC = REPO.parent / "shared" / "data" / "wikipedia" / "enwiki-sample.xml.bz2"
MIB = 1024 * 1024
PAGE = os.sysconf("SC_PAGE_SIZE")
TARGETS = {"wikiextractor": 2.0, "wikipedia2vec": 5.0}

_CHILD_POLYSENT = """
import json, sys, time
t0 = time.perf_counter()
from pathlib import Path
try:
    from pipelines.wikipedia.extract import extract_pairs
except ImportError as exc:
    print(json.dumps({"unavailable": f"{type(exc).__name__}: {exc}"}))
    raise SystemExit(0)
dump, lang, out, processes, index = sys.argv[1:6]
t1 = time.perf_counter()
counts = extract_pairs(Path(dump), lang, Path(out), processes=int(processes),
                       index=None if index == "-" else Path(index))
t2 = time.perf_counter()
hwm = 0
for line in Path("/proc/self/status").read_text().splitlines():
    if line.startswith("VmHWM:"):
        hwm = int(line.split()[1]) * 1024
print(json.dumps({"counts": dict(counts), "import_s": t1 - t0, "extract_s": t2 - t1, "hwm": hwm}, default=str))
"""


# ---------------------------------------------------------------------------------------------- process-tree memory


def _status_kib(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _tree_pids(root: int) -> list[int]:
    """``root`` and all its live descendants: psutil when installed, else one scan of /proc/*/stat (this kernel may
    lack /proc/*/task/*/children)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            return [root, *(c.pid for c in psutil.Process(root).children(recursive=True))]
        except psutil.Error:
            return [root]
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        try:
            ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


@dataclass
class Run:
    seconds: float
    rc: int
    peak_tree: int  # bytes: peak over samples of the summed VmRSS of the child and its descendants
    own_hwm: int  # bytes: the child's VmHWM (last sampled, or self-reported)
    max_procs: int
    peak_single: int = 0  # bytes: the largest VmRSS sampled of any one process of the tree
    stdout: str = ""
    stderr: str = ""
    extra: dict = field(default_factory=dict)


def run_measured(cmd: list[str], *, cwd: Path | None = None, env: dict | None = None, capture_stdout: bool = True,
                 interval: float = 0.02, timeout: float | None = None) -> Run:
    """Run ``cmd`` in a fresh process (own session), timing it and sampling its process tree's RSS every
    ``interval`` seconds from a thread, while the main thread waits for it (so the wall time is exact)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out if capture_stdout else subprocess.DEVNULL, stderr=err,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        peak = {"tree": 0, "hwm": 0, "procs": 0, "single": 0}
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                pids = _tree_pids(p.pid)
                rss = [_rss_bytes(pid) for pid in pids]
                total = sum(rss)
                peak["single"] = max(peak["single"], *rss)
                hwm = _status_kib(p.pid, b"VmHWM:") * 1024
                peak["tree"] = max(peak["tree"], total)
                peak["hwm"] = max(peak["hwm"], hwm)
                peak["procs"] = max(peak["procs"], len(pids))
                stop.wait(interval)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            rc = p.wait(timeout=timeout)
        except BaseException:
            _kill_session(p)
            raise
        finally:
            seconds = time.perf_counter() - t0
            stop.set()
            sampler.join()
        _kill_session(p)  # stray workers of a tool that exited early
        out.seek(0)
        err.seek(0)
        return Run(seconds=seconds, rc=rc, peak_tree=peak["tree"], own_hwm=peak["hwm"], max_procs=peak["procs"],
                   peak_single=peak["single"],
                   stdout=out.read().decode("utf-8", "replace"), stderr=err.read().decode("utf-8", "replace"))


def _kill_session(p: subprocess.Popen) -> None:
    """End the process group this bench started for ``p`` (its own session), and nothing else."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.wait(timeout=10)


# ---------------------------------------------------------------------------------------------------------- tools


@dataclass
class Tool:
    name: str
    available: str | None  # None when usable, else why not

    def command(self, dump: Path, index: Path, out: Path, processes: int, lang: str) -> list[str]:
        raise NotImplementedError


class Bzcat(Tool):
    def command(self, dump, index, out, processes, lang):
        return ["bzcat", str(dump)]


class WikiExtractor(Tool):
    def command(self, dump, index, out, processes, lang):
        return [sys.executable, "-m", "wikiextractor.WikiExtractor", str(dump), "--links", "-o", str(out / "text"),
                "--processes", str(processes), "-q"]


class Wikipedia2Vec(Tool):
    def __init__(self, name: str, available: str | None, exe: str) -> None:
        super().__init__(name, available)
        self.exe = exe

    def command(self, dump, index, out, processes, lang):
        return [self.exe, "build-dump-db", str(dump), str(out / "dump.db"), "--pool-size", str(processes)]


class Polysent(Tool):
    def command(self, dump, index, out, processes, lang):
        return [sys.executable, "-c", _CHILD_POLYSENT, str(dump), lang, str(out / "pairs"), str(processes),
                str(index) if index else "-"]


def anchor_tools() -> list[Tool]:
    venv_w2v = Path(sys.executable).parent / "wikipedia2vec"
    w2v = str(venv_w2v) if venv_w2v.exists() else shutil.which("wikipedia2vec")
    return [
        WikiExtractor("wikiextractor", None if importlib.util.find_spec("wikiextractor") else
                      "not installed (pip install wikiextractor==3.1)"),
        Wikipedia2Vec("wikipedia2vec", None if w2v else "not installed (pip install wikipedia2vec==2.0.0)", w2v or ""),
        Bzcat("bzcat", None if shutil.which("bzcat") else "bzcat not on PATH"),
    ]


def measure(tool: Tool, dump: Path, index: Path, processes: int, lang: str, scratch: Path,
            timeout: float | None) -> Run:
    scratch.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix=f"{tool.name}-", dir=scratch))
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        run = run_measured(tool.command(dump, index, out, processes, lang), cwd=REPO, env=env,
                           capture_stdout=not isinstance(tool, Bzcat), timeout=timeout)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if isinstance(tool, Polysent) and run.rc == 0:
        lines = run.stdout.strip().splitlines()
        try:
            run.extra = json.loads(lines[-1]) if lines else {}
        except ValueError:
            run.extra = {"error": f"no JSON result on stdout: {run.stdout[-500:]}"}
        if run.extra.get("hwm"):
            run.own_hwm = run.extra["hwm"]
    return run


# ---------------------------------------------------------------------------------------------------------- report


def _fmt_s(s: float | None) -> str:
    return "n/a" if s is None else f"{s:.1f} s" if s >= 1 else f"{s:.2f} s"


def _mib(b: float) -> str:
    return f"{b / MIB:,.0f} MiB"


def prepare(src: Path, work: Path, copies: int) -> tuple[Path, Path, dict]:
    from bench.synthetic_wiki import read_meta, replicate_dump

    t0 = time.perf_counter()
    dump, index = replicate_dump(src, work, copies)
    assert index is not None
    meta = read_meta(dump)
    took = time.perf_counter() - t0
    if took > 1:
        print(f"generated ×{copies}: {dump.name} ({meta['pages']:,} pages, {meta['xml_bytes'] / 1e6:.1f} MB XML, "
              f"{dump.stat().st_size / 1e6:.1f} MB bz2, {meta['streams']} streams) in {took:.1f} s", flush=True)
    else:
        print(f"input ×{copies}: {dump} exists (sidecar matches; generated in {meta['seconds']:.1f} s)", flush=True)
    return dump, index, meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, nargs="+", default=[10, 50], help="replication sizes")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--skip-anchors", action="store_true")
    ap.add_argument("--anchor-copies", type=int, nargs="*", default=[10],
                    help="sizes at which the anchors run too (default: 10)")
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC)
    ap.add_argument("--lang", default="en")
    ap.add_argument("--work", type=Path, default=REPO / "data" / "bench-inputs", help="inputs go to WORK/wiki")
    ap.add_argument("--data-root", type=Path, default=REPO / "data")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    a = ap.parse_args(argv)
    if not a.src.exists():
        print(f"source dump {a.src} not found (../shared/data is needed, or pass --src)", file=sys.stderr)
        return 2
    wiki = a.work / "wiki"
    wiki.mkdir(parents=True, exist_ok=True)
    scratch = wiki / "tmp"
    anchors = [] if a.skip_anchors else anchor_tools()
    for t in anchors:
        if t.available:
            print(f"{t.name}: {t.available}; skipped", flush=True)
    anchors = [t for t in anchors if not t.available]
    polysent = Polysent("polysent", None)
    polysent_ok = True
    rows: list[dict] = []
    rss_by_size: dict[int, tuple[int, int]] = {}

    for copies in a.copies:
        dump, index, meta = prepare(a.src, wiki, copies)
        dump.read_bytes()  # warm the page cache: every tool then reads it from memory
        tools: list[Tool] = [polysent] if polysent_ok else []
        tools += [t for t in anchors if copies in a.anchor_copies]
        runs: dict[str, list[Run]] = {t.name: [] for t in tools}
        failed: dict[str, str] = {}
        for _ in range(a.repeat):
            for tool in tools:
                if tool.name in failed:
                    continue
                r = measure(tool, dump, index, a.processes, a.lang, scratch, a.timeout)
                if r.rc != 0:
                    failed[tool.name] = f"exit {r.rc}: {r.stderr.strip()[-1500:]}"
                    continue
                if isinstance(tool, Polysent) and "unavailable" in r.extra:
                    failed[tool.name] = r.extra["unavailable"]
                    continue
                if isinstance(tool, Polysent) and "error" in r.extra:
                    failed[tool.name] = r.extra["error"]
                    continue
                runs[tool.name].append(r)

        mb, pages = meta["xml_bytes"] / 1e6, meta["pages"]
        med = {name: statistics.median(r.seconds for r in rs) for name, rs in runs.items() if rs}
        ps = med.get("polysent")
        if "polysent" in failed:
            why = failed["polysent"]
            if "extract_pairs" in why and "cannot import name" in why:
                print("polysent: extract_pairs not available yet", flush=True)
            else:
                print(f"polysent: failed ({why})", flush=True)
            polysent_ok = not why.startswith(("ImportError", "ModuleNotFoundError"))
        for name, why in failed.items():
            if name != "polysent":
                print(f"{name} ×{copies}: failed ({why})", flush=True)

        pairs = None
        if runs.get("polysent"):
            counts = runs["polysent"][0].extra.get("counts", {})
            pairs = counts.get("pairs", counts.get("links"))
            if counts.get("xml_bytes") and abs(int(counts["xml_bytes"]) - meta["xml_bytes"]) > 0.01 * meta["xml_bytes"]:
                print(f"note: extract_pairs counted {int(counts['xml_bytes']):,} XML bytes, the dump has "
                      f"{meta['xml_bytes']:,}", flush=True)

        parts = [f"polysent {_fmt_s(ps)}"]
        for t in tools:
            if t.name == "polysent" or t.name not in med:
                continue
            ratio = ""
            if ps and t.name != "bzcat":  # bzcat is the floor, not a competitor: its ratio is in the rows only
                target = f", target ≥ {TARGETS[t.name]:g}×" if t.name in TARGETS else ""
                ratio = f" ({med[t.name] / ps:.1f}×{target})"
            parts.append(f"{t.name} {_fmt_s(med[t.name])}{ratio}")
        head = f"wiki {a.lang}×{copies} ({mb:.1f} MB XML, {pages:,} pages, {a.processes} processes): "
        line = head + " | ".join(parts)
        if ps:
            pr = runs["polysent"]
            tree, own = max(r.peak_tree for r in pr), max(r.own_hwm for r in pr)
            rss_by_size[copies] = (tree, own)
            rates = f"{pages / ps:,.0f} pages/s, {mb / ps:.1f} MB/s"
            if pairs is not None:
                rates += f", {int(pairs) / ps:,.0f} pairs/s"
            line += f"; {rates}; peak RSS tree {_mib(tree)} (child's own {_mib(own)}; target ≤ 1,024 MiB)"
        print(line, flush=True)

        for t in tools:
            rs = runs.get(t.name) or []
            if not rs:
                continue
            sec = med[t.name]
            tree, own = max(r.peak_tree for r in rs), max(r.own_hwm for r in rs)
            procs = max(r.max_procs for r in rs)
            single = max(r.peak_single for r in rs)
            each = "/".join(f"{r.seconds:.1f}" for r in rs)
            extra = ""
            if t.name == "polysent":
                c = rs[0].extra
                inside = statistics.median(r.extra.get("extract_s", float("nan")) for r in rs)
                nums = {k: v for k, v in c.get("counts", {}).items()
                        if isinstance(v, int) and not isinstance(v, bool) and v}
                extra = (f", {inside:.1f} s inside extract_pairs (import {c.get('import_s', 0):.1f} s); counts "
                         + ", ".join(f"{k} {v:,}" for k, v in nums.items()))
            print(f"  {t.name} ×{copies}: {_fmt_s(sec)} (runs {each} s), {pages / sec:,.0f} pages/s, "
                  f"{mb / sec:.1f} MB/s; peak RSS tree {_mib(tree)} over ≤ {procs} processes (largest {_mib(single)}), "
                  f"child's own VmHWM {_mib(own)}{extra}", flush=True)
            rows.append({
                "benchmark": "wikipedia_extract", "copies": copies, "tool": t.name, "seconds": sec,
                "pages_per_s": pages / sec, "mb_per_s": mb / sec,
                "pairs_per_s": (int(pairs) / sec) if (t.name == "polysent" and pairs is not None) else None,
                "peak_rss_tree_mib": tree / MIB, "ratio_vs_polysent": (sec / ps) if ps else None,
                "own_hwm_mib": own / MIB, "largest_process_mib": single / MIB, "max_processes": procs,
                "processes": a.processes, "repeat": len(rs),
                "xml_bytes": meta["xml_bytes"], "pages": pages, "runs_seconds": [r.seconds for r in rs],
            })

    if rss_by_size:
        print("peak RSS " + ", ".join(f"×{c}: {tree / MIB:,.0f} MiB" for c, (tree, _) in sorted(rss_by_size.items()))
              + " (polysent process tree; child's own "
              + ", ".join(f"×{c}: {own / MIB:,.0f} MiB" for c, (_, own) in sorted(rss_by_size.items())) + ")",
              flush=True)
    for t in anchors:
        vals = [f"×{r['copies']}: {r['peak_rss_tree_mib']:,.0f} MiB" for r in rows if r["tool"] == t.name]
        if len(vals) > 1:
            print(f"peak RSS {t.name} " + ", ".join(vals), flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    append_results(a.data_root, "wikipedia_extract", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
