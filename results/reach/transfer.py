"""Play a passive T-maze agent at corridor lengths it was not trained on.

    python results/reach/transfer.py CHECKPOINT --spans 100,300,1000 --episodes 32 --out FILE.json

Loads a ``txrl train`` checkpoint of a memory policy and plays ``--episodes`` greedy episodes
of ``txrl/TMazePassive-v0`` at each span (the other env settings of the run's ``config.yaml`` kept),
through SB3's ``evaluate_policy`` on a ``DummyVecEnv``, on env seeds apart from those of the
run's training and evaluations. Writes the success rate and mean episode length per span.
Whether a policy that learned to read the cue over a short corridor reads it over a long one
tells whether what it learned depends on the distance (the relative position terms) or
only on the cue step's content.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import yaml

#: First env seed of the played episodes (apart from training's and evaluations' seeds).
SEED = 3_000_000


def play(checkpoint: Path, span: int, episodes: int) -> dict[str, Any]:
    """Greedy success rate and mean length of ``episodes`` episodes at corridor ``span``."""
    import gymnasium as gym
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    import txrl
    import txrl.envs  # registers the tasks

    run_config = checkpoint.resolve().parent.parent / "config.yaml"  # RUN/checkpoints/X.zip
    config = yaml.safe_load(run_config.read_text()) if run_config.exists() else {}
    kwargs = dict(config.get("env", {}).get("kwargs", {}))
    kwargs["length"] = span
    n_envs = min(8, episodes)
    env = DummyVecEnv([lambda: Monitor(gym.make("txrl/TMazePassive-v0", **kwargs))] * n_envs)
    env.seed(SEED)
    model = txrl.MemoryPPO.load(checkpoint, device="cpu")
    successes: list[bool] = []

    def record(local: dict[str, Any], _: dict[str, Any]) -> None:
        if local["done"] and "is_success" in local["info"]:
            successes.append(bool(local["info"]["is_success"]))

    _, lengths = evaluate_policy(
        model,
        env,
        n_eval_episodes=episodes,
        deterministic=True,
        return_episode_rewards=True,
        callback=record,
    )
    env.close()
    return {
        "span": span,
        "episodes": len(successes),
        "success_rate": float(np.mean(successes)),
        "mean_length": float(np.mean(lengths)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--spans", default="100,300,1000", help="comma-separated corridor lengths")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    try:
        spans = [int(s) for s in args.spans.split(",")]
    except ValueError:
        parser.error(f"--spans must be comma-separated integers, got {args.spans!r}")
    if args.episodes < 1 or any(s < 1 for s in spans):
        parser.error("--episodes and every span must be >= 1")
    results = {
        "checkpoint": str(args.checkpoint),
        "rows": [play(args.checkpoint, s, args.episodes) for s in spans],
    }
    text = json.dumps(results, indent=2) + "\n"
    if args.out is not None:
        fd, tmp = tempfile.mkstemp(dir=args.out.parent, prefix=f".{args.out.name}.")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, args.out)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
