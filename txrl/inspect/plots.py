"""Pictures of recorded episodes: the attention map, the traces (gates, action probabilities,
value and reward) and the summary across episodes. Each is drawn for a reader who has not
read the documentation: titles say what happened in the episode, axes and captions what is
drawn, and nothing drawn hides the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from txrl.inspect.episode import EpisodeRecord, InspectError
from txrl.inspect.layers import GATE_MEANINGS, GATE_SUBLAYERS
from txrl.plotting import figure_class, save_png

CUE_COLOUR, DECISION_COLOUR = "tab:green", "tab:red"


#: What needs matplotlib, for :func:`txrl.plotting.figure_class`'s error without it.
DRAWS = "txrl inspect draws"


def save_figure(fig: Any, path: Path) -> None:
    """Every picture of txrl inspect: 110 dpi, cropped to what is drawn, written atomically."""
    save_png(fig, path, dpi=110, tight=True)


def episode_title(record: EpisodeRecord, index: int | None = None) -> str:
    """``episode 2: cue up, chose up at step 11, success (return +1.00), 12 steps``, with
    the parts the env reports."""
    parts = [] if record.cue is None else [f"cue {record.cue}"]
    if record.decision_step is not None and 0 <= record.decision_step < record.steps:
        parts.append(
            f"chose {record.action_name(record.decision_step)} at step {record.decision_step}"
        )
    outcome = {None: "", True: "success", False: "failure"}[record.success]
    parts.append(f"{outcome} (return {record.episode_return:+.2f})".strip())
    parts.append(f"{record.steps} steps")
    head = "episode" if index is None else f"episode {index}"
    return f"{head}: {', '.join(parts)}"


def _mark_cells(ax: Any, record: EpisodeRecord, steps_across: bool = True) -> list[Any]:
    """Triangles outside the axes at the cue column (top) and the decision row (right), and an
    outline of the (decision, cue) cell, so that no mark covers a weight. Returns legend
    handles. ``steps_across``: the columns are episode steps (not projected slots, which
    have no cue column)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle
    from matplotlib.transforms import offset_copy

    handles: list[Any] = []  # legend handles: lines and patches
    above = offset_copy(ax.get_xaxis_transform(), fig=ax.figure, y=6, units="points")
    right = offset_copy(ax.get_yaxis_transform(), fig=ax.figure, x=6, units="points")
    # (step, its point on the axes' edge, marker, colour, where it sits, what it marks)
    marks = [
        (record.cue_step, (record.cue_step, 1.0), "v", CUE_COLOUR, above, "cue step ({}): attended column"),
        (record.decision_step, (1.0, record.decision_step), "<", DECISION_COLOUR, right,
         "decision step ({}): attending row"),
    ]  # fmt: skip
    if not steps_across:
        marks = marks[1:]
    for step, (x, y), marker, colour, transform, label in marks:
        if step is None:
            continue
        ax.plot(
            [x], [y], marker=marker, color=colour, markersize=8, transform=transform,
            clip_on=False, linestyle="none",
        )  # fmt: skip
        handles.append(
            Line2D([], [], marker=marker, color=colour, linestyle="none", label=label.format(step))
        )
    if steps_across and record.cue_step is not None and record.decision_step is not None:
        ax.add_patch(
            Rectangle(
                (record.cue_step - 0.5, record.decision_step - 0.5), 1, 1,
                fill=False, edgecolor="white", linewidth=1.2,
            )
        )  # fmt: skip
        handles.append(
            Rectangle((0, 0), 1, 1, fill=False, edgecolor="black",
                      label="outlined: the decision's weight on the cue")
        )  # fmt: skip
    return handles


