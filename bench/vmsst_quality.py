"""VMSST decided in the paper's random-init setting, scaled to 2 CPU cores: VMSST vs BITRANSLATION vs CONTRASTIVE vs
VMSST-CONTRASTIVE, small models from random initialisation with a corpus-trained tokenizer.

The paper's comparison (Wieting et al. 2023, Table 1's random-init 6-layer rows, §6) at a scale a CPU can run: the same
pivot-sampled pairs, the same encoder architecture, tokenizer, steps, batch, learning-rate schedule and seed for the
four methods; only the objective differs (and dropout, which the paper uses for CONTRASTIVE only: every method here is
``VmsstObjective`` with its ``variant``, whose ``semantic_dropout`` follows the paper). The numbers are printed as
measured; the paper's ordering need not hold at this scale. The claims tested (README "Replications"): VMSST beats
BITRANSLATION; VMSST ≥ CONTRASTIVE on STS while CONTRASTIVE leads on Tatoeba; VMSST-CONTRASTIVE ≈ CONTRASTIVE.

Protocol (the project's own stage functions, into ``--work``, rebuilt on every run):

1. Held-out documents. NTREX-128's 123 documents (``DOCUMENT_IDS.tsv``, in file order) are split by document: every
   ``--holdout-every``-th document (default 5th) is held out for xSIM, the others give training text.
2. Corpus. ``bitext_pairs`` (``pipelines.bitext.sampling.build_pairs``) with VMSST's **en and es pivots** and equal
   quotas per (pivot, language) (``--quota``) from two N-way sources: NTREX-128's training documents in en, es, de,
   fr, ru, it, pt, nl, tr (pairs en–x and es–x) and Multi30k's ``train`` split in en, de, fr, cs (en–x). The leakage
   guard (``pipelines.leakage``) removes every pair with a side in the evaluated Tatoeba files or in the held-out
   NTREX documents; the removed pairs are counted.
3. Tokenizer: the pipeline's BPE trainer (``models.tokenizer``) on the training pairs' texts (``--vocab``).
4. Models, one per method, from the same random initialisation seed: a BERT of ``--hidden`` × ``--layers`` (4 heads,
   FFN 4 × hidden, ``max_length`` 32 as the paper) + mean pooling + a bias-free projection (the exported embedding;
   μ_sem for the generative methods). CONTRASTIVE = ``VmsstObjective(variant="contrastive")`` (the paper's
   dot-product softmax on μ_sem, both directions; dropout 0.1); BITRANSLATION = ``variant="bitranslation"``; VMSST =
   ``VmsstObjective()`` with the paper's random-init λ = 0.1, a 1-layer language encoder and decoder, KL annealed over
   10 × the steps (the paper's 1M over 100k, so β ends at 0.1); VMSST-CONTRASTIVE = ``variant="vmsst_contrastive"``
   (contrastive + λ_vc·VMSST, λ_vc 0.0005 for this small random init). No dropout but for CONTRASTIVE. Same steps,
   batch of pairs, AdamW lr with 10 % warm-up and linear decay, seed.
5. Scores of each exported ``model/`` (``SentenceEncoder.load``): Tatoeba accuracy (mean of xx→en and en→xx, points)
   for the training languages that Tatoeba has, and xSIM error rate (ratio margin, k = 4; LASER's protocol) on the
   held-out NTREX documents, x→en and en→x, for every training language; STS17 (Spearman × 100, mean of the
   tracks whose two languages are both trained: of SemEval's release, es-es, es-en ×2, en-en, tr-en); plus the
   untrained model. The training curves (mean loss and translation NLL over ten equal windows of the run: flat at the
   end means trained long enough), the last logged KL, active units of z_sem (μ_sem varies with Var ≥ 0.01) and the
   swap probe (translation NLL from the pair's μ_sem vs an unrelated pair's; reconstruction from own / translation's /
   unrelated z_sem) are printed and stored. One row per method and seed goes to ``bench_results`` (benchmark
   ``vmsst_quality``).

    python -m bench.vmsst_quality [--data ../shared/data] [--steps 1500] [--batch 64] [--seeds 13 14 15]
    python -m bench.vmsst_quality --quick        # smoke test: 20 steps, tiny model; its numbers mean nothing
    python -m bench.vmsst_quality --summary data/bench/vmsst_quality-<time>.parquet   # the README table of a run
    make bench-vmsst-quality

Without the shared data the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.results import append_results

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("POLYSENT_SHARED_DATA", REPO.parent / "shared" / "data"))
# training languages → NTREX-128 file code; Tatoeba uses ISO 639-3 (cmn etc.), here equal to the NTREX code
NTREX = {"en": "eng", "es": "spa", "de": "deu", "fr": "fra", "ru": "rus", "it": "ita", "pt": "por", "nl": "nld",
         "tr": "tur"}
MULTI30K = ("en", "de", "fr", "cs")
TATOEBA = ("spa", "deu", "fra", "rus", "ita", "por", "nld", "tur")
METHODS = ("CONTRASTIVE", "BITRANSLATION", "VMSST", "VMSST-CONTRASTIVE")
TRAINED = set(NTREX) | set(MULTI30K)
PROBE = ("kl_sem", "kl_lang", "active_units_sem", "active_units_lang", "reconstruction_nll", "translation_nll",
         "translation_nll_unrelated", "swap_nll_own", "swap_nll_swapped", "swap_nll_unrelated", "contrastive_loss")


def ntrex_file(folder: Path, lang: str) -> Path:
    return folder / ("newstest2019-src.eng.txt" if lang == "en" else f"newstest2019-ref.{NTREX[lang]}.txt")


def missing_inputs(data: Path) -> list[Path]:
    ntrex, m30k = data / "parallel" / "ntrex128", data / "parallel" / "multi30k"
    need = [ntrex / "DOCUMENT_IDS.tsv"] + [ntrex_file(ntrex, lang) for lang in NTREX]
    need += [m30k / f"train.{lang}.gz" for lang in MULTI30K]
    need += [data / "tatoeba" / f"tatoeba.{c}-eng.{s}" for c in TATOEBA for s in (c, "eng")]
    return [p for p in need if not p.is_file()] + [p for p in (data / "sts" / "sts17",) if not p.is_dir()]


def split_ntrex(folder: Path, every: int) -> tuple[list[int], list[int], int]:
    """Line numbers of the training and the held-out documents (every ``every``-th document, in file order)."""
    with (folder / "DOCUMENT_IDS.tsv").open(encoding="utf-8") as f:
        docs = [row[0] for row in csv.reader(f, delimiter="\t")]
    order = list(dict.fromkeys(docs))
    held = {d for i, d in enumerate(order) if i % every == every - 1}
    train = [i for i, d in enumerate(docs) if d not in held]
    test = [i for i, d in enumerate(docs) if d in held]
    return train, test, len(held)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def build_corpora(data: Path, work: Path, quota: int, every: int, vocab: int) -> tuple[dict[str, Any], dict]:
    """``bitext_pairs``, ``eval_tatoeba`` and a tokenizer under ``work``; the held-out NTREX texts per language."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from models.settings import TokenizerSettings
    from models.tokenizer import train_tokenizer
    from pipelines.bitext.sampling import BitextSettings, build_pairs
    from pipelines.bitext.sources import NwaySource
    from pipelines.eval_sets import EvalSetsSettings, EvalSources, build_eval_sets
    from pipelines.leakage import EvalSetSpec, EvalTextIndex, LeakageSettings

    if work.exists():
        shutil.rmtree(work)
    (work / "ntrex_train").mkdir(parents=True)
    (work / "ntrex_heldout").mkdir()
    (work / "bitext").mkdir()
    (work / "eval").mkdir()
    ntrex = data / "parallel" / "ntrex128"
    train_lines, test_lines, n_held = split_ntrex(ntrex, every)
    heldout: dict[str, list[str]] = {}
    train_files: dict[str, Path] = {}
    for lang in NTREX:
        lines = _lines(ntrex_file(ntrex, lang))
        train_files[lang] = work / "ntrex_train" / f"{lang}.txt"
        train_files[lang].write_text("\n".join(lines[i] for i in train_lines) + "\n", encoding="utf-8")
        heldout[lang] = [lines[i] for i in test_lines]
        (work / "ntrex_heldout" / f"{lang}.txt").write_text("\n".join(heldout[lang]) + "\n", encoding="utf-8")
    tatoeba = data / "tatoeba"
    specs = [EvalSetSpec(name=f"tatoeba.{c}", path=tatoeba / f"tatoeba.{c}-eng.*", format="lines") for c in TATOEBA]
    specs.append(EvalSetSpec(name="ntrex_heldout", path=work / "ntrex_heldout" / "*.txt", format="lines"))
    index = EvalTextIndex.from_settings(LeakageSettings(eval_sets=specs))
    m30k = data / "parallel" / "multi30k"
    sources = [NwaySource(format="nway", files=train_files),
               NwaySource(format="nway", files={lang: m30k / f"train.{lang}.gz" for lang in MULTI30K})]
    bitext = build_pairs(BitextSettings(pivots=["en", "es"], quota_mode="equal", quota_per_language=quota),
                         sources, index, work / "bitext")
    evals = build_eval_sets(EvalSetsSettings(tatoeba_languages=list(TATOEBA)),
                            EvalSources(tatoeba=tatoeba, sts=data / "sts" / "sts17"), work / "eval")
    pairs_path = work / "bitext" / bitext.tables["bitext_pairs"]
    t = pq.read_table(pairs_path, columns=["pivot_text", "text"])
    texts = t.column("pivot_text").to_pylist() + t.column("text").to_pylist()
    pq.write_table(pa.table({"text": texts}), work / "tokenizer_texts.parquet")
    train_tokenizer(TokenizerSettings(vocab_size=vocab, min_frequency=2), {"t": work / "tokenizer_texts.parquet"},
                    work)
    counts = pq.read_table(pairs_path, columns=["pivot_lang", "lang"]).to_pydict()
    per_pair: dict[str, int] = {}
    for p, x in zip(counts["pivot_lang"], counts["lang"], strict=True):
        per_pair[f"{p}-{x}"] = per_pair.get(f"{p}-{x}", 0) + 1
    sts = pq.read_table(work / "eval" / evals.tables["eval_sts"]).to_pydict()
    sts_texts = {x for col in ("s1", "s2") for x, sub in zip(sts[col], sts["subset"], strict=True)
                 if trained_track(sub)}
    overlap = len(sts_texts & set(texts))  # STS17 is not in the leakage guard: counted here instead
    return ({"bitext_pairs": pairs_path, "eval_tatoeba": work / "eval" / evals.tables["eval_tatoeba"],
             "eval_sts": work / "eval" / evals.tables["eval_sts"],
             "tokenizer": work / "tokenizer", "heldout": heldout},
            {"bitext": bitext.stats, "per_pair": dict(sorted(per_pair.items())), "heldout_docs": n_held,
             "sts17_texts_in_training": overlap,
             "heldout_lines": len(test_lines), "train_lines": len(train_lines)})


