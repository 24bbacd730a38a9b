"""Check: the ``entity_vectors`` artifact is byte-identical however it is executed, also on a busy machine (issue 21).

Wikipedia2Vec training draws its page order and weights from the process-wide ``random`` / ``numpy.random`` streams;
other threads of a ``polysent run`` (Prefect's event client, run names) draw from them too, so on a busy machine the
Dask run and the thread pool gave different vectors now and then. ``pipelines/wikipedia/entity_vectors.py`` now trains
in a child process of its own. This script repeats the comparison with CPU-burning processes beside it and prints
``N/N identical`` per execution path:

* ``--mode stage`` (default, seconds per repetition): the ``entity_vectors`` stage on the English sample, run (a) on a
  worker thread while a neighbour thread draws from ``random`` every millisecond (what Prefect's websocket client does
  per frame) and (b) as a task on a 2-worker Dask ``LocalCluster`` (spawned processes, 1 thread each, the nanny's
  thread settings); both compared with the same stage run on the quiet main thread.
* ``--mode pipeline`` (about a minute per repetition on 2 cores): the scale-out test itself —
  ``tests/test_scale_out.py``'s corpus config run by ``polysent run`` on Prefect's thread pool and on a Dask
  LocalCluster, every artifact's content hash compared (the ``entity_vectors`` one reported on its own).

    python -m bench.entity_vectors_determinism [--mode stage|pipeline] [--repeat 5] [--burners 2]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.shared_data import REPO

sys.path.insert(0, str(REPO / "tests"))  # the sample chain and the scale-out config are the tests' own helpers

BURN = "while True: pass"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _burners(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(n)]


# -- the stage ------------------------------------------------------------------------------------------------------
def _stage(settings_json: str, dump: str, entities: str, lang: str, out: str) -> str:
    """Build the stage into ``out`` (a fresh folder); the Parquet file's hash. Picklable: a Dask task."""
    from pipelines.wikipedia.entity_vectors import EntityVectorSettings, build_entity_vectors

    folder = Path(out)
    folder.mkdir(parents=True)
    build_entity_vectors(EntityVectorSettings.model_validate_json(settings_json), Path(dump), Path(entities),
                         Path(lang), folder)
    return _sha(folder / "entity_vectors.parquet")


def _with_neighbour(work: Callable[[], str]) -> str:
    """``work()`` on a worker thread while another thread draws from the process-wide ``random`` stream."""
    stop = threading.Event()

    def neighbour() -> None:
        while not stop.is_set():
            random.getrandbits(32)  # a websocket frame mask (websockets, used by Prefect's event client)
            time.sleep(0.001)

    got: list[str] = []
    threads = [threading.Thread(target=neighbour, daemon=True), threading.Thread(target=lambda: got.append(work()))]
    for t in threads:
        t.start()
    threads[1].join()
    stop.set()
    threads[0].join()
    return got[0]


def stage_mode(repeat: int, burners: int, tmp: Path) -> dict[str, list[bool]]:
    import logging

    import yaml
    from conftest import SAMPLE
    from distributed import Client, LocalCluster
    from wiki_chain import build_chain

    from pipelines.wikipedia.entities import EntitySettings
    from pipelines.wikipedia.entity_vectors import EntityVectorSettings

    logging.getLogger("polysent").setLevel(logging.WARNING)
    dump = SAMPLE / "wikipedia" / "enwiki-sample.xml.bz2"
    default = yaml.safe_load((REPO / "configs" / "default.yaml").read_text(encoding="utf-8"))
    settings = EntityVectorSettings(**default["corpora"]["entity_vectors"]).model_dump_json()
    dirs = build_chain({"en": dump}, tmp / "chain", SAMPLE / "wikidata" / "entities.jsonl",
                       entities=EntitySettings(**default["corpora"]["entities"]))
    args = (settings, str(dump), str(dirs["entities"]), str(dirs["lang-en"]))
    reference = _stage(*args, str(tmp / "reference"))  # quiet: main thread, no burners yet
    print(f"reference (main thread, quiet machine): {reference}", flush=True)
    same: dict[str, list[bool]] = {"thread beside a random-drawing thread": [], "Dask LocalCluster worker": []}
    burning = _burners(burners)
    try:
        import dask

        dask.config.set({"distributed.worker.daemon": False})  # as flows/pipeline.py's task runner: workers may fork
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            for i in range(repeat):
                threaded = _with_neighbour(lambda i=i: _stage(*args, str(tmp / f"thread-{i}")))
                dask = client.submit(_stage, *args, str(tmp / f"dask-{i}"), pure=False).result()
                same["thread beside a random-drawing thread"].append(threaded == reference)
                same["Dask LocalCluster worker"].append(dask == reference)
                print(f"  {i + 1}/{repeat}: thread {threaded} dask {dask}", flush=True)
    finally:
        for p in burning:
            p.kill()
            p.wait()
    return same


# -- the pipeline ---------------------------------------------------------------------------------------------------
def pipeline_mode(repeat: int, burners: int, tmp: Path) -> dict[str, list[bool]]:
    from conftest import contents
    from test_scale_out import corpus_config

    def run(name: str, execution: dict | None) -> dict[str, str]:
        config = corpus_config(tmp, name, execution)
        proc = subprocess.run([sys.executable, "-m", "flows.cli", "run", str(config)], cwd=REPO, capture_output=True,
                              text=True, timeout=1800)
        if proc.returncode != 0:
            raise SystemExit(f"{name}: polysent run failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
        return contents(tmp / name)

    same: dict[str, list[bool]] = {"entity_vectors artifact": [], "every artifact": []}
    burning = _burners(burners)
    try:
        for i in range(repeat):
            t0 = time.perf_counter()
            threads, dask = run(f"threads-{i}", None), run(f"dask-{i}", {"runner": "dask", "workers": 2})
            ev_t = {k: v for k, v in threads.items() if k.startswith("entity_vectors/")}
            ev_d = {k: v for k, v in dask.items() if k.startswith("entity_vectors/")}
            assert ev_t, "no entity_vectors artifact: is entity_vectors.mode 'train' in configs/default.yaml?"
            same["entity_vectors artifact"].append(ev_t == ev_d)
            same["every artifact"].append(threads == dask)
            differ = sorted(k for k in threads.keys() | dask.keys() if threads.get(k) != dask.get(k))
            short = [",".join(v[:16] for v in ev.values()) for ev in (ev_t, ev_d)]
            print(f"  {i + 1}/{repeat} ({time.perf_counter() - t0:.0f} s): entity_vectors threads {short[0]} "
                  f"dask {short[1]}"
                  f"{'; differ: ' + ', '.join(differ) if differ else ''}", flush=True)
    finally:
        for p in burning:
            p.kill()
            p.wait()
    return same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("stage", "pipeline"), default="stage")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--burners", type=int, default=os.cpu_count() or 2,
                    help="CPU-burning processes beside the runs (default: one per core)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ev-determinism-") as tmp:
        run = stage_mode if args.mode == "stage" else pipeline_mode
        same = run(args.repeat, args.burners, Path(tmp))
    print(f"{args.mode} mode, {args.repeat} repetitions beside {args.burners} CPU burners "
          f"({time.perf_counter() - t0:.0f} s):")
    for path, flags in same.items():
        print(f"  {path}: {sum(flags)}/{len(flags)} identical")
    return 0 if all(all(f) for f in same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
