"""Report sections ``Evaluation``: ``eval_results`` tables, headline numbers, per-task tables (runs as columns).

``eval_results`` is one long table per evaluation artifact (schema ``EVAL_RESULTS_SCHEMA``); several artifacts may
carry different runs. The protocols behind each ``task``/``variant`` are those of ``docs/methods.md`` §7 (Tatoeba
§7.1 after LASER ``data/tatoeba`` and mSimCSE ``eval/evaluation_retrieval.py``; BUCC §7.3 after LASER
``source/mine_bitexts.py``; STS §7.4 after SentEval ``senteval/sts.py``; clustering §7.5 after EASE
``downstreams/text-clustering/evaluation.py``; alignment/uniformity §7.7 after ``SsnL/align_uniform``; xSIM §7.8 after
LASER ``source/xsim.py``) and §9 (mteb evaluators). Scales: points (×100) for accuracies, F1, correlations and
V-measure, percent for xSIM error, raw for alignment, uniformity and thresholds.

What the report says of each task — its section title, its variants' labels and order, its headline metrics, its
metric order and scales, its charts — is the task's declaration (``pipelines/eval_tasks/<name>.py``, a ``Report``;
gathered by :func:`vocabulary`): this module names no task.

Headline numbers: a task declaring ``headline_mean`` (Tatoeba, xSIM, alignment/uniformity) shows its aggregate rows
(``xnli14``, ``xtreme36``, ``all``, or ``N languages``); where a run has none, the plain mean over its per-language
rows is shown as subset ``mean``. The other tasks show every subset (BUCC per pair and threshold protocol, STS per
dataset/track, clustering per language).

A trained run that began from a pretrained model is set beside that start model's rows (evaluated by its own node
in ``flows/stages``) with a Δ column (run − start, in the metric's scale) in the headline comparison and in every
per-task table; ``evaluation.models`` peers stand beside it too. Per-language charts (tasks declaring
``per_language``: Tatoeba, xSIM, clustering, STS, pair classification) put the languages a run trained on before
those it never saw, in labelled blocks, when training languages are known.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipelines.eval_task_registry import SHARED_VARIANTS, tasks
from pipelines.report import plots
from pipelines.report.document import Block, Figure, Section, Table, Text, safe_name
from pipelines.report.training import subset_languages

EVAL_RESULTS_SCHEMA: dict[str, pl.DataType] = {
    "run": pl.Utf8(), "model": pl.Utf8(), "task": pl.Utf8(), "variant": pl.Utf8(), "subset": pl.Utf8(),
    "languages": pl.Utf8(), "metric": pl.Utf8(), "value": pl.Float64(), "n": pl.Int64(),
}
KEY = ("task", "variant", "subset", "languages", "metric")  # one value per run and key
# the first evaluation node's table (models/evaluation/tatoeba.py before the evaluation suite): converted on read
LEGACY_COLUMNS = ("train_run", "model_key", "task", "lang", "direction", "metric", "value", "n")

@dataclass(frozen=True)
class Vocabulary:
    """What the report knows of the evaluation tasks, gathered from their declarations
    (``pipelines.eval_task_registry``: ``Report``): section titles, variant labels and the variants' order (by
    rank; unranked ones after, alphabetically), the metric order (each task's metrics in task order, a metric keeping
    its first place), per task its headline preference, the tasks with every headline metric, the tasks whose
    per-language rows are summarised by aggregates or their mean, what a subset is for the per-language charts, the
    metrics shown raw and those where lower is better, and each task's own figure."""

    titles: dict[str, str]
    variants: dict[str, str]
    variant_order: tuple[str, ...]
    metric_order: tuple[str, ...]
    headline: dict[str, tuple[str, ...]]
    every_metric: frozenset[str]
    mean: frozenset[str]
    per_language: dict[str, str]
    raw: frozenset[str]
    lower: frozenset[str]
    figures: dict[str, Callable[[pl.DataFrame], Any]]


_VOCABULARY: list[tuple[tuple[int, ...], Vocabulary]] = []  # (ids of the tasks it was built from, it)


