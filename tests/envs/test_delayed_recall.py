from __future__ import annotations

import itertools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import txrl.envs
from txrl.envs.delayed_recall import DelayedRecallEnv

from ._helpers import best_memoryless_success, rollout, run_env_checkers, same_trajectory

ID = txrl.envs.DELAYED_RECALL_ID


class Recaller:
    """The memory policy: store the shown symbols, replay them in the recall phase."""

    def __init__(self, n_symbols: int) -> None:
        self.n = n_symbols
        self.seen: list[int] = []
        self.recalled = 0

    def __call__(self, obs: np.ndarray) -> int:
        n = self.n
        show, _, recall = obs[2 * n :]
        if show:
            self.seen.append(int(np.argmax(obs[:n])))
        if recall:
            self.recalled += 1
            return self.seen[self.recalled - 1]
        return 0


@pytest.mark.parametrize(("n_symbols", "k", "delay"), [(2, 1, 0), (4, 3, 10), (8, 5, 200)])
def test_recalling_policy_always_succeeds(n_symbols: int, k: int, delay: int) -> None:
    env = gym.make(ID, n_symbols=n_symbols, k=k, delay=delay)
    for seed in range(100):
        _, rewards, info, terminated = rollout(env, Recaller(n_symbols), seed=seed)
        assert terminated and info == {"is_success": True, "n_correct": k}
        assert len(rewards) == 2 * k + delay
        assert sum(rewards) == pytest.approx(1.0)


@pytest.mark.parametrize(("n_symbols", "k", "delay"), [(2, 2, 1), (3, 2, 1), (2, 3, 0)])
def test_best_memoryless_policy_is_at_chance(n_symbols: int, k: int, delay: int) -> None:
    env = DelayedRecallEnv(n_symbols=n_symbols, k=k, delay=delay)
    sequences = [{"symbols": list(s)} for s in itertools.product(range(n_symbols), repeat=k)]
    best, tried = best_memoryless_success(env, sequences)
    assert best == pytest.approx(n_symbols**-k) and tried > 1
    # Control: the same search solves the task when only one sequence can occur.
    assert best_memoryless_success(env, sequences[-1:])[0] == 1.0


def test_memoryless_symbol_accuracy_is_chance() -> None:
    # Whatever a memoryless policy answers, each recalled symbol is right 1/n of the time.
    env = gym.make(ID, n_symbols=4, k=3, delay=5)
    correct = 0
    for seed in range(500):
        _, _, info, _ = rollout(env, lambda obs: 2, seed=seed)
        correct += info["n_correct"]
    assert abs(correct / (500 * 3) - 0.25) < 0.04


def test_phases_and_observation_layout() -> None:
    n, k, delay = 3, 2, 2
    env = DelayedRecallEnv(n_symbols=n, k=k, delay=delay)
    obs, _ = env.reset(seed=4, options={"symbols": [2, 0]})
    assert obs.dtype == np.float32 and obs.shape == (2 * n + 3,) and obs in env.observation_space
    assert obs.tolist() == [0, 0, 1, 0, 0, 0, 1, 0, 0]
    obs, reward, *_ = env.step(2)  # actions before the recall phase earn nothing
    assert obs.tolist() == [1, 0, 0, 0, 0, 0, 1, 0, 0] and reward == 0.0
    for _ in range(delay):
        obs, reward, *_ = env.step(0)
        assert obs[:n].sum() == 0 and obs[n : 2 * n].sum() == 1 and obs[2 * n + 1] == 1
        assert reward == 0.0
    obs, reward, *_ = env.step(0)
    assert obs.tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 1] and reward == 0.0
    obs, reward, terminated, _, info = env.step(2)  # first recall: right
    assert reward == 0.5 and not terminated and info == {}
    obs, reward, terminated, truncated, info = env.step(1)  # second recall: wrong
    assert reward == 0.0 and terminated and not truncated
    assert info == {"is_success": False, "n_correct": 1}


def test_distractors_can_be_switched_off_and_vary_with_the_seed() -> None:
    def delay_channel(env: gym.Env, seed: int) -> list[int]:
        env.reset(seed=seed)  # t = 0 shows the symbol, t = 1..8 are the delay
        out = []
        for _ in range(8):
            obs, *_ = env.step(0)
            out.append(int(np.argmax(obs[4:8])) if obs[4:8].any() else -1)
        return out

    on = DelayedRecallEnv(n_symbols=4, k=1, delay=8)
    off = DelayedRecallEnv(n_symbols=4, k=1, delay=8, distractors=False)
    assert delay_channel(off, 0) == [-1] * 8
    assert delay_channel(on, 0) != delay_channel(on, 1)
    assert set(delay_channel(on, 0) + delay_channel(on, 1)) <= {0, 1, 2, 3}


def test_seeding_is_reproducible() -> None:
    env = gym.make(ID, n_symbols=5, k=3, delay=7)
    assert same_trajectory(env, seed=11, n_steps=100)
    first = [env.reset(seed=s)[0].tolist() for s in range(20)]
    assert first == [env.reset(seed=s)[0].tolist() for s in range(20)]
    assert len({tuple(o) for o in first}) > 1


def test_env_checkers_pass() -> None:
    env = gym.make(ID, n_symbols=6, k=4, delay=12)
    run_env_checkers(env, gym_env=env.unwrapped)


BAD_KWARGS: list[tuple[dict[str, Any], str]] = [
    ({"k": 0}, "k"),
    ({"k": -2}, "k"),
    ({"delay": -1}, "delay"),
    ({"delay": 1.5}, "delay"),
    ({"n_symbols": 1}, "n_symbols"),
    ({"n_symbols": "4"}, "n_symbols"),
    ({"distractors": "yes"}, "distractors"),
]


@pytest.mark.parametrize(("kwargs", "name"), BAD_KWARGS)
def test_bad_kwargs_raise_a_clear_value_error(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name} must be") as excinfo:
        gym.make(ID, **kwargs)
    assert repr(kwargs[name]) in str(excinfo.value)


def test_bad_symbols_option_and_action_raise() -> None:
    env = DelayedRecallEnv(n_symbols=3, k=2, delay=0)
    for bad in ([0, 3], [0], [-1, 0], [0.5, 1.0]):
        with pytest.raises(
            ValueError, match=r'options\["symbols"\] must be 2 integers in \[0, 3\)'
        ):
            env.reset(options={"symbols": bad})
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action must be in \[0, 3\)"):
        env.step(3)
