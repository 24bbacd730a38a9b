"""Report section ``Training``: per trained run its start model, its training languages and its training curves.

A run's curves come from the tables the training stage writes (``models/training/train.py``): ``train_steps`` (weighted
total loss and learning rate per step), ``train_objective_losses`` (each objective's own loss per step) and
``train_dev`` (the dev metric every ``dev.every`` steps; ``best`` marks a new best, so the last flagged step is the
exported checkpoint). Wall-clock columns (``seconds``, ``sentences_per_second``) are not shown: they differ between
identical runs, and the report must be byte-identical for identical inputs.

Training languages are read from the corpora a run's objectives read (every string column named ``lang``, ``*_lang``
or ``lang_*``), narrowed by an objective's own ``languages`` setting when it has one; they are unknown (``None``)
when an objective's tables carry no language column. Codes are compared as ISO 639-3 through ICU, so ``de`` in a
corpus matches ``deu`` in Tatoeba and ``deu_Latn`` in FLORES.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import icu
import polars as pl

from pipelines.language_codes import split_languages
from pipelines.report import plots
from pipelines.report.document import Block, Figure, Section, Table, Text, safe_name

CURVE_TABLES = ("train_steps", "train_objective_losses", "train_dev")
MAX_POINTS = 1000  # curves longer than this are averaged over equal bins of steps (the SVG stays small)
_LANG_COLUMN = re.compile(r"^(lang|.+_lang|lang_.+)$")
_CODE = re.compile(r"^[A-Za-z]{2,3}(_[A-Za-z]{4})?$")


@dataclass(frozen=True)
class TrainedRun:
    """What the report knows about one training run besides its evaluation rows.

    ``start``: the ``eval_results`` run name of the model it began from (its ``encoder.pretrained``, evaluated once
    by its own node or by the ``evaluation.models`` peer naming the same model); ``None`` for a run trained from
    scratch. ``pretrained``: that start model as the config names it. ``curves``: ``train_steps`` /
    ``train_objective_losses`` / ``train_dev`` → Parquet file. ``sources``: per objective, the corpus tables it reads
    and the languages it restricts itself to (empty: every language of those tables)."""

    start: str | None = None
    pretrained: str | None = None
    curves: Mapping[str, Path] = field(default_factory=dict)
    sources: Sequence[tuple[Sequence[str], Sequence[str]]] = ()


# -- languages --------------------------------------------------------------------------------------------------
# individual languages that evaluation sets name where corpora name the macrolanguage (Tatoeba ``cmn``/``swh``,
# FLORES ``arb_Arab``/``pes_Arab``/``zsm_Latn``… against XNLI's and Wikipedia's ``zh``/``sw``/``ar``/``fa``/``ms``)
MACROLANGUAGE = {"cmn": "zho", "swh": "swa", "arb": "ara", "pes": "fas", "zsm": "msa", "ekk": "est", "lvs": "lav",
                 "nob": "nor", "azj": "aze", "uzn": "uzb", "khk": "mon", "plt": "mlg", "npi": "nep", "ory": "ori",
                 "gaz": "orm", "als": "sqi", "pbt": "pus", "ydd": "yid"}


@cache
def iso3(code: str) -> str:
    """``de`` / ``deu`` / ``deu_Latn`` / ``de-AT`` → ``deu``: ICU's ISO 639-3 code (the lower-cased language subtag
    when ICU has none, e.g. LASER's ``ber``), an individual language folded into its macrolanguage
    (``MACROLANGUAGE``) so that ``cmn`` and ``zh`` compare equal."""
    loc = icu.Locale(code.replace("_", "-"))
    found = loc.getISO3Language() or (loc.getLanguage() or code.split("-")[0].split("_")[0]).lower()
    return MACROLANGUAGE.get(found, found)


def subset_languages(languages: str | None) -> frozenset[str]:
    """The ISO 639-3 codes of an ``eval_results.languages`` value (``deu-eng`` → {deu, eng}, ``de`` → {deu},
    ``deu_Latn-eng_Latn`` → {deu, eng}); empty for aggregates (``14 languages``) and other values."""
    parts = split_languages(languages or "")  # a script or region subtag stays with its language (zho-CN)
    if not parts or not all(_CODE.match(p.split("-", 1)[0]) for p in parts):
        return frozenset()
    return frozenset(iso3(p) for p in parts)


def _table_languages(path: Path) -> set[str] | None:
    """Distinct values of the language columns of one corpus table (Parquet file or hive folder); None without any."""
    path = Path(path)
    if path.is_dir() and not any(path.rglob("*.parquet")):
        return set()
    frame = pl.scan_parquet(path / "**/*.parquet" if path.is_dir() else path, hive_partitioning=True)
    schema = frame.collect_schema()
    cols = [c for c, t in schema.items() if _LANG_COLUMN.match(c) and t in (pl.Utf8, pl.Categorical)]
    if not cols:
        return None
    values = frame.select(pl.concat_list(pl.col(cols).cast(pl.Utf8)).alias("_l")).explode("_l").unique().collect()
    return {v for v in values["_l"] if v}


def training_languages(run: TrainedRun, corpora: Mapping[str, Path]) -> tuple[str, ...] | None:
    """The languages a run trained on, as the corpora name them (sorted); None when some objective's languages cannot
    be told (a table it reads is absent or has no language column) or the run's sources are not known."""
    if not run.sources:
        return None
    found: set[str] = set()
    for tables, restrict in run.sources:
        if restrict:
            found.update(restrict)
            continue
        langs = [_table_languages(corpora[t]) if t in corpora else None for t in tables]
        known = [x for x in langs if x is not None]
        if not known:
            return None
        for x in known:
            found.update(x)
    return tuple(sorted(found))


