"""Stage ``evaluate``: one model on every configured evaluation task → ``eval_results``.

The sentences of all tasks are gathered first and encoded once through the embedding cache (a sentence shared by
Tatoeba, xSIM and the geometry probe, or already encoded by an earlier run of the same model, is not encoded again);
then each task scores its rows with the protocol modules of this package:

| task | protocols (variant labels) | module |
|---|---|---|
| tatoeba | canonical (xx→en, en→xx, mean), xtreme (en→xx), mteb (xx→en weighted F1); xnli14 / xtreme36 / all | bitext |
| bucc | LASER mining: oracle, held_out; oracle_cosine (absolute margin); mteb (retrieval-style) | bucc |
| sts | canonical (Spearman, Pearson ×100 of cosine), senteval (STS12–16 all/mean/wmean), mteb | sts |
| clustering | ease (k-means, Hungarian accuracy), mteb (bootstrapped V-measure) | clustering |
| classification | mteb (in-language logistic-regression probe), zero_shot (source-language training) | classification |
| xsim | laser (ratio-margin error rate, text comparison) | xsim |
| geometry | alignment / uniformity per translation pair | geometry |
| langid | language-identification probe | geometry |
| pair_classification | mteb (cosine accuracy, F1 + thresholds, AP; max_ap: PAWS-X main score) | pair_classification |

Tables come from the ``eval_sets`` stage (read with pyarrow); no table → the task is skipped and the log says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import torch

from contract import StageResult
from models import stage_versions
from models.encoder import SentenceEncoder, pick_device
from models.evaluation.embedding_cache import EmbeddingCache, folder_hash, model_id
from models.evaluation.results import Results
from models.settings import EvaluationSettings

log = logging.getLogger("polysent.models.evaluation")
STAGE_VERSION = stage_versions.EVALUATE
DTYPES = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class Vectors:
    """Text → embedding (raw model output, unnormalised) for every sentence of the run."""

    index: dict[str, int]
    matrix: np.ndarray

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return self.matrix[[self.index[t] for t in texts]]


def _columns(path: Path | None, *names: str) -> dict[str, list] | None:
    if path is None or not Path(path).exists():
        return None
    table = pq.read_table(path, columns=list(names))
    return {n: table.column(n).to_pylist() for n in names}


def _groups(cols: Mapping[str, list], *keys: str) -> dict[tuple, list[int]]:
    out: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(*(cols[k] for k in keys), strict=True)):
        out.setdefault(key, []).append(i)
    return out


def _pick(cols: Mapping[str, list], rows: list[int], name: str) -> list:
    col = cols[name]
    return [col[i] for i in rows]


def _metrics(result: Mapping[str, Any], skip: Iterable[str] = ("n",)) -> dict[str, float]:
    """The scores of a protocol function's result: numbers in points, without mteb's duplicate [0, 1] values
    (``mteb_*``) and bookkeeping counts."""
    drop = {*skip, "k", "inertia", "n_experiments"}
    return {k: float(v) for k, v in result.items()
            if k not in drop and not k.startswith(("mteb_", "n_")) and isinstance(v, int | float)}


@contextmanager
def _one_thread() -> Iterator[None]:
    """scikit-learn's k-means and solvers under one OpenMP/BLAS thread: on a busy 2-core machine idle worker threads
    spin and make MiniBatchKMeans 10–100× slower, and the thread count changes its results in the last bits."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


# -- tasks: each returns the texts it needs (phase 1) and scores them (phase 2) ------------------------------------
class Task:
    name = ""

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        self.settings = settings
        self.tables = tables

    def texts(self) -> Iterable[str]:
        return ()

    def score(self, vec: Vectors, out: Results) -> None:
        raise NotImplementedError


