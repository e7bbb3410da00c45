"""MemoryPPO with GTrXL solves a T-maze that a memoryless PPO cannot (CI-sized budgets)."""

from __future__ import annotations

import gymnasium as gym
from stable_baselines3 import PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO

LENGTH = 3  # corridor length: the cue must be held for 4 steps
BUDGET = 20_000
HYPER = {"n_steps": 32, "batch_size": 64, "n_epochs": 4, "learning_rate": 3e-3, "seed": 0}


def tmaze(n_envs: int, seed: int) -> DummyVecEnv:
    env = DummyVecEnv([lambda: Monitor(gym.make("txrl/TMazePassive-v0", length=LENGTH))] * n_envs)
    env.seed(seed)
    return env


def success_rate(model: BaseAlgorithm, episodes: int = 100) -> float:
    outcomes: list[bool] = []

    def record(local: dict, _: dict) -> None:
        if local["done"]:
            outcomes.append(bool(local["info"]["is_success"]))

    evaluate_policy(
        model, tmaze(4, seed=123), n_eval_episodes=episodes, deterministic=True, callback=record
    )
    return sum(outcomes) / len(outcomes)


def test_gtrxl_solves_the_tmaze() -> None:
    policy_kwargs = {
        "d_model": 32,
        "n_layers": 1,
        "n_heads": 2,
        "memory_length": 8,
        "net_arch": [32],
    }
    model = MemoryPPO(
        "MlpGTrXLPolicy", tmaze(8, seed=0), segment_length=16, policy_kwargs=policy_kwargs, **HYPER
    )
    model.learn(BUDGET)
    assert success_rate(model) >= 0.9


def test_memoryless_ppo_stays_at_chance() -> None:
    model = PPO("MlpPolicy", tmaze(8, seed=0), policy_kwargs={"net_arch": [32]}, **HYPER)
    model.learn(BUDGET)
    assert success_rate(model) <= 0.65
