"""Benchmark of the evaluation suite against mteb: Tatoeba-36 + STS17 + MewsC-16, all-MiniLM-L6-v2, on the CPU.

Issue target: on 2 CPU cores polysent is ≥ 2× faster end-to-end than mteb on the same tasks and model, in the same
run, with identical numbers where the protocols match (methods.md §7.1, §7.4, §7.5, §9).

Both sides run end-to-end (read the files, load the model, encode, score) in a fresh child process per repeat, and
the wall time from spawn to exit (interpreter start and imports included) is what is compared; the repeats are
interleaved (mteb, polysent, mteb, …) and the median is reported. Thread settings are left at their defaults on both
sides (torch uses one thread per core); the environment is passed on unchanged except for the hub's offline switches.

* **polysent**: ``pipelines.eval_sets.build_eval_sets`` (the local Tatoeba folder, the STS17 folder, the MewsC-16
  folder; the empty sentence ``de_sentences.txt:3128`` skipped) → ``models.evaluation.suite.evaluate_model`` with only
  the tatoeba, sts and clustering sections set and no embedding cache (``cache_root=None``: a cold run). Every text is
  encoded once (length-sorted batches of ≈4,096 padded tokens); each task then scores all its protocols (Tatoeba
  canonical + xtreme + mteb, STS canonical + mteb, clustering EASE k-means/Hungarian + mteb V-measure).
* **mteb** (PyPI ``mteb`` 2.26.24, sentence-transformers ``SentenceTransformer(model, device="cpu")``): local tasks
  whose ``load_data`` reads the same files, with the metadata of mteb's ``Tatoeba`` (``AbsTaskBitextMining``, xx→en,
  main score f1), ``STS17Crosslingual`` (``AbsTaskSTS``, scores 0–5, cosine_spearman) and ``MewsC16JaClustering``
  (``AbsTaskClustering``, v_measure) — one STS task with a subset per local track (file column order kept: tracks 2,
  4b, 6 have the English sentence first; track 6 scored on its first 250 lines), one clustering task per MewsC-16
  language with ``max_document_to_embed = max_fraction_of_documents_to_embed = None`` (every document embedded, and
  each language's bootstrap draws from its own ``random.Random(42)``, as polysent scores it). ``mteb.evaluate`` with
  the default encode kwargs (batch size 32), a result cache in a temporary folder, ``overwrite_strategy="always"``.
  mteb's own phase timings (``TaskResult.evaluation_phases``: Data loading, Encoding, Scoring) give its split.

Numbers compared where the protocols match: Tatoeba mteb f1/accuracy per language vs polysent's ``tatoeba``/``mteb``
rows; STS17 cosine_spearman per track vs ``sts``/``mteb``; MewsC-16 v_measure vs ``clustering``/``mteb``. polysent
stores points (×100), mteb [0, 1]: differences are given in mteb's [0, 1] scale. The embeddings of the two sides are
not bit-identical (other batches, other padding: the last float bits move), so near-ties may flip.

After the runs the parent measures this machine's float32 floor (``bench/encoder_ceiling.py``: the linear-layer FLOPs
of the distinct texts at the CPU's best GEMM rate for the model's layer shapes) and prints the largest speedup over
the anchor that float32 arithmetic allows here: anchor seconds / (floor + polysent's seconds outside encoding).

One line per figure is printed; the figures go to the warehouse's ``bench_results`` (benchmark
``evaluation_vs_mteb``; ``ratio`` = polysent seconds / mteb seconds, ``speedup`` its inverse).

    python -m bench.evaluation_vs_mteb [--data ../shared/data] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.results import append_results
from bench.shared_data import (
    REPO,
    SHARED,
    has_shared_data,
    model_dir,
    read_mewsc,
    read_sts17,
    read_tatoeba,
)

MTEB_VERSION = "2.26.24"
TARGET = 2.0
IDENTICAL = 1e-9  # in mteb's [0, 1] scale

# ISO 639-3 + script as mteb's task metadata writes them
STS_LANGS = {"ar": "ara-Arab", "en": "eng-Latn", "es": "spa-Latn", "tr": "tur-Latn"}
MEWSC_LANGS = {"ar": "ara-Arab", "de": "deu-Latn", "en": "eng-Latn", "es": "spa-Latn", "fr": "fra-Latn",
               "ja": "jpn-Jpan", "ru": "rus-Cyrl", "tr": "tur-Latn"}
# STS17 tracks whose first column is the English sentence (polysent's pipelines.eval_sets.sts keeps this order too)
STS17_ENGLISH_FIRST = {"track2.ar-en", "track4b.es-en", "track6.tr-en"}

_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from pathlib import Path
from bench.evaluation_vs_mteb import run_mteb, run_polysent
side, data, work, dtype = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
res = run_mteb(data, work, t0) if side == "mteb" else run_polysent(data, work, t0, dtype)
print(json.dumps(res))
"""


