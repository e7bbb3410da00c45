"""``txrl inspect``: what a trained memory agent attends to, how its gates open and what it
expects, step by step over whole episodes, as pictures, ``.npz`` data and MP4 video.

Why: a success rate says *that* a memory agent fails, not *why*. At the step where the
memory matters (the T-maze's junction, the end of MiniGrid-Memory's hallway), does any head
attend to the step where the cue was seen? Do GTrXL's gates pass the attention output on,
or stay near the identity and ignore memory (Parisotto et al. 2019, sec. 3, eqs. 10-14 of
``references/000_4baccbf6ade0250f.txt``)? Scalar means over a rollout cannot say.

What is recorded, per step of each episode (legend: N steps of the episode, L attention
layers, H heads, A actions):

* attention (L, H, N, N): row ``s`` is the softmax of step ``s`` over the steps it could
  attend to (Transformer-XL's memory slots and itself, Dai et al. 2019, eq. 6 of reference
  000), mapped from memory slots to *absolute* episode steps, so column 0 is the episode's
  first observation. Entries the step could not attend to are 0 and ``attendable`` (N, N)
  is False there. The weights come from the backbone's own attention through
  :class:`txrl.nn.attention.AttentionRecorder`, not from a second implementation.
* traces: the backbone's diagnostics (``Backbone.run(stats=True)``): each gate's mean
  activation per sub-layer (``layer0/gate_attention``, ``layer0/gate_mlp``; for GTrXL's GRU
  gate the update gate z, how much of the sub-layer's output replaces the skip stream, 0
  being the identity map; :mod:`txrl.nn.gates` says what each gate reports), attention
  entropy, memory in use; for backbones without attention weights, the norms of their
  recurrent state instead.
* the value estimate, the action probabilities (discrete actions), the action, the reward,
  ``info["is_success"]`` at the end, and the env's ``info["cue_step"]`` /
  ``info["decision_step"]`` when it reports them (the T-maze and MiniGrid-Memory do).

Step ``s`` is the observation the agent acts on; step 0 is the reset's. Episodes are
played one env at a time with the eval env of the checkpoint's config (the same
observation normalisation), greedy unless asked otherwise, as ``txrl eval``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.distributions import CategoricalDistribution

from txrl.nn.attention import AttentionRecorder
from txrl.nn.pair import PairedBackbone
from txrl.nn.trxl import TransformerXL

VIDEO_FPS = 4  # when the env's metadata names no render_fps


class InspectError(ValueError):
    """Input ``txrl inspect`` cannot use (named in the message)."""


@dataclasses.dataclass
class EpisodeRecord:
    """Everything recorded over one episode (see the module docstring for each field)."""

    actions: np.ndarray  # (N, ...) the actions taken
    rewards: np.ndarray  # (N,) reward after each step's action
    values: np.ndarray  # (N,) value estimate of each step
    action_probs: np.ndarray | None  # (N, A) for discrete actions, else None
    attention: np.ndarray | None  # (L, H, N, N) weights over absolute steps, or None
    attendable: np.ndarray | None  # (N, N) bool, the keys each step could attend to
    layers: list[str]  # L names of the attention layers
    traces: dict[str, np.ndarray]  # name -> (N,) per-step diagnostics of the backbone
    success: bool | None  # info["is_success"] at the episode's end, None when not reported
    cue_step: int | None
    decision_step: int | None
    frames: list[np.ndarray] = dataclasses.field(default_factory=list)  # (H_px, W_px, 3) each

    @property
    def steps(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def gate_names(self) -> list[str]:
        return [name for name in self.traces if "gate" in name.rsplit("/", 1)[-1]]

    def cue_mass_at_decision(self) -> np.ndarray | None:
        """Attention mass (L,) on the cue step at the decision step, heads averaged; None
        when the episode has no attention, cue or decision step."""
        if self.attention is None or self.cue_step is None or self.decision_step is None:
            return None
        if not (0 <= self.cue_step <= self.decision_step < self.steps):
            return None
        return self.attention[:, :, self.decision_step, self.cue_step].mean(axis=1)

    def to_npz(self) -> dict[str, np.ndarray]:
        """The arrays to save; missing parts are left out, scalars are 0-d arrays (-1: none)."""
        data: dict[str, np.ndarray] = {
            "actions": self.actions,
            "rewards": self.rewards,
            "values": self.values,
            "layers": np.array(self.layers, dtype=str),
            "success": np.array(-1 if self.success is None else int(self.success)),
            "cue_step": np.array(-1 if self.cue_step is None else self.cue_step),
            "decision_step": np.array(-1 if self.decision_step is None else self.decision_step),
        }
        if self.action_probs is not None:
            data["action_probs"] = self.action_probs
        if self.attention is not None and self.attendable is not None:
            data["attention"] = self.attention
            data["attendable"] = self.attendable
        data.update({f"trace/{name}": values for name, values in self.traces.items()})
        return data


# ---------------------------------------------------------------------------- recording


def absolute_row(
    weights: np.ndarray, allowed: np.ndarray, step: int, n_steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Map one acting step's attention from key slots to absolute episode steps.

    ``weights`` (H, K) over the K = M + 1 keys of a one-step call (M memory slots, oldest
    first, then the step itself), ``allowed`` (K,) bool, ``step`` the step's index in its
    episode. Key k lies ``K - 1 - k`` steps back. Returns the row (H, n_steps) and which
    steps were attendable (n_steps,). An attendable key before the episode's start means
    the memory leaked across episodes, which is an error, not something to draw.
    """
    n_keys = weights.shape[-1]
    absolute = step - (n_keys - 1 - np.arange(n_keys))  # (K,) episode step of each key
    if np.any(allowed & (absolute < 0)):
        raise RuntimeError(
            f"step {step} may attend to keys before its episode's start: the memory was not "
            "cleared at the episode start"
        )
    row = np.zeros((weights.shape[0], n_steps), dtype=np.float32)
    attendable = np.zeros(n_steps, dtype=bool)
    keep = allowed & (absolute >= 0)
    row[:, absolute[keep]] = weights[:, keep]
    attendable[absolute[keep]] = True
    return row, attendable


