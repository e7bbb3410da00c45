"""Recording: greedy (or sampled) episodes of a policy, with per step its attention over
absolute episode steps, its backbone's diagnostics, each memory layer's output, the value,
the action probabilities and what the env says about the cue, the decision and the outcome.

Each episode becomes an [`txrl.inspect.episode.EpisodeRecord`][txrl.inspect.episode.EpisodeRecord]; what the backbone's
layers hand out is found and read by `txrl.inspect.layers`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.distributions import CategoricalDistribution

from txrl.inspect.episode import EpisodeRecord, InspectError
from txrl.inspect.layers import (
    KernelWeights,
    KeyLayout,
    attention_layers,
    episode_maps,
    gate_kinds,
    key_layout,
    layer_weights,
    memory_layers,
    state_norms,
)
from txrl.nn.attention import AttentionRecorder

# ---------------------------------------------------------------------------- the env


def action_names(env: Any, n_actions: int) -> list[str] | None:
    """Names of a Discrete action space's actions, when the env names them: the T-maze's
    moves, MiniGrid's ``Actions`` (through [`txrl.envs.wrappers.DiscreteActionSubset`][txrl.envs.wrappers.DiscreteActionSubset]
    when it keeps a subset), or an env's own ``action_names``."""
    from txrl.envs.tmaze import TMazeEnv

    base = env.get_attr("unwrapped")[0]
    names: list[str] | None = None
    if isinstance(base, TMazeEnv):
        names = ["forward", "backward", "up", "down"]
    elif isinstance(getattr(base, "action_names", None), list | tuple):
        names = [str(n) for n in base.action_names]
    elif hasattr(base, "actions") and hasattr(base.actions, "__members__"):  # MiniGrid
        try:
            kept = env.get_attr("kept")[0]
        except AttributeError:
            kept = range(n_actions)
        names = [base.actions(int(k)).name for k in kept]
    return names if names is not None and len(names) == n_actions else None


def cue_of(
    env: Any, info: dict[str, Any], observations: dict[str, np.ndarray], cue_step: int | None
) -> str | None:
    """What the cue said, when known: the env's ``info["cue"]``, else for the T-maze the
    sign of the cue feature of the observation at the cue step (``+1``: up is rewarded)."""
    from txrl.envs.tmaze import TMazeEnv

    if "cue" in info:
        return str(info["cue"])
    base = env.get_attr("unwrapped")[0]
    if isinstance(base, TMazeEnv) and cue_step is not None and "obs" in observations:
        return "up" if observations["obs"][cue_step, 1] > 0 else "down"
    return None


def _original_obs(env: Any, obs: Any) -> dict[str, np.ndarray]:
    """Env 0's observation before a VecNormalize, by name ("obs" for a Box space)."""
    original = env.get_original_obs() if hasattr(env, "get_original_obs") else obs
    if isinstance(original, dict):
        return {str(k): np.array(v[0]) for k, v in original.items()}
    return {"obs": np.array(original[0])}


def _scalar_infos(info: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v.item() if isinstance(v, np.generic) else v
        for k, v in info.items()
        if isinstance(v, bool | int | float | str | np.generic) and k != "TimeLimit.truncated"
    }


# ---------------------------------------------------------------------------- recording