class Tatoeba(Task):
    name = "tatoeba"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = _columns(tables.get("eval_tatoeba"), "lang", "text", "eng")
        self.by_lang = _groups(self.cols, "lang") if self.cols else {}
        if settings.languages:
            missing = sorted(set(settings.languages) - {k[0] for k in self.by_lang})
            if missing:
                raise ValueError(f"evaluation.tatoeba.languages: {missing} not in eval_tatoeba "
                                 f"(has {sorted(k[0] for k in self.by_lang)})")
            self.by_lang = {k: v for k, v in self.by_lang.items() if k[0] in settings.languages}

    def texts(self) -> Iterable[str]:
        for rows in self.by_lang.values():
            yield from _pick(self.cols, rows, "text")
            yield from _pick(self.cols, rows, "eng")

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.bitext import TATOEBA_XNLI14, TATOEBA_XTREME36, bitext_mining_mteb, tatoeba_accuracy

        per_lang: dict[str, dict[str, float]] = {}
        for (lang,), rows in sorted(self.by_lang.items()):
            src, eng = vec(_pick(self.cols, rows, "text")), vec(_pick(self.cols, rows, "eng"))
            res = tatoeba_accuracy(src, eng)
            per_lang[lang] = _metrics(res)
            out.add("tatoeba", "canonical", lang, f"{lang}-eng", per_lang[lang], len(rows))
            if self.settings.xtreme:
                out.add("tatoeba", "xtreme", lang, f"eng-{lang}", {"accuracy": res["accuracy_en_xx"]}, len(rows))
            if self.settings.mteb:
                out.add("tatoeba", "mteb", lang, f"{lang}-eng", _metrics(bitext_mining_mteb(src, eng)), len(rows))
        subsets = {"xnli14": TATOEBA_XNLI14, "xtreme36": TATOEBA_XTREME36, "all": tuple(sorted(per_lang))}
        for name in self.settings.subsets:
            langs = subsets[name]
            missing = [lang for lang in langs if lang not in per_lang]
            if missing or not langs:
                log.info("tatoeba: subset %s skipped, %d of its languages are not evaluated (%s)", name,
                         len(missing), ", ".join(missing[:6]) + ("…" if len(missing) > 6 else ""))
                continue
            mean = {m: float(np.mean([per_lang[lang][m] for lang in langs])) for m in per_lang[langs[0]]}
            out.add("tatoeba", "canonical", name, f"{len(langs)} languages", mean, len(langs))


class Bucc(Task):
    name = "bucc"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = _columns(tables.get("eval_bucc"), "pair", "split", "lang", "id", "text")
        gold = _columns(tables.get("eval_bucc_gold"), "pair", "split", "src_id", "tgt_id")
        self.gold: dict[tuple[str, str], list[tuple[str, str]]] = {}
        if gold:
            for p, s, a, b in zip(gold["pair"], gold["split"], gold["src_id"], gold["tgt_id"], strict=True):
                self.gold.setdefault((p, s), []).append((a, b))
        self.groups = _groups(self.cols, "pair", "split", "lang") if self.cols else {}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from _pick(self.cols, rows, "text")

    def _split(self, vec: Vectors, pair: str, split: str) -> Any:
        from models.evaluation.bucc import BuccSplit

        src_lang, tgt_lang = pair.split("-")
        src_rows, tgt_rows = self.groups[(pair, split, src_lang)], self.groups[(pair, split, tgt_lang)]
        src_texts, tgt_texts = _pick(self.cols, src_rows, "text"), _pick(self.cols, tgt_rows, "text")
        return BuccSplit(_pick(self.cols, src_rows, "id"), src_texts, vec(src_texts),
                         _pick(self.cols, tgt_rows, "id"), tgt_texts, vec(tgt_texts), self.gold.get((pair, split)))

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.bucc import bucc_mteb, evaluate_bucc

        s = self.settings
        device = "cuda" if torch.cuda.is_available() else "cpu"
        for pair in sorted({p for p, _, _ in self.groups}):
            splits = sorted({sp for p, sp, _ in self.groups if p == pair})
            for split in splits:
                data = self._split(vec, pair, split)
                if data.gold is None:
                    log.info("bucc %s/%s: no gold (hidden test split), only usable as a held-out target", pair, split)
                    continue
                held = s.test_split if split == s.tune_split and s.test_split in splits else None
                test = self._split(vec, pair, held) if held else None
                test = test if test is not None and test.gold is not None else None
                res = evaluate_bucc(data, test, k=s.k, margin=s.margin, retrieval=s.retrieval, device=device)
                n = len(data.gold)
                out.add("bucc", "oracle", f"{pair}/{split}", pair, _metrics(res["oracle"]), n)
                if "held_out" in res and test is not None:
                    out.add("bucc", "held_out", f"{pair}/{held}", pair, _metrics(res["held_out"]),
                            len(test.gold or ()))
                if s.cosine:
                    cos = evaluate_bucc(data, None, k=s.k, margin="absolute", retrieval=s.retrieval, device=device)
                    out.add("bucc", "oracle_cosine", f"{pair}/{split}", pair, _metrics(cos["oracle"]), n)
                if s.mteb:
                    src_pos = {x: i for i, x in enumerate(data.src_ids)}
                    tgt_pos = {x: i for i, x in enumerate(data.tgt_ids)}
                    rows = [(src_pos[a], tgt_pos[b]) for a, b in data.gold]
                    out.add("bucc", "mteb", f"{pair}/{split}", pair,
                            _metrics(bucc_mteb(data.src_emb, data.tgt_emb, rows)), n)