def attention_layers(backbone: torch.nn.Module) -> dict[int, str] | None:
    """``id(attention module) -> layer name`` for the TrXL family (gtrxl, trxl_i, trxl), whose
    layers call Transformer-XL's relative attention once per step over a window of the
    episode's own steps; None for other backbones.

    The others either have no attention weights (lstm, gru, linear, performer) or attend
    over keys that are not a plain step window (compressed memories, hashed buckets,
    adaptive depth), which absolute step indices would misdescribe. A critic with a memory
    of its own (:class:`txrl.nn.PairedBackbone`) has its layers named ``actor/layer<i>``
    and ``critic/layer<i>``.
    """
    if isinstance(backbone, PairedBackbone):
        parts = {
            "actor": attention_layers(backbone.actor),
            "critic": attention_layers(backbone.critic),
        }
        named = {k: f"{part}/{v}" for part, ids in parts.items() for k, v in (ids or {}).items()}
        return named or None
    if not isinstance(backbone, TransformerXL):
        return None
    return {id(block.attention): f"layer{index}" for index, block in enumerate(backbone.blocks)}


def _state_norms(state: tuple) -> dict[str, float]:
    """The norm of each float field of a one-env memory state (an LSTM's h and c, a linear
    attention's running sums, a window's cached inputs)."""
    return {
        f"state/{name}_norm": float(field[0].float().norm())  # env on axis 0
        for name, field in zip(state._fields, state, strict=True)  # type: ignore[attr-defined]
        if field.is_floating_point()
    }


