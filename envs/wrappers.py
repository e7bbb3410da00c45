"""Small wrappers used by the txrl adapters of third-party memory tasks.

* `EpisodeSuccessInfo` adds ``info["is_success"]`` (the key Stable-Baselines3 logs as
  ``success_rate``) on the last step of an episode, under a named success rule.
* `FreshInfo` gives every ``reset``/``step`` its own info arrays; some POPGym tasks
  (Morad et al. 2023) return the same mutable array on every call, which Gymnasium 1.x's
  ``check_env`` rejects and which silently rewrites infos a caller has stored.
* `DiscreteActionSubset` keeps some actions of a ``Discrete`` space (MiniGrid's Memory
  tasks need only 3 of its 7).

All of them inherit `gymnasium.utils.RecordConstructorArgs`, so ``env.spec`` records them
and ``gymnasium.make(env.spec)`` can rebuild the env.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np


def _positive_reward_on_termination(
    env: gym.Env, action: Any, reward: SupportsFloat, terminated: bool, truncated: bool
) -> bool:
    # MiniGrid Memory pays 1 - 0.9 * t / max_steps > 0 for the matching object and exactly 0
    # for the other one; both terminate, a timeout truncates.
    return terminated and float(reward) > 0.0


def _terminated(
    env: gym.Env, action: Any, reward: SupportsFloat, terminated: bool, truncated: bool
) -> bool:
    # POPGym Battleship / Concentration terminate only when the board is solved (all ships
    # sunk, all pairs face up); running out of moves truncates.
    return terminated


def _survived(
    env: gym.Env, action: Any, reward: SupportsFloat, terminated: bool, truncated: bool
) -> bool:
    # POPGym's partially observable CartPoles terminate when the pole falls and truncate
    # after max_episode_length steps ("agent beat episode" in the POPGym source).
    return truncated and not terminated


def _minesweeper_cleared(
    env: gym.Env, action: Any, reward: SupportsFloat, terminated: bool, truncated: bool
) -> bool:
    # POPGym MineSweeper terminates on a mine *or* once no clear square is left hidden; only
    # the latter is a win. HiddenSquare.CLEAR == 0 in popgym.envs.minesweeper.
    if not terminated:
        return False
    return not bool(np.any(env.unwrapped.hidden_grid == 0))  # type: ignore[attr-defined]


SuccessRule = Callable[[gym.Env, Any, SupportsFloat, bool, bool], bool]

SUCCESS_RULES: dict[str, SuccessRule] = {
    "positive_reward_on_termination": _positive_reward_on_termination,
    "terminated": _terminated,
    "survived": _survived,
    "minesweeper_cleared": _minesweeper_cleared,
}


class EpisodeSuccessInfo(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Set ``info["is_success"]`` on the last step of each episode (terminated or truncated).

    Args:
        env: the env to wrap; the rule sees its raw ``(action, reward, terminated,
            truncated)``, so wrap before anything that rewrites rewards.
        rule: a key of `SUCCESS_RULES`. Rules are named rather than passed as
            callables so that the wrapper's recorded kwargs stay plain, picklable data.
    """

    def __init__(self, env: gym.Env, rule: str) -> None:
        if rule not in SUCCESS_RULES:
            raise ValueError(f"rule must be one of {sorted(SUCCESS_RULES)}, got {rule!r}")
        gym.utils.RecordConstructorArgs.__init__(self, rule=rule)
        gym.Wrapper.__init__(self, env)
        self._rule = SUCCESS_RULES[rule]

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info = dict(info)
            info["is_success"] = self._rule(self.env, action, reward, terminated, truncated)
        return obs, reward, terminated, truncated, info


def _fresh(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in info.items()}


