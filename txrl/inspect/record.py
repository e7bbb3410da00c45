"""Recording: greedy (or sampled) episodes of a policy, with per step its attention over
absolute episode steps, its backbone's diagnostics, each memory layer's output, the value,
the action probabilities and what the env says about the cue, the decision and the outcome.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.distributions import CategoricalDistribution

from txrl.backbones.trxl import GATES
from txrl.backbones.trxl.model import TransformerXL
from txrl.nn import gates as gate_classes
from txrl.nn.attention import AttentionRecorder
from txrl.nn.pair import PairedBackbone


class InspectError(ValueError):
    """Input ``txrl inspect`` cannot use (named in the message)."""


@dataclasses.dataclass
class EpisodeRecord:
    """Everything recorded over one episode (see the package docstring for each field)."""

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
    # name -> (N, ...) the observations the agent acted on, before observation normalisation:
    # "obs" for a Box space, the keys of a Dict space
    observations: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    hidden: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # layer -> (N, D)
    gates: dict[str, str] = dataclasses.field(default_factory=dict)  # trace name -> gate class
    cue: str | None = None  # what the cue said ("up", "down"), when the env tells
    # the steps whose observation showed the cue, when the env tells (info["cue_in_view"])
    cue_sightings: tuple[int, ...] | None = None
    action_names: list[str] | None = None  # names of the discrete actions, when the env tells
    info: dict[str, Any] = dataclasses.field(default_factory=dict)  # last scalar of each key

    @property
    def steps(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def gate_names(self) -> list[str]:
        return [name for name in self.traces if "gate" in name.rsplit("/", 1)[-1]]

    @property
    def episode_return(self) -> float:
        return float(self.rewards.sum())

    def action_name(self, step: int) -> str:
        action = self.actions[step]
        if self.action_names is not None and action.ndim == 0:
            return self.action_names[int(action)]
        return str(action.tolist())

    def fingerprint(self) -> str:
        """A digest of the observations and actions: equal for byte-identical episodes."""
        digest = hashlib.sha256()
        for name in sorted(self.observations):
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(self.observations[name]).tobytes())
        digest.update(np.ascontiguousarray(self.actions).tobytes())
        return digest.hexdigest()

    def cue_mass_at_decision(self) -> np.ndarray | None:
        """Attention mass (L,) on the cue step at the decision step, heads averaged; None
        when the episode has no attention, cue or decision step."""
        if self.attention is None or self.cue_step is None or self.decision_step is None:
            return None
        if not (0 <= self.cue_step <= self.decision_step < self.steps):
            return None
        return self.attention[:, :, self.decision_step, self.cue_step].mean(axis=1)

    def sightings_to_decision(self) -> list[int] | None:
        """The steps up to the decision step whose observation showed the cue; None when the
        episode has no decision step or the env does not say when the cue was in view."""
        if self.cue_sightings is None or self.decision_step is None:
            return None
        return [s for s in self.cue_sightings if s <= self.decision_step]

    def sightings_mass_at_decision(self) -> tuple[np.ndarray, float] | None:
        """Attention mass (L,) at the decision step on every step up to it that showed the
        cue, heads averaged, and what uniform attention would give those steps; None when
        the episode has no attention or decision step, or the env does not say when the cue
        was in view.

        :meth:`cue_mass_at_decision` reads the first sighting only; an agent that looks at
        the cue again (MiniGrid-Memory's agent may) can keep a later look instead."""
        seen = self.sightings_to_decision()
        if self.attention is None or self.attendable is None or seen is None:
            return None
        assert self.decision_step is not None  # seen is None without it
        if not 0 <= self.decision_step < self.steps:
            return None
        row = self.attention[:, :, self.decision_step, seen]  # (L, H, len(seen))
        uniform = len(seen) / float(self.attendable[self.decision_step].sum())
        return row.sum(axis=-1).mean(axis=1), uniform

    def decision_focus(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Where each head looks hardest when the agent decides, and how hard: per layer and
        head (L, H), how many steps back of the decision step its largest attention weight
        lies (0: the decision step itself) and that weight (1: all on one step, a saturated
        softmax). None when the episode has no attention or decision step.

        A head that puts all its weight on the last step or two has learned recency; one
        that reaches back to where the cue was seen has learned the read-out. A weight near 1
        also means its softmax passes almost no gradient to the other steps."""
        if self.attention is None or self.decision_step is None:
            return None
        if not 0 <= self.decision_step < self.steps:
            return None
        row = self.attention[:, :, self.decision_step, : self.decision_step + 1]  # (L, H, t+1)
        return self.decision_step - row.argmax(axis=-1), row.max(axis=-1)

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
            "cue": np.array("" if self.cue is None else self.cue),
        }
        if self.cue_sightings is not None:
            data["cue_sightings"] = np.array(self.cue_sightings, dtype=np.int64)
        if self.action_probs is not None:
            data["action_probs"] = self.action_probs
        if self.action_names is not None:
            data["action_names"] = np.array(self.action_names, dtype=str)
        if self.attention is not None and self.attendable is not None:
            data["attention"] = self.attention
            data["attendable"] = self.attendable
        data.update({f"trace/{name}": values for name, values in self.traces.items()})
        data.update({f"hidden/{name}": values for name, values in self.hidden.items()})
        data.update(
            {name if name == "obs" else f"obs/{name}": v for name, v in self.observations.items()}
        )
        return data


# ---------------------------------------------------------------------------- the backbone


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


def memory_layers(backbone: torch.nn.Module) -> dict[str, torch.nn.Module]:
    """``layer name -> block`` for backbones built of a ``blocks`` list (the TrXL family and
    the other layer-memory backbones): ``layer<i>``, or ``actor/layer<i>`` and
    ``critic/layer<i>`` under a :class:`txrl.nn.PairedBackbone`, the names the backbone's
    diagnostics use. Empty for backbones without blocks (the recurrent ones)."""
    found: dict[str, torch.nn.Module] = {}
    for name, module in backbone.named_modules():
        parts = name.split(".")
        if len(parts) >= 2 and parts[-2] == "blocks" and parts[-1].isdigit():
            prefix = "".join(f"{part}/" for part in parts[:-2])
            found[f"{prefix}layer{parts[-1]}"] = module
    return found


#: Gate class -> (gate and equation, what 1 and 0 mean), for the sub-layers' mean activation
#: that :mod:`txrl.nn.gates` reports, read from the declaration of the gate of the class's
#: name (:data:`txrl.backbones.trxl.GATES`).
GATE_MEANINGS: dict[type, tuple[str, str]] = {
    cls: (
        GATES[name].title,
        f"1 = {GATES[name].one_means}, 0 = {GATES[name].zero_means}",
    )
    for name, cls in gate_classes.GATE_CLASSES.items()
}

#: Sub-layer gate attribute -> the sub-layer whose output it lets through.
GATE_SUBLAYERS = {"gate_attention": "after attention (g_MHA)", "gate_mlp": "after MLP (g_MLP)"}


def gate_kinds(backbone: torch.nn.Module) -> dict[str, str]:
    """``trace name -> gate class name`` (``layer0/gate_attention`` -> ``GRUGate``)."""
    kinds: dict[str, str] = {}
    for layer, block in memory_layers(backbone).items():
        for attribute in GATE_SUBLAYERS:
            gate = getattr(block, attribute, None)
            if isinstance(gate, gate_classes.Gate):
                kinds[f"{layer}/{attribute}"] = type(gate).__name__
    return kinds


def _state_norms(state: tuple) -> dict[str, float]:
    """The norm of each float field of a one-env memory state (an LSTM's h and c, a linear
    attention's running sums, a window's cached inputs)."""
    return {
        f"state/{name}_norm": float(field[0].float().norm())  # env on axis 0
        for name, field in zip(state._fields, state, strict=True)  # type: ignore[attr-defined]  # a NamedTuple, which plain tuple does not declare _fields of
        if field.is_floating_point()
    }


# ---------------------------------------------------------------------------- the env


def action_names(env: Any, n_actions: int) -> list[str] | None:
    """Names of a Discrete action space's actions, when the env names them: the T-maze's
    moves, MiniGrid's ``Actions`` (through :class:`txrl.envs.wrappers.DiscreteActionSubset`
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

    def finish(self, success: bool | None, layers: list[str], env: Any) -> EpisodeRecord:
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
        observations = {
            name: np.stack([o[name] for o in self.observations]) for name in self.observations[0]
        }
        return EpisodeRecord(
            actions=np.stack(self.actions),
            rewards=np.array(self.rewards, dtype=np.float32),
            values=np.array(self.values, dtype=np.float32),
            action_probs=np.stack(self.probs) if self.probs else None,
            attention=attention,
            attendable=attendable,
            layers=layers if attention is not None else [],
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
    """Play ``episodes`` episodes of ``policy`` (a :class:`txrl.sb3.policies.MemoryActorCriticPolicy`)
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
    names = action_names(env, int(policy.action_space.n)) if discrete else None
    kinds = gate_kinds(backbone)
    max_plays = 2 * episodes + 8 if max_plays is None else max_plays

    policy.set_training_mode(False)
    hidden: dict[str, np.ndarray] = {}
    hooks = [_capture(block, layer, hidden) for layer, block in memory_layers(backbone).items()]
    kept: list[EpisodeRecord] = []
    seen: set[str] = set()
    plays = 0
    try:
        while len(kept) < episodes and plays < max_plays:
            if seed is not None:
                env.seed(seed + plays)
            plays += 1
            record, bad_frame = _play(
                policy, env, discrete, deterministic, frames, layer_of, layers, hidden
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
            step_traces.update(_state_norms(state))
        else:
            buffer.attention.append(_layer_weights(recorder.calls, layer_of, layers))
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
            record = buffer.finish(None if success is None else bool(success), layers, env)
            return record, bad_frame


def _is_rgb(image: Any) -> bool:
    return isinstance(image, np.ndarray) and image.ndim == 3 and image.shape[2] == 3


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