class _EpisodeBuffer:
    """Per-step records of the episode in progress."""

    def __init__(self) -> None:
        self.actions: list[np.ndarray] = []
        self.rewards: list[float] = []
        self.values: list[float] = []
        self.probs: list[np.ndarray] = []
        self.attention: list[tuple[np.ndarray, np.ndarray]] = []  # (L, H, K), (K,) per step
        self.traces: list[dict[str, float]] = []
        self.frames: list[np.ndarray] = []
        self.cue_step: int | None = None
        self.decision_step: int | None = None

    def note_info(self, info: dict[str, Any]) -> None:
        if "cue_step" in info and self.cue_step is None:
            self.cue_step = int(info["cue_step"])
        if "decision_step" in info:
            self.decision_step = int(info["decision_step"])

    def finish(self, success: bool | None, layers: list[str]) -> EpisodeRecord:
        n = len(self.rewards)
        attention = attendable = None
        if self.attention:
            attention = np.zeros((len(layers), self.attention[0][0].shape[1], n, n), np.float32)
            attendable = np.zeros((n, n), dtype=bool)
            for step, (weights, allowed) in enumerate(self.attention):
                for layer in range(len(layers)):
                    row, ok = absolute_row(weights[layer], allowed, step, n)
                    attention[layer, :, step] = row
                    attendable[step] = ok
        names = sorted({name for trace in self.traces for name in trace})
        traces = {
            name: np.array([t.get(name, math.nan) for t in self.traces], dtype=np.float32)
            for name in names
        }
        return EpisodeRecord(
            actions=np.stack(self.actions),
            rewards=np.array(self.rewards, dtype=np.float32),
            values=np.array(self.values, dtype=np.float32),
            action_probs=np.stack(self.probs) if self.probs else None,
            attention=attention,
            attendable=attendable,
            layers=layers if attention is not None else [],
            traces=traces,
            success=success,
            cue_step=self.cue_step,
            decision_step=self.decision_step,
            frames=self.frames,
        )


@dataclasses.dataclass
class Recording:
    """The episodes played, whether they hold video frames, and what could not be recorded."""

    episodes: list[EpisodeRecord]
    missing: list[str]
    frames: bool


def record_episodes(
    policy: Any,
    env: Any,
    episodes: int,
    *,
    deterministic: bool = True,
    frames: bool = False,
) -> Recording:
    """Play ``episodes`` episodes of ``policy`` (a :class:`txrl.sb3.policies.MemoryActorCriticPolicy`)
    on ``env`` (an SB3 VecEnv with one env) and record each step.

    ``frames``: keep the env's ``rgb_array`` render of each step's observation (the env must
    have been made with ``render_mode="rgb_array"``).
    """
    if env.num_envs != 1:
        raise InspectError(f"inspect plays one env at a time, got a VecEnv of {env.num_envs}")
    backbone = policy.backbone
    layer_of = attention_layers(backbone)
    layers = list(layer_of.values()) if layer_of else []  # in layer order
    name = getattr(policy, "backbone_name", type(backbone).__name__)
    missing: list[str] = []
    if layer_of is None:
        missing.append(
            f"attention weights: not recorded for backbone {name!r}; only the TrXL family "
            "(gtrxl, trxl_i, trxl) hands them out per step (txrl.nn.attention.AttentionRecorder). "
            "Recording the norms of its memory state instead"
        )
    discrete = isinstance(policy.action_dist, CategoricalDistribution)
    if not discrete:
        missing.append(
            "action probabilities: only for discrete (Discrete) action spaces; "
            f"this policy's distribution is {type(policy.action_dist).__name__}"
        )

    policy.set_training_mode(False)
    state = policy.initial_state(1)
    start = torch.ones(1, dtype=torch.bool, device=policy.device)
    obs = env.reset()
    buffer = _EpisodeBuffer()
    buffer.note_info(env.reset_infos[0] if getattr(env, "reset_infos", None) else {})
    done_episodes: list[EpisodeRecord] = []
    while len(done_episodes) < episodes:
        if frames:
            image = env.get_images()[0]
            if not (isinstance(image, np.ndarray) and image.ndim == 3 and image.shape[2] == 3):
                missing.append(
                    f"video: the env's render() gave {type(image).__name__}, not an "
                    "(height, width, 3) rgb_array frame; writing the plots and data only"
                )
                frames = False
                buffer.frames.clear()
                for record in done_episodes:
                    record.frames.clear()
            else:
                buffer.frames.append(image)
        obs_tensor, _ = policy.obs_to_tensor(obs)
        with torch.no_grad(), AttentionRecorder() as recorder:
            # The policy's own forward pass, asking the backbone for its diagnostics; the
            # acting shortcut (policy.act) does not hand them out.
            latent_pi, latent_vf, out = policy._latent(obs_tensor, state, start[None], stats=True)
            distribution = policy._get_action_dist_from_latent(latent_pi)
            action = distribution.get_actions(deterministic=deterministic)
            value = policy.value_net(latent_vf)
        state = out.state
        step_traces = {k: float(v) for k, v in out.stats.items() if v.numel() == 1}
        if layer_of is None:
            step_traces.update(_state_norms(state))
        else:
            weights, allowed = _layer_weights(recorder.calls, layer_of, layers)
            buffer.attention.append((weights, allowed))
        buffer.traces.append(step_traces)
        buffer.values.append(float(value.flatten()[0]))
        if discrete:
            buffer.probs.append(distribution.distribution.probs[0].cpu().numpy())
        action_np = action.cpu().numpy().reshape((-1, *policy.action_space.shape))
        buffer.actions.append(action_np[0])
        obs, reward, done, infos = env.step(action_np)
        buffer.rewards.append(float(reward[0]))
        buffer.note_info(infos[0])
        start = torch.as_tensor(done, device=policy.device).reshape(1)
        if done[0]:
            success = infos[0].get("is_success")
            done_episodes.append(buffer.finish(None if success is None else bool(success), layers))
            buffer = _EpisodeBuffer()
            buffer.note_info(env.reset_infos[0] if getattr(env, "reset_infos", None) else {})
    if not done_episodes[0].gate_names:
        missing.append(
            f"gates: backbone {name!r} reports no gate activations (torch's fused LSTM/GRU "
            "cells keep theirs inside; trxl has plain residuals)"
        )
    return Recording(done_episodes, missing, frames)