def vocabulary() -> Vocabulary:
    """The report's :class:`Vocabulary` of the registered tasks (built again when they change)."""
    specs = tasks()
    key = tuple(id(t) for t in specs.values())
    if _VOCABULARY and _VOCABULARY[0][0] == key:
        return _VOCABULARY[0][1]
    reports = {name: t.report for name, t in specs.items()}
    variants = {**SHARED_VARIANTS, **{v: var for r in reports.values() for v, var in r.variants.items()}}
    vocab = Vocabulary(
        titles={name: r.title for name, r in reports.items()},
        variants={v: var.label for v, var in variants.items()},
        variant_order=tuple(sorted((v for v, var in variants.items() if math.isfinite(var.rank)),
                                   key=lambda v: (variants[v].rank, v))),
        metric_order=tuple(dict.fromkeys(m for r in reports.values() for m in r.metrics)),
        headline={name: r.headline for name, r in reports.items() if r.headline},
        every_metric=frozenset(name for name, r in reports.items() if r.headline_every_metric),
        mean=frozenset(name for name, r in reports.items() if r.headline_mean),
        per_language={name: r.per_language for name, r in reports.items() if r.per_language},
        raw=frozenset(m for r in reports.values() for m in r.raw_metrics),
        lower=frozenset(m for r in reports.values() for m in r.lower_is_better),
        figures={name: r.figure for name, r in reports.items() if r.figure is not None})
    _VOCABULARY[:] = [(key, vocab)]
    return vocab


def raw_metrics() -> frozenset[str]:
    """Metrics shown raw (4 decimals): thresholds, alignment, uniformity, …"""
    return vocabulary().raw


def lower_is_better() -> frozenset[str]:
    """Metrics where lower is better: error rates, alignment, uniformity, …"""
    return vocabulary().lower


AGGREGATE_SUBSETS = ("xnli14", "xtreme36", "all", "mean", "wmean")
SCALES = ("Values in points (×100) for accuracies, F1, precision, recall, average precision, correlations and "
          "V-measure; xSIM error rate in percent; alignment, uniformity and thresholds raw (lower alignment/uniformity "
          "is better).")


# -- reading ----------------------------------------------------------------------------------------------------
def _from_legacy(df: pl.DataFrame) -> pl.DataFrame:
    """Old ``evaluate_tatoeba`` rows (fractions per direction) → canonical Tatoeba rows in points, with the mean."""
    per_dir = df.filter(pl.col("metric") == "accuracy").select(
        run=pl.col("train_run"), model=pl.col("model_key"), task=pl.col("task"), variant=pl.lit("canonical"),
        subset=pl.col("lang"), languages=pl.col("lang") + "-eng",
        metric=pl.when(pl.col("direction") == "eng->xx").then(pl.lit("accuracy_en_xx"))
        .otherwise(pl.lit("accuracy_xx_en")),
        value=pl.col("value").cast(pl.Float64) * 100, n=pl.col("n").cast(pl.Int64))
    mean = (per_dir.group_by("run", "model", "task", "variant", "subset", "languages", maintain_order=True)
            .agg(metric=pl.lit("accuracy_mean"), value=pl.col("value").mean(), n=pl.col("n").first()))
    return pl.concat([per_dir, mean.select(per_dir.columns)])


def normalise_results(df: pl.DataFrame, source: str) -> pl.DataFrame:
    """Check and cast one ``eval_results`` table to ``EVAL_RESULTS_SCHEMA`` (legacy rows are converted).

    Raises ValueError naming ``source`` (and the 1-based row) for missing columns, uncastable types or empty keys.
    """
    if "train_run" in df.columns and set(LEGACY_COLUMNS) <= set(df.columns):
        legacy = pl.col("run").is_null() if "run" in df.columns else pl.lit(True)
        converted = _from_legacy(df.filter(legacy))
        if "run" not in df.columns:
            df = converted
        else:
            df = pl.concat([df.filter(~legacy).select(converted.columns), converted], how="vertical_relaxed")
    missing = [c for c in EVAL_RESULTS_SCHEMA if c not in df.columns]
    if missing:
        raise ValueError(f"{source}: not an eval_results table: missing columns {missing} "
                         f"(expected {', '.join(EVAL_RESULTS_SCHEMA)})")
    try:
        df = df.select(pl.col(c).cast(t, strict=True) for c, t in EVAL_RESULTS_SCHEMA.items())
    except pl.exceptions.PolarsError as exc:
        types = ", ".join(f"{c}: {t}" for c, t in EVAL_RESULTS_SCHEMA.items())
        raise ValueError(f"{source}: eval_results columns do not have the expected types ({types}): {exc}") from None
    for col in ("run", "task", "variant", "subset", "metric"):
        bad = (df[col].is_null() | (df[col] == "")).arg_true()
        if len(bad):
            raise ValueError(f"{source}: row {bad[0] + 1}: empty `{col}` (every eval_results row needs run, task, "
                             "variant, subset and metric)")
    return df


