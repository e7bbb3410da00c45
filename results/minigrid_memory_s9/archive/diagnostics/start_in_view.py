"""Can the memory learn to use the object at all? MiniGrid-MemoryS9 with every episode started
at x = 1, where the start room's object is in view at reset (in the real task: 1 start in 6).

    python results/minigrid_memory_s9/archive/diagnostics/start_in_view.py LEARNING_RATE gtrxl|lstm

The recipe's model and PPO settings (entropy 0.01, as before tuning), 3 moves; prints the
greedy success rate over 40 episodes every 25.6k env steps, up to 204.8k.
"""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO


class StartInView(gym.Wrapper):
    """Every reset puts the agent at x = 1 (facing east), where the object is in view."""

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        grid = self.env.unwrapped
        grid.agent_pos = np.array((1, grid.height // 2))
        return grid.gen_obs()["image"], {}


def make() -> gym.Env:
    return StartInView(gym.make("txrl/MiniGrid-MemoryS9-v0", actions=["left", "right", "forward"]))


if __name__ == "__main__":
    torch.set_num_threads(1)
    learning_rate, memory = float(sys.argv[1]), sys.argv[2]
    gtrxl = dict(d_model=64, n_layers=1, n_heads=2, memory_length=32, gate="gru")
    model = MemoryPPO(
        "MlpGTrXLPolicy" if memory == "gtrxl" else "MlpLstmPolicy",
        make_vec_env(make, n_envs=8, seed=0),
        n_steps=128,
        batch_size=512,
        segment_length=32,
        n_epochs=4,
        learning_rate=learning_rate,
        ent_coef=0.01,
        seed=0,
        policy_kwargs=gtrxl if memory == "gtrxl" else dict(hidden_size=128),
    )
    eval_env = make_vec_env(make, n_envs=4, seed=100)
    for _ in range(8):
        model.learn(25_000, reset_num_timesteps=False)
        successes: list[bool] = []

        def record(local: dict, _: dict, successes: list[bool] = successes) -> None:
            if local["done"]:
                successes.append(bool(local["info"].get("is_success", False)))

        evaluate_policy(model, eval_env, n_eval_episodes=40, deterministic=True, callback=record)
        print(model.num_timesteps, np.mean(successes), flush=True)
