"""Tatoeba bitext retrieval accuracy and mteb's BitextMining metrics (docs methods §7.1, §9; pitfalls D.6.2).

References: the project's canonical definition (methods §7.1: cosine, argmax with ties to the lowest index, both
directions, denominator = the real number of pairs, not EASE's ``/10``), mSimCSE ``eval/evaluation_retrieval.py``
(both directions, reported separately), XTREME ``third_party/evaluate_retrieval.py`` (en→xx only), and mteb
``_evaluators/text/bitext_mining_evaluator.py`` + ``abstasks/text/bitext_mining.py`` (reproduced exactly by
:func:`bitext_mining_mteb`). Scores are points (×100), except the legacy :func:`retrieval_accuracy` (fractions).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from models.evaluation.knn import as_embeddings, cosine_topk_pair

#: Tatoeba (LASER v1) file codes of the 14 XNLI languages (mSimCSE's first table) and of the 36 XTREME languages
TATOEBA_XNLI14 = ("ara", "bul", "cmn", "deu", "ell", "fra", "hin", "rus", "spa", "swh", "tha", "tur", "urd", "vie")
TATOEBA_XTREME36 = tuple(sorted((
    *TATOEBA_XNLI14, "afr", "ben", "est", "eus", "fin", "heb", "hun", "ind", "ita", "jav", "jpn", "kat", "kaz",
    "kor", "mal", "mar", "nld", "pes", "por", "tam", "tel", "tgl")))

# mteb BitextMiningEvaluator._similarity_search defaults
_MTEB_QUERY_CHUNK = 100
_MTEB_CORPUS_CHUNK = 500_000


def _aligned(src: np.ndarray, tgt: np.ndarray, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    a, b = as_embeddings(src, names[0]), as_embeddings(tgt, names[1])
    if a.shape != b.shape:
        raise ValueError(f"{names[0]} {a.shape} and {names[1]} {b.shape} must have the same shape "
                         "(row i of one is the translation of row i of the other)")
    if len(a) == 0:
        raise ValueError(f"{names[0]} and {names[1]} are empty")
    return a, b


def _top1_both(src: np.ndarray, tgt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    (_, s2t), (_, t2s) = cosine_topk_pair(src, tgt, 1)
    return s2t[:, 0], t2s[:, 0]


def retrieval_accuracy(src: np.ndarray, tgt: np.ndarray) -> tuple[float, float]:
    """Legacy: (accuracy src→tgt, accuracy tgt→src) as FRACTIONS for row-aligned embeddings (cosine, ties → lowest
    index). Kept for the old ``evaluate_tatoeba`` caller; new code uses :func:`tatoeba_accuracy` (points)."""
    a, b = _aligned(src, tgt, ("src", "tgt"))
    s2t, t2s = _top1_both(a, b)
    gold = np.arange(len(a))
    return float((s2t == gold).mean()), float((t2s == gold).mean())


def tatoeba_accuracy(src: np.ndarray, eng: np.ndarray) -> dict[str, float]:
    """Tatoeba accuracy both ways, in points: ``accuracy_xx_en`` (each xx row retrieves among English rows),
    ``accuracy_en_xx``, their mean, and ``n`` (the real pair count, the denominator). Row i of ``src`` ↔ row i of
    ``eng``; cosine, argmax, ties → lowest index."""
    a, b = _aligned(src, eng, ("src", "eng"))
    x2e, e2x = _top1_both(a, b)
    gold = np.arange(len(a))
    xx_en, en_xx = 100 * float((x2e == gold).mean()), 100 * float((e2x == gold).mean())
    return {"accuracy_xx_en": xx_en, "accuracy_en_xx": en_xx, "accuracy_mean": (xx_en + en_xx) / 2, "n": len(a)}


def tatoeba_xtreme(src: np.ndarray, eng: np.ndarray) -> dict[str, float]:
    """XTREME's Tatoeba number: en→xx accuracy only (the index is built on xx and queried with English), points.

    XTREME ranks by L2 distance between L2-normalised vectors; ‖a − b‖² = 2 − 2·cos(a, b), so its nearest neighbour
    is the cosine argmax and the number equals :func:`tatoeba_accuracy`'s ``accuracy_en_xx`` by construction (here
    with row-aligned gold; XTREME's permuted English side and label file, issue #21, are a data-loading matter).
    """
    res = tatoeba_accuracy(src, eng)
    return {"accuracy_en_xx": res["accuracy_en_xx"], "n": res["n"]}


def _mteb_top1(query: np.ndarray, corpus: np.ndarray) -> np.ndarray:
    """mteb ``BitextMiningEvaluator._similarity_search`` with ``model.similarity`` = cosine (sentence-transformers
    ``cos_sim``: ``F.normalize(p=2)`` then a matmul), operation for operation so scores are bitwise equal: 100
    queries × 500,000 corpus rows per chunk, ``torch.topk(k=1, sorted=False)`` per chunk, then Python's stable
    ``sorted(..., reverse=True)`` over the chunks' winners (an earlier chunk wins a tie). On ties inside a chunk,
    torch's CPU topk picks an implementation-defined entry (not always the lowest index); calling the same op on
    the same values reproduces its choice."""
    import torch

    q, c = torch.from_numpy(query), torch.from_numpy(corpus)
    best = np.empty(len(query), dtype=np.int64)
    with torch.inference_mode():
        for qlo in range(0, len(q), _MTEB_QUERY_CHUNK):
            qn = torch.nn.functional.normalize(q[qlo:qlo + _MTEB_QUERY_CHUNK], p=2, dim=-1)
            found: list[list[tuple[float, int]]] = [[] for _ in range(len(qn))]
            for clo in range(0, len(c), _MTEB_CORPUS_CHUNK):
                cn = torch.nn.functional.normalize(c[clo:clo + _MTEB_CORPUS_CHUNK], p=2, dim=-1)
                vals, idx = torch.topk(torch.mm(qn, cn.transpose(0, 1)), 1, dim=1, largest=True, sorted=False)
                for r, (v, i) in enumerate(zip(vals[:, 0].tolist(), idx[:, 0].tolist(), strict=True)):
                    found[r].append((v, clo + i))
            for r, hits in enumerate(found):
                best[qlo + r] = sorted(hits, key=lambda h: h[0], reverse=True)[0][1]
    return best


def bitext_mining_mteb(src: np.ndarray, tgt: np.ndarray,
                       gold: np.ndarray | Sequence[int] | Sequence[tuple[int, int]] | None = None) -> dict[str, float]:
    """mteb BitextMining on precomputed embeddings: accuracy, precision, recall, f1 (points; mteb's main score is f1).

    ``sentence1`` = ``src`` rows retrieve their cosine top-1 among ``tgt`` rows (:func:`_mteb_top1`); labels are the
    gold target rows: identity when ``gold`` is None, else ``gold[i]`` for query i (a 1-D sequence of target rows,
    or mteb's ``(i, j)`` pairs of which, like mteb, only j is read). sklearn ``accuracy_score`` and
    ``precision/recall/f1_score(average="weighted", zero_division=0)`` as ``AbsTaskBitextMining._compute_metrics``.
    """
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

    q, c = as_embeddings(src, "src"), as_embeddings(tgt, "tgt")
    if q.shape[1] != c.shape[1]:
        raise ValueError(f"src has dimension {q.shape[1]} but tgt has {c.shape[1]}")
    if len(q) == 0 or len(c) == 0:
        raise ValueError("src and tgt must both have rows")
    if gold is None:
        if len(q) != len(c):
            raise ValueError(f"identity gold needs as many src rows ({len(q)}) as tgt rows ({len(c)}); pass gold")
        labels = np.arange(len(q))
    else:
        g = np.asarray(gold, dtype=np.int64)
        labels = g[:, 1] if g.ndim == 2 else g
        if labels.ndim != 1 or len(labels) != len(q):
            raise ValueError(f"gold: expected one target row per src row ({len(q)}), got shape {g.shape}")
    pred = _mteb_top1(q, c)
    labels_l, pred_l = labels.tolist(), pred.tolist()
    return {
        "accuracy": 100 * float(accuracy_score(labels_l, pred_l)),
        "precision": 100 * float(precision_score(labels_l, pred_l, zero_division=0, average="weighted")),
        "recall": 100 * float(recall_score(labels_l, pred_l, zero_division=0, average="weighted")),
        "f1": 100 * float(f1_score(labels_l, pred_l, zero_division=0, average="weighted")),
    }


def aggregate(values_by_lang: Mapping[str, float], subset_langs: Iterable[str]) -> float:
    """Mean of ``values_by_lang`` over ``subset_langs`` (e.g. :data:`TATOEBA_XNLI14`, :data:`TATOEBA_XTREME36`);
    raises ValueError naming every language of the subset that has no value."""
    langs = list(dict.fromkeys(subset_langs))
    if not langs:
        raise ValueError("the language subset is empty")
    missing = [lang for lang in langs if lang not in values_by_lang]
    if missing:
        raise ValueError(f"no value for {len(missing)} of the {len(langs)} subset languages: {', '.join(missing)}")
    return float(np.mean([float(values_by_lang[lang]) for lang in langs]))
