"""The figures a verdict reads, from one ``eval_results`` table (``models.evaluation.suite``).

Figure names are what ``question.yaml`` lists under ``evaluation.report`` / ``decision`` / ``final`` and what a
ledger row's ``metrics`` hold (decision figures prefixed ``decision.``, full-set figures ``final.``). Higher is better
for every figure except ``xsim_error`` (``LOWER_IS_BETTER``).

| figure | what |
|---|---|
| ``tatoeba_trained`` / ``tatoeba_untrained`` | Tatoeba accuracy (mean of xx→en, en→xx) over trained / other languages |
| ``tatoeba_mean`` | the same over every evaluated language; ``tatoeba.<lang>`` per language |
| ``bucc_f1`` | BUCC mining F1 (LASER ratio margin, oracle threshold), mean over language pairs |
| ``sts17``, ``sts17_mono``, ``sts17_cross`` | STS17 Spearman × 100: every track / tracks of one language / of two |
| ``stsb_mono``, ``stsb_cross`` | STS-B multi-mt Spearman × 100, monolingual / cross-lingual subsets |
| ``xsim_error`` | xSIM error rate % (ratio margin, x → en), mean over languages |
| ``mewsc_accuracy`` | MewsC-16 k-means + Hungarian accuracy (EASE's protocol), mean over languages |
| ``train.<column>`` | a ``train_steps`` column read at the run's last probed update (``experiments.runner``) |
| ``entity_retrieval_acc`` | EASE's witness: sentence → entity top-1 % on the kit's held-out pairs, trained head |
| ``entity_retrieval_start`` | the same at the run's start: start encoder, the head as initialised (same W₀) |
| ``entity_retrieval_gain`` / ``_gain_se`` | acc − start (points; paired, same pairs) and its standard error |
| ``entity_retrieval_mrr`` | mean reciprocal rank × 100 of the trained head |
| ``entity_retrieval_chance`` / ``_blind`` | 1/candidates × 100; the held-out majority entity's share × 100 |
| ``entity_retrieval_balanced`` (``_start``, ``_gain``, ``_gain_se``) | top-1 per entity first (blind ranking: chance) |
| ``entity_head_movement`` | ‖W_trained − W_init‖_F / ‖W_init‖_F of the entity head (a fraction) |

The ``entity_*`` figures (``ENTITY_FIGURES``) are not scored by the evaluation suite: ``experiments.entity_witness``
computes them from the run's entity head (``<run>/entity_head/``) and the kit's ``eval_entity_pairs``;
``scored_by_suite`` tells the two kinds apart.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

LOWER_IS_BETTER = frozenset({"xsim_error"})
STSB_DATASET = "stsb-multi-mt"  # the ``dataset`` value of STS-B multi-mt rows (``pipelines.eval_sets.sts``)
ENTITY_FIGURES = ("entity_retrieval_acc", "entity_retrieval_start", "entity_retrieval_gain",
                  "entity_retrieval_gain_se", "entity_retrieval_balanced", "entity_retrieval_balanced_start",
                  "entity_retrieval_balanced_gain", "entity_retrieval_balanced_gain_se", "entity_retrieval_mrr",
                  "entity_retrieval_chance", "entity_retrieval_blind", "entity_head_movement")
KNOWN = ("tatoeba_trained", "tatoeba_untrained", "tatoeba_mean", "bucc_f1", "sts17", "sts17_mono", "sts17_cross",
         "stsb_mono", "stsb_cross", "xsim_error", "mewsc_accuracy", *ENTITY_FIGURES)


# the kit tables (``experiments.kits.tables``) each figure family is scored on
_FAMILY_TABLES = {"tatoeba": ("eval_tatoeba",), "bucc": ("eval_bucc", "eval_bucc_gold"), "sts17": ("eval_sts",),
                  "stsb": ("eval_sts",), "xsim": ("eval_parallel",), "mewsc": ("eval_clustering",),
                  "entity": ("eval_entity_pairs",)}


def family(figure: str) -> str:
    """The family of a figure (``tatoeba``, ``bucc``, ``sts17``, ``stsb``, ``xsim``, ``mewsc``, ``entity``): the
    figures one evaluation task computes from the same tables, e.g. ``tatoeba_untrained`` and ``tatoeba.deu``."""
    base = figure.removeprefix("decision.").removeprefix("final.")
    return base.split(".")[0].split("_")[0]


def tables_of(figure: str) -> tuple[str, ...]:
    """The kit tables a figure is scored on (``eval_bucc`` and its gold pairs for ``bucc_f1``, …)."""
    try:
        return _FAMILY_TABLES[family(figure)]
    except KeyError:
        raise ValueError(f"figure {figure!r}: no evaluation table known for it; expected one of {', '.join(KNOWN)} "
                         "(decision./final. prefixes allowed)") from None


def scored_by_suite(figure: str) -> bool:
    """Whether the evaluation suite scores ``figure`` (``score`` in ``experiments.runner``): not a ``train.*`` figure
    (read from the training log) nor an ``entity_*`` one (``experiments.entity_witness``)."""
    return not figure.startswith("train.") and family(figure) != "entity"


def on_report_sets(figure: str) -> bool:
    """Whether a ledger figure name is scored on the report sets (not ``decision.*``, ``final.*`` or ``train.*``)."""
    return not figure.startswith(("decision.", "final.", "train."))


def higher_is_better(figure: str) -> bool:
    return figure.removeprefix("decision.").removeprefix("final.") not in LOWER_IS_BETTER


def figures(results: Path, trained: Sequence[str]) -> dict[str, float]:
    """Every figure ``results`` (an ``eval_results.parquet``) supports; ``trained``: the trained Tatoeba languages."""
    import pyarrow.parquet as pq

    rows = pq.read_table(results).to_pylist()
    out: dict[str, float] = {}
    tat = {r["subset"]: r["value"] for r in rows if (r["task"], r["variant"], r["metric"]) ==
           ("tatoeba", "canonical", "accuracy_mean") and r["languages"] == f"{r['subset']}-eng"}
    for name, langs in (("tatoeba_trained", [k for k in tat if k in trained]),
                        ("tatoeba_untrained", [k for k in tat if k not in trained]), ("tatoeba_mean", list(tat))):
        if langs:
            out[name] = statistics.fmean(tat[k] for k in langs)
    out.update({f"tatoeba.{k}": v for k, v in sorted(tat.items())})
    bucc = [r["value"] for r in rows if (r["task"], r["variant"], r["metric"]) == ("bucc", "oracle", "f1")]
    if bucc:
        out["bucc_f1"] = statistics.fmean(bucc)
    sts: dict[str, list[float]] = {}
    for r in rows:
        if (r["task"], r["variant"], r["metric"]) != ("sts", "canonical", "spearman") or "/" not in r["subset"]:
            continue
        dataset = r["subset"].split("/", 1)[0]
        a, _, b = str(r["languages"]).partition("-")
        prefix = {"sts17": "sts17", STSB_DATASET: "stsb"}.get(dataset)
        if prefix:
            sts.setdefault(prefix, []).append(r["value"])
            sts.setdefault(f"{prefix}_{'mono' if a == b else 'cross'}", []).append(r["value"])
    out.update({k: statistics.fmean(v) for k, v in sts.items() if k != "stsb"})
    xsim = [r["value"] for r in rows if (r["task"], r["variant"], r["metric"]) == ("xsim", "laser", "error_rate")
            and str(r["subset"]).endswith("/mean")]
    if xsim:
        out["xsim_error"] = statistics.fmean(xsim)
    clu = [r["value"] for r in rows if (r["task"], r["variant"], r["metric"]) ==
           ("clustering", "ease", "hungarian_accuracy")]
    if clu:
        out["mewsc_accuracy"] = statistics.fmean(clu)
    return out


def evaluation_settings(names: Sequence[str], batch_size: int) -> object:
    """The evaluation suite's settings that compute ``names`` (and nothing else: each task costs encoding time)."""
    from models.settings import (
        BuccSettings,
        ClusteringSettings,
        EvaluationSettings,
        StsSettings,
        TatoebaSettings,
        XsimSettings,
    )

    base = {n.removeprefix("decision.").removeprefix("final.").split(".")[0] for n in names if scored_by_suite(n)}
    sts = tuple(sorted({"sts17" for n in base if n.startswith("sts17")} |
                       {STSB_DATASET for n in base if n.startswith("stsb")}))
    return EvaluationSettings(
        tatoeba=TatoebaSettings(subsets=(), xtreme=False, mteb=False) if any(n.startswith("tatoeba") for n in base)
        else None,
        bucc=BuccSettings(cosine=False, mteb=False) if "bucc_f1" in base else None,
        sts=StsSettings(datasets=sts, mteb=False) if sts else None,
        clustering=ClusteringSettings(v_measure=False, n_init=3) if "mewsc_accuracy" in base else None,
        xsim=XsimSettings(compare_text=False) if "xsim_error" in base else None,
        classification=None, geometry=None, langid=None, pair_classification=None, cache=False,
        batch_size=batch_size)
