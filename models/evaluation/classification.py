"""Linear classification probes on frozen embeddings (docs methods §7.6, pitfall D.6.6).

Reproduces mteb's classification scoring (installed mteb 2.26: ``mteb/abstasks/classification.py``
``AbsTaskClassification._evaluate_subset`` / ``_undersample_data`` / ``_calculate_scores`` / ``_calculate_avg_scores``
and ``mteb/_evaluators/sklearn_evaluator.py``) on precomputed embeddings:

* ``n_experiments`` (10) experiments; experiment i trains on an undersample of ``samples_per_label`` (task default 8)
  rows per label. mteb's exact rng use: ONE index list ``list(range(n_train))`` is kept across experiments, and every
  experiment shuffles it in place again with a fresh ``np.random.RandomState(seed)``; the experiment then walks the
  shuffled list and keeps a row while its label has fewer than ``samples_per_label`` rows. (So experiments differ only
  because the permutation is applied once more each time; the seed itself is never varied — mteb issue #3897.)
* the probe is ``LogisticRegression(max_iter=100)`` with ``random_state=seed`` set as mteb's ``evaluate`` does, fitted
  on the selected rows in selection order, predicting the whole test split.
* per experiment: accuracy, f1 (macro), f1_weighted, precision / recall (macro) and their weighted versions, and for a
  binary test set ``ap``/``ap_weighted`` (sklearn ``average_precision_score`` of the predicted labels, as mteb);
  main score = accuracy; the reported value is the mean over experiments.

:func:`zero_shot_transfer` trains once per experiment on the source language (English, as MLDoc/MTOP cross-lingual
transfer) and scores every target language with the same classifiers. ``samples_per_label=None`` is the "full" mode:
no undersampling, one fit on every training row.

Scale: unprefixed keys are ×100; ``mteb_<key>`` are mteb's own [0, 1] values.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["logreg_probe", "mteb_undersample", "zero_shot_transfer"]

_METRICS = ("accuracy", "f1", "f1_weighted", "precision", "precision_weighted", "recall", "recall_weighted")


def _check_split(emb: np.ndarray, labels: Sequence | np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(emb)
    y = np.asarray(labels)
    if x.ndim != 2:
        raise ValueError(f"{what}: embeddings must be a 2-D array (N×d), got shape {x.shape}")
    if y.ndim != 1 or len(y) != len(x):
        raise ValueError(f"{what}: labels must be 1-D with one label per embedding row ({len(x)}), got {y.shape}")
    if len(x) == 0:
        raise ValueError(f"{what}: no rows")
    if np.issubdtype(x.dtype, np.floating) and not np.isfinite(x).all():
        raise ValueError(f"{what}: embeddings contain NaN or inf")
    return x, y


def mteb_undersample(
    labels: Sequence | np.ndarray, *, n_experiments: int = 10, samples_per_label: int = 8, seed: int = 42
) -> list[list[int]]:
    """Training-row indices of each experiment, as mteb's ``_undersample_data`` selects them (selection order)."""
    if n_experiments < 1 or samples_per_label < 1:
        raise ValueError(f"n_experiments ({n_experiments}) and samples_per_label ({samples_per_label}) must be >= 1")
    label_list = list(np.asarray(labels).tolist())
    idxs = list(range(len(label_list)))
    selections = []
    for _ in range(n_experiments):
        np.random.RandomState(seed).shuffle(idxs)  # fresh state every experiment, same list shuffled again
        counter: dict = defaultdict(int)
        selected = []
        for i in idxs:
            if counter[label_list[i]] < samples_per_label:
                selected.append(i)
                counter[label_list[i]] += 1
        selections.append(selected)
    return selections