def _layer_weights(
    calls: Sequence[Any], layer_of: dict[int, str], layers: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """One acting step's recorded calls -> weights (L, H, K) of env 0 and allowed (K,)."""
    by_layer = {layer_of[id(call.module)]: call for call in calls if id(call.module) in layer_of}
    if sorted(by_layer) != sorted(layers) or len(calls) != len(layers):
        raise RuntimeError(
            f"expected one attention call per layer ({', '.join(layers)}), got {len(calls)}"
        )
    weights = np.stack([by_layer[name].weights[0, :, 0].cpu().numpy() for name in layers])
    allowed = by_layer[layers[0]].allowed[0, 0].cpu().numpy()
    return weights, allowed


# ---------------------------------------------------------------------------- pictures


def _figure_class() -> Any:
    try:
        from matplotlib.figure import Figure  # the OO API: no pyplot, no display backend
    except ImportError as e:
        raise ImportError("txrl inspect draws with matplotlib: pip install 'txrl[plots]'") from e
    return Figure


def _save_figure(fig: Any, path: Path) -> None:
    from txrl.checkpoint import atomic_write

    data = io.BytesIO()
    fig.savefig(data, format="png", dpi=110, bbox_inches="tight")
    atomic_write(path, data.getvalue())


def _mark_steps(ax: Any, record: EpisodeRecord, *, rows: bool) -> None:
    """Dashed lines at the cue step (attended column) and the decision step (row)."""
    if record.cue_step is not None:
        ax.axvline(record.cue_step, color="tab:green", linestyle="--", linewidth=1, label="cue")
    if record.decision_step is not None:
        line = ax.axhline if rows else ax.axvline
        line(record.decision_step, color="tab:red", linestyle="--", linewidth=1, label="decision")


def _outcome(record: EpisodeRecord) -> str:
    return {None: "", True: ", success", False: ", failure"}[record.success]


def plot_attention_map(record: EpisodeRecord, path: Path, *, per_head: bool = False) -> None:
    """Episode step x attended step, one panel per layer (and per head with ``per_head``)."""
    if record.attention is None or record.attendable is None:
        raise InspectError("this episode has no attention weights to draw")
    Figure = _figure_class()
    n_layers, n_heads, n, _ = record.attention.shape
    columns = n_heads + 1 if per_head else 1
    fig = Figure(figsize=(3.6 * columns + 0.8, 3.3 * n_layers + 0.4), layout="constrained")
    axes = fig.subplots(n_layers, columns, squeeze=False)
    image = None
    for layer in range(n_layers):
        panels = [(record.attention[layer].mean(axis=0), "heads averaged")]
        if per_head:
            panels += [(record.attention[layer, h], f"head {h}") for h in range(n_heads)]
        for ax, (weights, label) in zip(axes[layer], panels, strict=True):
            shown = np.ma.masked_where(~record.attendable, weights)
            image = ax.imshow(
                shown, vmin=0.0, vmax=1.0, cmap="viridis", origin="upper", interpolation="nearest"
            )
            _mark_steps(ax, record, rows=True)
            ax.set_title(f"{record.layers[layer]}, {label}", fontsize="small")
            ax.set_xlabel("attended step")
            ax.set_ylabel("episode step")
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if handles:
        axes[0, 0].legend(handles, labels, fontsize="x-small", loc="lower left")
    fig.suptitle(f"attention over the episode ({n} steps{_outcome(record)})", fontsize="medium")
    _save_figure(fig, path)


def plot_traces(record: EpisodeRecord, path: Path) -> None:
    """Gate activations (or state norms), value and reward over the episode."""
    Figure = _figure_class()
    steps = np.arange(record.steps)
    gates = record.gate_names
    others = gates or [name for name in record.traces if name.startswith("state/")]
    fig = Figure(figsize=(7.5, 5.5), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    for name in others:
        top.plot(steps, record.traces[name], marker=".", label=name)
    top.set_ylabel("gate activation (mean)" if gates else "state norm")
    if gates:
        top.set_ylim(-0.02, 1.02)
    if others:
        top.legend(fontsize="x-small")
    else:
        top.text(0.5, 0.5, "no gates or state norms recorded", ha="center", transform=top.transAxes)
    bottom.plot(steps, record.values, marker=".", label="value estimate")
    bottom.bar(steps, record.rewards, color="tab:orange", alpha=0.6, label="reward")
    bottom.set_xlabel("episode step")
    bottom.legend(fontsize="x-small")
    for ax in (top, bottom):
        _mark_steps(ax, record, rows=False)
        ax.grid(alpha=0.3)
    fig.suptitle(f"gates and value over the episode{_outcome(record)}", fontsize="medium")
    _save_figure(fig, path)


def plot_summary(records: Sequence[EpisodeRecord], path: Path) -> dict[str, Any]:
    """Attention mass on the cue step at the decision step, successes vs failures, per layer.

    Returns the numbers drawn (also written next to the picture as JSON).
    """
    Figure = _figure_class()
    masses = [r.cue_mass_at_decision() for r in records]
    usable = [(r.success, m) for r, m in zip(records, masses, strict=True) if m is not None]
    layers = next((r.layers for r in records if r.attention is not None), [])
    summary: dict[str, Any] = {
        "episodes": len(records),
        "successes": sum(1 for r in records if r.success),
        "layers": layers,
        "cue_mass_at_decision": [
            {"episode": i, "success": r.success, "mass": [float(x) for x in m]}
            for i, (r, m) in enumerate(zip(records, masses, strict=True))
            if m is not None
        ],
    }
    fig = Figure(figsize=(max(4.0, 2.2 * max(len(layers), 1) + 1.5), 3.8), layout="constrained")
    ax = fig.subplots()
    if not usable:
        ax.text(
            0.5,
            0.5,
            "no episode with attention weights, a cue step and a decision step",
            ha="center",
            wrap=True,
            transform=ax.transAxes,
        )
        ax.set_axis_off()
    else:
        for outcome, colour, shift in ((True, "tab:green", -0.15), (False, "tab:red", 0.15)):
            group = np.array([m for s, m in usable if s is outcome])  # (episodes, L)
            if group.size == 0:
                continue
            x = np.arange(len(layers)) + shift
            for row in group:
                ax.scatter(x, row, color=colour, alpha=0.5, s=18)
            ax.scatter(
                x, group.mean(axis=0), color=colour, marker="_", s=400,
                label=f"{'successes' if outcome else 'failures'} ({len(group)}), mean",
            )  # fmt: skip
        ax.set_xticks(range(len(layers)), layers)
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("attention on the cue step\nat the decision step (heads averaged)")
        ax.legend(fontsize="x-small")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"{summary['successes']}/{len(records)} episodes succeeded", fontsize="medium")
    _save_figure(fig, path)
    return summary


# ---------------------------------------------------------------------------- video


def _video_frame(fig: Any, record: EpisodeRecord, step: int) -> np.ndarray:
    """The env frame beside the step's attention row and gate bars, as an RGB array."""
    fig.clear()
    left, middle, right = fig.subplots(1, 3, width_ratios=(1.2, 1.6, 1.0))
    left.imshow(record.frames[step], interpolation="nearest")
    left.set_axis_off()
    reward = record.rewards[step]
    left.set_title(
        f"step {step}  value {record.values[step]:+.2f}  reward {reward:+.2f}", fontsize=9
    )
    steps = np.arange(record.steps)
    if record.attention is not None:
        for layer, name in enumerate(record.layers):
            row = record.attention[layer, :, step].mean(axis=0)
            middle.bar(steps, row, alpha=0.6, label=name)
        middle.set_ylim(0, 1)
        middle.set_xlim(-0.5, record.steps - 0.5)
        middle.set_xlabel("attended step")
        middle.set_title("attention of this step (heads averaged)", fontsize=9)
        if record.cue_step is not None:
            middle.axvline(record.cue_step, color="tab:green", linestyle="--", label="cue")
        middle.legend(fontsize=7, loc="upper right")
    else:
        middle.text(0.5, 0.5, "no attention weights", ha="center", transform=middle.transAxes)
        middle.set_axis_off()
    names = record.gate_names or [n for n in record.traces if n.startswith("state/")]
    if names:
        values = [record.traces[n][step] for n in names]
        right.barh(range(len(names)), values, color="tab:purple")
        right.set_yticks(range(len(names)), [n.replace("/", "\n", 1) for n in names], fontsize=7)
        right.invert_yaxis()
        if record.gate_names:
            right.set_xlim(0, 1)
        right.set_title("gates (mean)" if record.gate_names else "state norms", fontsize=9)
    else:
        right.set_axis_off()
    if step == record.decision_step:
        fig.suptitle("decision step", color="tab:red", fontsize=10)
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()


def write_video(record: EpisodeRecord, path: Path, *, fps: int = VIDEO_FPS) -> None:
    """An MP4 with one frame per step (imageio's ffmpeg writer, as gymnasium's RecordVideo)."""
    import os

    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401  (the ffmpeg binary imageio writes MP4 with)
    except ImportError as e:
        raise ImportError(
            "txrl inspect --video writes MP4 with imageio and imageio-ffmpeg: "
            "pip install 'txrl[video]'"
        ) from e
    if len(record.frames) != record.steps:
        raise InspectError(f"{len(record.frames)} frames recorded for {record.steps} steps")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    Figure = _figure_class()
    # 960 x 320 pixels: multiples of 16, as H.264 wants
    fig = Figure(figsize=(9.6, 3.2), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    tmp = path.with_name(f".{path.stem}.partial{path.suffix}")
    writer = imageio.get_writer(tmp, fps=fps, codec="libx264", quality=7, macro_block_size=16)
    try:
        for step in range(record.steps):
            writer.append_data(_video_frame(fig, record, step))
    finally:
        writer.close()
    os.replace(tmp, path)


# ---------------------------------------------------------------------------- entry point


@dataclasses.dataclass
class InspectResult:
    """What :func:`inspect_run` wrote and what it could not record."""

    out_dir: Path
    checkpoint: Path
    files: list[Path]
    messages: list[str]
    summary: dict[str, Any]


def default_out_dir(target: str | Path) -> Path:
    """``RUN_DIR/inspect``, or ``inspect-<name>`` beside a checkpoint file."""
    path = Path(target)
    return path / "inspect" if path.is_dir() else path.parent / f"inspect-{path.stem}"


def _render_config(config: Any) -> Any:
    kwargs = {**config.env.kwargs, "render_mode": "rgb_array"}
    return dataclasses.replace(config, env=dataclasses.replace(config.env, kwargs=kwargs))


def inspect_run(
    target: str | Path,
    *,
    episodes: int = 4,
    seed: int | None = None,
    out_dir: str | Path | None = None,
    video: bool = False,
    per_head: bool = False,
    deterministic: bool | None = None,
    echo: Callable[[str], None] = print,
) -> InspectResult:
    """Play ``episodes`` episodes of a run's (or a checkpoint's) agent and write, in ``out_dir``:
    ``episode_<i>_attention.png``, ``episode_<i>_traces.png``, ``episode_<i>.npz`` (the data
    behind them), ``summary.png`` and ``summary.json``, and with ``video`` ``episode_<i>.mp4``.
    """
    from txrl.checkpoint import atomic_write, read_checkpoint_config
    from txrl.evaluate import load_checkpoint_model, make_checkpoint_eval_env, resolve_checkpoint

    if episodes < 1:
        raise InspectError(f"episodes must be >= 1, got {episodes}")
    checkpoint = resolve_checkpoint(target)
    config = read_checkpoint_config(checkpoint)
    messages: list[str] = []
    env = None
    if video:
        try:
            env = make_checkpoint_eval_env(
                checkpoint, _render_config(config), episodes=1, seed=seed
            )
        except (TypeError, ValueError) as e:
            messages.append(
                f"video: {config.env.id} cannot be made with render_mode='rgb_array' ({e})"
            )
        else:
            if env.render_mode != "rgb_array":
                env.close()
                env = None
                messages.append(f"video: {config.env.id} does not render rgb_array frames")
        if env is None:
            messages[-1] += "; writing the plots and data only"
    if env is None:
        env = make_checkpoint_eval_env(checkpoint, config, episodes=1, seed=seed)
    frames = env.render_mode == "rgb_array" and video
    model = load_checkpoint_model(checkpoint, config)
    greedy = config.eval.deterministic if deterministic is None else deterministic
    try:
        recording = record_episodes(
            model.policy, env, episodes, deterministic=greedy, frames=frames
        )
        fps = int(env.get_attr("metadata")[0].get("render_fps") or VIDEO_FPS)
    finally:
        env.close()
    messages += recording.missing

    out = Path(out_dir) if out_dir is not None else default_out_dir(target)
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    for index, record in enumerate(recording.episodes):
        data = io.BytesIO()
        np.savez_compressed(data, **record.to_npz())
        files.append(out / f"episode_{index}.npz")
        atomic_write(files[-1], data.getvalue())
        if record.attention is not None:
            files.append(out / f"episode_{index}_attention.png")
            plot_attention_map(record, files[-1], per_head=per_head)
        files.append(out / f"episode_{index}_traces.png")
        plot_traces(record, files[-1])
        if recording.frames:
            files.append(out / f"episode_{index}.mp4")
            write_video(record, files[-1], fps=fps)
    files.append(out / "summary.png")
    summary = plot_summary(recording.episodes, files[-1])
    summary = {"checkpoint": str(checkpoint), "deterministic": greedy, **summary}
    files.append(out / "summary.json")
    atomic_write(files[-1], (json.dumps(summary, indent=2) + "\n").encode())
    for message in messages:
        echo(message)
    return InspectResult(out, checkpoint, files, messages, summary)