# ---------------------------------------------------------------------------------------------- mteb side: the tasks


def mteb_tasks(data: Path) -> list[Any]:
    """mteb tasks over the local files: Tatoeba (one subset per language), STS17 (one subset per track), MewsC-16
    (one task per language). The metadata is copied from mteb's own task definitions; ``load_data`` reads the files."""
    from datasets import Dataset, DatasetDict
    from mteb.abstasks import AbsTaskBitextMining, AbsTaskClustering, AbsTaskSTS
    from mteb.tasks.bitext_mining.multilingual.tatoeba_bitext_mining import _LANGUAGES as TATOEBA_LANGS
    from mteb.tasks.bitext_mining.multilingual.tatoeba_bitext_mining import TatoebaBitextMining
    from mteb.tasks.clustering.jpn.mews_c16_ja_clustering import MewsC16JaClustering
    from mteb.tasks.sts.multilingual.sts17_crosslingual_sts import STS17Crosslingual

    tatoeba_dir, sts_dir, mewsc_dir = data / "tatoeba", data / "sts" / "sts17", data / "mewsc16"
    tatoeba_langs = sorted(p.name[len("tatoeba."):-len("-eng.eng")] for p in tatoeba_dir.glob("tatoeba.*-eng.eng"))
    sts_tracks = sorted(p.name[len("STS.input."):-len(".txt")] for p in sts_dir.glob("STS.input.*.txt"))
    mewsc_langs = sorted(p.name[: -len("_sentences.txt")] for p in mewsc_dir.glob("*_sentences.txt"))

    def local(meta: Any, name: str, eval_langs: Any) -> Any:
        return meta.model_copy(update={"name": name, "eval_langs": eval_langs,
                                       "dataset": {"path": f"local/{name}", "revision": "local"}})

    def sts_langs(track: str) -> list[str]:
        a, b = track.split(".")[1].split("-")
        first, second = (b, a) if track in STS17_ENGLISH_FIRST else (a, b)
        return list(dict.fromkeys([STS_LANGS[first], STS_LANGS[second]]))

    class LocalTatoeba(AbsTaskBitextMining):
        metadata = local(TatoebaBitextMining.metadata, "LocalTatoeba",
                         {f"{lang}-eng": TATOEBA_LANGS[f"{lang}-eng"] for lang in tatoeba_langs})

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            if self.data_loaded:
                return
            self.dataset = {f"{lang}-eng": DatasetDict({"test": Dataset.from_dict(
                {"sentence1": xx, "sentence2": eng})}) for lang, (xx, eng) in read_tatoeba(tatoeba_dir).items()}
            self.data_loaded = True

    class LocalSTS17(AbsTaskSTS):
        metadata = local(STS17Crosslingual.metadata, "LocalSTS17", {t: sts_langs(t) for t in sts_tracks})
        min_score = STS17Crosslingual.min_score
        max_score = STS17Crosslingual.max_score

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            if self.data_loaded:
                return
            self.dataset = {track: DatasetDict({"test": Dataset.from_dict(
                {"sentence1": s1, "sentence2": s2, "score": gold})})
                for track, (s1, s2, gold) in read_sts17(sts_dir).items()}
            self.data_loaded = True

    def clustering_task(lang: str) -> Any:
        class LocalMewsC16(AbsTaskClustering):
            max_document_to_embed = None
            max_fraction_of_documents_to_embed = None
            metadata = local(MewsC16JaClustering.metadata, f"LocalMewsC16{lang.capitalize()}Clustering",
                             [MEWSC_LANGS[lang]])

            def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
                if self.data_loaded:
                    return
                text, label = read_mewsc(mewsc_dir)[lang]
                self.dataset = DatasetDict({"test": Dataset.from_dict({"sentences": text, "labels": label})})
                self.data_loaded = True

        return LocalMewsC16()

    return [LocalTatoeba(), LocalSTS17(), *(clustering_task(lang) for lang in mewsc_langs)]


def _family(task_name: str) -> str:
    return "tatoeba" if "Tatoeba" in task_name else "sts" if "STS" in task_name else "clustering"


