"""Report figures as SVG text: grouped bars (per language / per run), run-vs-run scatter, alignment–uniformity.

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
                 horizontal: bool = False) -> str:
    """Bars of ``value`` per ``category`` (in first-appearance order), one bar per ``group`` (sorted) side by side;
    a group without a value for a category leaves a gap."""
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
            ax.set_xticks(ticks, cats, rotation=90 if len(cats) > 8 else 0)
            ax.set_ylabel(label)
        if not horizontal:
            ax.set_ylim(top=ax.get_ylim()[1] * 1.05)
        ax.set_title(title)
        ax.legend(title=group, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return svg_text(fig)


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