class FreshInfo(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Return a new info dict, with copies of its numpy arrays, from every reset and step."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, _fresh(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, _fresh(info)


class DiscreteActionSubset(gym.ActionWrapper, gym.utils.RecordConstructorArgs):
    """Expose only ``actions`` of a ``Discrete`` action space, as ``Discrete(len(actions))``.

    Action ``i`` of the wrapped env is the inner env's ``actions[i]``. The agent explores
    only the moves that matter (MiniGrid's Memory tasks need left, right and forward; its
    pickup, drop, toggle and done are no-ops there), a choice of the task's recipe.

    Args:
        env: an env with a ``Discrete`` action space.
        actions: distinct inner actions to keep, in the order the agent numbers them.
    """

    def __init__(self, env: gym.Env, actions: tuple[int, ...] | list[int]) -> None:
        space = env.action_space
        if not isinstance(space, gym.spaces.Discrete):
            raise ValueError(f"DiscreteActionSubset needs a Discrete action space, got {space}")
        valid = range(int(space.start), int(space.start + space.n))
        kept = [int(a) for a in actions]
        if not kept or len(set(kept)) != len(kept) or any(a not in valid for a in kept):
            raise ValueError(
                f"actions must be distinct actions of {space} (each in {valid.start}.."
                f"{valid.stop - 1}), at least one, got {list(actions)!r}"
            )
        gym.utils.RecordConstructorArgs.__init__(self, actions=tuple(kept))
        gym.ActionWrapper.__init__(self, env)
        self.kept = tuple(kept)
        self.action_space = gym.spaces.Discrete(len(kept))

    def action(self, action: Any) -> int:
        return self.kept[int(action)]


def _action_size(space: gym.Space) -> int:
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, gym.spaces.Box | gym.spaces.MultiBinary):
        return int(np.prod(space.shape))
    raise ValueError(
        f"PreviousActionReward supports Discrete, MultiDiscrete, MultiBinary and Box actions, got {space}"
    )


class PreviousActionReward(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Adds the previous action and reward to each observation, as the GTrXL and V-MPO agents
    of Parisotto et al. (2019) and Song et al. (2019) receive them.

    Flat ``Box`` observations are extended to ``[obs, a_{t-1}, r_{t-1}]``; any other observation
    space becomes a ``Dict`` with ``observation`` (or the original Dict's keys),
    ``previous_action`` and ``previous_reward``. Discrete actions are one-hot encoded,
    MultiDiscrete ones as concatenated one-hots, Box and MultiBinary ones as they are. Both are
    zero on the first step of an episode.

    The information is part of the observation, so acting, training, ``predict`` and
    ``evaluate_policy`` all see it the same way; evaluate a model trained with this wrapper on
    an env wrapped the same way.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.ObservationWrapper.__init__(self, env)
        self._action_size = _action_size(env.action_space)
        inner = env.observation_space
        self._flat = isinstance(inner, gym.spaces.Box) and len(inner.shape) == 1
        action_box = gym.spaces.Box(-np.inf, np.inf, (self._action_size,), dtype=np.float32)
        reward_box = gym.spaces.Box(-np.inf, np.inf, (1,), dtype=np.float32)
        if self._flat:
            low = np.concatenate([inner.low.astype(np.float32), action_box.low, reward_box.low])
            high = np.concatenate([inner.high.astype(np.float32), action_box.high, reward_box.high])
            self.observation_space = gym.spaces.Box(low, high, dtype=np.float32)
        else:
            parts = (
                dict(inner.spaces) if isinstance(inner, gym.spaces.Dict) else {"observation": inner}
            )
            self.observation_space = gym.spaces.Dict(
                {**parts, "previous_action": action_box, "previous_reward": reward_box}
            )
        self._previous_action = np.zeros(self._action_size, dtype=np.float32)
        self._previous_reward = np.zeros(1, dtype=np.float32)

    def _encode(self, action: Any) -> np.ndarray:
        space = self.env.action_space
        encoded = np.zeros(self._action_size, dtype=np.float32)
        if isinstance(space, gym.spaces.Discrete):
            encoded[int(action) - int(space.start)] = 1.0
        elif isinstance(space, gym.spaces.MultiDiscrete):
            offsets = np.concatenate([[0], np.cumsum(space.nvec.ravel())[:-1]])
            starts = np.asarray(space.start).ravel() if hasattr(space, "start") else 0
            encoded[offsets + (np.asarray(action).ravel() - starts)] = 1.0
        else:
            encoded[:] = np.asarray(action, dtype=np.float32).ravel()
        return encoded

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self._previous_action = np.zeros(self._action_size, dtype=np.float32)
        self._previous_reward = np.zeros(1, dtype=np.float32)
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._previous_action = self._encode(action)
        self._previous_reward = np.array([float(reward)], dtype=np.float32)
        return self.observation(obs), reward, terminated, truncated, info

    def observation(self, observation: Any) -> Any:
        if self._flat:
            return np.concatenate(
                [
                    np.asarray(observation, dtype=np.float32),
                    self._previous_action,
                    self._previous_reward,
                ]
            )
        parts = dict(observation) if isinstance(observation, dict) else {"observation": observation}
        return {
            **parts,
            "previous_action": self._previous_action.copy(),
            "previous_reward": self._previous_reward.copy(),
        }
