"""The comparison's pictures: learning curves (curves.png), the final metric per variant
(final.png) and, with a reference, our IQM against the reference score (ranking.png).

Drawn with matplotlib's object-oriented API through `txrl.plotting` and saved
atomically; the bands and intervals are [`txrl.stats`][txrl.stats]'s.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from txrl import stats
from txrl.compare.ranking import ReferenceComparison
from txrl.compare.summary import VariantSummary, panels
from txrl.config import CompareConfig
from txrl.plotting import figure_class, save_png

#: What needs matplotlib, for :func:`txrl.plotting.figure_class`'s error without it.
DRAWS = "txrl compare draws its plots"

#: Resolution of every picture of a comparison.
DPI = 120


def _line_key(config: CompareConfig, v: VariantSummary) -> tuple[str, ...]:
    return tuple(label for axis, label in v.labels if axis != config.panels)


def _line_label(config: CompareConfig, v: VariantSummary) -> str:
    """The variant's labels besides the panel's, and how many seeds its curve averages."""
    parts = _line_key(config, v)
    n = sum(1 for r in v.records if any(not math.isnan(y) for y in r.values))
    return f"{' '.join(parts) or v.variant} (n={n})"


def _mean_curve(
    v: VariantSummary, reps: int = 1000
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Common timesteps, mean over seeds and its 95% band (seeds interpolated onto them).

    The band is [`txrl.stats.mean_band`][txrl.stats.mean_band]: rliable's stratified bootstrap at each
    timestep, or a percentile bootstrap without rliable.
    """
    curves = [(np.array(r.timesteps), np.array(r.values)) for r in v.records if r.timesteps]
    curves = [(t[~np.isnan(y)], y[~np.isnan(y)]) for t, y in curves]  # evaluations with a value
    curves = [(t, y) for t, y in curves if t.size]
    if not curves:
        return None
    grid = np.unique(np.concatenate([t for t, _ in curves]))
    end = min(t[-1] for t, _ in curves)
    grid = grid[grid <= end]
    ys = np.stack([np.interp(grid, t, y) for t, y in curves])  # (seeds, T)
    low, high = stats.mean_band(ys, reps)
    return grid, ys.mean(0), low, high


#: Most curves drawn in one panel; with more variants each gets its own small panel.
MAX_CURVES_PER_PANEL = 4


def _steps_text(x: float, _pos: Any = None) -> str:
    """Tick label of an env-step axis: 0, 50k, 1.5M."""
    if abs(x) >= 1e6:
        return f"{x / 1e6:g}M"
    return f"{x / 1e3:g}k" if abs(x) >= 1e3 else f"{x:g}"