class _EpisodeBuffer:
    """Per-step records of the episode in progress."""

    def __init__(self) -> None:
        self.actions: list[np.ndarray] = []
        self.rewards: list[float] = []
        self.values: list[float] = []
        self.probs: list[np.ndarray] = []
        self.attention: list[tuple[np.ndarray, np.ndarray]] = []  # (L, H, K), (K,) per step
        self.traces: list[dict[str, float]] = []
        self.hidden: list[dict[str, np.ndarray]] = []
        self.observations: list[dict[str, np.ndarray]] = []
        self.frames: list[np.ndarray] = []
        self.info: dict[str, Any] = {}
        self.cue_step: int | None = None
        self.decision_step: int | None = None
        self.cue_sightings: list[int] | None = None  # None until the env reports cue_in_view

    def note_info(self, info: dict[str, Any]) -> None:
        """The info of the observation the episode's next step acts on (the reset's first,
        then each step's; the terminal step's, whose observation no step acts on, last)."""
        if "cue_in_view" in info:
            if self.cue_sightings is None:
                self.cue_sightings = []
            if info["cue_in_view"]:
                self.cue_sightings.append(len(self.rewards))  # that observation's step
        if "cue_step" in info and self.cue_step is None:
            self.cue_step = int(info["cue_step"])
        if "decision_step" in info:
            self.decision_step = int(info["decision_step"])
        self.info.update(_scalar_infos(info))

    def finish(
        self, success: bool | None, layers: list[str], layout: KeyLayout, env: Any
    ) -> EpisodeRecord:
        n = len(self.rewards)
        maps = episode_maps(layout, self.attention, len(layers))
        observations = {
            name: np.stack([o[name] for o in self.observations]) for name in self.observations[0]
        }
        return EpisodeRecord(
            actions=np.stack(self.actions),
            rewards=np.array(self.rewards, dtype=np.float32),
            values=np.array(self.values, dtype=np.float32),
            action_probs=np.stack(self.probs) if self.probs else None,
            attention=maps.attention,
            attendable=maps.attendable,
            layers=layers if self.attention else [],
            traces=_stack(self.traces, math.nan),
            success=success,
            cue_step=self.cue_step,
            decision_step=self.decision_step,
            frames=self.frames,
            observations=observations,
            hidden=_stack(self.hidden, None),
            cue=cue_of(env, self.info, observations, self.cue_step),
            cue_sightings=(
                None
                if self.cue_sightings is None
                else tuple(s for s in self.cue_sightings if s < n)
            ),
            info=self.info,
            compressed=maps.compressed,
            compressed_slot=maps.compressed_slot,
            projected=maps.projected,
            attention_kind=layout.kind,
        )


def _stack(rows: list[dict[str, Any]], fill: float | None) -> dict[str, np.ndarray]:
    """Per-step dicts -> name: (N, ...) float32, ``fill`` where a step lacks the name."""
    names = sorted({name for row in rows for name in row})
    if fill is None:
        return {name: np.stack([row[name] for row in rows]).astype(np.float32) for name in names}
    return {name: np.array([r.get(name, fill) for r in rows], dtype=np.float32) for name in names}


@dataclasses.dataclass
class Recording:
    """The episodes played, whether they hold video frames, what could not be recorded,
    and how many episodes were played to find them (duplicates are not kept)."""

    episodes: list[EpisodeRecord]
    missing: list[str]
    frames: bool
    plays: int = 0


