"""Report figures as SVG text: grouped bars (per language / per run, optionally in labelled blocks), run-vs-run
scatter, alignment–uniformity, training curves.

The alignment–uniformity plot follows Wang & Isola (2020) / SimCSE Fig. 2 (docs/methods.md §7.7; reference code
``SsnL/align_uniform``): x = uniformity, y = alignment, both lower-is-better. matplotlib is imported lazily and used
through its object API with an Agg canvas (no pyplot, no global backend switch). Every figure is drawn under fixed rc
settings — ``svg.hashsalt`` (otherwise clip-path ids are random uuids), text kept as ``<text>`` (``svg.fonttype``
none), no mathtext — and saved without ``Date``/``Creator`` metadata, so identical data give byte-identical SVG.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import polars as pl

SVG_METADATA = {"Date": None, "Creator": None, "Type": None, "Format": None}
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
RC = {
    "svg.hashsalt": "polysent-report",
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.family": ["DejaVu Sans"],
    "font.size": 8.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.axisbelow": True,
}


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


@contextlib.contextmanager
def _figure(width: float, height: float) -> Iterator[Any]:
    """A matplotlib Figure on an Agg canvas under the deterministic rc settings (kept until the SVG is written)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(width, height), layout="constrained")
        FigureCanvasAgg(fig)
        yield fig


