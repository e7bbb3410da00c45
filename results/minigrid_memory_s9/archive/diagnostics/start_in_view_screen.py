"""How fast does a setting learn to use the object when it is always in view at the start?

MiniGrid-MemoryS9 with every episode started at x = 1, facing east, where the start room's
object is in view at reset (one start in six in the real task), 3 moves. The recipe's model
and PPO settings unless an option changes them; greedy success over 40 episodes every 12.8k
env steps (``--every``) until the first evaluation at >= 0.9 or the budget. One JSON line per run:

    python results/minigrid_memory_s9/archive/diagnostics/start_in_view_screen.py --seed 0 --lr 2e-3 --tag lr2e-3

A fast look at what makes retrieval and comparison start (the real task needs them and
exploration too); `start_in_view_screen.jsonl` holds the runs made.
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.env_util import make_vec_env
from start_in_view import StartInView  # the wrapper of the diagnostic beside this one

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO
from txrl.envs import PreviousActionReward


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ent", type=float, default=0.03)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--prevact", action="store_true", help="previous action and reward in")
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--gate-bias", type=float, default=None, help="the GRU gate's b_g")
    parser.add_argument("--vf-coef", type=float, default=0.5)
    parser.add_argument("--budget", type=int, default=150_000)
    parser.add_argument("--every", type=int, default=12_800, help="env steps between evaluations")
    parser.add_argument("--tag", default="")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    def make() -> gym.Env:
        env = StartInView(
            gym.make("txrl/MiniGrid-MemoryS9-v0", actions=["left", "right", "forward"])
        )
        return PreviousActionReward(env) if args.prevact else env

    model = MemoryPPO(
        ("MultiInput" if args.prevact else "Mlp") + "GTrXLPolicy",
        make_vec_env(make, n_envs=args.n_envs, seed=args.seed),
        n_steps=128,
        batch_size=args.batch,
        segment_length=32,
        n_epochs=args.epochs,
        vf_coef=args.vf_coef,
        learning_rate=args.lr,
        ent_coef=args.ent,
        seed=args.seed,
        policy_kwargs=dict(
            d_model=args.d_model,
            n_layers=1,
            n_heads=args.heads,
            memory_length=32,
            gate="gru",
            gate_bias=args.gate_bias,
        ),
    )
    eval_env = make_vec_env(make, n_envs=8, seed=10_000 + args.seed)
    began, curve, solved = time.time(), [], None
    while model.num_timesteps < args.budget and solved is None:
        model.learn(max(args.every, 128 * args.n_envs), reset_num_timesteps=False)
        obs, state, starts, successes = eval_env.reset(), None, np.ones(8, bool), []
        for _ in range(120):  # a greedy policy that turns in place never ends: a failure
            action, state = model.predict(
                obs, state=state, episode_start=starts, deterministic=True
            )
            obs, rewards, starts, _ = eval_env.step(action)
            successes += [float(rewards[i] > 0) for i in np.flatnonzero(starts)]
            if len(successes) >= 40:
                break
        successes = (successes + [0.0] * 40)[:40]
        curve.append((model.num_timesteps, float(np.mean(successes))))
        if curve[-1][1] >= 0.9:
            solved = model.num_timesteps
    print(
        json.dumps(
            {
                "tag": args.tag,
                "seed": args.seed,
                "solved_at": solved,
                "curve": curve,
                "secs": round(time.time() - began),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
