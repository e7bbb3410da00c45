"""Greedy success of a MiniGrid-MemoryS9 checkpoint from each start cell of the hallway.

    python results/minigrid_memory_s9/archive/diagnostics/success_by_start_cell.py CHECKPOINT.zip

The agent starts at x = 1..6 of the middle row facing east; only from x = 1 is the start
room's object in view at reset. A policy that ignores its memory sits near 0.5 everywhere;
one that reads the object only when it happens to see it does better from x = 1 alone.
40 episodes per cell, fixed seeds, deterministic actions through ``model.predict``.
"""

from __future__ import annotations

import json
import sys

import gymnasium as gym
import numpy as np
import torch

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO


def success_from(model: MemoryPPO, env: gym.Env, start_x: int, episodes: int) -> float:
    successes = []
    for episode in range(episodes):
        env.reset(seed=1000 * start_x + episode)
        grid = env.unwrapped
        grid.agent_pos = np.array((start_x, grid.height // 2))  # same heading (east)
        obs = grid.gen_obs()["image"]
        state, start, done, info = None, np.array([True]), False, {}
        while not done:
            action, state = model.predict(
                obs[None], state=state, episode_start=start, deterministic=True
            )
            start = np.array([False])
            obs, _, terminated, truncated, info = env.step(int(action[0]))
            done = terminated or truncated
        successes.append(bool(info.get("is_success", False)))
    return float(np.mean(successes))


if __name__ == "__main__":
    torch.set_num_threads(1)
    model = MemoryPPO.load(sys.argv[1], device="cpu")
    env = gym.make("txrl/MiniGrid-MemoryS9-v0", actions=["left", "right", "forward"])
    print(json.dumps({x: success_from(model, env, x, 40) for x in range(1, 7)}))
