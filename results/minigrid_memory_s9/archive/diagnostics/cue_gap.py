"""How often does an exploring agent see the start room's object before it decides, and how
long before? MiniGrid-MemoryS9 under random policies over the three moves.

    python results/minigrid_memory_s9/archive/diagnostics/cue_gap.py

For each probability of ``forward`` (the rest split between ``left`` and ``right``), 600
episodes from the task's own random starts: the share that end at one of the two objects
(a decision), the share in which the object was in view at some step before the decision,
and the gap from the last step it was in view to the decision step, against the recipe's
memory of M = 32 steps. No network is involved.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import txrl.envs  # noqa: F401 - registers the tasks
from txrl.envs.minigrid_memory import MemoryStepsInfo

EPISODES = 600


def cue_wrapper(env: gym.Env) -> MemoryStepsInfo:
    while not isinstance(env, MemoryStepsInfo):
        env = env.env  # type: ignore[attr-defined]
    return env


def main(episodes: int = EPISODES) -> None:
    env = gym.make("txrl/MiniGrid-MemoryS9-v0", actions=["left", "right", "forward"])
    steps_info = cue_wrapper(env)
    rng = np.random.default_rng(0)
    for p_forward in (1 / 3, 0.5, 0.7, 0.9):
        probs = np.array([(1 - p_forward) / 2, (1 - p_forward) / 2, p_forward])
        decided, gaps, lengths = 0, [], []
        for _ in range(episodes):
            env.reset(seed=int(rng.integers(1 << 30)))
            grid = env.unwrapped
            last_seen = 0 if steps_info._cue_in_view(grid.gen_obs()) else None
            t, done, info = 0, False, {}
            while not done:
                _, _, terminated, truncated, info = env.step(int(rng.choice(3, p=probs)))
                t += 1
                if steps_info._cue_in_view(grid.gen_obs()):
                    last_seen = t
                done = terminated or truncated
            lengths.append(t)
            if "decision_step" in info:
                decided += 1
                if last_seen is not None:
                    gaps.append(info["decision_step"] - last_seen)
        gap = np.array(gaps)
        print(
            f"P(forward) {p_forward:.2f}: decided {decided / episodes:.2f}, object seen before "
            f"the decision {len(gap) / episodes:.2f} (within 32 steps of it "
            f"{np.sum(gap <= 32) / episodes:.2f}), gap median {np.median(gap):.0f}, "
            f"mean episode length {np.mean(lengths):.0f}"
        )


if __name__ == "__main__":
    main()
