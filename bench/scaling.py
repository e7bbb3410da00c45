"""Where each learner is bound as envs grow: ``learn()`` env steps/s, FLOPs per env step and
the training pass's achieved GFLOP/s against this machine's measured matmul peak.

    python bench/scaling.py                          # n_envs 8, 32, 128 (about 10 minutes)
    python bench/scaling.py --n-envs 8 32 --rollouts 2
    python bench/scaling.py --profile 128           # where txrl's training pass spends its time

One torch thread. The task is the passive T-maze (length 20); each learner collects
``n_steps`` 64 per env and trains 4 epochs over minibatches of ``16 * n_envs`` transitions,
so a rollout's work grows with the envs while the number of gradient steps stays the same:

* txrl ``MemoryPPO`` with a GTrXL of 2 layers, d_model 64, 4 heads, M = 32 (segments of 16);
* sb3-contrib ``RecurrentPPO`` with an LSTM of 64 units (its actor and critic LSTMs);
* SB3 ``PPO`` with its default MLP, memoryless: the floor of what SB3's loop costs.

For each learner and ``n_envs`` the script prints

* ``steps/s``: env steps per second over ``learn()`` (collection and training), after one
  warm-up rollout, over ``--rollouts`` rollouts;
* ``act MF/step`` and ``train MF/step``: megaFLOPs per env step of collection (the acting
  steps, heads included) and of the training pass (forward and backward over every epoch),
  counted by ``torch.utils.flop_counter.FlopCounterMode`` over one rollout and one ``train()``
  (it counts matrix products and attention, the ops that dominate; elementwise ops are free
  to it);
* ``train GF/s`` and ``% peak``: the training pass's FLOPs over its wall-clock time (one
  ``train()`` timed alone, on the rollout just collected) and that rate against the peak,
  which is measured first as the median rate of a one-thread fp32 ``torch.mm`` of
  1024 x 1024 matrices.

A learner whose ``% peak`` is high is bound by the work its model does; one whose steps/s
stays low while its GF/s is low is bound by per-op and per-env costs (Python, small kernels,
the env loop). Figures on a shared machine move with its load: compare rows from one run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import gymnasium as gym
import torch
from sb3_contrib import RecurrentPPO
from stable_baselines3 import PPO
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv
from torch.utils.flop_counter import FlopCounterMode

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO

TASK = "txrl/TMazePassive-v0"
GTRXL = {"n_layers": 2, "d_model": 64, "n_heads": 4, "memory_length": 32, "gate": "gru"}
LEARNERS = ("txrl GTrXL 2x64", "RecurrentPPO LSTM-64", "PPO MLP")


def matmul_peak_gflops(size: int = 1024, repeats: int = 20) -> float:
    """Median GFLOP/s of a one-thread fp32 ``torch.mm`` of two ``size x size`` matrices."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    for _ in range(3):
        torch.mm(a, b)
    rates = []
    for _ in range(repeats):
        began = time.perf_counter()
        torch.mm(a, b)
        rates.append(2 * size**3 / (time.perf_counter() - began) / 1e9)
    return statistics.median(rates)


def build(learner: str, n_envs: int, n_steps: int) -> Any:
    env = DummyVecEnv([lambda: Monitor(gym.make(TASK, length=20))] * n_envs)
    env.seed(0)
    common = {"n_steps": n_steps, "batch_size": 16 * n_envs, "n_epochs": 4, "seed": 0}
    common |= {"device": "cpu"}
    if learner == LEARNERS[0]:
        return MemoryPPO(
            "MlpGTrXLPolicy", env, segment_length=16, policy_kwargs=dict(GTRXL), **common
        )
    if learner == LEARNERS[1]:
        return RecurrentPPO("MlpLstmPolicy", env, policy_kwargs={"lstm_hidden_size": 64}, **common)
    return PPO("MlpPolicy", env, **common)


def one_rollout(model: Any) -> None:
    """Collect one rollout (no training), as ``learn`` does before each ``train()``."""
    model._setup_learn(model.n_steps * model.n_envs, reset_num_timesteps=False)
    model.collect_rollouts(model.env, model._init_callback(None), model.rollout_buffer,
                           model.n_steps)  # fmt: skip


def measure(learner: str, n_envs: int, n_steps: int, rollouts: int) -> dict[str, float]:
    model = build(learner, n_envs, n_steps)
    per_rollout = model.n_steps * model.n_envs
    model.learn(per_rollout)  # warm-up: first calls, allocations
    began = time.perf_counter()
    model.learn(rollouts * per_rollout, reset_num_timesteps=False)
    steps_per_s = rollouts * per_rollout / (time.perf_counter() - began)

    with FlopCounterMode(display=False) as acting:
        one_rollout(model)
    with FlopCounterMode(display=False) as training:
        model.train()
    began = time.perf_counter()
    model.train()  # the same rollout again, timed without the counter
    train_seconds = time.perf_counter() - began
    return {
        "steps_per_s": steps_per_s,
        "act_mflop": acting.get_total_flops() / per_rollout / 1e6,
        "train_mflop": training.get_total_flops() / per_rollout / 1e6,
        "train_gflops": training.get_total_flops() / train_seconds / 1e9,
    }


def profile_training_pass(n_envs: int, n_steps: int) -> None:
    """Print ``torch.profiler``'s table of one ``train()`` of txrl's GTrXL at ``n_envs``: the
    share of the matrix products (``mm``, ``addmm``, ``bmm``) against everything else."""
    from torch.profiler import ProfilerActivity, profile

    model = build(LEARNERS[0], n_envs, n_steps)
    model.learn(model.n_steps * model.n_envs)
    model.train()  # warm
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model.train()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n-envs", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--n-steps", type=int, default=64, help="rollout length per env")
    parser.add_argument("--rollouts", type=int, default=3, help="rollouts timed per figure")
    parser.add_argument(
        "--profile", type=int, metavar="N_ENVS", help="only profile txrl's train() at N_ENVS"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.profile is not None:
        profile_training_pass(args.profile, args.n_steps)
        return
    peak = matmul_peak_gflops()
    print(
        f"{TASK} length 20, n_steps {args.n_steps}, batch 16 x n_envs, 4 epochs, "
        f"torch {torch.__version__}, 1 thread; fp32 mm peak {peak:.1f} GFLOP/s"
    )
    header = ("learner", "n_envs", "steps/s", "act MF/step", "train MF/step", "train GF/s")
    print(f"{header[0]:<22} {' '.join(f'{h:>13}' for h in header[1:])} {'% peak':>7}")
    for n_envs in args.n_envs:
        for learner in LEARNERS:
            m = measure(learner, n_envs, args.n_steps, args.rollouts)
            print(
                f"{learner:<22} {n_envs:>13} {m['steps_per_s']:>13.0f} {m['act_mflop']:>13.3f} "
                f"{m['train_mflop']:>13.3f} {m['train_gflops']:>13.2f} "
                f"{100 * m['train_gflops'] / peak:>6.0f}%",
                flush=True,
            )


if __name__ == "__main__":
    main()