class Sts(Task):
    name = "sts"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = _columns(tables.get("eval_sts"), "dataset", "subset", "lang1", "lang2", "s1", "s2", "score")
        self.groups = _groups(self.cols, "dataset", "subset") if self.cols else {}
        if settings.datasets:
            self.groups = {k: v for k, v in self.groups.items() if k[0] in settings.datasets}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from _pick(self.cols, rows, "s1")
            yield from _pick(self.cols, rows, "s2")

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.sts import paired_cosine, senteval_aggregate, sts_correlations, sts_mteb

        senteval: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        for (dataset, subset), rows in sorted(self.groups.items()):
            e1, e2 = vec(_pick(self.cols, rows, "s1")), vec(_pick(self.cols, rows, "s2"))
            gold = np.asarray(_pick(self.cols, rows, "score"), dtype=np.float64)
            langs = f"{self.cols['lang1'][rows[0]]}-{self.cols['lang2'][rows[0]]}"
            out.add("sts", "canonical", f"{dataset}/{subset}", langs, _metrics(sts_correlations(e1, e2, gold)),
                    len(rows))
            if self.settings.mteb:
                res = sts_mteb(e1, e2, gold)
                scores = {m: res[m] for m in ("cosine_spearman", "cosine_pearson")}  # ×100 (mteb_* keys: [0, 1])
                out.add("sts", "mteb", f"{dataset}/{subset}", langs, scores, len(rows))
            if dataset in ("sts12", "sts13", "sts14", "sts15", "sts16"):
                senteval.setdefault(dataset, {})[subset] = (paired_cosine(e1, e2), gold)
        for dataset, per_subset in sorted(senteval.items()):
            agg = senteval_aggregate(per_subset)
            n = int(agg["n"])  # type: ignore[arg-type]
            for how in ("all", "mean", "wmean"):
                out.add("sts", "senteval", f"{dataset}/{how}", "en-en",
                        {"spearman": agg[f"spearman_{how}"], "pearson": agg[f"pearson_{how}"]}, n)  # type: ignore[dict-item]


class Clustering(Task):
    name = "clustering"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = _columns(tables.get("eval_clustering"), "dataset", "lang", "text", "label")
        self.groups = _groups(self.cols, "dataset", "lang") if self.cols else {}
        if settings.languages:
            self.groups = {k: v for k, v in self.groups.items() if k[1] in settings.languages}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from _pick(self.cols, rows, "text")

    def score(self, vec: Vectors, out: Results) -> None:
        with _one_thread():
            for (dataset, lang), rows in sorted(self.groups.items()):
                self._score_one(vec, out, dataset, lang, rows)

    def _score_one(self, vec: Vectors, out: Results, dataset: str, lang: str, rows: list[int]) -> None:
        """EASE's protocol on every document; mteb's V-measure on all of them too (each language as mteb scores a
        single-language task: a fresh ``Random(seed)``), or on mteb's own 4 % document sample."""
        from models.evaluation.clustering import kmeans_hungarian_accuracy, select_documents_to_embed, v_measure_mteb

        s = self.settings
        emb, labels = vec(_pick(self.cols, rows, "text")), _pick(self.cols, rows, "label")
        res = kmeans_hungarian_accuracy(emb, labels, n_init=s.n_init, seed=s.seed)
        out.add("clustering", "ease", f"{dataset}/{lang}", lang, {"hungarian_accuracy": res["accuracy"]}, len(rows))
        if s.v_measure:
            if s.mteb_document_sample:
                keep = select_documents_to_embed(len(rows), seed=s.seed)
                emb, labels = emb[keep], [labels[i] for i in keep]
            res = v_measure_mteb(emb, labels, seed=s.seed)
            out.add("clustering", "mteb", f"{dataset}/{lang}", lang,
                    {m: res[m] for m in ("v_measure", "v_measure_std", "ami")}, len(labels))


