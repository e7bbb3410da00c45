"""Shared checks for the memory-task tests."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

# Warnings that are expected, and only those: anything else fails the test.
WRAPPED_ENV = r"is different from the unwrapped version"
SMALL_IMAGE = r"minimal resolution for an image is 36x36"
INFINITE_BOX = r"Box observation space (maximum|minimum) value is -?infinity"


def run_env_checkers(
    env: gym.Env, *, allowed: Iterable[str] = (), gym_env: gym.Env | None = None
) -> None:
    """Run Gymnasium's and SB3's ``check_env``; fail on errors and on unexpected warnings.

    ``gym_env`` is what Gymnasium's checker gets (default ``env``): Gymnasium recommends the
    unwrapped env, SB3 should see the env as users make it.
    """
    patterns = [re.compile(p) for p in allowed]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gym_check_env(env if gym_env is None else gym_env, skip_render_check=True)
        sb3_check_env(env, warn=True)
    unexpected = [
        str(w.message) for w in caught if not any(p.search(str(w.message)) for p in patterns)
    ]
    assert not unexpected, unexpected


def rollout(
    env: gym.Env, policy: Callable[[Any], Any], *, seed: int, max_steps: int = 100_000
) -> tuple[list[Any], list[float], dict[str, Any], bool]:
    """Run one episode; return (observations, rewards, final info, terminated)."""
    obs, _ = env.reset(seed=seed)
    observations, rewards = [obs], []
    for _ in range(max_steps):
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        observations.append(obs)
        rewards.append(float(reward))
        if terminated or truncated:
            return observations, rewards, info, terminated
    raise AssertionError(f"episode did not end within {max_steps} steps")


def same_trajectory(env: gym.Env, seed: int, n_steps: int) -> bool:
    """Two runs from ``reset(seed=seed)`` with the same action sequence agree exactly."""
    env.action_space.seed(seed)
    actions = [env.action_space.sample() for _ in range(n_steps)]

    def parts(obs: Any) -> list[Any]:  # a Dict observation compares key by key
        return [obs[k] for k in sorted(obs)] if isinstance(obs, dict) else [obs]

    def run() -> list[Any]:
        out: list[Any] = parts(env.reset(seed=seed)[0])
        for a in actions:
            obs, reward, terminated, truncated, _ = env.step(a)
            out += [*parts(obs), float(reward), terminated, truncated]
            if terminated or truncated:
                out += parts(env.reset()[0])
        return out

    first, second = run(), run()
    return len(first) == len(second) and all(
        np.array_equal(a, b) for a, b in zip(first, second, strict=True)
    )


def obs_key(obs: Any) -> Hashable:
    return tuple(np.asarray(obs).ravel().tolist())


def best_memoryless_success(
    env: gym.Env, episode_options: list[dict[str, Any]], *, seed: int = 0
) -> tuple[float, int]:
    """Exhaustive search over deterministic memoryless policies (observation -> action).

    ``env`` must be deterministic given ``reset(seed=seed, options=o)``. Each of the
    ``episode_options`` is one equally likely episode (e.g. each cue). Policies are grown
    lazily: an action is chosen for an observation only once some episode reaches it, so
    every distinct behaviour is visited once. Returns (best mean success, policies tried).
    """
    n_actions = int(env.action_space.n)  # type: ignore[attr-defined]
    best, tried = 0.0, 0
    stack: list[dict[Hashable, int]] = [{}]
    while stack:
        policy = stack.pop()
        successes, missing = 0, None
        for options in episode_options:
            obs, _ = env.reset(seed=seed, options=options)
            while True:
                key = obs_key(obs)
                if key not in policy:
                    missing = key
                    break
                obs, _, terminated, truncated, info = env.step(policy[key])
                if terminated or truncated:
                    successes += bool(info["is_success"])
                    break
            if missing is not None:
                break
        if missing is not None:
            stack.extend({**policy, missing: a} for a in range(n_actions))
            continue
        tried += 1
        best = max(best, successes / len(episode_options))
    return best, tried