def trained_track(subset: str) -> bool:
    """An STS17 track (``xx-yy`` or SemEval's ``trackN.xx-yy``) whose two languages are both in the training pairs."""
    return set(subset.rsplit(".", 1)[-1].split("-")) <= TRAINED


def score(model: Any, tables: dict[str, Any], max_pairs: int) -> dict[str, Any]:
    """Tatoeba accuracy per language, xSIM (ratio margin, k 4) on the held-out NTREX documents vs English and STS17
    Spearman on the trained tracks."""
    import pyarrow.parquet as pq

    from models.evaluation.bitext import tatoeba_accuracy
    from models.evaluation.sts import sts_correlations
    from models.evaluation.xsim import xsim

    tatoeba_path, heldout = tables["eval_tatoeba"], tables["heldout"]

    t = pq.read_table(tatoeba_path).to_pydict()
    out: dict[str, Any] = {"tatoeba": {}, "xsim": {}}
    for code in TATOEBA:
        rows = [i for i, lang in enumerate(t["lang"]) if lang == code][:max_pairs]
        src = model.encode([t["text"][i] for i in rows])
        eng = model.encode([t["eng"][i] for i in rows])
        out["tatoeba"][code] = tatoeba_accuracy(src, eng)["accuracy_mean"]
    eng = model.encode(heldout["en"])
    for lang in NTREX:
        if lang == "en":
            continue
        x = model.encode(heldout[lang])
        out["xsim"][lang] = (xsim(x, eng)["error_rate"] + xsim(eng, x)["error_rate"]) / 2
    sts = pq.read_table(tables["eval_sts"]).to_pydict()
    out["sts17"], pearson = {}, {}
    for track in sorted({sub for sub in sts["subset"] if trained_track(sub)}):
        rows = [i for i, sub in enumerate(sts["subset"]) if sub == track]
        if rows:
            e1, e2 = (model.encode([sts[c][i] for i in rows]) for c in ("s1", "s2"))
            corr = sts_correlations(e1, e2, [sts["score"][i] for i in rows])
            out["sts17"][track], pearson[track] = corr["spearman"], corr["pearson"]
    out["sts17_mean"] = float(np.mean(list(out["sts17"].values())))
    out["sts17_pearson_mean"] = float(np.mean(list(pearson.values())))  # the paper reports Pearson
    out["tatoeba_mean"] = float(np.mean(list(out["tatoeba"].values())))
    out["xsim_mean"] = float(np.mean(list(out["xsim"].values())))
    return out