def _panels(record: EpisodeRecord, layer: int, per_head: bool) -> list[tuple[Any, ...]]:
    """One layer's panels: (weights (N, X), shown (N, X) bool, title, x label, whether the
    columns are episode steps), heads averaged, then each head with ``per_head``.

    Steps of the window (every attention backbone but linformer), and for ``compressive``
    beside them its compressed slots, each slot's weight drawn on every one of the c steps
    it summarises; for ``linformer`` its k projected slots, which are not steps."""
    heads = [None, *range(record.heads)] if per_head else [None]

    def pick(weights: np.ndarray, head: int | None) -> np.ndarray:  # (H, N, X) -> (N, X)
        return weights.mean(axis=0) if head is None else weights[head]

    def name(head: int | None) -> str:
        return "heads averaged" if head is None else f"head {head}"

    layer_name = record.layers[layer]
    panels: list[tuple[Any, ...]] = []
    if record.projected is not None:
        shown = np.ones(record.projected.shape[2:], dtype=bool)
        xlabel = "projected slot (each mixes the whole window)"
        return [
            (pick(record.projected[layer], h), shown, f"{layer_name}, {name(h)}", xlabel, False)
            for h in heads
        ]
    assert record.attention is not None and record.attendable is not None
    for head in heads:
        title = f"{layer_name}, {name(head)}"
        if record.compressed is not None:
            title = f"{layer_name}, raw memory, {name(head)}"
        panels.append(
            (pick(record.attention[layer], head), record.attendable, title,
             "attended step (key)", True)
        )  # fmt: skip
        if record.compressed is not None and record.compressed_slot is not None:
            slot = record.compressed_slot  # (N, N)
            held = np.take_along_axis(
                pick(record.compressed[layer], head), np.maximum(slot, 0), axis=1
            )  # (N, Mc) -> (N, N): the weight of the slot that holds each step
            panels.append(
                (held, slot >= 0, f"{layer_name}, compressed memory, {name(head)}",
                 "step summarised in a compressed slot", True)
            )  # fmt: skip
    return panels


def plot_attention_map(
    record: EpisodeRecord, path: Path, *, per_head: bool = False, index: int | None = None
) -> Any:
    """Episode step x attended step (or slot), one row of panels per layer (per head too with
    ``per_head``; beside the raw memory the compressed memory for ``compressive``; over the
    projected slots for ``linformer``); returns the figure."""
    if not record.has_attention:
        raise InspectError("this episode has no attention weights to draw")
    Figure = figure_class(DRAWS)
    rows = [_panels(record, layer, per_head) for layer in range(len(record.layers))]
    columns = len(rows[0])
    fig = Figure(figsize=(3.8 * columns + 1.0, 3.4 * len(rows) + 1.4), layout="constrained")
    axes = fig.subplots(len(rows), columns, squeeze=False)
    image = None
    handles: list[Any] = []  # legend handles of the last panel that marked anything
    for layer_axes, panels in zip(axes, rows, strict=True):
        for ax, (weights, shown, title, xlabel, steps_across) in zip(
            layer_axes, panels, strict=True
        ):
            image = ax.imshow(
                np.ma.masked_where(~shown, weights), vmin=0.0, vmax=1.0, cmap="viridis",
                origin="upper", interpolation="nearest",
                aspect="equal" if steps_across else "auto",
            )  # fmt: skip
            ax.set_facecolor("0.85")
            handles = _mark_cells(ax, record, steps_across) or handles
            ax.set_title(title, fontsize="small")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("acting step (query)")
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight (grey: not attendable)")
    if handles:
        fig.legend(handles=handles, loc="outside lower center", fontsize="x-small", ncols=2)
    note = {
        "compressive": "\ncompressed memory: each slot's weight on each of the c steps it "
        "summarises",
        "projected": "\nlinformer: over its projected slots, each a learned mix of the window",
        "kernel": "\nlinear attention's equivalent weights "
        "phi(q_i)·phi(k_j) / (phi(q_i)·z_i + eps)",
    }.get(record.attention_kind, "")
    fig.suptitle(
        f"{episode_title(record, index)}\nwhere each step's attention goes{note}",
        fontsize="medium",
    )
    save_figure(fig, path)
    return fig


def gate_label(trace: str, gate_class: str | None) -> tuple[str, str]:
    """(legend label, meaning of 1 and 0) of a gate trace such as ``layer0/gate_attention``."""
    layer, _, sublayer = trace.rpartition("/")
    where = GATE_SUBLAYERS.get(sublayer, sublayer)
    meaning = next(
        (m for cls, m in GATE_MEANINGS.items() if cls.__name__ == gate_class),
        ("gate", "mean activation"),
    )
    return f"{layer}, {where}: {meaning[0]}", meaning[1]