def check_unique(df: pl.DataFrame, source_col: str | None = None) -> None:
    """Raise ValueError when a run has two values for one (task, variant, subset, languages, metric)."""
    aggs = [pl.len().alias("rows")]
    if source_col:
        aggs.append(pl.col(source_col).unique().sort().alias("sources"))
    dup = (df.group_by("run", *KEY).agg(*aggs).filter(pl.col("rows") > 1)
           .sort("run", *KEY, nulls_last=True))
    if dup.height:
        r = dup.row(0, named=True)
        where = f" (in {', '.join(r['sources'])})" if source_col else ""
        key = ", ".join(f"{k}={r[k]!r}" for k in KEY)
        raise ValueError(f"eval_results: run {r['run']!r} has {r['rows']} values for {key}{where}; expected one per "
                         f"run and (task, variant, subset, languages, metric)")


def empty_results() -> pl.DataFrame:
    return pl.DataFrame(schema=EVAL_RESULTS_SCHEMA)


def read_results(paths: Iterable[Path]) -> pl.DataFrame:
    """Every ``eval_results.parquet`` in ``paths``, checked, as one frame (one value per run and key)."""
    frames = [normalise_results(pl.read_parquet(p), str(p)).with_columns(source=pl.lit(str(p))) for p in paths]
    if not frames:
        return empty_results()
    df = pl.concat(frames)
    check_unique(df, "source")
    return df.drop("source")


# -- ordering and formatting ------------------------------------------------------------------------------------
def _rank(col: str, order: Sequence[str]) -> pl.Expr:
    return pl.col(col).replace_strict(list(order), list(range(len(order))), default=len(order),
                                      return_dtype=pl.Int32)


def ordered(df: pl.DataFrame) -> pl.DataFrame:
    """Rows in report order: task, variant, aggregates before languages, then metric (known orders first)."""
    keys: dict[str, pl.Expr] = {}
    by: list[str] = []
    vocab = vocabulary()
    for col, order in (("task", tuple(vocab.titles)), ("variant", vocab.variant_order), ("subset", AGGREGATE_SUBSETS),
                       ("languages", ()), ("metric", vocab.metric_order)):
        if col in df.columns:
            if order:
                keys[f"_{col}"] = _rank(col, order)
                by.append(f"_{col}")
            by.append(col)
    return df.with_columns(**keys).sort(by, nulls_last=True, maintain_order=True).drop(*keys)


def in_order(values: Iterable[str], order: Sequence[str]) -> list[str]:
    """Distinct ``values``: those in ``order`` first (in that order), then the rest alphabetically."""
    rank = {v: i for i, v in enumerate(order)}
    return sorted(set(values), key=lambda v: (rank.get(v, len(order)), v))


def format_value(metric: str, value: float | None) -> str:
    if value is None:
        return "–"
    if math.isnan(value):
        return "nan"
    return f"{value:.4f}" if metric in raw_metrics() else f"{value:.2f}"


def format_delta(metric: str, value: float | None) -> str:
    """A difference with its sign (``+1.25``, ``-0.0300``), in the metric's own scale."""
    text = format_value(metric, value)
    return text if value is None or math.isnan(value) or text.startswith("-") else f"+{text}"


def formatted(df: pl.DataFrame, value: str = "value", out: str = "value_text") -> pl.DataFrame:
    texts = [format_value(m, v) for m, v in zip(df["metric"], df[value], strict=True)]
    return df.with_columns(pl.Series(out, texts, dtype=pl.Utf8))


def delta_column(run: str, start: str) -> str:
    return f"Δ ({run} − {start})"


