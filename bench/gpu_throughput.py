"""The GPU path, side by side from one run: MemoryPPO's ``learn()`` throughput and acting step
on a CUDA GPU against the same model on the machine's CPU and against sb3-contrib's
RecurrentPPO on the same GPU.

    python bench/gpu_throughput.py                          # needs a CUDA GPU; a few minutes
    python bench/gpu_throughput.py --out bench/results/gpu_throughput.json

The setup ("GPU setup"): the passive T-maze (length 20), 64 envs, n_steps 128, batch 2048,
segments of 32, 4 epochs; GTrXL 3 layers, d_model 256, 4 heads, M = 256 (the GRU gate)
against RecurrentPPO's LSTM-256 with the same PPO settings. The CPU runs use every core the
machine has (``torch.set_num_threads(os.cpu_count())``, or ``--cpu-threads``); the GPU runs
one. ``learn()`` figures are env steps per second over ``--timesteps`` steps after one
warm-up rollout and update; acting figures are medians of ``--repeats`` calls with the
memory full, synchronised with the GPU before the clock is read.

Printed: ``learn()`` env-steps/s on the GPU (fp32 acting through a CUDA graph, the
default there; fp32 with eager acting steps, ``cuda_graph=False``; the bfloat16 training
pass), on the CPU, and RecurrentPPO's on the GPU and the CPU; one acting step
(``policy.act``, B = 64) on the GPU, the same step replayed as a captured CUDA graph (what
the learners' rollouts do on a GPU, ``txrl.sb3.graphs``), on the CPU, and RecurrentPPO's
``policy.forward`` on both; ``predict`` on the GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO
from txrl.sb3.graphs import GraphedActing

TASK = "txrl/TMazePassive-v0"
GPU_GTRXL = {"n_layers": 3, "d_model": 256, "n_heads": 4, "memory_length": 256, "gate": "gru"}


def make_env(n_envs: int, length: int) -> DummyVecEnv:
    env = DummyVecEnv([lambda: Monitor(gym.make(TASK, length=length))] * n_envs)
    env.seed(0)
    return env


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_seconds(call: Callable[[], Any], device: str, warmup: int, repeats: int) -> float:
    """Median wall-clock seconds of ``call()``, the device synchronised around each."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):
        sync(device)
        began = time.perf_counter()
        call()
        sync(device)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def build(
    algo: str, device: str, args: argparse.Namespace, cuda_graph: bool = True, **policy: Any
) -> Any:
    """MemoryPPO + GTrXL or RecurrentPPO + LSTM-256 at the GPU setup on ``device``."""
    env = make_env(args.n_envs, args.length)
    common = {"n_steps": args.n_steps, "batch_size": args.batch_size, "n_epochs": 4}
    common |= {"seed": 0, "device": device}
    if algo == "txrl":
        kwargs = GPU_GTRXL | policy
        return MemoryPPO(
            "MlpGTrXLPolicy", env, segment_length=32, cuda_graph=cuda_graph,
            policy_kwargs=kwargs, **common,
        )  # fmt: skip
    return RecurrentPPO("MlpLstmPolicy", env, policy_kwargs={"lstm_hidden_size": 256}, **common)


def learn_steps_per_second(model: Any, timesteps: int) -> float:
    """Env steps per second over ``learn`` (collection and training), after one warm-up update.
    The steps counted are those taken: ``learn`` runs whole rollouts, so ``timesteps`` is
    rounded up to a multiple of ``n_steps * n_envs``."""
    model.learn(model.n_steps * model.n_envs)
    sync(str(model.device))
    taken_before = model.num_timesteps
    began = time.perf_counter()
    model.learn(timesteps, reset_num_timesteps=False)
    sync(str(model.device))
    return (model.num_timesteps - taken_before) / (time.perf_counter() - began)


def observations(model: Any) -> torch.Tensor:
    obs = np.stack([model.observation_space.sample() for _ in range(model.n_envs)])
    return torch.as_tensor(obs, device=model.device)


def txrl_act_seconds(model: MemoryPPO, repeats: int) -> float:
    """One ``policy.act`` for all envs, memory full (M steps taken first), as in rollouts."""
    policy = model.policy.eval()
    obs = observations(model)
    starts = torch.zeros(model.n_envs, dtype=torch.bool, device=model.device)
    holder = {"state": policy.initial_state(model.n_envs)}

    def step() -> None:
        with torch.inference_mode():
            *_, out = policy.act(obs, holder["state"], starts)
        holder["state"] = out.state

    warmup = policy.backbone.memory_length + 20
    return median_seconds(step, str(model.device), warmup, repeats)


def txrl_graph_act_seconds(model: MemoryPPO, repeats: int) -> float:
    """The same acting step through :class:`txrl.sb3.graphs.GraphedActing`, as rollouts on a
    GPU take it: inputs copied in, the graph replayed, outputs copied out."""
    policy = model.policy.eval()
    obs = observations(model)
    starts = torch.zeros(model.n_envs, dtype=torch.bool, device=model.device)
    graphed = GraphedActing(policy, obs, policy.initial_state(model.n_envs), starts)
    warmup = policy.backbone.memory_length + 20
    return median_seconds(lambda: graphed(obs, starts), str(model.device), warmup, repeats)