def plot_traces(record: EpisodeRecord, path: Path, *, index: int | None = None) -> Any:
    """Gate activations (or state norms), action probabilities, value and reward over the
    episode; returns the figure."""
    Figure = figure_class(DRAWS)
    steps = np.arange(record.steps)
    gates = record.gate_names
    others = gates or [name for name in record.traces if name.startswith("state/")]
    probs = record.action_probs
    rows = 3 if probs is not None else 2
    fig = Figure(figsize=(8.0, 2.6 * rows + 1.0), layout="constrained")
    axes = fig.subplots(rows, 1, sharex=True)
    top, bottom = axes[0], axes[-1]
    meanings: list[str] = []
    for name in others:
        if gates:
            label, meaning = gate_label(name, record.gates.get(name))
            if meaning not in meanings:
                meanings.append(meaning)
        else:
            label = name
        top.plot(steps, record.traces[name], marker=".", label=label)
    if gates:
        top.set_ylabel("gate activation\n(mean over units)")
        top.set_ylim(-0.02, 1.02)
        top.set_title("; ".join(meanings), fontsize="x-small")
    else:
        top.set_ylabel("memory state norm")
    if others:
        top.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        top.text(0.5, 0.5, "no gates or state norms recorded", ha="center", transform=top.transAxes)
    if probs is not None:
        middle = axes[1]
        names = record.action_names or [f"action {a}" for a in range(probs.shape[1])]
        for action, name in enumerate(names):
            middle.plot(steps, probs[:, action], marker=".", label=name)
        taken = [int(a) for a in record.actions.reshape(-1)]
        middle.scatter(steps, probs[steps, taken], s=60, facecolors="none", edgecolors="black",
                       label="action taken", zorder=3)  # fmt: skip
        middle.set_ylim(-0.02, 1.02)
        middle.set_ylabel("action probability")
        middle.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    bottom.plot(steps, record.values, marker=".", label="value estimate")
    bottom.bar(steps, record.rewards, color="tab:orange", alpha=0.6, label="reward")
    bottom.set_xlabel("episode step (0: the reset's observation)")
    bottom.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    for ax in axes:
        if record.cue_step is not None:
            ax.axvline(record.cue_step, color=CUE_COLOUR, linestyle="--", linewidth=1)
        if record.decision_step is not None:
            ax.axvline(record.decision_step, color=DECISION_COLOUR, linestyle="--", linewidth=1)
        ax.grid(alpha=0.3)
    marks = [
        f"{name} step (dashed, {colour.removeprefix('tab:')})"
        for name, colour, step in (
            ("cue", CUE_COLOUR, record.cue_step),
            ("decision", DECISION_COLOUR, record.decision_step),
        )
        if step is not None
    ]
    what = "gates" if gates else "memory state"
    fig.suptitle(
        f"{episode_title(record, index)}\n{what}, action probabilities and value per step"
        + (f"; {' and '.join(marks)}" if marks else ""),
        fontsize="medium",
    )
    save_figure(fig, path)
    return fig


def plot_summary(records: Sequence[EpisodeRecord], path: Path) -> dict[str, Any]:
    """Attention weight on the cue step at the decision step, successes vs failures, per
    layer, with the level of uniform attention for reference.

    Returns the numbers drawn (also written next to the picture as JSON).
    """
    masses = [r.cue_mass_at_decision() for r in records]
    layers = next((r.layers for r in records if r.attention is not None), [])
    rows = [
        {
            "episode": i,
            "success": r.success,
            "cue": r.cue,
            "mass": [float(x) for x in m],
            # uniform attention: 1 / the number of keys (steps, compressed slots) the
            # decision step could attend to
            "uniform": 1.0 / r.keys_at(r.decision_step),  # type: ignore[arg-type]  # masses are None without it
            **_sightings_columns(r),
        }
        for i, (r, m) in enumerate(zip(records, masses, strict=True))
        if m is not None
    ]
    summary: dict[str, Any] = {
        "episodes": len(records),
        "successes": sum(1 for r in records if r.success),
        "layers": layers,
        "cue_mass_at_decision": rows,
        "decision_focus": [row for i, r in enumerate(records) if (row := _focus_row(i, r))],
        "actions": [row for i, r in enumerate(records) if (row := _actions_row(i, r))],
    }
    save_figure(draw_summary(summary), path)
    return summary


def _sightings_columns(record: EpisodeRecord) -> dict[str, Any]:
    """The summary row's columns for every sighting of the cue up to the decision (when the
    env reports them): how many, the attention mass on them per layer, and uniform's."""
    found = record.sightings_mass_at_decision()
    if found is None:
        return {}
    mass, uniform = found
    return {
        "sightings": len(record.sightings_to_decision() or ()),
        "sightings_mass": [float(x) for x in mass],
        "sightings_uniform": uniform,
    }