class Classification(Task):
    name = "classification"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = _columns(tables.get("eval_classification"), "dataset", "lang", "split", "text", "label")
        self.groups = _groups(self.cols, "dataset", "lang", "split") if self.cols else {}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from _pick(self.cols, rows, "text")

    def _split(self, vec: Vectors, dataset: str, lang: str, name: str) -> tuple[np.ndarray, list] | None:
        rows = self.groups.get((dataset, lang, name))
        return None if not rows else (vec(_pick(self.cols, rows, "text")), _pick(self.cols, rows, "label"))

    def score(self, vec: Vectors, out: Results) -> None:
        with _one_thread():
            for dataset in sorted({d for d, _, _ in self.groups}):
                self._score_dataset(vec, out, dataset)

    def _score_dataset(self, vec: Vectors, out: Results, dataset: str) -> None:
        from models.evaluation.classification import logreg_probe, zero_shot_transfer

        s = self.settings
        kw = {"n_experiments": s.n_experiments, "samples_per_label": s.samples_per_label, "seed": s.seed}
        langs = sorted({lang for d, lang, _ in self.groups if d == dataset})
        tests = {lang: t for lang in langs if (t := self._split(vec, dataset, lang, s.test_split)) is not None}
        for lang in langs:
            train, test = self._split(vec, dataset, lang, s.train_split), tests.get(lang)
            if train is not None and test is not None:
                res = logreg_probe(*train, *test, **kw)
                out.add("classification", "mteb", f"{dataset}/{lang}", lang, _metrics(res), len(test[1]))
        source = self._split(vec, dataset, s.source_language, s.train_split)
        if source is None:
            log.info("classification %s: no %s/%s split, zero-shot transfer skipped", dataset, s.source_language,
                     s.train_split)
            return
        for lang, res in sorted(zero_shot_transfer(*source, tests, **kw).items()):
            out.add("classification", "zero_shot", f"{dataset}/{lang}", f"{s.source_language}-{lang}", _metrics(res),
                    len(tests[lang][1]))


class Xsim(Task):
    name = "xsim"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = _columns(tables.get("eval_parallel"), "dataset", "lang", "idx", "text")
        self.groups = _groups(self.cols, "dataset", "lang") if self.cols else {}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from _pick(self.cols, rows, "text")

    def side(self, vec: Vectors, dataset: str, lang: str) -> tuple[np.ndarray, list[str]]:
        rows = sorted(self.groups[(dataset, lang)], key=lambda i: self.cols["idx"][i])
        texts = _pick(self.cols, rows, "text")
        return vec(texts), texts

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.xsim import xsim

        s = self.settings
        device = "cuda" if torch.cuda.is_available() else "cpu"
        for dataset in sorted({d for d, _ in self.groups}):
            langs = sorted(lang for d, lang in self.groups if d == dataset)
            if s.pairs == "to_english":
                if s.pivot not in langs:
                    log.info("xsim %s: pivot %s not in the set, skipped", dataset, s.pivot)
                    continue
                pairs = [(lang, s.pivot) for lang in langs if lang != s.pivot]
            else:
                pairs = [(a, b) for a in langs for b in langs if a != b]
            sides = {lang: self.side(vec, dataset, lang) for lang in langs}
            errors = []
            for a, b in pairs:
                res = xsim(sides[a][0], sides[b][0], margin=s.margin, k=s.k,
                           tgt_texts=sides[b][1] if s.compare_text else None, device=device)
                errors.append(res["error_rate"])
                out.add("xsim", "laser", f"{dataset}/{a}-{b}", f"{a}-{b}", {"error_rate": res["error_rate"]},
                        int(res["n"]))
            if errors:
                out.add("xsim", "laser", f"{dataset}/mean", f"{len(pairs)} pairs",
                        {"error_rate": float(np.mean(errors))}, len(pairs))