def runs_as_columns(long: pl.DataFrame, index: Sequence[str], runs: Sequence[str],
                    deltas: Sequence[tuple[str, str]] = ()) -> pl.DataFrame:
    """Long rows (one per run) → one row per ``index`` (which includes ``metric``) with a formatted value column per
    run (``–`` where absent), then a signed ``Δ (run − start)`` column per (run, start) of ``deltas``."""
    text = formatted(long)
    wide = text.pivot(on="run", on_columns=list(runs), index=list(index), values="value_text")
    names = [delta_column(r, s) for r, s in deltas]
    if deltas:
        nums = long.pivot(on="run", on_columns=list(runs), index=list(index), values="value")
        diff = nums.select(*index, *((pl.col(r) - pl.col(s)).alias(n) for (r, s), n in zip(deltas, names,
                                                                                            strict=True)))
        diff = diff.with_columns(pl.Series(n, [format_delta(m, v) for m, v in zip(diff["metric"], diff[n],
                                                                                  strict=True)], dtype=pl.Utf8)
                                 for n in names)
        wide = wide.join(diff, on=list(index), how="left", nulls_equal=True)
    return ordered(wide).with_columns(pl.col(c).fill_null("–") for c in (*runs, *names))


def variant_label(variant: str) -> str:
    return vocabulary().variants.get(variant, "no description")


# -- headline numbers -------------------------------------------------------------------------------------------
def is_aggregate() -> pl.Expr:
    return (pl.col("subset").is_in(AGGREGATE_SUBSETS)
            | pl.col("languages").fill_null("").str.contains(r"^\d+ (languages|pairs|tracks)$"))


def headline_metrics(results: pl.DataFrame) -> pl.DataFrame:
    """(task, variant, metric) of each headline: per task and variant the first metric of its ``Report.headline``
    present (every one for a task with ``headline_every_metric``; the alphabetically first for a task without a
    headline)."""
    present = results.select("task", "variant", "metric").unique().sort("task", "variant", "metric")
    vocab = vocabulary()
    rows = []
    for (task, variant), grp in present.group_by("task", "variant", maintain_order=True):
        have = set(grp["metric"])
        prefs = vocab.headline.get(task, tuple(sorted(have)))
        chosen = [m for m in prefs if m in have]
        rows += [(task, variant, m) for m in (chosen if task in vocab.every_metric else chosen[:1])]
    return pl.DataFrame(rows, schema={"task": pl.Utf8, "variant": pl.Utf8, "metric": pl.Utf8}, orient="row")


def headlines(results: pl.DataFrame) -> pl.DataFrame:
    """Headline rows (same columns as ``eval_results``), in report order."""
    rows = results.join(headline_metrics(results), on=["task", "variant", "metric"], how="semi")
    mean_task = pl.col("task").is_in(vocabulary().mean)
    shown = rows.filter(~mean_task | is_aggregate())
    per_lang = rows.filter(mean_task & ~is_aggregate())
    covered = shown.filter(mean_task).select("run", "task", "variant", "metric").unique()
    computed = (per_lang.join(covered, on=["run", "task", "variant", "metric"], how="anti")
                .group_by("run", "task", "variant", "metric")
                .agg(model=pl.col("model").first(), value=pl.col("value").mean(), n=pl.col("n").sum()))
    computed = computed.with_columns(subset=pl.lit("mean"), languages=pl.lit("mean over subsets"))
    return ordered(pl.concat([shown, computed.select(shown.columns)]))


# -- sections ---------------------------------------------------------------------------------------------------
def _runs_table(results: pl.DataFrame, roles: Mapping[str, str]) -> pl.DataFrame:
    table = (results.group_by("run").agg(model=pl.col("model").unique().sort().str.join(", "),
                                         tasks=pl.col("task").unique().sort().str.join(", "),
                                         rows=pl.len())
             .sort("run"))
    return table.with_columns(pl.Series("role", [roles.get(r, "–") for r in table["run"]], dtype=pl.Utf8))


def _variant_legend(df: pl.DataFrame) -> Text:
    variants = in_order(df["variant"], vocabulary().variant_order)
    return Text("Variants: " + "; ".join(f"`{v}` — {variant_label(v)}" for v in variants) + ".")


NEVER_TRAINED, OTHER = "never trained", "no language"