def svg_text(fig: Any) -> str:
    """The figure as SVG text (call inside ``_figure``: the rc settings apply while saving)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=SVG_METADATA)
    return buf.getvalue()


def _colours(groups: Sequence[str]) -> dict[str, str]:
    return {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(groups)}


def _distinct(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))


def grouped_bars(frame: pl.DataFrame, *, category: str, group: str, value: str, title: str, label: str,
                 horizontal: bool = False, blocks: Sequence[tuple[str, int, int]] = ()) -> str:
    """Bars of ``value`` per ``category`` (in first-appearance order), one bar per ``group`` (sorted) side by side;
    a group without a value for a category leaves a gap. ``blocks`` — (label, first, last) category positions,
    inclusive — shades alternate runs of categories and names each one above the plot (vertical bars only: the
    per-language charts use it to set trained languages apart from never-trained ones)."""
    cats = _distinct(frame[category].to_list())
    groups = sorted(set(frame[group].to_list()))
    colours = _colours(groups)
    pos = {c: i for i, c in enumerate(cats)}
    width = 0.8 / max(1, len(groups))
    span = max(1.0, len(cats) * max(1.0, 0.35 * len(groups)))
    size = (7.0, min(40.0, 1.2 + 0.22 * span)) if horizontal else (min(40.0, max(5.0, 1.5 + 0.3 * span)), 3.6)
    with _figure(*size) as fig:
        ax = fig.add_subplot()
        for j, g in enumerate(groups):
            sub = frame.filter(pl.col(group) == g)
            x = np.array([pos[c] for c in sub[category]], dtype=float) + (j - (len(groups) - 1) / 2) * width
            y = sub[value].to_numpy().astype(float)
            if horizontal:
                ax.barh(x, y, height=width, color=colours[g], label=g)
            else:
                ax.bar(x, y, width=width, color=colours[g], label=g)
        ticks = np.arange(len(cats), dtype=float)
        if horizontal:
            ax.set_yticks(ticks, cats)
            ax.invert_yaxis()
            ax.set_xlabel(label)
        else:
            crowded = len(cats) > 8 or max((len(str(c)) for c in cats), default=0) > 8
            ax.set_xticks(ticks, cats, rotation=90 if crowded else 0)
            ax.set_ylabel(label)
        if not horizontal:
            ax.set_ylim(top=ax.get_ylim()[1] * 1.05)
            _shade_blocks(ax, blocks)
        ax.set_title(title, pad=14 if blocks and not horizontal else 6, wrap=True)
        ax.legend(title=group, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return svg_text(fig)


def _shade_blocks(ax: Any, blocks: Sequence[tuple[str, int, int]]) -> None:
    """Grey every other block of categories, draw a dashed divider between blocks and write each block's label
    centred above it (in axes-fraction height, so the label stays above the bars whatever their values)."""
    from matplotlib.transforms import blended_transform_factory

    on_top = blended_transform_factory(ax.transData, ax.transAxes)
    for i, (text, first, last) in enumerate(blocks):
        if i % 2 == 1:
            ax.axvspan(first - 0.5, last + 0.5, color="#000000", alpha=0.06, linewidth=0)
        if i:
            ax.axvline(first - 0.5, color="#555555", linewidth=0.8, linestyle="--")
        ax.text((first + last) / 2, 1.01, text, transform=on_top, ha="center", va="bottom", fontsize=7,
                color="#333333")
    if blocks:
        ax.set_xlim(-0.5, blocks[-1][2] + 0.5)


def scatter_runs(frame: pl.DataFrame, *, x: str, y: str, hue: str, title: str, xlabel: str, ylabel: str) -> str:
    """Run A (x) against run B (y), one point per row, coloured by ``hue``, with the diagonal y = x."""
    hues = sorted(set(frame[hue].to_list()))
    colours = _colours(hues)
    xs, ys = frame[x].to_numpy().astype(float), frame[y].to_numpy().astype(float)
    with _figure(5.5, 5.0) as fig:
        ax = fig.add_subplot()
        if len(xs):
            lo, hi = float(min(xs.min(), ys.min())), float(max(xs.max(), ys.max()))
            pad = 0.05 * (hi - lo or 1.0)
            ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="#888888", linewidth=0.8, linestyle="--",
                    label="y = x")
        for h in hues:
            sub = frame.filter(pl.col(hue) == h)
            ax.scatter(sub[x].to_numpy(), sub[y].to_numpy(), s=14, color=colours[h], label=h)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return svg_text(fig)


def alignment_uniformity(frame: pl.DataFrame) -> str:
    """One point per row of ``frame`` [run, variant, subset, alignment, uniformity]: x = uniformity, y = alignment,
    colour per run, each point labelled with its language pair."""
    runs = sorted(set(frame["run"].to_list()))
    colours = _colours(runs)
    with _figure(6.0, 4.5) as fig:
        ax = fig.add_subplot()
        for run in runs:
            sub = frame.filter(pl.col("run") == run)
            ax.scatter(sub["uniformity"].to_numpy(), sub["alignment"].to_numpy(), s=18, color=colours[run], label=run)
            for u, a, pair in zip(sub["uniformity"], sub["alignment"], sub["subset"], strict=True):
                ax.annotate(pair, (u, a), xytext=(3, 3), textcoords="offset points", fontsize=6,
                            color=colours[run])
        ax.set_xlabel("uniformity (log E exp(−2‖f(x)−f(y)‖²))")
        ax.set_ylabel("alignment (E ‖f(x)−f(y)‖²)")
        ax.set_title("Alignment vs uniformity")
        ax.legend(title="run", fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return svg_text(fig)


def training_curves(objectives: pl.DataFrame, steps: pl.DataFrame, dev: pl.DataFrame, *, title: str,
                    best_step: int | None, log_loss: bool) -> str:
    """Three panels over the training steps: loss per objective (``objectives``: step, objective, loss; plus the
    weighted ``total`` from ``steps``: step, loss, lr; with a ``smooth`` column in both, the raw loss is drawn faint
    under it), the learning rate, and the dev metric (``dev``: step, metric, value). ``best_step`` (the exported
    checkpoint) is a dashed line on every panel and a star on the dev curve."""
    names = _distinct(objectives["objective"].to_list())
    colours = _colours(["total", *names])
    with _figure(11.0, 3.2) as fig:
        loss_ax, lr_ax, dev_ax = fig.subplots(1, 3)
        series = [(n, objectives.filter(pl.col("objective") == n)) for n in names]
        if len(names) > 1 and steps.height:
            series.insert(0, ("total (weighted)", steps.with_columns(objective=pl.lit("total"))))
        for name, sub in series:
            colour = colours["total" if name == "total (weighted)" else name] if len(names) > 1 else PALETTE[0]
            x = sub["step"].to_numpy()
            if "smooth" in sub.columns:  # raw values faint, their moving average drawn over them
                loss_ax.plot(x, sub["loss"].to_numpy(), color=colour, linewidth=0.6, alpha=0.3)
                loss_ax.plot(x, sub["smooth"].to_numpy(), color=colour, linewidth=1.1, label=name)
            else:
                loss_ax.plot(x, sub["loss"].to_numpy(), color=colour, linewidth=0.9, label=name)
        if log_loss:
            from matplotlib.ticker import FuncFormatter, NullFormatter

            loss_ax.set_yscale("log")  # tick labels as plain numbers: mathtext is off (text.parse_math)
            loss_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            loss_ax.yaxis.set_minor_formatter(NullFormatter())
        loss_ax.set_title("loss per objective")
        loss_ax.set_xlabel("step")
        loss_ax.legend(fontsize=6)
        lr_ax.plot(steps["step"].to_numpy(), steps["lr"].to_numpy(), color="#444444", linewidth=1.0)
        lr_ax.set_title("learning rate")
        lr_ax.set_xlabel("step")
        lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        if dev.height:
            for j, metric in enumerate(_distinct(dev["metric"].to_list())):
                sub = dev.filter(pl.col("metric") == metric)
                dev_ax.plot(sub["step"].to_numpy(), sub["value"].to_numpy(), marker="o", markersize=3,
                            color=PALETTE[j % len(PALETTE)], label=metric)
                best = sub.filter(pl.col("step") == best_step) if best_step is not None else sub.clear()
                if best.height:
                    dev_ax.scatter(best["step"].to_numpy(), best["value"].to_numpy(), marker="*", s=120,
                                   color="#d62728", zorder=3, label=f"best (step {best_step})")
            dev_ax.legend(fontsize=6)
        else:
            dev_ax.text(0.5, 0.5, "no dev evaluation\n(training.*.dev not set)", ha="center", va="center",
                        transform=dev_ax.transAxes, color="#666666")
        dev_ax.set_title("dev metric")
        dev_ax.set_xlabel("step")
        if best_step is not None:
            for ax in (loss_ax, lr_ax, dev_ax):
                ax.axvline(best_step, color="#d62728", linewidth=0.8, linestyle="--")
        fig.suptitle(title)
        return svg_text(fig)
