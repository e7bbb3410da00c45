"""SB3's entry points of a policy with memory: ``predict`` with a state, and no ``forward``.

`MemoryPredictPolicy` is the part of [`txrl.sb3.policies.MemoryActorCriticPolicy`][txrl.sb3.policies.MemoryActorCriticPolicy]
that SB3's ``predict`` (and ``evaluate_policy``, which calls it) talks to: it turns numpy
observations and episode-start flags into tensors, takes the state of the last call back
(or checks one given by hand), hands the step to the policy's network and returns numpy
actions with the new state. The network's part is the subclass's: `initial_state`,
`on_parameters_changed` and `_predicted_actions`.

Legend: B observations (one per env).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.preprocessing import is_image_space
from stable_baselines3.common.type_aliases import PyTorchObs

from txrl.nn.state import as_state


class MemoryPredictPolicy(ActorCriticPolicy):
    """An actor-critic whose ``predict`` carries a memory state from call to call."""

    # ------------------------------------------------------------------ the network's part

    def initial_state(self, n_envs: int) -> Any:
        """An empty memory state of ``n_envs`` envs on the policy's device."""
        raise NotImplementedError

    def on_parameters_changed(self) -> None:
        """Drop what acting derived from the weights (after weights written with gradients
        off)."""
        raise NotImplementedError

    def _predicted_actions(
        self, obs: PyTorchObs, state: Any, episode_starts: torch.Tensor, deterministic: bool
    ) -> tuple[torch.Tensor, Any]:
        """One step of ``predict`` for B envs, under inference mode: the actions (B, ...)
        and the new state. ``state`` may be advanced in place."""
        raise NotImplementedError

    # ------------------------------------------------------------------ SB3 entry points

    def forward(
        self, obs: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        raise NotImplementedError(
            "a memory policy needs its memory state: use policy.act(obs, state, episode_starts) or model.predict(obs, state, episode_start)"
        )

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, Any]:
        """SB3's recurrent ``predict``, one row of the state per observation.

        The state returned is the backbone's own (a NamedTuple of tensors on the policy's
        device), which SB3's ``evaluate_policy`` passes back unchanged, so a step copies no
        memory to numpy and back; the next call advances it in place. A tuple of arrays of
        the same fields (e.g. ``txrl.nn.state.state_to_numpy`` of a state, saved and loaded)
        is accepted too. Only the actor's head runs (no value, no log-probability), except
        with ``compile_step``, where a discrete action comes from the acting step's heads in
        its one compiled call (cheaper than a second call for the actor); a vector
        observation batch or a discrete action goes the short way round SB3's generic
        conversions, with the same results. With ``critic_memory="separate"`` the critic's
        memory is stepped too, so the state returned stays one whole state (usable by
        ``act`` as well), at the cost of its backbone.

        Weights: each call acts with the weights the policy has now. What the attention
        derives from them alone (its scaled query weights and positional keys,
        [`txrl.nn.attention.RelativeMultiHeadAttention.derived_weights`][txrl.nn.attention.RelativeMultiHeadAttention.derived_weights]) is kept
        between calls and dropped by a training pass, ``train()`` / ``eval()``, a load, and
        the learners' optimizer steps and rollout starts; after weights are written
        otherwise with gradients off (through ``p.data``, an EMA, SB3's ``polyak_update``),
        call `on_parameters_changed`.

        The state is data, as in sb3-contrib's ``RecurrentPPO.predict``, whose LSTM state
        stays as the weights that computed it left it: after a weight change, the memory
        passed in keeps its layer inputs and the keys and values computed from them with the
        old weights, and only the new step is computed with the new weights. To act from the
        memory as the new weights would have computed its keys and values, pass
        ``policy.backbone.refresh_state(state)`` (what the learners do at each rollout start).
        """
        if self.training:
            self.set_training_mode(False)
        check_finite_observation(observation, self.observation_space)
        device = self._acting_device()
        with torch.inference_mode():
            # the observation and flags made here are inference tensors, which the compiled
            # step takes without a copy; the state is the caller's (or a fresh plain one)
            obs, vectorized = self._observation_tensor(observation, device)
            n_envs = next(iter(obs.values())).shape[0] if isinstance(obs, dict) else obs.shape[0]
            starts = self._episode_start_tensor(episode_start, n_envs, device)
        memory = self._predict_state(state, n_envs)
        with torch.inference_mode():
            actions, new_state = self._predicted_actions(obs, memory, starts, deterministic)
        # kept past nn.Module's __setattr__ (which checks parameters, buffers and modules)
        self.__dict__["_last_predicted_state"] = new_state
        actions_np = actions.cpu().numpy().reshape((-1, *self._action_shape()))
        if isinstance(self.action_space, spaces.Box):
            if self.squash_output:
                actions_np = self.unscale_action(actions_np)
            else:
                actions_np = np.clip(actions_np, self.action_space.low, self.action_space.high)
        if not vectorized:
            actions_np = actions_np.squeeze(axis=0)
        return actions_np, new_state

    def _action_shape(self) -> tuple[int, ...]:
        """The action space's shape (gymnasium allows None; every space SB3 acts in has one)."""
        shape = self.action_space.shape
        assert shape is not None
        return shape

    def _acting_device(self) -> torch.device:
        """The policy's device: that of the actor head's weight (every module of a policy is
        on one device), without SB3's ``device`` property's walk over the parameters."""
        weight = getattr(self.action_net, "weight", None)
        return weight.device if isinstance(weight, torch.Tensor) else self.device

    def _observation_tensor(
        self, observation: Any, device: torch.device
    ) -> tuple[PyTorchObs, bool]:
        """SB3's ``obs_to_tensor``; a batch (B, *shape) of a non-image Box space becomes a
        tensor directly (no copy, no transposition check: nothing to transpose)."""
        space = self.observation_space
        if (
            isinstance(observation, np.ndarray)
            and isinstance(space, spaces.Box)
            and observation.shape[1:] == space.shape
            and not is_image_space(space)
        ):
            return torch.as_tensor(observation, device=device), True
        return self.obs_to_tensor(observation)

    def _predict_state(self, state: Any, n_envs: int) -> Any:
        """The memory ``predict`` steps from: a fresh one for ``state=None``; the state the
        last call returned as it is (only its batch size checked); anything else checked
        field by field against an empty state (`txrl.nn.state.as_state`)."""
        if state is None:
            return self.initial_state(n_envs)
        last: Any = getattr(self, "_last_predicted_state", None)  # none before the first call
        if state is last:
            held = state[0].shape[0]
            if held != n_envs:
                raise ValueError(
                    f"state holds {held} envs but the observation batch has {n_envs}: pass "
                    "the state returned for the same number of observations"
                )
            return state
        return as_state(self._state_template(n_envs), state, self.device)

    def _episode_start_tensor(
        self, episode_start: Any, n_envs: int, device: torch.device
    ) -> torch.Tensor:
        """``episode_start`` as a (B,) bool tensor, all False when None; any other number of
        flags than observations is a ValueError naming both."""
        if episode_start is None:
            return torch.zeros(n_envs, dtype=torch.bool, device=device)
        flags = np.asarray(episode_start)
        if flags.size != n_envs:
            raise ValueError(
                f"episode_start has {flags.size} entries (shape {flags.shape}) but the "
                f"observation batch has {n_envs}: pass one flag per observation"
            )
        return torch.as_tensor(flags.reshape(n_envs), device=device).bool()

    def _state_template(self, n_envs: int) -> Any:
        """An empty state of ``n_envs`` envs, kept to check the states given to ``predict``."""
        cached = getattr(self, "_template", None)
        if cached is None or cached[0] != n_envs:
            cached = self._template = (n_envs, self.initial_state(n_envs))
        return cached[1]