def record_episodes(
    policy: Any,
    env: Any,
    episodes: int,
    *,
    deterministic: bool = True,
    frames: bool = False,
    seed: int | None = None,
    distinct: bool = True,
    max_plays: int | None = None,
) -> Recording:
    """Play ``episodes`` episodes of ``policy`` (a [`txrl.sb3.policies.MemoryActorCriticPolicy`][txrl.sb3.policies.MemoryActorCriticPolicy])
    on ``env`` (an SB3 VecEnv with one env) and record each step.

    ``seed``: the k-th episode played is reset with seed ``seed + k``, so each episode can be
    replayed on its own. ``distinct``: keep only episodes that differ from those kept (in
    observations or actions). A greedy agent on an env whose only randomness is a few
    reset draws plays few distinct episodes (two in the passive T-maze: one per cue), so
    at most ``max_plays`` (default ``2 * episodes + 8``) episodes are played and the
    shortfall is reported in ``missing``.
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
            f"attention weights: not recorded for backbone {name!r}; the attention backbones "
            "gtrxl, trxl_i, trxl, compressive, adaptive_span, sparse_strided, sparse_fixed, "
            "linformer, linear and performer hand them out per step "
            "(txrl.nn.attention.AttentionRecorder). Recording the norms of its memory state "
            "instead"
        )
    layout = key_layout(backbone)
    discrete = isinstance(policy.action_dist, CategoricalDistribution)
    if not discrete:
        missing.append(
            "action probabilities: only for discrete (Discrete) action spaces; "
            f"this policy's distribution is {type(policy.action_dist).__name__}"
        )
    names = action_names(env, int(policy.action_space.n)) if discrete else None
    kinds = gate_kinds(backbone)
    max_plays = 2 * episodes + 8 if max_plays is None else max_plays

    policy.set_training_mode(False)
    hidden: dict[str, np.ndarray] = {}
    hooks = [_capture(block, layer, hidden) for layer, block in memory_layers(backbone).items()]
    kept: list[EpisodeRecord] = []
    seen: set[str] = set()
    plays = 0
    hooks += KernelWeights(backbone).register()  # linear attention's equivalent weights
    try:
        while len(kept) < episodes and plays < max_plays:
            if seed is not None:
                env.seed(seed + plays)
            plays += 1
            record, bad_frame = _play(
                policy, env, discrete, deterministic, frames, layer_of, layers, layout, hidden
            )
            if bad_frame is not None:
                missing.append(
                    f"video: the env's render() gave {bad_frame}, not an "
                    "(height, width, 3) rgb_array frame; writing the plots and data only"
                )
                frames = False
                for done in (*kept, record):
                    done.frames.clear()
            record.gates = {k: v for k, v in kinds.items() if k in record.traces}
            record.action_names = names
            key = record.fingerprint()
            if distinct and key in seen:
                continue
            seen.add(key)
            kept.append(record)
    finally:
        for hook in hooks:
            hook.remove()
    if len(kept) < episodes:
        missing.append(
            f"episodes: {len(kept)} distinct episodes in {plays} played, not {episodes}; the "
            "others repeated one of them step for step (a greedy agent replays an episode "
            "whenever the env draws the same start: the passive T-maze has one per cue)"
        )
    if not kept[0].gate_names:
        missing.append(
            f"gates: backbone {name!r} reports no gate activations (torch's fused LSTM/GRU "
            "cells keep theirs inside; trxl has plain residuals)"
        )
    return Recording(kept, missing, frames, plays)


def _capture(block: torch.nn.Module, layer: str, into: dict[str, np.ndarray]) -> Any:
    """A forward hook keeping env 0's last-step output (D,) of ``block`` as ``into[layer]``."""

    def hook(module: torch.nn.Module, args: tuple, output: Any) -> None:
        if isinstance(output, torch.Tensor) and output.ndim == 3:  # (B, T, D)
            into[layer] = output[0, -1].detach().float().cpu().numpy()

    return block.register_forward_hook(hook)


def _play(
    policy: Any,
    env: Any,
    discrete: bool,
    deterministic: bool,
    frames: bool,
    layer_of: dict[int, str] | None,
    layers: list[str],
    layout: KeyLayout,
    hidden: dict[str, np.ndarray],
) -> tuple[EpisodeRecord, str | None]:
    """One episode from a reset of ``env``, recorded step by step, and the type of the
    first render that was not an rgb_array frame (None when all were, or none was asked)."""
    bad_frame: str | None = None
    state = policy.initial_state(1)
    start = torch.ones(1, dtype=torch.bool, device=policy.device)
    obs = env.reset()
    buffer = _EpisodeBuffer()
    buffer.note_info(env.reset_infos[0] if getattr(env, "reset_infos", None) else {})
    while True:
        if frames and bad_frame is None:
            image = env.get_images()[0]
            if _is_rgb(image):
                buffer.frames.append(image)
            else:
                bad_frame = type(image).__name__
        buffer.observations.append(_original_obs(env, obs))
        obs_tensor, _ = policy.obs_to_tensor(obs)
        hidden.clear()
        with torch.no_grad(), AttentionRecorder() as recorder:
            # The policy's own forward pass, asking the backbone for its diagnostics; the
            # acting shortcut (policy.act) does not hand them out.
            latent_pi, latent_vf, out = policy._latent(obs_tensor, state, start[None], stats=True)
            distribution = policy._get_action_dist_from_latent(latent_pi)
            action = distribution.get_actions(deterministic=deterministic)
            value = policy.value_net(latent_vf)
        state = out.state
        buffer.hidden.append({**hidden, "output": out.output[0, -1].float().cpu().numpy()})
        step_traces = {k: float(v) for k, v in out.stats.items() if v.numel() == 1}
        if layer_of is None:
            step_traces.update(state_norms(state))
        else:
            buffer.attention.append(layer_weights(recorder.calls, layer_of, layers))
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
            record = buffer.finish(None if success is None else bool(success), layers, layout, env)
            return record, bad_frame


def _is_rgb(image: Any) -> bool:
    return isinstance(image, np.ndarray) and image.ndim == 3 and image.shape[2] == 3