def run_mteb(data: Path, work: Path, t0: float) -> dict[str, Any]:
    """The mteb side in this process; ``t0`` = the child's start (imports are timed from it)."""
    import mteb
    from sentence_transformers import SentenceTransformer

    t_import = time.perf_counter()
    tasks = mteb_tasks(data)
    model = SentenceTransformer(str(model_dir()), device="cpu")
    t_model = time.perf_counter()
    result = mteb.evaluate(model, tasks, cache=mteb.ResultCache(work / "mteb-cache"), overwrite_strategy="always",
                           show_progress_bar=False)
    t_eval = time.perf_counter()
    if result.exceptions:
        raise RuntimeError(f"mteb task errors: {result.exceptions}")
    import torch

    scores: dict[str, dict[str, dict[str, float]]] = {}
    phases: dict[str, float] = defaultdict(float)
    for tr in result.task_results:
        family = _family(tr.task_name)
        for row in tr.scores["test"]:
            subset = row["hf_subset"]
            if family == "clustering":
                subset = tr.task_name[len("LocalMewsC16"):-len("Clustering")].lower()
            scores.setdefault(family, {})[subset] = {k: float(v) for k, v in row.items()
                                                      if isinstance(v, int | float) and not isinstance(v, bool)}
        for ph in tr.evaluation_phases or ():
            phases[f"{family}/{ph['name']}"] += ph["end"] - ph["start"]
    return {"side": "mteb", "scores": scores, "phases": dict(phases), "threads": torch.get_num_threads(),
            "seconds": {"import": t_import - t0, "model_load": t_model - t_import, "evaluate": t_eval - t_model,
                        "total": t_eval - t0}}


# ---------------------------------------------------------------------------------------------- polysent side


def run_polysent(data: Path, work: Path, t0: float, dtype: str = "float32") -> dict[str, Any]:
    """The polysent side in this process: eval_sets stage, then ``evaluate_model`` (no embedding cache; ``dtype`` =
    ``EvaluationSettings.dtype``)."""
    import torch

    from models.evaluation.settings import EvaluationSettings
    from models.evaluation.suite import evaluate_model
    from models.evaluation.tasks.clustering import ClusteringSettings
    from models.evaluation.tasks.sts import StsSettings
    from models.evaluation.tasks.tatoeba import TatoebaSettings
    from pipelines.eval_sets import EvalSetsSettings, EvalSources, build_eval_sets

    t_import = time.perf_counter()
    sets, out = work / "sets", work / "out"
    sets.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    built = build_eval_sets(EvalSetsSettings(clustering_empty_sentences="skip"),
                            EvalSources(tatoeba=data / "tatoeba", sts=data / "sts" / "sts17",
                                        clustering=data / "mewsc16"), sets)
    tables = {table: sets / rel for table, rel in built.tables.items()}
    t_sets = time.perf_counter()
    settings = EvaluationSettings(tatoeba=TatoebaSettings(), sts=StsSettings(), clustering=ClusteringSettings(),
                                  bucc=None, classification=None, xsim=None, geometry=None, langid=None, dtype=dtype)
    res = evaluate_model(settings, model_dir(), tables, out, run="minilm", cache_root=None, progress=False)
    t_eval = time.perf_counter()
    inner = res.stats["seconds"]
    return {"side": "polysent", "results": str(out / "eval_results.parquet"), "threads": torch.get_num_threads(),
            "sentences": res.stats["sentences"], "rows": built.stats["rows"], "phases": inner,
            "seconds": {"import": t_import - t0, "eval_sets": t_sets - t_import, "evaluate": t_eval - t_sets,
                        "model_load_and_write": (t_eval - t_sets) - sum(inner.values()), "total": t_eval - t0}}


# ---------------------------------------------------------------------------------------------- the parent


def _child(side: str, data: Path, work: Path, timeout: float, dtype: str) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("HF_DATASETS_OFFLINE", "1")
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _CHILD, side, str(data), str(work), dtype], capture_output=True,
                       text=True, env=env, cwd=REPO, timeout=timeout)
    wall = time.perf_counter() - t0
    if p.returncode:
        raise RuntimeError(f"{side} child failed (exit {p.returncode}):\n{p.stderr[-4000:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["wall"] = wall
    return res


def polysent_scores(path: Path) -> dict[str, dict[str, dict[str, float]]]:
    """The ``variant == "mteb"`` rows of ``eval_results`` as {task: {key: {metric: value in [0, 1]}}}, keyed as the
    mteb side keys them (``afr-eng``, ``track1.ar-ar``, ``ar``)."""
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["task", "variant", "subset", "metric", "value"]).to_pylist()
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in t:
        if r["variant"] != "mteb":
            continue
        key = r["subset"]
        if r["task"] == "tatoeba":
            key = f"{key}-eng"
        elif "/" in key:
            key = key.split("/", 1)[1]
        out.setdefault(r["task"], {}).setdefault(key, {})[r["metric"]] = r["value"] / 100.0
    return out