def _actions_row(index: int, record: EpisodeRecord) -> dict[str, Any] | None:
    """One episode's choices for the summary, for discrete actions: its return and length,
    how often it took each action, and its action probabilities at the first step. A policy
    that gives one answer whatever it sees (the same counts and first-step probabilities in
    every episode) shows here, for any backbone."""
    probs = record.action_probs
    if probs is None or record.steps == 0:
        return None
    counts = np.bincount(
        np.asarray(record.actions, dtype=np.int64).ravel(), minlength=probs.shape[1]
    )
    return {
        "episode": index,
        "return": round(record.episode_return, 6),
        "steps": record.steps,
        "counts": counts.tolist(),
        "first_probs": np.round(probs[0].astype(float), 4).tolist(),
    }


def _focus_row(index: int, record: EpisodeRecord) -> dict[str, Any] | None:
    """One episode's `EpisodeRecord.decision_focus` for the summary: per layer and
    head, the steps back of the largest attention weight at the decision and that weight."""
    focus = record.decision_focus()
    if focus is None:
        return None
    steps_back, weight = focus
    return {
        "episode": index,
        "success": record.success,
        "cue_step": record.cue_step,
        "decision_step": record.decision_step,
        "steps_back": steps_back.tolist(),
        "weight": np.round(weight.astype(float), 4).tolist(),
    }


def draw_summary(summary: dict[str, Any]) -> Any:
    """The figure of [`plot_summary`][txrl.inspect.plots.plot_summary]'s numbers."""
    Figure = figure_class(DRAWS)
    layers, rows = summary["layers"], summary["cue_mass_at_decision"]
    fig = Figure(figsize=(max(5.0, 1.8 * max(len(layers), 1) + 3.0), 4.6), layout="constrained")
    ax = fig.subplots()
    if not rows:
        ax.text(
            0.5, 0.5,
            "nothing to draw: no episode has attention weights, a cue step and a decision "
            "step (the env reports info['cue_step'] and info['decision_step'], and the "
            "backbone attends over steps: not a recurrent one, nor linformer, whose "
            "projected slots each mix the whole window)",
            ha="center", va="center", wrap=True, transform=ax.transAxes,
        )  # fmt: skip
        ax.set_axis_off()
    else:
        x = np.arange(len(layers))
        jitter = np.random.default_rng(0)
        cues = sorted({str(row["cue"]) for row in rows if row["cue"] is not None})
        shapes = iter("sDP*X")
        markers: dict[str | None, str] = {
            None: "o",
            **{c: {"up": "^", "down": "v"}.get(c) or next(shapes, "o") for c in cues},
        }
        for cue, marker in markers.items():
            if cue is not None:
                ax.scatter([], [], color="0.5", marker=marker, label=f"cue {cue}")
        groups = ((True, "tab:green", -0.17, "success"), (False, "tab:red", 0.17, "failure"))
        for outcome, colour, shift, name in groups:
            group = [row for row in rows if row["success"] is outcome]
            if not group:
                continue
            mass = np.array([row["mass"] for row in group])  # (episodes, L)
            spread = jitter.uniform(-0.06, 0.06, size=mass.shape)
            for cue, marker in markers.items():
                mine = [row["cue"] == cue for row in group]
                if any(mine):
                    ax.scatter((x + shift + spread)[mine], mass[mine], color=colour, alpha=0.5,
                               s=22, marker=marker)  # fmt: skip
            ax.scatter([], [], color=colour, label=f"{name} ({len(group)} episodes)")
            ax.scatter(x + shift, mass.mean(axis=0), color=colour, marker="_", s=500,
                       linewidths=2, label=f"{name}: mean")  # fmt: skip
        uniform = float(np.mean([row["uniform"] for row in rows]))
        ax.axhline(uniform, color="0.4", linestyle=":", linewidth=1,
                   label=f"uniform attention ({uniform:.2f}, mean)")  # fmt: skip
        ax.set_xticks(x, layers)
        ax.set_xlim(-0.6, len(layers) - 0.4)
        ax.set_xlabel("attention layer")
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("attention weight on the cue step\nat the decision step (heads averaged)")
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.grid(axis="y", alpha=0.3)
        fig.text(
            0.01, -0.02,
            "Each marker: one episode. Near 1: when choosing, the agent reads the step that "
            "showed the cue;\nat the dotted line: it spreads its attention evenly over the "
            "steps it can see.",
            fontsize="x-small", ha="left", va="top",
        )  # fmt: skip
    fig.suptitle(
        f"Does the agent attend to the cue when it decides? "
        f"{summary['successes']}/{summary['episodes']} episodes succeeded",
        fontsize="medium",
    )
    return fig
