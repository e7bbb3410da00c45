"""VMPO with its constructor defaults on a passive T-maze: success every 10k env steps.

Only ``n_steps=128, batch_size=256`` are set (8 envs, default GTrXL policy); keyword
arguments given as JSON override the learner's defaults, ``env`` the T-maze's kwargs::

    python results/vmpo_defaults/probe.py '{"env": {"length": 10}, "seed": 1}'
    python results/vmpo_defaults/probe.py '{"env": {"length": 10}, "learning_rate": 1e-4, "n_epochs": 1}'

Each line (every ``every`` env steps, 10k unless set; ``budget`` 100k unless set): env
steps, greedy success over 100 episodes, the multipliers and the KL of the last update, and
env steps/s.
"""

from __future__ import annotations

import json
import sys
import time

import gymnasium as gym
import torch
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import VMPO


def passive_tmaze(n_envs: int, seed: int, **kwargs: object) -> DummyVecEnv:
    env = DummyVecEnv([lambda: Monitor(gym.make("txrl/TMazePassive-v0", **kwargs))] * n_envs)
    env.seed(seed)
    return env


def success_rate(model: VMPO, env_kwargs: dict) -> float:
    outcomes: list[bool] = []

    def record(local: dict, _: dict) -> None:
        if local["done"]:
            outcomes.append(bool(local["info"]["is_success"]))

    env = passive_tmaze(4, 123, **env_kwargs)
    evaluate_policy(model, env, n_eval_episodes=100, deterministic=True, callback=record)
    return sum(outcomes) / len(outcomes)


def main(argv: list[str] | None = None) -> None:
    torch.set_num_threads(1)
    argv = sys.argv[1:] if argv is None else argv
    overrides = json.loads(argv[0]) if argv else {}
    env_kwargs = overrides.pop("env", {"length": 10})
    budget = overrides.pop("budget", 100_000)
    seed = overrides.pop("seed", 0)
    every = overrides.pop("every", 10_000)
    model = VMPO(
        "MlpGTrXLPolicy",
        passive_tmaze(8, seed, **env_kwargs),
        **{"n_steps": 128, "batch_size": 256, "seed": seed, **overrides},
    )
    start = time.time()
    while model.num_timesteps < budget:
        model.learn(every, reset_num_timesteps=False)
        logged = model.logger.name_to_value
        stats = {k: round(float(logged[k]), 4) for k in ("train/eta", "train/alpha", "train/kl")}
        rate = model.num_timesteps / (time.time() - start)
        print(model.num_timesteps, success_rate(model, env_kwargs), stats, f"{rate:.0f} steps/s")


if __name__ == "__main__":
    main()