def check_finite_observation(observation: Any, space: spaces.Space) -> None:
    """One ValueError naming the envs whose observation holds a NaN or an infinity: the
    policy would act on it (a NaN makes the action probabilities NaN and sampling fail with
    no word of the observation). Per call it costs one sum of each floating array (a NaN or
    an infinity makes the sum non-finite); only then is the array checked element by
    element, so a sum that overflowed is no error. Integer observations are skipped."""
    items = observation.items() if isinstance(observation, dict) else [(None, observation)]
    for key, value in items:
        array = np.asarray(value)
        if array.dtype.kind != "f" or math.isfinite(array.sum()):
            continue
        finite = np.isfinite(array)
        if finite.all():
            continue
        sub = space.spaces[key] if isinstance(space, spaces.Dict) and key is not None else space
        shape = sub.shape or ()
        batched = array.ndim > len(shape)
        per_env = finite.reshape(array.shape[0] if batched else 1, -1).all(axis=1)  # (B,)
        envs = ", ".join(str(i) for i in np.flatnonzero(~per_env))
        where = "" if key is None else f" at key {key!r}"
        raise ValueError(
            f"predict got a non-finite observation (NaN or inf) for env {envs}{where}: the "
            "policy cannot act on it; check the env (or the wrapper that computes its "
            "observations), e.g. by training with check_finite='raise'"
        )