def language_blocks(data: pl.DataFrame, trained: Mapping[str, frozenset[str]]) -> tuple[pl.DataFrame, list[str]]:
    """Per-language rows → (the rows sorted by block, then report order; the block labels in order). A subset's block
    says which trained runs saw all of its languages in training (``trained``: run → ISO 639-3 codes; only runs
    present in ``data`` count): ``trained`` (all of them; ``trained by A, B`` when only some), ``never trained``,
    and last ``no language`` for subsets whose ``languages`` name no code."""
    known = {r: langs for r, langs in trained.items() if r in set(data["run"])}
    subsets = data.select("subset", "languages").unique(subset="subset", keep="first", maintain_order=True)
    labels = []
    for languages in subsets["languages"]:
        codes = subset_languages(languages)
        who = [r for r in sorted(known) if codes and codes <= known[r]]
        labels.append(OTHER if not codes else NEVER_TRAINED if not who else
                      "trained" if len(who) == len(known) else f"trained by {', '.join(who)}")
    blocks = pl.DataFrame({"subset": subsets["subset"], "_block": pl.Series(labels, dtype=pl.Utf8)})
    present = set(labels)
    order = (["trained"] if "trained" in present else []) + sorted(
        b for b in present if b.startswith("trained by ")) + [b for b in (NEVER_TRAINED, OTHER) if b in present]
    ranked = ordered(data.join(blocks, on="subset", how="left")).with_columns(_rank=_rank("_block", order))
    return ranked.sort("_rank", maintain_order=True).drop("_rank"), order


def _per_language_figure(task: str, variant: str, metric: str, rows: pl.DataFrame,
                         trained: Mapping[str, frozenset[str]]) -> Figure | None:
    data = rows.filter(~is_aggregate())
    if not data.height:
        return None
    vocab = vocabulary()
    title = f"{vocab.titles.get(task, task)} — {variant} — {metric} per {vocab.per_language[task]}"
    caption = title
    blocks: list[tuple[str, int, int]] = []
    if any(r in trained for r in set(data["run"])):
        data, order = language_blocks(data, trained)
        cats = data.unique(subset="subset", keep="first", maintain_order=True)["_block"].to_list()
        blocks = [(b, cats.index(b), len(cats) - 1 - cats[::-1].index(b)) for b in order]
        caption += "; languages a trained run saw in its training corpora first, then those it never saw"
        data = data.drop("_block")
    else:
        data = ordered(data)
    if metric in lower_is_better():
        caption += " (lower is better)"
    svg = plots.grouped_bars(data, category="subset", group="run", value="value", title=title, label=metric,
                             blocks=blocks)
    return Figure(safe_name(f"{task}_{variant}_{metric}_per_subset"), svg, caption)


def _headline_figure(head: pl.DataFrame) -> Figure | None:
    data = head.filter(~pl.col("metric").is_in(raw_metrics())).with_columns(
        label=pl.concat_str("task", "variant", "subset", "metric", separator=" · "))
    if data.select("run").n_unique() < 2 or not data.height:
        return None
    title = "Headline numbers per run (points; xSIM error in %)"
    return Figure("headline_by_run", plots.grouped_bars(data, category="label", group="run", value="value",
                                                        title=title, label="value", horizontal=True), title)


def _comparison_blocks(results: pl.DataFrame, run: str, start: str | None, peers: Sequence[str]) -> list[Block]:
    """One trained run beside its start model (with Δ = run − start) and the peers: headline rows over the keys the
    run has (and its start too, so that a computed ``mean`` averages the same subsets on both sides)."""
    if start is None:
        text = (f"**`{run}`** was trained from scratch (no `encoder.pretrained`): there is no start model to "
                "compare it with")
    elif start not in set(results["run"]):
        text = f"**`{run}`** began from `{start}`, which has no evaluation results"
        start = None
    else:
        text = f"**`{run}`** against its start model `{start}` (Δ = {run} − {start})"
    group = [r for r in dict.fromkeys((run, *([start] if start else []), *peers)) if r in set(results["run"])]
    if len(group) < 2:
        return [Text(text + (" nor an `evaluation.models` peer." if start is None else "."))]
    keys = results.filter(pl.col("run") == run).select(*KEY)
    if start is not None:
        keys = keys.join(results.filter(pl.col("run") == start).select(*KEY), on=list(KEY), how="semi",
                         nulls_equal=True)
    rows = results.filter(pl.col("run").is_in(group)).join(keys, on=list(KEY), how="semi", nulls_equal=True)
    peers_in = [p for p in group if p not in (run, start)]
    text += f"; beside the peer(s) {', '.join(f'`{p}`' for p in peers_in)}." if peers_in else "."
    table = runs_as_columns(headlines(rows), KEY, group, [(run, start)] if start else [])
    delta = [delta_column(run, start)] if start else []
    table = table.select(*KEY, run, *([start] if start else []), *delta, *peers_in)  # Δ beside its two columns
    return [Text(text), Table(table.filter(pl.col(run) != "–"))]


