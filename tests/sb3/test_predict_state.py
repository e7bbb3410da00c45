"""``predict``'s state: the backbone's own tensors passed back cheaply, arrays still accepted."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO
from txrl.nn.state import state_to_numpy


def small_model(n_layers: int) -> tuple[MemoryPPO, DummyVecEnv]:
    """A tiny GTrXL MemoryPPO (M = 3) on 2 passive T-mazes of length 4."""
    env = DummyVecEnv([lambda: Monitor(gym.make("txrl/TMazePassive-v0", length=4))] * 2)
    env.seed(0)
    kwargs = {"d_model": 16, "n_layers": n_layers, "n_heads": 2, "memory_length": 3}
    model = MemoryPPO(
        "MlpGTrXLPolicy",
        env,
        n_steps=8,
        batch_size=16,
        segment_length=4,
        policy_kwargs=kwargs,
        seed=0,
    )
    return model, env


def test_tensor_state_and_array_state_give_the_same_actions() -> None:
    model, env = small_model(n_layers=2)
    obs = env.reset()
    starts = np.ones(2, dtype=bool)
    live = None  # the state predict returns, passed back as it is
    for _ in range(7):  # past M, so the memory's ring wraps
        saved = None if live is None else state_to_numpy(live)  # what a user may store
        act_live, live = model.predict(obs, state=live, episode_start=starts, deterministic=True)
        if saved is not None:
            act_saved, from_arrays = model.predict(
                obs, state=saved, episode_start=starts, deterministic=True
            )
            assert np.array_equal(act_live, act_saved)
            for a, b in zip(live, from_arrays, strict=True):
                assert torch.equal(a, b)
        assert all(isinstance(field, torch.Tensor) for field in live)
        obs, _, starts, _ = env.step(act_live)


def test_a_state_or_episode_start_for_another_batch_size_is_named() -> None:
    model, env = small_model(n_layers=1)
    obs = env.reset()
    _, live = model.predict(obs, episode_start=np.ones(2, dtype=bool))
    three = np.concatenate((obs, obs[:1]))  # a batch of 3 observations
    with pytest.raises(ValueError, match="state holds 2 envs but the observation batch has 3"):
        model.predict(three, state=live, episode_start=np.zeros(3, dtype=bool))
    with pytest.raises(ValueError, match="holds 2 envs but the observation batch has 3"):
        model.predict(three, state=type(live)(*live), episode_start=np.zeros(3, dtype=bool))
    with pytest.raises(ValueError, match=r"episode_start has 3 entries \(shape \(3,\)\) but"):
        model.predict(obs, state=live, episode_start=np.zeros(3, dtype=bool))
    # the live state still works after the refused calls
    model.predict(obs, state=live, episode_start=np.zeros(2, dtype=bool))