COMPARED = {"tatoeba": ("f1", "accuracy"), "sts": ("cosine_spearman",), "clustering": ("v_measure",)}


def compare(mteb: dict, ours: dict) -> dict[str, dict[str, Any]]:
    """Per task: every compared entry (key, metric, mteb, polysent, |Δ|) in key order, how many are identical
    (|Δ| ≤ 1e-9 in [0, 1]), the max |Δ|, and the keys only one side has."""
    out = {}
    for task, metrics in COMPARED.items():
        m, p = mteb.get(task, {}), ours.get(task, {})
        missing = sorted(set(m) ^ set(p))
        diffs = []
        for key in sorted(set(m) & set(p)):
            for metric in metrics:
                diffs.append((key, metric, m[key][metric], p[key][metric], abs(p[key][metric] - m[key][metric])))
        out[task] = {"entries": diffs, "compared": len(diffs), "identical": sum(d[-1] <= IDENTICAL for d in diffs),
                     "max_abs_diff": max((d[-1] for d in diffs), default=float("nan")), "missing": missing}
    return out


def print_table(agreement: dict[str, dict[str, Any]]) -> None:
    """One line per compared key: each metric as mteb | polysent (both in [0, 1]) and |Δ|; ≠ marks |Δ| > 1e-9."""
    print("comparison (mteb | polysent, [0, 1] scale; ≠: |Δ| > 1e-9):")
    for task, c in agreement.items():
        by_key: dict[str, list[str]] = {}
        for key, metric, mv, pv, d in c["entries"]:
            mark = "≠" if d > IDENTICAL else " "
            by_key.setdefault(key, []).append(f"{metric} {mv:.6f} | {pv:.6f} Δ {d:.1e}{mark}")
        for key, cells in by_key.items():
            print(f"  {task:<10} {key:<14} " + "   ".join(cells))


def _each(runs: list[dict]) -> str:
    return "/".join(f"{r['wall']:.1f}" for r in runs) + " s"