class Geometry(Task):
    name = "geometry"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.pairs: dict[str, tuple[list[str], list[str]]] = {}
        if settings.source == "tatoeba":
            cols = _columns(tables.get("eval_tatoeba"), "lang", "text", "eng")
            for (lang,), rows in sorted((_groups(cols, "lang") if cols else {}).items()):
                self.pairs[f"{lang}-eng"] = (_pick(cols, rows, "text"), _pick(cols, rows, "eng"))
        else:
            cols = _columns(tables.get("eval_parallel"), "dataset", "lang", "idx", "text")
            groups = _groups(cols, "dataset", "lang") if cols else {}
            for (dataset, lang), rows in sorted(groups.items()):
                pivot = groups.get((dataset, "eng"))
                if lang == "eng" or pivot is None:
                    continue
                rows = sorted(rows, key=lambda i: cols["idx"][i])
                piv = sorted(pivot, key=lambda i: cols["idx"][i])
                self.pairs[f"{dataset}/{lang}-eng"] = (_pick(cols, rows, "text"), _pick(cols, piv, "text"))

    def texts(self) -> Iterable[str]:
        for a, b in self.pairs.values():
            yield from a
            yield from b

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.geometry import alignment, uniformity

        s = self.settings
        for name, (a, b) in sorted(self.pairs.items()):
            x, y = vec(a), vec(b)
            both = np.concatenate([x, y])
            scores = {"alignment": alignment(x, y),
                      "uniformity": uniformity(both, max_points=s.max_points, seed=s.seed)}
            out.add("geometry", "wang_isola", name, name.rsplit("/", 1)[-1], scores, len(a))


class Langid(Task):
    name = "langid"

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = _columns(tables.get("eval_langid"), "lang", "split", "text")
        self.groups = _groups(self.cols, "split") if self.cols else {}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from _pick(self.cols, rows, "text")

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.geometry import language_id_probe

        with _one_thread():
            self._probe(vec, out, language_id_probe)

    def _probe(self, vec: Vectors, out: Results, language_id_probe: Any) -> None:
        train, test = self.groups.get(("train",)), self.groups.get(("test",))
        if not train or not test:
            log.info("langid: eval_langid needs a train and a test split, skipped")
            return
        res = language_id_probe(vec(_pick(self.cols, train, "text")), _pick(self.cols, train, "lang"),
                                vec(_pick(self.cols, test, "text")), _pick(self.cols, test, "lang"),
                                seed=self.settings.seed)
        langs = sorted(set(_pick(self.cols, test, "lang")))
        out.add("langid", "msimcse", "xnli", ",".join(langs), _metrics(res, skip=("n", "n_languages")), int(res["n"]))


class PairClassification(Task):
    """Paraphrase detection (PAWS-X and other 0/1-labelled pair sets): mteb's PairClassification scores."""

    name = "pair_classification"
    METRICS = ("cosine_accuracy", "cosine_accuracy_threshold", "cosine_f1", "cosine_f1_threshold", "cosine_precision",
               "cosine_recall", "cosine_ap", "max_accuracy", "max_f1", "max_precision", "max_recall", "max_ap")

    def __init__(self, settings: Any, tables: Mapping[str, Path]) -> None:
        super().__init__(settings, tables)
        self.cols = _columns(tables.get("eval_pair_classification"), "dataset", "lang", "split", "s1", "s2", "label")
        self.groups = _groups(self.cols, "dataset", "split", "lang") if self.cols else {}
        if settings.datasets:
            self.groups = {k: v for k, v in self.groups.items() if k[0] in settings.datasets}
        if settings.splits:
            self.groups = {k: v for k, v in self.groups.items() if k[1] in settings.splits}

    def texts(self) -> Iterable[str]:
        for rows in self.groups.values():
            yield from _pick(self.cols, rows, "s1")
            yield from _pick(self.cols, rows, "s2")

    def score(self, vec: Vectors, out: Results) -> None:
        from models.evaluation.pair_classification import pair_classification_mteb

        per_set: dict[tuple[str, str], list[dict[str, float]]] = {}
        for (dataset, split, lang), rows in sorted(self.groups.items()):
            labels = _pick(self.cols, rows, "label")
            if len(set(labels)) < 2:
                log.info("pair_classification %s/%s/%s: only one class among %d pairs, skipped (no threshold to "
                         "search)", dataset, split, lang, len(rows))
                continue
            res = pair_classification_mteb(vec(_pick(self.cols, rows, "s1")), vec(_pick(self.cols, rows, "s2")),
                                           labels)
            scores = {m: res[m] for m in self.METRICS}
            out.add("pair_classification", "mteb", f"{dataset}/{split}/{lang}", lang, scores, len(rows))
            per_set.setdefault((dataset, split), []).append(scores)
        for (dataset, split), results in sorted(per_set.items()):
            if len(results) > 1:
                mean = {m: float(np.mean([r[m] for r in results])) for m in self.METRICS if "threshold" not in m}
                out.add("pair_classification", "mteb", f"{dataset}/{split}/mean", f"{len(results)} languages", mean,
                        len(results))


