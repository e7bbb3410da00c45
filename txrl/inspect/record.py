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
    """Play ``episodes`` episodes of ``policy`` on ``env`` (an SB3 VecEnv with one env) and
    record each step.

    ``policy``: a [`txrl.sb3.policies.MemoryActorCriticPolicy`][txrl.sb3.policies.MemoryActorCriticPolicy]
    (txrl's learners: everything above is recorded), or sb3-contrib's
    ``RecurrentActorCriticPolicy`` (``algo: recurrent_ppo``: the LSTMs' states stand for the
    memory, there is no attention or gate to record).
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
    actor: _MemoryPolicyActor | _ContribRecurrentActor
    if hasattr(policy, "backbone"):
        actor = _MemoryPolicyActor(policy)
    elif _is_contrib_recurrent(policy):
        actor = _ContribRecurrentActor(policy)
    else:
        raise InspectError(
            f"inspect records txrl's memory policies (algo ppo or vmpo) and sb3-contrib's "
            f"RecurrentActorCriticPolicy (algo recurrent_ppo), got {type(policy).__name__}"
        )
    missing = list(actor.missing)
    discrete = isinstance(policy.action_dist, CategoricalDistribution)
    if not discrete:
        missing.append(
            "action probabilities: only for discrete (Discrete) action spaces; "
            f"this policy's distribution is {type(policy.action_dist).__name__}"
        )
    names = action_names(env, int(policy.action_space.n)) if discrete else None
    max_plays = 2 * episodes + 8 if max_plays is None else max_plays

    policy.set_training_mode(False)
    kept: list[EpisodeRecord] = []
    seen: set[str] = set()
    plays = 0
    hooks = actor.register()
    try:
        while len(kept) < episodes and plays < max_plays:
            if seed is not None:
                env.seed(seed + plays)
            plays += 1
            record, bad_frame = _play(actor, env, discrete, deterministic, frames)
            if bad_frame is not None:
                missing.append(
                    f"video: the env's render() gave {bad_frame}, not an "
                    "(height, width, 3) rgb_array frame; writing the plots and data only"
                )
                frames = False
                for done in (*kept, record):
                    done.frames.clear()
            record.gates = {k: v for k, v in actor.gate_kinds.items() if k in record.traces}
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
            f"gates: backbone {actor.name!r} reports no gate activations (torch's fused LSTM/GRU "
            "cells keep theirs inside; trxl has plain residuals)"
        )
    return Recording(kept, missing, frames, plays)


@dataclasses.dataclass
class _Step:
    """What one acting step hands the recording: the action and its distribution, the
    value, the memory layers' outputs, the scalar traces and the attention (None when the
    policy records none)."""

    action: torch.Tensor
    distribution: Any
    value: float
    hidden: dict[str, np.ndarray]
    traces: dict[str, float]
    attention: tuple[np.ndarray, np.ndarray] | None


class _MemoryPolicyActor:
    """Acts with a txrl memory policy through its own forward pass, asking the backbone for
    its diagnostics (the acting shortcut ``policy.act`` does not hand them out)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        backbone = policy.backbone
        self.layer_of = attention_layers(backbone)
        self.layers = list(self.layer_of.values()) if self.layer_of else []  # in layer order
        self.layout = key_layout(backbone)
        self.gate_kinds = gate_kinds(backbone)
        self.name = getattr(policy, "backbone_name", type(backbone).__name__)
        self.missing: list[str] = []
        if self.layer_of is None:
            self.missing.append(
                f"attention weights: not recorded for backbone {self.name!r}; the attention "
                "backbones gtrxl, trxl_i, trxl, compressive, adaptive_span, sparse_strided, "
                "sparse_fixed, linformer, linear and performer hand them out per step "
                "(txrl.nn.attention.AttentionRecorder). Recording the norms of its memory "
                "state instead"
            )
        self._hidden: dict[str, np.ndarray] = {}
        self._state: Any = None

    def register(self) -> list[Any]:
        """Forward hooks keeping each memory layer's output, and linear attention's
        equivalent weights; removed by the caller."""
        hooks = [
            _capture(block, layer, self._hidden)
            for layer, block in memory_layers(self.policy.backbone).items()
        ]
        return hooks + KernelWeights(self.policy.backbone).register()

    def reset(self) -> None:
        self._state = self.policy.initial_state(1)

    def step(self, obs: Any, start: bool, deterministic: bool) -> _Step:
        policy = self.policy
        obs_tensor, _ = policy.obs_to_tensor(obs)
        starts = torch.tensor([[start]], dtype=torch.bool, device=policy.device)
        self._hidden.clear()
        with torch.no_grad(), AttentionRecorder() as recorder:
            latent_pi, latent_vf, out = policy._latent(obs_tensor, self._state, starts, stats=True)
            distribution = policy._get_action_dist_from_latent(latent_pi)
            action = distribution.get_actions(deterministic=deterministic)
            value = policy.value_net(latent_vf)
        self._state = out.state
        traces = {k: float(v) for k, v in out.stats.items() if v.numel() == 1}
        attention = None
        if self.layer_of is None:
            traces.update(state_norms(self._state))
        else:
            attention = layer_weights(recorder.calls, self.layer_of, self.layers)
        hidden = {**self._hidden, "output": out.output[0, -1].float().cpu().numpy()}
        return _Step(action, distribution, float(value.flatten()[0]), hidden, traces, attention)