def _phase_line(label: str, parts: dict[str, float]) -> str:
    return f"  {label}: " + ", ".join(f"{k} {v:.1f} s" for k, v in parts.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=SHARED, help="shared data root (tatoeba/, sts/sts17/, mewsc16/)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-root", type=Path, default=REPO / "data", help="warehouse root (bench_results)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per child run")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                    help="polysent's EvaluationSettings.dtype: float32 (mteb's numerics, the issue's comparison) or "
                         "bfloat16 (autocast; faster on CPUs with AMX / AVX-512 BF16; numbers move; mteb stays "
                         "float32)")
    a = ap.parse_args(argv)
    if not has_shared_data(a.data):
        return 2
    model_dir()
    runs: dict[str, list[dict]] = {"mteb": [], "polysent": []}
    with tempfile.TemporaryDirectory(prefix="eval-vs-mteb-") as tmp:
        for i in range(a.repeat):
            for side in ("mteb", "polysent"):
                work = Path(tmp) / f"{side}-{i}"
                r = _child(side, a.data, work, a.timeout, a.dtype)
                if side == "polysent":
                    r["scores"] = polysent_scores(Path(r["results"]))
                shutil.rmtree(work, ignore_errors=True)
                runs[side].append(r)
                print(f"  run {i + 1}/{a.repeat} {side}: {r['wall']:.1f} s", flush=True)

    m_runs, p_runs = runs["mteb"], runs["polysent"]
    m_s = statistics.median(r["wall"] for r in m_runs)
    p_s = statistics.median(r["wall"] for r in p_runs)
    speedup = m_s / p_s
    med = statistics.median
    print(f"evaluation Tatoeba-{len(m_runs[0]['scores'].get('tatoeba', {}))} + STS17 "
          f"({len(m_runs[0]['scores'].get('sts', {}))} tracks) + MewsC-16 "
          f"({len(m_runs[0]['scores'].get('clustering', {}))} languages), all-MiniLM-L6-v2, CPU, "
          f"torch threads mteb {m_runs[0]['threads']} / polysent {p_runs[0]['threads']}, "
          f"TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM', 'unset')}, "
          f"polysent dtype {a.dtype}, {p_runs[0]['sentences']:,} distinct sentences, median of {a.repeat} "
          "(interleaved):")
    print(f"anchor mteb {MTEB_VERSION} {m_s:.1f} s (runs {_each(m_runs)})")
    print(f"polysent {p_s:.1f} s (runs {_each(p_runs)})")
    print(f"speedup {speedup:.2f}× (target ≥ {TARGET:g}×: {'met' if speedup >= TARGET else 'NOT met'})")

    p_parts = {k: med(r["seconds"][k] for r in p_runs) for k in ("import", "eval_sets")}
    p_parts["model load + write"] = med(r["seconds"]["model_load_and_write"] for r in p_runs)
    for k in p_runs[0]["phases"]:
        p_parts[k] = med(r["phases"][k] for r in p_runs)
    p_parts["process start/exit"] = med(r["wall"] - r["seconds"]["total"] for r in p_runs)
    print(_phase_line("polysent phases (median)", p_parts))
    m_parts = {"import": med(r["seconds"]["import"] for r in m_runs),
               "model load": med(r["seconds"]["model_load"] for r in m_runs)}
    names = sorted({k for r in m_runs for k in r["phases"]})
    for k in names:
        m_parts[k] = med(r["phases"].get(k, 0.0) for r in m_runs)
    m_enc = med(sum(v for k, v in r["phases"].items() if "/Encoding" in k) for r in m_runs)
    m_score = med(sum(v for k, v in r["phases"].items() if k.endswith("/Scoring")) for r in m_runs)
    m_parts["evaluate() other"] = med(r["seconds"]["evaluate"] - sum(r["phases"].values()) for r in m_runs)
    m_parts["process start/exit"] = med(r["wall"] - r["seconds"]["total"] for r in m_runs)
    print(_phase_line("mteb phases (median)", m_parts))
    print(f"  encode: mteb {m_enc:.1f} s, polysent {p_parts['encode']:.1f} s ({m_enc / p_parts['encode']:.2f}×); "
          f"scoring: mteb {m_score:.1f} s, polysent "
          f"{sum(p_parts[k] for k in ('tatoeba', 'sts', 'clustering') if k in p_parts):.1f} s "
          f"(polysent scores every protocol of these tasks, not only mteb's)")

    for side, rs in runs.items():
        if any(r["scores"] != rs[0]["scores"] for r in rs[1:]):
            print(f"note: {side}'s numbers differ between repeats", flush=True)
    agreement = compare(m_runs[-1]["scores"], p_runs[-1]["scores"])
    print_table(agreement)
    for task, c in agreement.items():
        metrics = "/".join(COMPARED[task])
        print(f"numbers {task} ({metrics}): {c['identical']}/{c['compared']} identical to {IDENTICAL:g}, "
              f"max |Δ| {c['max_abs_diff']:.3g} (mteb's [0, 1] scale)"
              + (f"; only on one side: {c['missing']}" if c["missing"] else ""))

    # the float32 floor of this machine (bench/encoder_ceiling.py): measured after the runs, in this process
    from bench.encoder_ceiling import ceiling, report_lines

    floor = ceiling(a.data, model_dir())
    other = p_s - p_parts["encode"]
    for line in report_lines(floor, m_s, other):
        print(line)

    rows: list[dict[str, Any]] = [{
        "benchmark": "evaluation_vs_mteb", "anchor": f"mteb {MTEB_VERSION}", "anchor_seconds": m_s,
        "polysent_seconds": p_s, "ratio": p_s / m_s, "speedup": speedup, "target_speedup": TARGET,
        "repeat": a.repeat, "sentences": p_runs[0]["sentences"], "anchor_runs_seconds": [r["wall"] for r in m_runs],
        "polysent_runs_seconds": [r["wall"] for r in p_runs], "anchor_encode_seconds": m_enc,
        "anchor_scoring_seconds": m_score, "polysent_encode_seconds": p_parts["encode"],
        "polysent_phases": json.dumps(p_parts), "anchor_phases": json.dumps(m_parts),
        "torch_threads": p_runs[0]["threads"], "polysent_dtype": a.dtype,
        "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM"),
        "floor_seconds": floor["floor_seconds"], "floor_with_attention_seconds": floor["floor_with_attention_seconds"],
        "gemm_rate": floor["gemm_rate"], "linear_flops": floor["linear_flops"], "tokens": floor["tokens"],
        "max_possible_speedup": m_s / (floor["floor_seconds"] + other),
    }]
    for task, c in agreement.items():
        rows.append({"benchmark": f"evaluation_vs_mteb_numbers_{task}", "anchor": f"mteb {MTEB_VERSION}",
                     "repeat": a.repeat, "polysent_dtype": a.dtype, "compared": c["compared"],
                     "identical": c["identical"], "max_abs_diff": c["max_abs_diff"]})
    append_results(a.data_root, "evaluation_vs_mteb", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