TASKS: tuple[type[Task], ...] = (Tatoeba, Bucc, Sts, Clustering, Classification, Xsim, Geometry, Langid,
                                 PairClassification)


def evaluate_model(settings: EvaluationSettings, model: Path | str, tables: Mapping[str, Path], out: Path, *,
                   run: str, model_hash: str | None = None, model_key: str | None = None,
                   cache_root: Path | None = None, progress: bool = True) -> StageResult:
    """Evaluate ``model`` (a sentence-transformers folder or hub id) on the ``eval_sets`` tables → ``eval_results``.

    ``model_hash`` names the model in the embedding cache (a trained model's artifact content hash); without it the
    folder's content is hashed. ``model_key`` fills the results' ``model`` column (the training artifact's key, so
    results join the warehouse's ``lineage``); without it, the content hash.
    """
    device = pick_device(settings.device)
    encoder = SentenceEncoder.load(model, device)
    if settings.max_length is not None:
        encoder.max_length = settings.max_length
    content = model_hash or (folder_hash(Path(model)) if Path(model).exists() else f"hub:{model}")
    mid = model_id(content, dtype=settings.dtype, max_length=encoder.max_length, device=device.type)
    tasks = [cls(section, tables) for cls in TASKS if (section := getattr(settings, cls.name)) is not None]
    texts = list(dict.fromkeys(t for task in tasks for t in task.texts()))
    cache = EmbeddingCache(cache_root if settings.cache else None, mid)
    started = time.perf_counter()
    bar = _progress(len(texts), f"encode {run}", progress)
    dtype = DTYPES[settings.dtype]

    def encode(batch: list[str]) -> np.ndarray:
        return encoder.encode(batch, settings.batch_size, normalize=False, batch_tokens=settings.batch_tokens,
                              dtype=dtype, progress=None)

    matrix = cache.embed(texts, encode, progress=bar.update) if texts else np.zeros((0, encoder.dim), np.float32)
    bar.close()
    encode_s = time.perf_counter() - started
    log.info("evaluate %s: %d distinct sentences, %d encoded, %d from the embedding cache (%.1f s)", run, len(texts),
             cache.encoded, cache.reused, encode_s)
    vec = Vectors({t: i for i, t in enumerate(texts)}, matrix)
    results = Results(run, model_key or content)
    seconds = {"encode": round(encode_s, 3)}
    for task in tasks:
        t0 = time.perf_counter()
        before = len(results.rows)
        task.score(vec, results)
        seconds[task.name] = round(time.perf_counter() - t0, 3)
        log.info("evaluate %s: %s → %d results (%.1f s)", run, task.name, len(results.rows) - before,
                 seconds[task.name])
    results.write(Path(out) / "eval_results.parquet")
    return StageResult(tables={"eval_results": "eval_results.parquet"},
                       stats={"sentences": len(texts), "encoded": cache.encoded, "cached": cache.reused,
                              "results": len(results.rows), "seconds": seconds})


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, desc: str, enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="sent", mininterval=2.0)