def comparison_section(results: pl.DataFrame, starts: Mapping[str, str | None], peers: Sequence[str]) -> Section:
    """``Trained runs against their start models``: per trained run (sorted) its comparison blocks."""
    sec = Section("Trained runs against their start models and peers", level=3)
    sec.blocks.append(Text("Headline numbers of each trained run beside the model it began from (`encoder.pretrained`,"
                           " evaluated once by its own node) and the `evaluation.models` peers. " + SCALES))
    for run in sorted(starts):
        if run in set(results["run"]):
            sec.blocks += _comparison_blocks(results, run, starts[run], peers)
        else:
            sec.blocks.append(Text(f"**`{run}`** has no evaluation results."))
    return sec


def evaluation_sections(results: pl.DataFrame, with_plots: bool = True, *,
                        starts: Mapping[str, str | None] | None = None, peers: Sequence[str] = (),
                        trained: Mapping[str, frozenset[str]] | None = None,
                        roles: Mapping[str, str] | None = None) -> list[Section]:
    """The ``Evaluation`` section (runs, headline numbers), the start-model comparison and one sub-section per task.

    ``starts``: trained run → the run name of its start model's results (None: trained from scratch); ``peers``:
    the ``evaluation.models`` runs; ``trained``: trained run → ISO 639-3 codes of its training languages (runs whose
    languages are unknown are left out); ``roles``: run → its role, shown in the runs table."""
    starts, trained, roles = dict(starts or {}), dict(trained or {}), dict(roles or {})
    top = Section("Evaluation")
    if not results.height:
        top.blocks.append(Text("No evaluation results."))
        return [top]
    with_plots = with_plots and plots.available()
    runs = sorted(set(results["run"]))
    deltas = [(r, s) for r, s in sorted(starts.items()) if s is not None and r in runs and s in runs]
    head = headlines(results)
    top.blocks += [Text(f"Runs ({len(runs)}), with the content id of each evaluated model:"),
                   Table(_runs_table(results, roles)),
                   Text("Headline numbers (runs as columns"
                        + ("; Δ = trained run − its start model" if deltas else "") + "). " + SCALES),
                   Table(runs_as_columns(head, KEY, runs, deltas)), _variant_legend(results)]
    if with_plots and (fig := _headline_figure(head)) is not None:
        top.blocks.append(fig)
    if not with_plots:
        top.blocks.append(Text("_Plots omitted: matplotlib is not installed._"))
    sections = [top]
    if starts:
        sections.append(comparison_section(results, starts, peers))
    chosen = headline_metrics(results)
    vocab = vocabulary()
    for task in in_order(results["task"], tuple(vocab.titles)):
        sections.append(_task_section(task, results.filter(pl.col("task") == task), chosen, runs, deltas, trained,
                                      with_plots))
    return sections


def _task_section(task: str, rows: pl.DataFrame, chosen: pl.DataFrame, runs: Sequence[str],
                  deltas: Sequence[tuple[str, str]], trained: Mapping[str, frozenset[str]],
                  with_plots: bool) -> Section:
    """One task's sub-section: a table per variant, runs as columns (per-subset charts of its headline metrics for a
    task with ``per_language``), then the task's own figure."""
    vocab = vocabulary()
    sec = Section(vocab.titles.get(task, task), level=3)
    sec.blocks.append(Text(f"Task `{task}`; one table per variant, runs as columns."))
    for variant in in_order(rows["variant"], vocab.variant_order):
        vrows = rows.filter(pl.col("variant") == variant)
        blocks: list[Block] = [Text(f"**Variant `{variant}`** — {variant_label(variant)}."),
                               Table(runs_as_columns(vrows, ["subset", "languages", "metric"], runs, deltas))]
        if with_plots and task in vocab.per_language:
            for metric in chosen.filter((pl.col("task") == task) & (pl.col("variant") == variant))["metric"]:
                fig = _per_language_figure(task, variant, metric, vrows.filter(pl.col("metric") == metric), trained)
                blocks += [fig] if fig is not None else []
        sec.blocks += blocks
    figure = vocab.figures.get(task)
    if with_plots and figure is not None and (fig := figure(rows)) is not None:
        sec.blocks.append(fig)
    return sec
