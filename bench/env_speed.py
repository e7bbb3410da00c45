"""Single-thread steps/s of the txrl memory tasks (a measurement script, not a test).

Each task is stepped with pre-sampled uniform random actions (so the policy costs nothing),
resetting whenever an episode ends; resets count towards the time. Three env stacks:

* ``raw``:  the env object itself (``gym.make(...).unwrapped``), no wrappers;
* ``make``: ``gym.make(id)`` as registered, i.e. what users get;
* ``full``: ``gym.make`` with Gymnasium's default stack forced on (OrderEnforcing and a
  TimeLimit wrapper), to show what the lean registration saves.

Examples::

    python bench/env_speed.py
    python bench/env_speed.py --tasks txrl/TMaze-v0 --length 100 --steps 500000 --modes make
    python bench/env_speed.py --tasks txrl/MiniGrid-MemoryS7-v0 txrl/popgym-RepeatFirstEasy-v0
    python bench/env_speed.py --tasks txrl/MiniGrid-MemoryS9-v0 --env-kwarg cache_views=false
    python bench/env_speed.py --suite memorygym --modes raw make --steps 20000
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

import gymnasium as gym
import yaml

import txrl.envs

MODES = ("raw", "make", "full")
#: Named groups of ids for ``--suite``; Memory Gym: the Grid and full versions (the Endless
#: ones draw the same scenes) and only when memory-gym is installed, like all its ids.
SUITES: dict[str, tuple[str, ...]] = {
    "txrl": txrl.envs.TXRL_TASK_IDS,
    "memorygym": tuple(i for i in txrl.envs.MEMORY_GYM_IDS if "Endless-" not in i),
}


def task_kwargs(env_id: str, args: argparse.Namespace) -> dict[str, Any]:
    if env_id in (txrl.envs.TMAZE_ID, txrl.envs.TMAZE_PASSIVE_ID):
        return {"length": args.length}
    if env_id == txrl.envs.DELAYED_RECALL_ID:
        return {"n_symbols": args.n_symbols, "k": args.k, "delay": args.delay}
    return {}


def build(env_id: str, mode: str, kwargs: dict[str, Any]) -> gym.Env:
    if mode == "raw":
        return gym.make(env_id, **kwargs).unwrapped
    if mode == "make":
        return gym.make(env_id, **kwargs)
    probe = gym.make(env_id, **kwargs).unwrapped
    # The tasks truncate themselves; a TimeLimit at the same horizon only adds its overhead.
    horizon = getattr(probe, "max_steps", None) or getattr(probe, "episode_length", None)
    spec = dataclasses.replace(
        gym.spec(env_id), order_enforce=True, max_episode_steps=horizon or 10**9
    )
    return gym.make(spec, **kwargs)


def measure(env: gym.Env, steps: int, seed: int) -> tuple[float, int]:
    """Return (steps per second, episodes finished) for ``steps`` random-action steps."""
    env.action_space.seed(seed)
    actions = [env.action_space.sample() for _ in range(min(steps, 65536))]
    n_actions = len(actions)
    step, reset = env.step, env.reset
    reset(seed=seed)
    episodes = 0
    start = time.perf_counter()
    for i in range(steps):
        _, _, terminated, truncated, _ = step(actions[i % n_actions])
        if terminated or truncated:
            episodes += 1
            reset()
    elapsed = time.perf_counter() - start
    return steps / elapsed, episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        help="env ids to time (default: the ids of --suite)",
    )
    parser.add_argument(
        "--suite",
        choices=sorted(SUITES),
        default="txrl",
        help="group of ids to time when --tasks is not given (default: the txrl tasks)",
    )
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--steps", type=int, default=200_000, help="steps per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="report the best of N runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--length", type=int, default=50, help="T-maze corridor length")
    parser.add_argument("--n-symbols", type=int, default=4, help="DelayedRecall vocabulary")
    parser.add_argument("--k", type=int, default=3, help="DelayedRecall symbols to recall")
    parser.add_argument("--delay", type=int, default=50, help="DelayedRecall delay")
    parser.add_argument(
        "--env-kwarg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another keyword for every task (a YAML value), e.g. cache_views=false",
    )
    args = parser.parse_args()
    extra = {}
    for text in args.env_kwarg:
        key, sep, value = text.partition("=")
        if not sep or not key:
            parser.error(f"--env-kwarg takes KEY=VALUE, got {text!r}")
        extra[key] = yaml.safe_load(value)

    print(f"{'task':44s} {'mode':5s} {'steps/s':>12s} {'episodes':>9s}")
    for env_id in args.tasks or SUITES[args.suite]:
        kwargs = task_kwargs(env_id, args) | extra
        for mode in args.modes:
            env = build(env_id, mode, kwargs)
            best, episodes = 0.0, 0
            for r in range(args.repeats):
                rate, episodes = measure(env, args.steps, args.seed + r)
                best = max(best, rate)
            env.close()
            print(f"{env_id:44s} {mode:5s} {best:12,.0f} {episodes:9d}", flush=True)


if __name__ == "__main__":
    main()
