"""``txrl inspect``: what a trained memory agent attends to, how its gates open, what it
expects and what its memory holds, step by step over whole episodes, as pictures, ``.npz``
data, MP4 video and linear probes.

Why: a success rate says *that* a memory agent fails, not *why*. At the step where the
memory matters (the T-maze's junction, the end of MiniGrid-Memory's hallway), does any head
attend to the step where the cue was seen? Do GTrXL's gates pass the attention output on,
or stay near the identity and ignore memory (Parisotto et al. 2020,
"Stabilizing Transformers for Reinforcement Learning", sec. 3.2, the gating layers)? Does a layer's output still hold the cue ten
steps after it was seen? Scalar means over a rollout cannot say.

What is recorded, per step of each episode (legend: N steps of the episode, L attention
layers, H heads, A actions, D the model width):

* attention (L, H, N, N): row ``s`` is the softmax of step ``s`` over the steps it could
  attend to (Transformer-XL's memory slots and itself, Dai et al. 2019, section
  3.2), mapped from memory slots to *absolute* episode steps, so column 0 is the episode's
  first observation. Entries the step could not attend to are 0 and ``attendable`` (N, N)
  is False there. The weights come from the backbone's own attention through
  [`txrl.nn.attention.AttentionRecorder`][txrl.nn.attention.AttentionRecorder], not from a second implementation. Every
  attention backbone hands them out ([`txrl.inspect.layers.attention_layers`][txrl.inspect.layers.attention_layers]): the
  TrXL family, ``adaptive_span`` and ``sparse_*`` over their window; ``compressive`` over
  its raw window, and beside it ``compressed`` (L, H, N, Mc) over its compressed slots with
  ``compressed_slot`` (N, N), the slot that holds step j when step s acts (-1: none; the
  pending steps awaiting compression are in no slot); ``linear`` and ``performer`` through
  their equivalent weights ``phi(q_i)^T phi(k_j) / (phi(q_i)^T z_i + eps)`` over every step
  of the episode so far, which reproduce their output exactly and sum to 1 up to eps
  (`txrl.inspect.layers.KernelWeights`); ``linformer`` only as ``projected`` (L, H,
  N, k) over its k projected slots, each a learned mix of the whole window, so it has no
  map over steps. ``attention_kind`` says which. The cue's weight at the decision is that
  of the memory entry that holds the cue step: its key, or its compressed slot.
* traces: the backbone's diagnostics (``Backbone.run(stats=True)``): each gate's mean
  activation per sub-layer (``layer0/gate_attention``, ``layer0/gate_mlp``; for GTrXL's GRU
  gate the update gate z of eq. 14, 1 = the block replaces its input by the sub-layer's
  update, 0 = the identity map; `txrl.inspect.layers.GATE_MEANINGS` says what 1 and 0
  mean for each gate), attention entropy, memory in use; for backbones without attention
  weights, the norms of their recurrent state instead.
* hidden (N, D) per layer: each block's output (``hidden/layer0``, ...) and the backbone's
  output (``hidden/output``, what the policy and value heads read), for the probes.
* the observations (before observation normalisation), the value estimate, the action
  probabilities (discrete actions), the action, the reward, ``info["is_success"]`` at the
  end, the env's ``info["cue_step"]`` / ``info["decision_step"]`` when it reports them (the
  T-maze and MiniGrid-Memory do), the steps whose observation showed the cue when the env
  reports ``info["cue_in_view"]`` (``cue_sightings``; MiniGrid-Memory does) and what the
  cue said: ``info["cue"]`` when the env reports it, else for the T-maze the sign of the
  cue feature of the cue step's observation.

Step ``s`` is the observation the agent acts on; step 0 is the reset's. Episodes are
played one env at a time with the eval env of the checkpoint's config (the same
observation normalisation), greedy unless asked otherwise, as ``txrl eval``; the k-th
episode played is reset with seed ``seed + k``. Pictures are drawn for *distinct* episodes:
a greedy agent replays an episode step for step whenever the env draws the same start (the
passive T-maze has two: one per cue), and a replay is skipped, not drawn twice.

Files: per episode ``episode_<i>_attention.png`` (acting step x attended step, per layer,
beside it the compressed memory of ``compressive``, each slot's weight drawn on the c steps
it summarises; acting step x projected slot for ``linformer``; the title names the cue, the
choice and the outcome), ``episode_<i>_traces.png`` (gates
named by kind, equation and layer, action probabilities, value and reward),
``episode_<i>.npz`` and with ``video`` ``episode_<i>.mp4``; ``summary.png`` / ``.json``
(per layer, the attention weight each episode's decision step gives the cue step, successes
against failures, with the level of uniform attention; the JSON also has each head's
``decision_focus``: how many steps back the decision step looks hardest, and how hard, and
where the env reports ``info["cue_in_view"]`` on every observation (MiniGrid-Memory does),
the mass on every step up to the decision that showed the cue, ``sightings_mass``, beside
uniform attention's share of those steps; for discrete actions, with any backbone, each
episode's ``actions``: its return and length, how often it took each action and its action
probabilities at the first step, which show a policy that answers the same whatever it sees).

Probes (``probe=TARGET``, [`probe_run`][txrl.inspect.probe_run]): "what does the memory hold, and when". Plays
``episodes`` episodes (replays kept: they are samples of the task) and fits, per layer and
per step, a linear softmax probe from the layer's output to a discrete per-episode target,
scored on held-out episodes against chance (the most common value); the current
observation alone is probed too, as the memoryless control (`txrl.inspect.probe`).
Targets: ``cue``; ``success``; ``info:KEY`` (an info field's last value in the episode);
``obs:INDEX``, ``obs:INDEX@STEP``, ``obs:INDEX@cue`` (a flat observation feature at step 0,
STEP or the cue step). ``probe_align`` counts steps from the episode's ``start``, its
``cue`` step or its ``decision`` step. Writes ``probe.csv`` (layer, step, episodes,
accuracy, chance), ``probe.json`` and ``probe.png`` (accuracy against step, one line per
layer, chance dashed).
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from txrl.inspect.episode import EpisodeRecord, InspectError
from txrl.inspect.layers import absolute_row, attention_layers
from txrl.inspect.plots import plot_attention_map, plot_summary, plot_traces
from txrl.inspect.probe import (
    ProbeResult,
    check_probe,
    probe_records,
    summary_line,
    write_probe,
)
from txrl.inspect.record import Recording, record_episodes
from txrl.inspect.video import VIDEO_FPS, write_video

__all__ = [
    "EpisodeRecord",
    "InspectError",
    "InspectResult",
    "ProbeResult",
    "Recording",
    "absolute_row",
    "attention_layers",
    "default_out_dir",
    "inspect_run",
    "plot_attention_map",
    "plot_summary",
    "plot_traces",
    "probe_records",
    "probe_run",
    "record_episodes",
    "write_video",
]

DEFAULT_EPISODES = 4
DEFAULT_PROBE_EPISODES = 64


@dataclasses.dataclass
class InspectResult:
    """What [`inspect_run`][txrl.inspect.inspect_run] wrote and what it could not record."""

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


@dataclasses.dataclass
class _Played:
    checkpoint: Path
    recording: Recording
    deterministic: bool
    fps: int
    messages: list[str]


def _play(
    target: str | Path,
    episodes: int,
    seed: int | None,
    video: bool,
    deterministic: bool | None,
    distinct: bool,
) -> _Played:
    """Load the checkpoint, make its eval env and record ``episodes`` episodes."""
    from txrl.run.checkpoint import read_checkpoint_config, resolve_checkpoint
    from txrl.run.envs import JUDGE_SEED_OFFSET
    from txrl.run.evaluate import load_checkpoint_model, make_checkpoint_eval_env

    if episodes < 1:
        raise InspectError(f"episodes must be >= 1, got {episodes}")
    checkpoint = resolve_checkpoint(target)
    config = read_checkpoint_config(checkpoint)
    seed = config.seed + JUDGE_SEED_OFFSET if seed is None else seed
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
            model.policy, env, episodes, deterministic=greedy, frames=frames, seed=seed,
            distinct=distinct,
        )  # fmt: skip
        fps = int(env.get_attr("metadata")[0].get("render_fps") or VIDEO_FPS)
    finally:
        env.close()
    return _Played(checkpoint, recording, greedy, fps, messages + recording.missing)


def inspect_run(
    target: str | Path,
    *,
    episodes: int | None = None,
    seed: int | None = None,
    out_dir: str | Path | None = None,
    video: bool = False,
    per_head: bool = False,
    deterministic: bool | None = None,
    probe: str | None = None,
    probe_align: str = "start",
    echo: Callable[[str], None] = print,
) -> InspectResult:
    """Play ``episodes`` (default 4) distinct episodes of a run's (or a checkpoint's) agent and
    write, in ``out_dir``: ``episode_<i>_attention.png``, ``episode_<i>_traces.png``,
    ``episode_<i>.npz`` (the data behind them), ``summary.png`` and ``summary.json``, and
    with ``video`` ``episode_<i>.mp4``. With ``probe``, run [`probe_run`][txrl.inspect.probe_run] instead.
    """
    if probe is not None:
        return probe_run(
            target, probe, episodes=episodes, seed=seed, out_dir=out_dir,
            align=probe_align, deterministic=deterministic, echo=echo,
        )  # fmt: skip
    from txrl.files import atomic_write

    played = _play(target, episodes or DEFAULT_EPISODES, seed, video, deterministic, True)
    recording = played.recording
    out = Path(out_dir) if out_dir is not None else default_out_dir(target)
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    for index, record in enumerate(recording.episodes):
        data = io.BytesIO()
        arrays: dict[str, Any] = record.to_npz()  # names -> arrays, none named allow_pickle
        np.savez_compressed(data, **arrays)
        files.append(out / f"episode_{index}.npz")
        atomic_write(files[-1], data.getvalue())
        if record.has_attention:
            files.append(out / f"episode_{index}_attention.png")
            plot_attention_map(record, files[-1], per_head=per_head, index=index)
        files.append(out / f"episode_{index}_traces.png")
        plot_traces(record, files[-1], index=index)
        if recording.frames:
            files.append(out / f"episode_{index}.mp4")
            write_video(record, files[-1], fps=played.fps)
    files.append(out / "summary.png")
    summary = plot_summary(recording.episodes, files[-1])
    summary = {
        "checkpoint": str(played.checkpoint),
        "deterministic": played.deterministic,
        "played": recording.plays,
        **summary,
    }
    files.append(out / "summary.json")
    atomic_write(files[-1], (json.dumps(summary, indent=2) + "\n").encode())
    for message in played.messages:
        echo(message)
    return InspectResult(out, played.checkpoint, files, played.messages, summary)


def probe_run(
    target: str | Path,
    probe: str,
    *,
    episodes: int | None = None,
    seed: int | None = None,
    out_dir: str | Path | None = None,
    align: str = "start",
    deterministic: bool | None = None,
    echo: Callable[[str], None] = print,
) -> InspectResult:
    """Play ``episodes`` (default 64) episodes of a run's agent and probe each memory layer
    for ``probe`` (see the package docstring for the targets); writes ``probe.csv``,
    ``probe.json`` and ``probe.png`` in ``out_dir``. ``summary`` is the probe's result."""
    check_probe(probe, align)
    episodes = episodes or DEFAULT_PROBE_EPISODES
    played = _play(target, episodes, seed, False, deterministic, False)
    result = probe_records(played.recording.episodes, probe, align=align, seed=seed or 0)
    out = Path(out_dir) if out_dir is not None else default_out_dir(target)
    out.mkdir(parents=True, exist_ok=True)
    files = write_probe(result, out)
    messages = [m for m in played.messages if not m.startswith("episodes:")]
    messages.append(summary_line(result))
    for message in messages:
        echo(message)
    summary = {"checkpoint": str(played.checkpoint), **result.to_json()}
    return InspectResult(out, played.checkpoint, files, messages, summary)