def _is_contrib_recurrent(policy: Any) -> bool:
    from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy

    return isinstance(policy, RecurrentActorCriticPolicy)


class _ContribRecurrentActor:
    """Acts with sb3-contrib's ``RecurrentActorCriticPolicy`` (RecurrentPPO) through its own
    ``forward``; records the LSTMs' last-layer hidden states (``hidden/output`` the actor's,
    what the policy head reads; ``hidden/critic`` the critic's own LSTM, when it has one)
    and the norms of their hidden and cell states."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.name = "recurrent_ppo"
        self.gate_kinds: dict[str, str] = {}
        self.layers: list[str] = []
        self.layout = KeyLayout("window")
        self.missing = [
            "attention weights: not recorded for sb3-contrib's RecurrentPPO, an LSTM with no "
            "attention. Recording the norms of its LSTM states instead"
        ]
        self._state: Any = None

    def register(self) -> list[Any]:
        return []

    def reset(self) -> None:
        from sb3_contrib.common.recurrent.type_aliases import RNNStates

        layers, _, size = self.policy.lstm_hidden_state_shape
        zeros = torch.zeros(layers, 1, size, device=self.policy.device)
        self._state = RNNStates((zeros, zeros.clone()), (zeros.clone(), zeros.clone()))

    def step(self, obs: Any, start: bool, deterministic: bool) -> _Step:
        policy = self.policy
        obs_tensor, _ = policy.obs_to_tensor(obs)
        starts = torch.tensor([float(start)], device=policy.device)
        before = self._state
        with torch.no_grad():
            action, value, _, self._state = policy.forward(
                obs_tensor, before, starts, deterministic=deterministic
            )
            distribution, _ = policy.get_distribution(obs_tensor, before.pi, starts)
        parts = {"actor": self._state.pi}
        if policy.lstm_critic is not None:  # else the critic reads the actor's LSTM, or none
            parts["critic"] = self._state.vf
        hidden = {
            "output" if part == "actor" else part: states[0][-1, 0].float().cpu().numpy()
            for part, states in parts.items()
        }
        traces = {
            f"state/{part}_{name}_norm": float(tensor[:, 0].float().norm())
            for part, states in parts.items()
            for name, tensor in zip(("h", "c"), states, strict=True)
        }
        return _Step(action, distribution, float(value.flatten()[0]), hidden, traces, None)


def _capture(block: torch.nn.Module, layer: str, into: dict[str, np.ndarray]) -> Any:
    """A forward hook keeping env 0's last-step output (D,) of ``block`` as ``into[layer]``."""

    def hook(module: torch.nn.Module, args: tuple, output: Any) -> None:
        if isinstance(output, torch.Tensor) and output.ndim == 3:  # (B, T, D)
            into[layer] = output[0, -1].detach().float().cpu().numpy()

    return block.register_forward_hook(hook)


def _play(
    actor: _MemoryPolicyActor | _ContribRecurrentActor,
    env: Any,
    discrete: bool,
    deterministic: bool,
    frames: bool,
) -> tuple[EpisodeRecord, str | None]:
    """One episode from a reset of ``env``, recorded step by step, and the type of the
    first render that was not an rgb_array frame (None when all were, or none was asked)."""
    bad_frame: str | None = None
    actor.reset()
    start = True
    obs = env.reset()
    buffer = _EpisodeBuffer()
    buffer.note_info(env.reset_infos[0] if getattr(env, "reset_infos", None) else {})
    action_shape = actor.policy.action_space.shape
    while True:
        if frames and bad_frame is None:
            image = env.get_images()[0]
            if _is_rgb(image):
                buffer.frames.append(image)
            else:
                bad_frame = type(image).__name__
        buffer.observations.append(_original_obs(env, obs))
        step = actor.step(obs, start, deterministic)
        buffer.hidden.append(step.hidden)
        if step.attention is not None:
            buffer.attention.append(step.attention)
        buffer.traces.append(step.traces)
        buffer.values.append(step.value)
        if discrete:
            buffer.probs.append(step.distribution.distribution.probs[0].cpu().numpy())
        action_np = step.action.cpu().numpy().reshape((-1, *action_shape))
        buffer.actions.append(action_np[0])
        obs, reward, done, infos = env.step(action_np)
        buffer.rewards.append(float(reward[0]))
        buffer.note_info(infos[0])
        start = bool(done[0])
        if done[0]:
            success = infos[0].get("is_success")
            record = buffer.finish(
                None if success is None else bool(success), actor.layers, actor.layout, env
            )
            return record, bad_frame


def _is_rgb(image: Any) -> bool:
    return isinstance(image, np.ndarray) and image.ndim == 3 and image.shape[2] == 3
