"""Throughput, acting latency and buffer size of MemoryPPO against RecurrentPPO and PPO.

    python bench/throughput.py                  # the README's table (takes a few minutes)
    python bench/throughput.py --timesteps 4096 --device cuda --n-envs 64

All three learners run the same task with the same n_envs / n_steps / batch_size / n_epochs;
steps/s counts environment steps over ``learn`` (collection and training). Acting latency is
one ``policy.act`` call for one env with a full memory, median over many steps.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import torch
from sb3_contrib import RecurrentPPO
from stable_baselines3 import PPO
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO

GTRXL = {"n_layers": 3, "d_model": 128, "n_heads": 4, "memory_length": 64}


def make_env(task: str, n_envs: int, length: int) -> DummyVecEnv:
    env = DummyVecEnv([lambda: Monitor(gym.make(task, length=length))] * n_envs)
    env.seed(0)
    return env


def steps_per_second(algo: str, args: argparse.Namespace) -> tuple[float, float | None]:
    env = make_env(args.task, args.n_envs, args.length)
    common = {
        "n_steps": args.n_steps,
        "batch_size": args.batch_size,
        "n_epochs": args.n_epochs,
        "device": args.device,
        "seed": 0,
    }
    bytes_per_transition = None
    if algo == "MemoryPPO+GTrXL":
        model = MemoryPPO(
            "MlpGTrXLPolicy", env, segment_length=args.segment_length, policy_kwargs=GTRXL, **common
        )
    elif algo == "RecurrentPPO+LSTM":
        model = RecurrentPPO(
            "MlpLstmPolicy", env, policy_kwargs={"lstm_hidden_size": 128}, **common
        )
    else:
        model = PPO("MlpPolicy", env, **common)
    model.learn(args.n_steps * args.n_envs)  # warm-up rollout and update
    began = time.perf_counter()
    model.learn(args.timesteps, reset_num_timesteps=False)
    elapsed = time.perf_counter() - began
    if isinstance(model, MemoryPPO):
        bytes_per_transition = model.rollout_buffer.trace_nbytes_per_transition()
    return args.timesteps / elapsed, bytes_per_transition


def acting_latency(memory_length: int, device: str, steps: int) -> float:
    """Median seconds of one acting step for one env whose memory is full."""
    env = make_env("txrl/TMazePassive-v0", 1, 10)
    model = MemoryPPO(
        "MlpGTrXLPolicy",
        env,
        policy_kwargs={**GTRXL, "memory_length": memory_length},
        device=device,
    )
    policy = model.policy.eval()
    obs = torch.zeros(1, 3, device=policy.device)
    starts = torch.zeros(1, dtype=torch.bool, device=policy.device)
    state = policy.initial_state(1)
    times = []
    with torch.no_grad():
        for step in range(memory_length + steps):
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            began = time.perf_counter()
            *_, out = policy.act(obs, state, starts)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            if step >= memory_length:  # memory full from here on
                times.append(time.perf_counter() - began)
            state = out.state
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="txrl/TMazePassive-v0")
    parser.add_argument("--length", type=int, default=20, help="T-maze corridor length")
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--n-steps", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--n-epochs", type=int, default=4)
    parser.add_argument("--segment-length", type=int, default=32)
    parser.add_argument("--timesteps", type=int, default=8192, help="env steps timed per learner")
    parser.add_argument("--latency-steps", type=int, default=200)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1 is fastest for small models on CPU)",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    print(
        f"task {args.task} length {args.length}, n_envs {args.n_envs}, n_steps {args.n_steps}, "
        f"batch {args.batch_size}, epochs {args.n_epochs}, device {args.device}, torch threads {args.threads}"
    )
    if not args.skip_throughput:
        results = {}
        for algo in ("MemoryPPO+GTrXL", "RecurrentPPO+LSTM", "PPO (no memory)"):
            if algo != "MemoryPPO+GTrXL" and args.device != "cpu":
                continue
            sps, nbytes = steps_per_second(algo, args)
            results[algo] = sps
            extra = (
                f", buffer memory streams {nbytes:.0f} B/transition" if nbytes is not None else ""
            )
            print(f"{algo:<20} {sps:8.0f} env-steps/s{extra}", flush=True)
        if "RecurrentPPO+LSTM" in results:
            ours = results["MemoryPPO+GTrXL"]
            print(
                f"MemoryPPO / RecurrentPPO = {ours / results['RecurrentPPO+LSTM']:.2f}x (target >= 3x)"
            )
            print(
                f"MemoryPPO / PPO          = {ours / results['PPO (no memory)']:.2f}x (stretch >= 0.7x)"
            )
    latencies = {m: acting_latency(m, args.device, args.latency_steps) for m in (16, 64, 256, 1024)}
    for m, seconds in latencies.items():
        print(f"acting latency M={m:<5} {seconds * 1e3:7.3f} ms/step")
    print(f"latency M=1024 / M=64 = {latencies[1024] / latencies[64]:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