def objective(method: str, batch: int, steps: int) -> Any:
    from models.objectives.vmsst import VmsstObjective

    if method == "CONTRASTIVE":  # the paper's baseline: dot-product softmax on μ_sem, dropout on
        return VmsstObjective(variant="contrastive", batch_size=batch)
    if method == "BITRANSLATION":
        return VmsstObjective(variant="bitranslation", batch_size=batch, monitor_every=max(1, steps // 10))
    variant = "vmsst_contrastive" if method == "VMSST-CONTRASTIVE" else "vmsst"
    return VmsstObjective(variant=variant, batch_size=batch, kl_anneal_steps=10 * steps, language_layers=1,
                          monitor_every=max(1, steps // 10))


def train_one(method: str, tables: dict[str, Any], out: Path, a: argparse.Namespace, seed: int) -> dict[str, Any]:
    import pyarrow.parquet as pq

    from models.encoder import SentenceEncoder, pick_device
    from models.settings import EncoderSettings, TrainSettings
    from models.train import train

    if out.exists():
        shutil.rmtree(out)
    encoder = EncoderSettings(hidden_size=a.hidden, num_layers=a.layers, num_heads=4, intermediate_size=4 * a.hidden,
                              max_length=32, dropout=0.1, projection=a.hidden)  # off by objective but CONTRASTIVE
    settings = TrainSettings(objectives=(objective(method, a.batch, a.steps),), encoder=encoder, steps=a.steps,
                             lr=a.lr, warmup_steps=max(1, a.steps // 10), weight_decay=0.01, seed=seed,
                             device="auto", dev=None)
    t0 = time.perf_counter()
    res = train(settings, {"bitext_pairs": tables["bitext_pairs"]}, out, run_name=f"{method}-{seed}",
                tokenizer_dir=tables["tokenizer"], keep_checkpoints_after=False)
    wall = time.perf_counter() - t0
    steps = pq.read_table(out / res.tables["train_steps"]).to_pydict()
    model = SentenceEncoder.load(out / "model", pick_device("auto"))
    result = score(model, tables, a.max_pairs)
    last = {k: next((v for v in reversed(col) if v is not None), None) for k, col in steps.items()}
    last.update(probe_at_last_monitor(steps))
    result["curves"] = {k: curve(steps[k]) for k in ("loss", "translation_nll", "contrastive_loss") if k in steps}
    result.update({"train_seconds": wall, "step_seconds": statistics.median(steps["seconds"][1:] or steps["seconds"]),
                   "final_loss": res.stats["final_loss"], "last": last, "device": res.stats["device"]})
    return result


def probe_at_last_monitor(steps: dict[str, list[Any]]) -> dict[str, Any]:
    """The probe columns and the translation NLL of the last update that ran the probe (one step, so the gap between
    the pair's and an unrelated pair's μ_sem compares like with like); {} when the probe never ran."""
    col = steps.get("translation_nll_unrelated") or []
    at = next((i for i in range(len(col) - 1, -1, -1) if col[i] is not None), None)
    if at is None:
        return {}
    keys = ("translation_nll", "translation_nll_unrelated", "swap_nll_own", "swap_nll_swapped", "swap_nll_unrelated")
    return {**{k: steps[k][at] for k in keys if k in steps}, "probe_step": steps["step"][at] if "step" in steps else at}


def curve(values: list[float | None], windows: int = 10) -> list[float]:
    """Mean of the logged values over ``windows`` equal consecutive windows of the run (nulls skipped)."""
    xs = np.asarray([np.nan if v is None else v for v in values], dtype=float)
    return [float(np.nanmean(w)) if np.isfinite(w).any() else float("nan") for w in np.array_split(xs, windows)]


def _line(res: dict[str, Any]) -> str:
    tat = " ".join(f"{k} {v:.1f}" for k, v in res["tatoeba"].items())
    xs = " ".join(f"{k} {v:.1f}" for k, v in res["xsim"].items())
    return (f"tatoeba mean {res['tatoeba_mean']:.2f} [{tat}]  xSIM mean {res['xsim_mean']:.2f} % [{xs}]  STS17 "
            f"{res['sts17_mean']:.2f}")


def summary_table(rows: list[dict[str, Any]], runs: Path | None = None) -> str:
    """Markdown table of one run's rows: mean ± std over seeds per method of Tatoeba, xSIM, STS17, z_sem's active
    units, the probe gap (translation NLL from an unrelated pair's μ_sem minus from the translation's, nats a
    sentence; 0 = μ_sem unused) and the loss's last two curve windows (flat when equal)."""
    methods = list(dict.fromkeys(r["method"] for r in rows))
    out = ["| method | seeds | Tatoeba acc. | xSIM error % | STS17 ρ | active units z_sem | probe gap (nats) | loss, "
           "windows 9 → 10 |", "|---|---|---|---|---|---|---|---|"]
    for m in methods:
        rs = [r for r in rows if r["method"] == m]

        def col(key: str, rs: list[dict[str, Any]] = rs) -> str:
            xs = [r[key] for r in rs if r.get(key) is not None and np.isfinite(r[key])]
            return _ms(xs) if xs else "—"

        for r in rs:
            steps_file = runs / f"{m.lower()}-{r.get('seed')}" / "train_steps.parquet" if runs else None
            if steps_file is not None and steps_file.is_file():  # the probe read at one step from the run's log
                import pyarrow.parquet as pq

                r.update(probe_at_last_monitor(pq.read_table(steps_file).to_pydict()))
            if r.get("translation_nll_unrelated") is not None and r.get("translation_nll") is not None:
                r["probe_gap"] = r["translation_nll_unrelated"] - r["translation_nll"]
            if r.get("curve_loss"):
                c = json.loads(r["curve_loss"])
                r["loss_w9"], r["loss_w10"] = c[-2], c[-1]
        tail = (f"{col('loss_w9')} → {col('loss_w10')}" if any("loss_w9" in r for r in rs) else "—")
        seeds = ", ".join(str(r["seed"]) for r in rs if r.get("seed") is not None) or "—"
        out.append(f"| {m} | {seeds} | {col('tatoeba_mean')} | {col('xsim_mean')} | {col('sts17_mean')} | "
                   f"{col('active_units_sem')} | {col('probe_gap')} | {tail} |")
    return "\n".join(out)


def _ms(xs: list[float]) -> str:
    return f"{statistics.mean(xs):.2f} ± {statistics.stdev(xs):.2f}" if len(xs) > 1 else f"{xs[0]:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=SHARED)
    ap.add_argument("--work", type=Path, default=REPO / "data" / "bench-vmsst-quality")
    ap.add_argument("--data-root", type=Path, default=REPO / "data", help="warehouse root (bench_results)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[13, 14, 15])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=64, help="translation pairs per step (every method)")
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=4000)
    ap.add_argument("--quota", type=int, default=4000, help="pairs per (pivot, language)")
    ap.add_argument("--holdout-every", type=int, default=5, help="every n-th NTREX document is held out")
    ap.add_argument("--max-pairs", type=int, default=1000, help="Tatoeba pairs per language scored")
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    ap.add_argument("--quick", action="store_true", help="smoke test: 20 steps, tiny model, small corpus")
    ap.add_argument("--summary", type=Path, default=None, help="print the table of a run's bench_results file")
    a = ap.parse_args(argv)
    if a.summary is not None:
        import pyarrow.parquet as pq

        print(summary_table(pq.read_table(a.summary).to_pylist(), a.work / "runs"))
        return 0
    if a.quick:
        a.steps, a.hidden, a.layers, a.vocab, a.quota, a.max_pairs, a.seeds = 20, 64, 1, 2000, 300, 200, a.seeds[:1]
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    missing = missing_inputs(a.data)
    if missing:
        print(f"skipped: the shared data is absent ({missing[0]} and {len(missing) - 1} more not found; --data or "
              "POLYSENT_SHARED_DATA)")
        return 0

    import torch

    from models.encoder import SentenceEncoder
    from models.settings import EncoderSettings

    t0 = time.perf_counter()
    tables, stats = build_corpora(a.data, a.work / "corpora", a.quota, a.holdout_every, a.vocab)
    b = stats["bitext"]
    print(f"vmsst_quality{' (QUICK smoke test: numbers mean nothing)' if a.quick else ''}: steps {a.steps}, batch "
          f"{a.batch} pairs, lr {a.lr:g}, BERT {a.hidden}×{a.layers}, vocab {a.vocab}, seeds {a.seeds}, torch "
          f"threads {torch.get_num_threads()}")
    print(f"corpora ({time.perf_counter() - t0:.1f} s): bitext_pairs {b['kept']:,} pairs (read {b['read']:,}, leaked "
          f"{b['leaked']:,}; quota {a.quota} per pivot-language) {stats['per_pair']}; NTREX held out "
          f"{stats['heldout_docs']} documents / {stats['heldout_lines']} lines (training {stats['train_lines']} "
          f"lines); STS17 sentences also in the training text: {stats['sts17_texts_in_training']}", flush=True)
    torch.manual_seed(a.seeds[0])
    untrained = SentenceEncoder.from_settings(EncoderSettings(hidden_size=a.hidden, num_layers=a.layers, num_heads=4,
                                                              intermediate_size=4 * a.hidden, max_length=32,
                                                              projection=a.hidden), tables["tokenizer"])
    base = score(untrained, tables, a.max_pairs)
    print(f"untrained  {_line(base)}", flush=True)
    common = {"steps": a.steps, "batch": a.batch, "lr": a.lr, "hidden": a.hidden, "layers": a.layers,
              "vocab": a.vocab, "quota": a.quota, "pairs": b["kept"], "quick": a.quick}

    def row(method: str, seed: int | None, res: dict[str, Any]) -> dict[str, Any]:
        r = {"benchmark": "vmsst_quality", "method": method, "seed": seed, **common,
             "tatoeba_mean": res["tatoeba_mean"], "xsim_mean": res["xsim_mean"], "sts17_mean": res["sts17_mean"],
             "sts17_pearson_mean": res["sts17_pearson_mean"],
             **{f"sts17_{k}": v for k, v in res["sts17"].items()},
             **{f"curve_{k}": json.dumps(v) for k, v in res.get("curves", {}).items()},
             **{f"tatoeba_{k}": v for k, v in res["tatoeba"].items()}, **{f"xsim_{k}": v for k, v in
                                                                          res["xsim"].items()},
             "train_seconds": res.get("train_seconds"), "step_seconds": res.get("step_seconds"),
             "final_loss": res.get("final_loss")}
        last = res.get("last", {})
        for k in PROBE:
            r[k] = last.get(k)
        return r

    rows = [row("untrained", None, base)]
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in a.methods}
    for seed in a.seeds:
        for method in a.methods:
            res = train_one(method, tables, a.work / "runs" / f"{method.lower()}-{seed}", a, seed)
            results[method].append(res)
            rows.append(row(method, seed, res))
            last = res["last"]
            extra = f"; active units sem {last['active_units_sem']:.0f}"
            if last.get("kl_sem") is not None:
                extra += (f", KL sem {last['kl_sem']:.2f} lang {last['kl_lang']:.2f}, active units lang "
                          f"{last['active_units_lang']:.0f}; probe: translation NLL {last['translation_nll']:.2f} "
                          f"vs unrelated μ_sem {last['translation_nll_unrelated']:.2f}, reconstruction own "
                          f"{last['swap_nll_own']:.2f} / swapped {last['swap_nll_swapped']:.2f} / unrelated "
                          f"{last['swap_nll_unrelated']:.2f}")
            extra += "; curve (loss, 10 windows) " + " ".join(f"{v:.2f}" for v in res["curves"]["loss"])
            print(f"seed {seed} {method:<13} {_line(res)}  train {res['train_seconds']:.0f} s "
                  f"({res['step_seconds']:.3f} s/step median), final loss {res['final_loss']:.3f}{extra}",
                  flush=True)
    print("summary (mean over seeds): " + "; ".join(
        f"{m} tatoeba {_ms([r['tatoeba_mean'] for r in rs])}, xSIM {_ms([r['xsim_mean'] for r in rs])} %, STS17 "
        f"{_ms([r['sts17_mean'] for r in rs])}" for m, rs in results.items() if rs))
    written = append_results(a.data_root, "vmsst_quality", rows)
    if written:
        print(f"rows written to {written}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