def _scores(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """mteb ``_calculate_scores`` (raw [0, 1] values)."""
    from sklearn.metrics import accuracy_score, average_precision_score, f1_score, precision_score, recall_score

    scores = {
        "accuracy": accuracy_score(y_true, y_pred),
        "f1": f1_score(y_true, y_pred, average="macro"),
        "f1_weighted": f1_score(y_true, y_pred, average="weighted"),
        "precision": precision_score(y_true, y_pred, average="macro"),
        "precision_weighted": precision_score(y_true, y_pred, average="weighted"),
        "recall": recall_score(y_true, y_pred, average="macro"),
        "recall_weighted": recall_score(y_true, y_pred, average="weighted"),
    }
    # mteb: binary test set -> AP of the predicted labels (only defined for numeric labels; mteb would raise on text)
    if len(np.unique(y_true)) == 2 and np.issubdtype(np.asarray(y_pred).dtype, np.number):
        scores["ap"] = average_precision_score(y_true, y_pred, average="macro")
        scores["ap_weighted"] = average_precision_score(y_true, y_pred, average="weighted")
    return {k: float(v) for k, v in scores.items()}


def _summarise(per_experiment: list[dict[str, float]], n_train: list[int], n_test: int) -> dict[str, float]:
    keys = list(per_experiment[0])
    raw = {k: float(np.mean([s[k] for s in per_experiment])) for k in keys}
    out: dict[str, float] = {f"mteb_{k}": v for k, v in raw.items()}
    out.update({k: 100.0 * v for k, v in raw.items()})
    out["accuracy_std"] = 100.0 * float(np.std([s["accuracy"] for s in per_experiment]))
    out["n_experiments"] = len(per_experiment)
    out["n_train"] = float(np.mean(n_train))
    out["n_test"] = n_test
    return out


def zero_shot_transfer(
    train_emb: np.ndarray,
    train_labels: Sequence | np.ndarray,
    tests: Mapping[str, tuple[np.ndarray, Sequence | np.ndarray]],
    *,
    n_experiments: int = 10,
    samples_per_label: int | None = 8,
    seed: int = 42,
) -> dict[str, dict[str, float]]:
    """Train on one (source) language, score every test set with the same classifiers; ``{lang: scores}``.

    Each experiment fits one ``LogisticRegression(max_iter=100, random_state=seed)`` on the mteb undersample of the
    source training rows and predicts every language; ``samples_per_label=None`` fits once on all training rows.
    Per language: ``accuracy``, ``f1``, ``f1_weighted``, ``precision(_weighted)``, ``recall(_weighted)``
    (+ ``ap``/``ap_weighted`` for binary test sets) ×100 and as ``mteb_*`` in [0, 1], ``accuracy_std`` (×100, across
    experiments), ``n_experiments``, ``n_train`` (mean rows per fit), ``n_test``.
    """
    from sklearn.linear_model import LogisticRegression

    x_train, y_train = _check_split(train_emb, train_labels, "train")
    if not tests:
        raise ValueError("tests is empty: expected {language: (embeddings, labels)}")
    checked = {lang: _check_split(e, y, f"test {lang!r}") for lang, (e, y) in tests.items()}
    for lang, (x_test, _) in checked.items():
        if x_test.shape[1] != x_train.shape[1]:
            raise ValueError(f"test {lang!r}: dimension {x_test.shape[1]} differs from train ({x_train.shape[1]})")
    if samples_per_label is None:
        selections = [list(range(len(y_train)))]
    else:
        selections = mteb_undersample(
            y_train, n_experiments=n_experiments, samples_per_label=samples_per_label, seed=seed
        )
    if len(np.unique(y_train)) < 2:
        raise ValueError("train: logistic regression needs at least 2 distinct labels")
    per_lang: dict[str, list[dict[str, float]]] = {lang: [] for lang in checked}
    for selected in selections:
        model = LogisticRegression(max_iter=100, random_state=seed)
        model.fit(x_train[selected], y_train[selected].tolist())
        for lang, (x_test, y_test) in checked.items():
            per_lang[lang].append(_scores(y_test, model.predict(x_test)))
    n_train = [len(s) for s in selections]
    return {lang: _summarise(scores, n_train, len(checked[lang][1])) for lang, scores in per_lang.items()}


def logreg_probe(
    train_emb: np.ndarray,
    train_labels: Sequence | np.ndarray,
    test_emb: np.ndarray,
    test_labels: Sequence | np.ndarray,
    *,
    n_experiments: int = 10,
    samples_per_label: int | None = 8,
    seed: int = 42,
) -> dict[str, float]:
    """mteb's logistic-regression probe on one train/test pair (see :func:`zero_shot_transfer` for the keys).

    ``samples_per_label`` defaults to mteb's ``AbsTaskClassification`` default (8); tasks override it (e.g. 16, 32).
    ``None`` = full mode (no undersampling, one fit).
    """
    return zero_shot_transfer(
        train_emb,
        train_labels,
        {"test": (test_emb, test_labels)},
        n_experiments=n_experiments,
        samples_per_label=samples_per_label,
        seed=seed,
    )["test"]