def steps_axis(ax: Any) -> None:
    """At most five ticks in short form, so a narrow panel's labels do not run together."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    ax.xaxis.set_major_formatter(FuncFormatter(_steps_text))


def _curve_axes(config: CompareConfig, ax: Any, title: str) -> None:
    if config.metric == "success_rate":
        ax.axhline(config.threshold, color="grey", linestyle=":", linewidth=1)
        ax.set_ylim(-0.02, 1.02)
    ax.set_title(title, fontsize="medium")
    ax.grid(alpha=0.3)
    steps_axis(ax)


def plot_curves(config: CompareConfig, variants: list[VariantSummary], path: Path) -> None:
    """Learning curves (mean over seeds, 95% band), one block per label of ``config.panels``.

    With up to `MAX_CURVES_PER_PANEL` variants a block is one panel with a line each;
    with more, overlapping bands hide each other, so each variant gets its own small panel
    (shared axes, the other variants' means in grey behind it). Legends and titles give the
    number of seeds each curve averages.
    """
    Figure = figure_class(DRAWS)
    blocks = panels(config, variants)
    reps = min(config.bootstrap_reps, 1000)
    curves = {v.variant: _mean_curve(v, reps) for v in variants}
    lines = list(dict.fromkeys(_line_key(config, v) for v in variants))  # same colour per panel
    colours = {v.variant: f"C{lines.index(_line_key(config, v)) % 10}" for v in variants}
    widest = max(len(members) for members in blocks.values())
    ylabel = config.metric.replace("_", " ")
    if widest <= MAX_CURVES_PER_PANEL:
        fig = Figure(figsize=(max(4.5, 4.0 * len(blocks)), 3.6), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(blocks), squeeze=False)[0])
        for ax, (title, members) in zip(axes, blocks.items(), strict=True):
            for v in members:
                curve = curves[v.variant]
                if curve is None:
                    continue
                t, mean, lo, hi = curve
                colour = colours[v.variant]
                ax.plot(t, mean, color=colour, label=_line_label(config, v))
                ax.fill_between(t, lo, hi, color=colour, alpha=0.2, linewidth=0)
            _curve_axes(config, ax, title or config.name or "")
            ax.set_xlabel("env steps")
            ax.set_ylabel(ylabel)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize="small")
        save_png(fig, path, dpi=DPI)
        return
    cols = min(widest, 3 if len(blocks) > 1 else math.ceil(math.sqrt(widest)))
    rows = math.ceil(widest / cols)
    fig = Figure(figsize=(2.4 * cols * len(blocks) + 0.6, 2.1 * rows + 0.9), layout="constrained")
    subfigures = fig.subfigures(1, len(blocks), squeeze=False)[0]
    for block, (title, members) in zip(subfigures, blocks.items(), strict=True):
        grid = block.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)
        for ax, v in itertools.zip_longest(grid.flat, members):
            if v is None:
                ax.set_visible(False)
                continue
            for other in members:
                curve = curves[other.variant]
                if other is not v and curve is not None:
                    ax.plot(curve[0], curve[1], color="0.75", linewidth=0.8)
            curve = curves[v.variant]
            if curve is not None:
                t, mean, lo, hi = curve
                ax.plot(t, mean, color=colours[v.variant])
                ax.fill_between(t, lo, hi, color=colours[v.variant], alpha=0.25, linewidth=0)
            _curve_axes(config, ax, _line_label(config, v))
            ax.tick_params(labelsize="small")
        block.supxlabel("env steps", fontsize="medium")
        block.supylabel(ylabel, fontsize="medium")
        heading = title or config.name or ""
        if heading:
            block.suptitle(f"{heading} (grey: the other variants' means)", fontsize="medium")
    save_png(fig, path, dpi=DPI)


def plot_finals(config: CompareConfig, variants: list[VariantSummary], path: Path) -> None:
    """Final metric per variant: IQM with its 95% CI, and each seed as a dot."""
    Figure = figure_class(DRAWS)

    fig = Figure(figsize=(6.5, 0.45 * len(variants) + 1.5), layout="constrained")
    ax = fig.subplots()
    for i, v in enumerate(variants):
        est = v.estimate
        if not math.isnan(est.value):
            err = [[est.value - est.low], [est.high - est.value]]
            ax.errorbar(est.value, i, xerr=err, fmt="o", color="C0", capsize=3)
        ax.scatter(v.finals, [i] * len(v.finals), color="C1", s=12, alpha=0.7, zorder=3)
    if config.metric == "success_rate":
        ax.set_xlim(-0.02, 1.02)
    ax.set_yticks(range(len(variants)), [v.variant for v in variants])
    ax.invert_yaxis()
    ax.set_xlabel(f"{config.score} {config.metric.replace('_', ' ')} (IQM, 95% CI; dots: seeds)")
    ax.grid(axis="x", alpha=0.3)
    save_png(fig, path, dpi=DPI)


def plot_ranking(
    config: CompareConfig, comparisons: Sequence[ReferenceComparison], path: Path
) -> None:
    """Our IQM (95% CI) against the reference score, one panel per comparison, τ in the title.

    Labels whose reference scores lie close together would overprint each other as text
    beside the points, so each label has its own colour and marker, named once in a legend
    (with its reference score) beside the panels.
    """
    import textwrap

    from matplotlib.lines import Line2D

    Figure = figure_class(DRAWS)
    fig = Figure(figsize=(4.0 * len(comparisons) + 1.8, 4.2), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(comparisons), squeeze=False)[0])
    markers = "osD^v<>pP*Xh"
    order = sorted(
        {(e.reference, e.label) for c in comparisons for e in c.ranked}, reverse=True
    )  # highest reference score first, as the reference ranks them
    style = {label: (f"C{i % 10}", markers[i % len(markers)]) for i, (_, label) in enumerate(order)}
    for ax, comparison in zip(axes, comparisons, strict=True):
        for e in comparison.ranked:
            est = e.estimate
            err = [[est.value - est.low], [est.high - est.value]]
            colour, marker = style[e.label]
            ax.errorbar(
                e.reference, est.value, yerr=err, fmt=marker, color=colour, capsize=3, alpha=0.9
            )
        tau = comparison.tau
        title = comparison.title or config.name or ""
        if tau is not None:
            title += f"\nKendall's tau {tau.value:.2f} [{tau.low:.2f}, {tau.high:.2f}]"
        ax.set_title(title, fontsize="medium")
        reference = textwrap.fill(f"reference: {config.reference.name or 'score'}", 40)
        ax.set_xlabel(reference, fontsize="small")
        ax.set_ylabel(f"our {config.score} {config.metric.replace('_', ' ')} (IQM, 95% CI)")
        ax.grid(alpha=0.3)
    handles = [
        Line2D([], [], color=style[label][0], marker=style[label][1], linestyle="none")
        for _, label in order
    ]
    names = [f"{label} ({reference:g})" for reference, label in order]
    fig.legend(handles, names, loc="outside right upper", fontsize="small", title="reference")
    save_png(fig, path, dpi=DPI)
