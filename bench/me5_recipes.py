"""`me5-best` against `me5-mpcl` and their start, on the broad evaluation of ``configs/examples/me5-best.yaml``.

The issue's question: does the combined recipe beat the MPCL recipe where MPCL gains (Tatoeba, BUCC) without losing
where MPCL loses ground (monolingual STS, clustering, xSIM)? One config, generated from ``me5-best.yaml`` (its
corpora, leakage guard and evaluation sets unchanged, its data root shared, so the start is scored once and every
node already built is a cache hit), adds training runs:

* ``me5_best_s<seed>`` — the ``me5_best`` run with another seed (seed 13 is ``me5_best`` itself);
* ``me5_mpcl_s<seed>`` — the ``me5-mpcl.yaml`` run (MPCL alone, 300 steps) with that seed, guarded against the same
  evaluation sets.

    python -m bench.me5_recipes run --best-seeds 13 14 15 --mpcl-seeds 13     # trains and scores what is missing
    python -m bench.me5_recipes run --best-seeds 13 --mpcl-seeds --without simcse   # + the ablation without NLI
    python -m bench.me5_recipes summary                                        # the broad table, mean ± std

``summary`` prints the table the README shows and appends its rows to ``bench_results`` (benchmark
``me5_recipes``). Groups: Tatoeba on the 5 trained languages and the 31 never trained (accuracy, mean of both
directions), BUCC zh-en mining F1, STS-B multi-mt monolingual (en de es fr) and cross-lingual pairs, STS17
monolingual and cross-lingual tracks (Spearman), MewsC-16 V-measure (mteb's bootstrapped k-means; 500 texts per
language), xSIM error rate on NTREX-128 (8 languages → English).
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
BEST = REPO / "configs" / "examples" / "me5-best.yaml"
MPCL = REPO / "configs" / "examples" / "me5-mpcl.yaml"
TRAINED = ("deu", "fra", "spa", "rus", "cmn")
START = "me5"


def _absolute(obj: Any, base: Path) -> Any:
    if isinstance(obj, dict):
        return {k: _absolute(v, base) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_absolute(v, base) for v in obj]
    if isinstance(obj, str) and obj.startswith("../"):
        return str((base / obj).resolve())
    return obj


def config(best_seeds: list[int], mpcl_seeds: list[int], without: list[str] = ()) -> dict[str, Any]:
    """``me5-best.yaml`` with the extra runs (paths made absolute so the file can live anywhere); ``without``:
    objective kinds to drop in an ablation run ``me5_best_no_<kind>`` (seed 13), e.g. ``simcse`` → the run
    ``me5_best_no_nli`` of the README."""
    cfg = _absolute(yaml.safe_load(BEST.read_text(encoding="utf-8")), BEST.parent)
    mpcl = yaml.safe_load(MPCL.read_text(encoding="utf-8"))["training"]["me5_mpcl"]
    best = cfg["training"]["me5_best"]
    runs: dict[str, Any] = {}
    for seed in best_seeds:
        runs["me5_best" if seed == best["seed"] else f"me5_best_s{seed}"] = {**copy.deepcopy(best), "seed": seed}
    for seed in mpcl_seeds:
        runs[f"me5_mpcl_s{seed}"] = {**copy.deepcopy(mpcl), "seed": seed}
    for kind in without:
        name = "me5_best_no_nli" if kind == "simcse" else f"me5_best_no_{kind}"
        runs[name] = {**copy.deepcopy(best), "objectives": [o for o in best["objectives"] if o["kind"] != kind]}
    cfg["name"] = "me5-recipes"
    cfg["training"] = runs
    return cfg


def run(args: argparse.Namespace) -> int:
    cfg = config(args.best_seeds, args.mpcl_seeds, args.without)
    path = REPO / "data" / "bench" / "me5-recipes.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    print(f"config: {path} (data root {cfg['data_root']}); runs: {', '.join(cfg['training'])}")
    return subprocess.call([sys.executable, "-m", "flows.cli", "run", str(path), "--executor", args.executor],
                           cwd=REPO)


# -- the broad table ----------------------------------------------------------------------------------------------
GROUPS = {  # name → SQL over eval_results of one run (one value)
    "Tatoeba trained (5)": "select avg(value) from r where task = 'tatoeba' and variant = 'canonical' and "
                           "metric = 'accuracy_mean' and subset in ({trained})",
    "Tatoeba never trained (31)": "select avg(value) from r where task = 'tatoeba' and variant = 'canonical' and "
                                  "metric = 'accuracy_mean' and subset not in ({trained}) and subset not in "
                                  "('xnli14', 'xtreme36', 'all')",
    "BUCC zh-en F1": "select avg(value) from r where task = 'bucc' and variant = 'oracle' and metric = 'f1'",
    "STS-B multi-mt monolingual (4)": "select avg(value) from r where task = 'sts' and variant = 'canonical' and "
                                      "metric = 'spearman' and subset like 'stsb-multi-mt/%' and "
                                      "split_part(languages, '-', 1) = split_part(languages, '-', 2)",
    "STS-B multi-mt cross-lingual (12)": "select avg(value) from r where task = 'sts' and variant = 'canonical' "
                                         "and metric = 'spearman' and subset like 'stsb-multi-mt/%' and "
                                         "split_part(languages, '-', 1) <> split_part(languages, '-', 2)",
    "STS17 monolingual": "select avg(value) from r where task = 'sts' and variant = 'canonical' and metric = "
                         "'spearman' and subset like 'sts17/%' and split_part(languages, '-', 1) = "
                         "split_part(languages, '-', 2)",
    "STS17 cross-lingual": "select avg(value) from r where task = 'sts' and variant = 'canonical' and metric = "
                           "'spearman' and subset like 'sts17/%' and split_part(languages, '-', 1) <> "
                           "split_part(languages, '-', 2)",
    "MewsC-16 V-measure (8)": "select avg(value) from r where task = 'clustering' and variant = 'mteb' and "
                              "metric = 'v_measure'",
    "xSIM error % (8 → eng)": "select avg(value) from r where task = 'xsim' and metric = 'error_rate' and "
                              "subset not like '%/mean'",
}


def figures(root: Path, run_name: str) -> dict[str, float | None]:
    """The GROUPS of one run, over its newest evaluation (``eval_results_all``: the current ``eval_results`` view
    holds only the last config run on this data root, and the runs here come from several)."""
    import duckdb

    from pipelines.export.model_export import eval_history
    from pipelines.export.mteb_results import UnknownRunError, run_results
    from warehouse.layout import DataRoot

    history = eval_history(DataRoot.at(root))
    try:
        rows = run_results(history, run_name).rows if history is not None else None
    except UnknownRunError:
        rows = None
    if rows is None:
        return dict.fromkeys(GROUPS)
    con = duckdb.connect()
    try:
        con.register("r", rows.to_arrow())
        trained = ", ".join(f"'{x}'" for x in TRAINED)
        return {g: con.execute(q.format(trained=trained)).fetchone()[0] for g, q in GROUPS.items()}
    finally:
        con.close()


def _mean_std(values: list[float]) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def summary(args: argparse.Namespace) -> int:
    from pipelines.export.model_export import eval_history
    from warehouse.layout import DataRoot

    cfg = _absolute(yaml.safe_load(BEST.read_text(encoding="utf-8")), BEST.parent)
    root = Path(cfg["data_root"])
    history = eval_history(DataRoot.at(root))
    runs = sorted(set(history["run"].drop_nulls())) if history is not None else []
    conditions = {"start (multilingual-e5-small)": [START],
                  "me5-mpcl": [r for r in runs if r.startswith("me5_mpcl_s")],
                  "me5-best": [r for r in runs if r == "me5_best" or r.startswith("me5_best_s")],
                  **{f"me5-best without {r[len('me5_best_no_'):]}": [r] for r in runs
                     if r.startswith("me5_best_no_")}}
    per_run = {r: figures(root, r) for rs in conditions.values() for r in rs}
    header = ["", *[f"{c} ({len(rs)} seed{'s' if len(rs) != 1 else ''})" for c, rs in conditions.items()]]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    rows = []
    for g in GROUPS:
        cells = [g]
        for c, rs in conditions.items():
            vals = [v for r in rs if (v := per_run[r][g]) is not None and not math.isnan(v)]
            cells.append(_mean_std(vals))
            rows += [{"benchmark": "me5_recipes", "condition": c, "run": r, "figure": g, "value": per_run[r][g]}
                     for r in rs]
        print("| " + " | ".join(cells) + " |")
    if not args.no_record:
        from bench.results import append_results

        append_results(root, "me5_recipes", rows)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train and score the runs that are missing")
    r.add_argument("--best-seeds", type=int, nargs="*", default=[13, 14, 15])
    r.add_argument("--mpcl-seeds", type=int, nargs="*", default=[13])
    r.add_argument("--without", nargs="*", default=[], metavar="KIND",
                   help="ablation runs of me5_best without one objective each (simcse → me5_best_no_nli)")
    r.add_argument("--executor", choices=("local", "prefect"), default="local")
    r.set_defaults(fn=run)
    s = sub.add_parser("summary", help="the broad table (mean ± std over seeds)")
    s.add_argument("--no-record", action="store_true", help="do not append to bench_results")
    s.set_defaults(fn=summary)
    args = p.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    raise SystemExit(main())
