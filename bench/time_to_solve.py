"""Wall-clock to a 0.9 success rate on the passive T-maze: MemoryPPO+GTrXL against
sb3-contrib's RecurrentPPO, corridor lengths 20 and 50, 3 seeds each.

    python bench/time_to_solve.py --out bench/results/time_to_solve.json   # the full study
    python bench/time_to_solve.py --lengths 20 --seeds 0 --budget 20000

Each run trains with one torch thread and stops at the first evaluation (every
``--eval-every`` env steps, ``--episodes`` deterministic episodes through SB3's
``evaluate_policy``) whose success rate (the env's ``info["is_success"]``) is at least 0.9.
The clock counts training only, not evaluations. The maze pays ``-1 / length`` for every
step that does not advance (``corridor_penalty``), as in ``configs/tmaze_long.yaml``. txrl gets ``--budget`` env steps per run;
RecurrentPPO gets three times as many, so "RecurrentPPO does not reach it in 3x txrl's
budget" can be read off the table. RecurrentPPO also stops once its training clock passes
``--time-factor`` (3) times txrl's on the same length and seed: past that point txrl is at
least that many times faster whatever happens later, and the study fits in an afternoon
of a 2-core machine. With ``--out FILE.json`` every finished run is written to the file
(atomically) as it lands, and running the command again keeps the runs already there.
Both learners use 8 envs; txrl the quick start's GTrXL
(1 layer, d_model 32, 2 heads, memory covering an episode's corridor), RecurrentPPO its
defaults with the same entropy bonus.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO
from txrl.files import atomic_write

TASK = "txrl/TMazePassive-v0"
TARGET = 0.9


def make_env(length: int, n_envs: int, seed: int) -> DummyVecEnv:
    # A random walk rarely covers 20 cells and never 50 within an episode: the corridor
    # penalty (1 / length per step that does not advance, configs/tmaze_long.yaml's
    # shaping) makes walking learnable for both learners; the arm still depends on memory.
    kwargs = {"length": length, "corridor_penalty": 1.0 / length}
    env = DummyVecEnv([lambda: Monitor(gym.make(TASK, **kwargs))] * n_envs)
    env.seed(seed)
    return env


class SolveClock(BaseCallback):
    """Evaluates every ``every`` env steps; stops training once the success rate reaches
    ``TARGET``, or once ``max_seconds`` of training have passed. ``training_seconds``
    excludes the evaluations."""

    def __init__(
        self, eval_env: DummyVecEnv, every: int, episodes: int, max_seconds: float = float("inf")
    ) -> None:
        super().__init__()
        self.eval_env, self.every, self.episodes = eval_env, every, episodes
        self.max_seconds = max_seconds
        self.next_eval = every
        self.training_seconds = 0.0
        self.solved_at: int | None = None
        self.timed_out = False
        self._since = 0.0

    def _on_training_start(self) -> None:
        self._since = time.perf_counter()

    def _on_training_end(self) -> None:
        if self.solved_at is None:  # the budget ran out: count the training since the last eval
            self.training_seconds += time.perf_counter() - self._since

    def _on_step(self) -> bool:
        now = time.perf_counter()
        if self.training_seconds + now - self._since > self.max_seconds:
            self.training_seconds += now - self._since
            self._since = now  # _on_training_end adds nothing more
            self.timed_out = True
            return False
        if self.num_timesteps < self.next_eval:
            return True
        self.training_seconds += time.perf_counter() - self._since
        self.next_eval += self.every
        successes: list[bool] = []

        def record(local: dict[str, Any], _: dict[str, Any]) -> None:
            if local["done"]:
                successes.append(bool(local["info"].get("is_success", False)))

        evaluate_policy(
            self.model, self.eval_env, self.episodes, deterministic=True, callback=record
        )
        self._since = time.perf_counter()
        if successes and sum(successes) / len(successes) >= TARGET:
            self.solved_at = self.num_timesteps
            return False
        return True


def build(learner: str, length: int, seed: int, n_envs: int) -> Any:
    env = make_env(length, n_envs, seed)
    if learner == "txrl":
        policy_kwargs = {
            "backbone": "gtrxl",
            "gate": "gru",
            "d_model": 32,
            "n_layers": 1,
            "n_heads": 2,
            "memory_length": 2 * (length + 1),  # the corridor and a turn, with room
        }
        return MemoryPPO(
            "MlpMemoryPolicy",
            env,
            learning_rate=5e-4,
            n_steps=64,
            batch_size=256,
            segment_length=16,
            n_epochs=4,
            ent_coef=0.01,
            policy_kwargs=policy_kwargs,
            seed=seed,
            device="cpu",
        )
    return RecurrentPPO("MlpLstmPolicy", env, ent_coef=0.01, seed=seed, device="cpu")


def time_to_solve(
    learner: str,
    length: int,
    seed: int,
    budget: int,
    args: argparse.Namespace,
    max_seconds: float = float("inf"),
) -> dict[str, Any]:
    """One run: training seconds until solved (or until the budget or the time ran out), the
    env step it was solved at (None if not) and the env steps it trained."""
    model = build(learner, length, seed, args.n_envs)
    clock = SolveClock(
        make_env(length, 1, seed + 1000), args.eval_every, args.episodes, max_seconds
    )
    model.learn(budget, callback=clock)
    return {
        "seconds": clock.training_seconds,
        "solved_at": clock.solved_at,
        "steps": model.num_timesteps,
        "stopped_by_time": clock.timed_out,
    }


def load_rows(path: Path | None) -> list[dict[str, Any]]:
    if path is None or not path.exists():
        return []
    try:
        rows = json.loads(path.read_text())["runs"]
    except (ValueError, KeyError, TypeError) as error:
        raise SystemExit(f"{path}: not a results file of this script ({error})") from None
    return list(rows)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", type=int, nargs="+", default=[20, 50])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=300_000, help="txrl's env steps per run")
    parser.add_argument("--eval-every", type=int, default=5000)
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument(
        "--time-factor",
        type=float,
        default=3.0,
        help="RecurrentPPO stops after this many times txrl's training seconds (same length, seed)",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON file of the runs (resumable)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    budgets = {"txrl": args.budget, "RecurrentPPO": 3 * args.budget}
    setup = {"budget": args.budget, "eval_every": args.eval_every, "episodes": args.episodes}
    setup |= {"n_envs": args.n_envs, "time_factor": args.time_factor}
    done = [r for r in load_rows(args.out) if r.get("setup") == setup]
    print(f"{'length':>6} {'seed':>4} {'learner':<13} {'seconds':>9} {'solved at':>10}")
    results: list[dict[str, Any]] = []
    for length in args.lengths:
        for seed in args.seeds:
            for learner, budget in budgets.items():
                key = {"length": length, "seed": seed, "learner": learner}
                row = next((r for r in done if all(r[k] == v for k, v in key.items())), None)
                if row is None:
                    cap = float("inf")
                    if learner != "txrl":
                        txrl_row = next(
                            r for r in results if r["length"] == length and r["seed"] == seed
                        )
                        cap = args.time_factor * txrl_row["seconds"]
                    run = time_to_solve(learner, length, seed, budget, args, cap)
                    row = key | run | {"budget": budget, "setup": setup}
                    if args.out is not None:
                        kept = load_rows(args.out)  # other setups' runs stay in the file
                        body = {"task": TASK, "target": TARGET, "runs": [*kept, row]}
                        args.out.parent.mkdir(parents=True, exist_ok=True)
                        atomic_write(args.out, (json.dumps(body, indent=1) + "\n").encode())
                results.append(row)
                if row["solved_at"] is not None:
                    solved = str(row["solved_at"])
                else:
                    why = "time" if row["stopped_by_time"] else "steps"
                    solved = f"no ({row['steps']} steps, {why})"
                print(
                    f"{length:>6} {seed:>4} {learner:<13} {row['seconds']:9.1f} {solved:>10}",
                    flush=True,
                )
    for length in args.lengths:
        for learner in budgets:
            runs = [r for r in results if r["length"] == length and r["learner"] == learner]
            solved = [r["seconds"] for r in runs if r["solved_at"] is not None]
            median = f"{statistics.median(solved):.1f} s" if solved else "-"
            print(
                f"length {length}: {learner:<13} solved {len(solved)}/{len(runs)}, median {median}"
            )
    return results


if __name__ == "__main__":
    main()