def recurrent_forward_seconds(model: RecurrentPPO, repeats: int) -> float:
    """One RecurrentPPO ``policy.forward`` for all envs, as in its rollouts."""
    policy = model.policy.eval()
    obs = observations(model)
    starts = torch.zeros(model.n_envs, device=model.device)
    zeros = torch.zeros(model._last_lstm_states.pi[0].shape, device=model.device)
    holder = {"state": type(model._last_lstm_states)((zeros, zeros), (zeros, zeros))}

    def step() -> None:
        with torch.no_grad():
            *_, holder["state"] = policy.forward(obs, holder["state"], starts)

    return median_seconds(step, str(model.device), 20, repeats)


def predict_seconds(model: Any, repeats: int) -> float:
    """``model.predict(obs, state, episode_start)`` for all envs, state passed back."""
    obs = np.stack([model.observation_space.sample() for _ in range(model.n_envs)])
    starts = np.zeros(model.n_envs, dtype=bool)
    holder: dict[str, Any] = {"state": None}

    def step() -> None:
        _, holder["state"] = model.predict(obs, state=holder["state"], episode_start=starts)

    return median_seconds(step, str(model.device), 300, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--length", type=int, default=20, help="T-maze corridor length")
    parser.add_argument("--n-envs", type=int, default=64)
    parser.add_argument("--n-steps", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--timesteps", type=int, default=16384, help="env steps per learn()")
    parser.add_argument("--repeats", type=int, default=200, help="timed calls per latency")
    parser.add_argument("--cpu-threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device is cuda but torch sees no CUDA GPU; this bench needs one")
    torch.set_num_threads(args.cpu_threads)
    gpu, cpu, n = args.device, "cpu", args.repeats
    hardware = {
        "gpu": torch.cuda.get_device_name(0) if gpu.startswith("cuda") else gpu,
        "cpu": platform.processor() or platform.machine(),
        "cpu_threads": args.cpu_threads,
        "torch": torch.__version__,
    }
    print(
        f"{TASK} length {args.length}, {args.n_envs} envs, n_steps {args.n_steps}, batch "
        f"{args.batch_size}, 4 epochs; GTrXL {GPU_GTRXL}; {hardware}"
    )
    ms = 1e3
    # (figure, unit, measure); each model is built when its figure is measured
    figures: list[tuple[str, str, Callable[[], float]]] = [
        ("txrl learn(), GPU fp32", "steps/s",
         lambda: learn_steps_per_second(build("txrl", gpu, args), args.timesteps)),
        ("txrl learn(), GPU fp32, eager acting steps", "steps/s",
         lambda: learn_steps_per_second(
             build("txrl", gpu, args, cuda_graph=False), args.timesteps)),
        ("txrl learn(), GPU bf16 training pass", "steps/s",
         lambda: learn_steps_per_second(
             build("txrl", gpu, args, training_precision="bf16"), args.timesteps)),
        ("txrl learn(), CPU", "steps/s",
         lambda: learn_steps_per_second(build("txrl", cpu, args), args.timesteps)),
        ("RecurrentPPO learn(), GPU", "steps/s",
         lambda: learn_steps_per_second(build("recurrent", gpu, args), args.timesteps)),
        ("RecurrentPPO learn(), CPU", "steps/s",
         lambda: learn_steps_per_second(build("recurrent", cpu, args), args.timesteps)),
        ("txrl acting step, GPU", "ms",
         lambda: txrl_act_seconds(build("txrl", gpu, args), n) * ms),
        ("txrl acting step, GPU, CUDA graph replay", "ms",
         lambda: txrl_graph_act_seconds(build("txrl", gpu, args), n) * ms),
        ("txrl acting step, CPU", "ms",
         lambda: txrl_act_seconds(build("txrl", cpu, args), n) * ms),
        ("RecurrentPPO forward, GPU", "ms",
         lambda: recurrent_forward_seconds(build("recurrent", gpu, args), n) * ms),
        ("RecurrentPPO forward, CPU", "ms",
         lambda: recurrent_forward_seconds(build("recurrent", cpu, args), n) * ms),
        ("txrl predict, GPU", "ms", lambda: predict_seconds(build("txrl", gpu, args), n) * ms),
        ("RecurrentPPO predict, GPU", "ms",
         lambda: predict_seconds(build("recurrent", gpu, args), n) * ms),
    ]  # fmt: skip
    results: dict[str, Any] = {"setup": vars(args) | {"out": None}, "hardware": hardware}
    for label, unit, measure in figures:
        try:
            value: float | str = measure()
            print(f"{label:<44} {value:10.2f} {unit}", flush=True)
        except Exception as error:  # a figure that cannot be taken is reported, not fatal
            value = f"failed: {type(error).__name__}: {error}"
            print(f"{label:<44} {value}", flush=True)
        results[label] = {"value": value, "unit": unit}
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, indent=2) + "\n")
        tmp.replace(args.out)


if __name__ == "__main__":
    main()