# -- curves -----------------------------------------------------------------------------------------------------
def read_curves(run: str, files: Mapping[str, Path]) -> dict[str, pl.DataFrame]:
    """The three training tables of ``run`` (missing ones as empty frames); raises ValueError naming the file when a
    table lacks the columns the curves need."""
    need = {"train_steps": ("step", "loss", "lr"), "train_objective_losses": ("step", "objective", "loss"),
            "train_dev": ("step", "metric", "value", "best")}
    out = {}
    for name, cols in need.items():
        if name not in files:
            out[name] = pl.DataFrame(schema=dict.fromkeys(cols, pl.Float64))
            continue
        frame = pl.read_parquet(files[name])
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ValueError(f"{files[name]}: not a {name} table of run {run!r}: missing columns {missing} "
                             f"(expected {', '.join(cols)})")
        out[name] = frame.select(cols).sort("step", maintain_order=True)
    return out


def _binned(frame: pl.DataFrame, by: Sequence[str], values: Sequence[str], n_steps: int) -> pl.DataFrame:
    """Means over bins of ``ceil(n_steps / MAX_POINTS)`` consecutive steps (x = the bin's mean step)."""
    if n_steps <= MAX_POINTS or not frame.height:
        return frame
    width = math.ceil(n_steps / MAX_POINTS)
    return (frame.with_columns(_bin=(pl.col("step") - 1) // width)
            .group_by(*by, "_bin", maintain_order=True).agg(pl.col("step").mean(), *(pl.col(v).mean() for v in values))
            .drop("_bin"))


def smoothed(frame: pl.DataFrame, by: Sequence[str], points: int = 50) -> pl.DataFrame:
    """``frame`` with ``smooth``: the trailing moving average of ``loss`` over ``len / points`` rows (per ``by``
    group), so that a noisy per-step loss still shows its trend; unchanged when that window is a single row."""
    window = frame.height // max(1, frame.select(pl.struct(*by).n_unique()).item() if by else 1) // points
    if window < 2:
        return frame
    smooth = pl.col("loss").rolling_mean(window, min_samples=1)
    return frame.with_columns(smooth.over(*by).alias("smooth") if by else smooth.alias("smooth"))


def best_step(dev: pl.DataFrame) -> int | None:
    """The step of the exported checkpoint: the last step flagged ``best`` (None without dev evaluation)."""
    flagged = dev.filter(pl.col("best").cast(pl.Boolean))
    return int(flagged["step"][-1]) if flagged.height else None


def _loss_summary(objectives: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Per objective (and the weighted total): loss at the first and last step and its minimum."""
    total = steps.select("step", "loss").with_columns(objective=pl.lit("total (weighted)"))
    both = pl.concat([objectives.select("step", "objective", "loss"), total.select("step", "objective", "loss")]) \
        if len(set(objectives["objective"])) > 1 else objectives.select("step", "objective", "loss")
    return (both.group_by("objective", maintain_order=True)
            .agg(first_loss=pl.col("loss").first(), last_loss=pl.col("loss").last(), min_loss=pl.col("loss").min(),
                 min_at_step=pl.col("step").get(pl.col("loss").arg_min()).cast(pl.Int64)))


def _run_text(name: str, run: TrainedRun, languages: tuple[str, ...] | None) -> Text:
    if run.pretrained is None:
        start = "trained from scratch (no `encoder.pretrained`): there is no start model to compare it with"
    elif run.start is None:
        start = f"began from `{run.pretrained}` (its start model; not evaluated: no evaluation sets)"
    else:
        start = f"began from `{run.pretrained}` (its start model, evaluated as `{run.start}`)"
    langs = (f"training languages (from its corpora): {', '.join(languages)}" if languages
             else "training languages unknown (its corpora carry no language column)")
    return Text(f"**`{name}`** {start}; {langs}.")


def run_training_blocks(name: str, run: TrainedRun, languages: tuple[str, ...] | None,
                        with_plots: bool) -> list[Block]:
    """Text (start model, languages, steps, dev), the loss summary table and the curves figure of one run."""
    blocks: list[Block] = [_run_text(name, run, languages)]
    if not any(t in run.curves for t in CURVE_TABLES):
        blocks.append(Text("_No training tables for this run (an artifact from before they were written)._"))
        return blocks
    curves = read_curves(name, run.curves)
    steps, objectives, dev = curves["train_steps"], curves["train_objective_losses"], curves["train_dev"]
    n = int(steps["step"].max() or 0) if steps.height else 0
    best = best_step(dev)
    if dev.height:
        last = dev.filter(pl.col("step") == best) if best is not None else dev.tail(1)
        metric, value = last["metric"][0], last["value"][0]
        dev_text = (f"best dev {metric} {value:.2f} at step {best} (the exported checkpoint)" if best is not None
                    else f"no dev improvement recorded; last dev {metric} {value:.2f}")
    else:
        dev_text = "no dev evaluation: the last step's weights are exported"
    peak = float(steps["lr"].max()) if steps.height else float("nan")
    blocks.append(Text(f"{n} steps, peak learning rate {peak:.3g}; {dev_text}."))
    if objectives.height:
        blocks.append(Table(_loss_summary(objectives, steps)))
    if with_plots and (steps.height or objectives.height):
        losses = objectives["loss"].drop_nulls()
        positive = losses.len() > 0 and float(losses.min()) > 0
        log_loss = positive and float(losses.max()) / float(losses.min()) > 30
        shown_steps = smoothed(_binned(steps, [], ["loss", "lr"], n), [])
        shown_obj = smoothed(_binned(objectives, ["objective"], ["loss"], n), ["objective"])
        binned = f"; means over bins of {math.ceil(n / MAX_POINTS)} steps" if n > MAX_POINTS else ""
        caption = (f"Training curves of {name}: loss per objective{' (log scale)' if log_loss else ''}"
                   f"{', faint: per step, solid: moving average' if 'smooth' in shown_obj.columns else ''}; "
                   f"learning rate; dev metric; dashed line and star: the best dev step{binned}")
        svg = plots.training_curves(shown_obj, shown_steps, dev, title=f"{name} — training curves", best_step=best,
                                    log_loss=log_loss)
        blocks.append(Figure(safe_name(f"training_{name}"), svg, caption))
    return blocks


def training_section(runs: Mapping[str, TrainedRun], languages: Mapping[str, tuple[str, ...] | None],
                     with_plots: bool) -> Section:
    """The ``Training`` section: one paragraph, table and figure per trained run (sorted by name)."""
    sec = Section("Training")
    with_plots = with_plots and plots.available()
    for name in sorted(runs):
        sec.blocks += run_training_blocks(name, runs[name], languages.get(name), with_plots)
    return sec


def all_languages(values: Iterable[str]) -> frozenset[str]:
    return frozenset(iso3(v) for v in values)
