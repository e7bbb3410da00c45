"""Acting latency, ``predict``, ``learn()`` throughput and buffer size: MemoryPPO against
sb3-contrib's RecurrentPPO, side by side from one run.

    python bench/throughput.py                      # every figure below (a few minutes)
    python bench/throughput.py --timesteps 2048     # a quicker, noisier look

The machine this was written on is shared, so every figure is a ratio measured in the same
run, one torch thread (``torch.set_num_threads(1)``), medians over many calls; the two
sides of a latency ratio are timed in alternating blocks of 50 calls (and ``learn()`` in
alternating turns), so a change in the machine's load falls on both. The setup:
the passive T-maze, 8 envs, n_steps 128, batch 256, 4 epochs; GTrXL 3 layers, d_model 128,
4 heads, M = 64 against RecurrentPPO's LSTM-128 ("bench setup"), and the quick start's GTrXL
(1 layer, d_model 32, 2 heads, M = 16, n_steps 64) against RecurrentPPO with its default
LSTM ("quick-start size").

Printed: one acting step (``policy.act``, B = 8, full memory) against one RecurrentPPO
``policy.forward``, with two bounds on it: the step's weight products alone (its 37
``(8, in) x (in, out)`` products with its weights, no other op: what any fp32
implementation pays; on the column-major copies the step takes, and those against row-major
weights) and the same step at d_model 8 (its products negligible: the per-op
cost); ``model.predict`` (the path of SB3's ``evaluate_policy``) against RecurrentPPO's;
the acting step and ``predict`` again with the ``compile_step`` setting (the acting step,
its ring write and heads included, compiled by ``torch.compile``; it compiles at the first
step); ``learn()`` env-steps/s at both sizes, and with ``compile_step`` at the bench
setup; txrl's ``learn()`` with the bfloat16 training pass (``training_precision="bf16"``)
against fp32; acting latency at M = 1024 against M = 64; the rollout buffer's memory trace
in bytes per transition at M = 64 and M = 1024.

What the profile (``torch.profiler``) said at each change to the acting step, and what
the change did, is logged in ``bench/results/throughput_changes.md``; the figures of full
runs are in ``bench/results/throughput_cpu.txt`` and ``throughput_cpu_run2.txt``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO
from txrl.nn.attention import RelativeMultiHeadAttention
from txrl.nn.state import state_nbytes

TASK = "txrl/TMazePassive-v0"
BENCH_GTRXL = {"n_layers": 3, "d_model": 128, "n_heads": 4, "memory_length": 64}
QUICK_GTRXL = {"n_layers": 1, "d_model": 32, "n_heads": 2, "memory_length": 16, "gate": "gru"}


def make_env(n_envs: int, length: int) -> DummyVecEnv:
    env = DummyVecEnv([lambda: Monitor(gym.make(TASK, length=length))] * n_envs)
    env.seed(0)
    return env


# a call to time and how many calls warm it up first
Timed = tuple[Callable[[], Any], int]


def paired_seconds(timed: tuple[Timed, Timed], repeats: int, block: int = 50) -> list[float]:
    """Median wall-clock seconds of each of two calls, after their warm-up calls, timed in
    alternating blocks of ``block`` calls until each has ``repeats``: a change in the
    machine's load within the measurement falls on both sides of the ratio alike."""
    for call, warmup in timed:
        for _ in range(warmup):
            call()
    times: list[list[float]] = [[], []]
    while len(times[1]) < repeats:
        for (call, _), taken in zip(timed, times, strict=True):
            for _ in range(min(block, repeats - len(taken))):
                began = time.perf_counter()
                call()
                taken.append(time.perf_counter() - began)
    return [statistics.median(taken) for taken in times]


def two_figures(
    compute: Callable[[], list[float]],
) -> tuple[Callable[[], float], Callable[[], float]]:
    """The two figures ``compute()`` measures together, as the two callables a row takes (the
    first runs the measurement, the second reads its other figure)."""
    figures: list[float] = []

    def first() -> float:
        figures[:] = compute()
        return figures[0]

    return first, lambda: figures[1]


def paired_latency(
    first: Callable[[], Timed], second: Callable[[], Timed], repeats: int
) -> tuple[Callable[[], float], Callable[[], float]]:
    """The two figures of :func:`paired_seconds` in ms, as the callables a row takes."""
    return two_figures(lambda: [t * 1e3 for t in paired_seconds((first(), second()), repeats)])


def build(algo: str, size: str, args: argparse.Namespace, **memory: Any) -> Any:
    """A MemoryPPO+GTrXL or RecurrentPPO model at the ``bench`` or ``quick`` size."""
    n_steps = args.n_steps if size == "bench" else 64
    env = make_env(args.n_envs, args.length)
    common = {"n_steps": n_steps, "batch_size": args.batch_size, "n_epochs": args.n_epochs}
    common |= {"seed": 0, "device": "cpu"}
    if algo == "txrl":
        kwargs = dict(BENCH_GTRXL if size == "bench" else QUICK_GTRXL) | memory
        segment = args.segment_length if size == "bench" else 16
        return MemoryPPO(
            "MlpGTrXLPolicy", env, segment_length=segment, policy_kwargs=kwargs, **common
        )
    lstm = {"lstm_hidden_size": 128} if size == "bench" else {}  # quick: sb3-contrib's default
    return RecurrentPPO("MlpLstmPolicy", env, policy_kwargs=lstm, **common)


def txrl_act(model: MemoryPPO) -> Timed:
    """One ``policy.act`` for all envs, memory full (M steps taken first), as in rollouts."""
    policy = model.policy.eval()
    n_envs = model.n_envs
    obs = torch.as_tensor(np.stack([model.observation_space.sample() for _ in range(n_envs)]))
    starts = torch.zeros(n_envs, dtype=torch.bool)
    holder = {"state": policy.initial_state(n_envs)}

    def step() -> None:
        with torch.inference_mode():
            *_, out = policy.act(obs, holder["state"], starts)
        holder["state"] = out.state

    return step, int(policy.backbone.memory_length) + 20


def step_products(policy: Any) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """(weight, bias) of every product an acting step makes with a weight: the embedding,
    per layer the key-value product, the scaled (q + u, q + v) product (the attention's
    ``derived_weights``), the output projection, the gates' and the MLP's products, then
    the heads. The positional keys are kept between updates and the query weight is read
    through the derived one, so they are not among them."""
    fused_away: set[torch.nn.Module] = set()
    products: list[tuple[torch.Tensor, torch.Tensor | None]] = []
    with torch.inference_mode():
        for module in policy.modules():  # pre-order: an attention before its own linears
            if isinstance(module, RelativeMultiHeadAttention):
                products.append((module.key_value.weight, None))
                products.append(module.derived_weights(policy.backbone.memory_length + 1)[:2])
                fused_away |= {module.query, module.key_value, module.position_key}
            elif isinstance(module, torch.nn.Linear) and module not in fused_away:
                products.append((module.weight, module.bias))
    return products


def column_major(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` (out, in), same values and shape, stored column-major (a copy)."""
    return weight.detach().t().contiguous().t()


def txrl_products(model: MemoryPPO, column_major_copies: bool = False) -> Timed:
    """The acting step's weight products alone (:func:`step_products` on B rows each): what
    a step costs with no per-op cost at all, a floor for any implementation in fp32. On
    row-major weights (``nn.Linear``'s layout, what the step takes) or, with
    ``column_major_copies``, on column-major copies of them (a layout MKL multiplies a few
    rows by faster on some CPUs)."""
    laid_out = column_major if column_major_copies else torch.Tensor.contiguous
    with torch.inference_mode():
        products = [(laid_out(w), b) for w, b in step_products(model.policy)]
    rows = [torch.randn(model.n_envs, weight.shape[1]) for weight, _ in products]

    def step() -> None:
        with torch.inference_mode():
            for x, (weight, bias) in zip(rows, products, strict=True):
                F.linear(x, weight, bias)

    return step, 20


def recurrent_forward(model: RecurrentPPO) -> Timed:
    """One RecurrentPPO ``policy.forward`` for all envs, as in its rollouts."""
    policy = model.policy.eval()
    n_envs = model.n_envs
    obs = torch.as_tensor(np.stack([model.observation_space.sample() for _ in range(n_envs)]))
    starts = torch.zeros(n_envs)
    shape = model._last_lstm_states.pi[0].shape
    zeros = torch.zeros(shape)
    holder = {"state": type(model._last_lstm_states)((zeros, zeros), (zeros, zeros))}

    def step() -> None:
        with torch.no_grad():
            *_, holder["state"] = policy.forward(obs, holder["state"], starts)

    return step, 20


def predict(model: Any, deterministic: bool = False) -> Timed:
    """``model.predict(obs, state, episode_start)`` for all envs, state passed back as
    SB3's ``evaluate_policy`` does (which also passes ``deterministic=True``; the default of
    ``predict`` is a draw)."""
    n_envs = model.n_envs
    obs = np.stack([model.observation_space.sample() for _ in range(n_envs)])
    starts = np.zeros(n_envs, dtype=bool)
    holder: dict[str, Any] = {"state": None}

    def step() -> None:
        _, holder["state"] = model.predict(
            obs, state=holder["state"], episode_start=starts, deterministic=deterministic
        )

    return step, 80


def learn_steps_per_second(models: tuple[Any, Any], timesteps: int, rounds: int = 4) -> list[float]:
    """Env steps per second over ``learn`` (collection and training) of two models, after one
    warm-up update each, timed in ``rounds`` alternating turns of ``timesteps / rounds``
    steps, so a change in the machine's load falls on both."""
    seconds = [0.0, 0.0]
    steps = [0, 0]
    for model in models:
        model.learn(model.n_steps * model.n_envs)
    for _ in range(rounds):
        for i, model in enumerate(models):
            taken_before = model.num_timesteps
            began = time.perf_counter()
            model.learn(timesteps // rounds, reset_num_timesteps=False)
            seconds[i] += time.perf_counter() - began
            steps[i] += model.num_timesteps - taken_before  # whole rollouts, as taken
    return [n / t for n, t in zip(steps, seconds, strict=True)]


def paired(
    models: tuple[Any, Any], timesteps: int
) -> tuple[Callable[[], float], Callable[[], float]]:
    """The two figures of :func:`learn_steps_per_second`, as the callables a row takes."""
    return two_figures(lambda: learn_steps_per_second(models, timesteps))


def trace_bytes_per_transition(model: MemoryPPO) -> float:
    """Bytes of the rollout's memory trace per transition (the carried-in memory, stored once
    per rollout, not per transition, is left out)."""
    model.learn(model.n_steps * model.n_envs)
    trace = model.rollout_buffer.trace
    return state_nbytes(trace) / (trace.hidden.shape[0] * trace.hidden.shape[1])


def row(name: str, ours: float, theirs: float, unit: str, target: str) -> None:
    print(f"{name:<42} {ours:10.3f} {theirs:10.3f} {unit:<8} {ours / theirs:6.2f}x  {target}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--length", type=int, default=20, help="T-maze corridor length")
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--n-steps", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--n-epochs", type=int, default=4)
    parser.add_argument("--segment-length", type=int, default=32)
    parser.add_argument("--timesteps", type=int, default=8192, help="env steps timed per learn()")
    parser.add_argument("--repeats", type=int, default=300, help="timed calls per latency figure")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"{TASK} length {args.length}, {args.n_envs} envs, n_steps {args.n_steps}, batch "
        f"{args.batch_size}, {args.n_epochs} epochs, torch {torch.__version__}, 1 thread"
    )
    print(f"{'figure':<42} {'txrl':>10} {'RecPPO':>10} {'unit':<8} {'ratio':>7}  target")

    ours, theirs = build("txrl", "bench", args), build("recurrent", "bench", args)
    quick_ours, quick_theirs = build("txrl", "quick", args), build("recurrent", "quick", args)
    long_memory = build("txrl", "bench", args, memory_length=1024)
    bf16 = build("txrl", "bench", args, training_precision="bf16")
    narrow = build("txrl", "bench", args, d_model=8)  # the same step, products negligible
    # the acting step's layer loop compiled (compiles at its first step, tens of seconds)
    compiled = build("txrl", "bench", args, backbone_kwargs={"compile_step": True})
    n = args.repeats
    # (label, first, second, unit, target); "first / second" is the ratio printed
    figures: list[tuple[str, Callable[[], float], Callable[[], float], str, str]] = [
        ("acting step (act vs forward), B=8",
         *paired_latency(lambda: txrl_act(ours), lambda: recurrent_forward(theirs), n),
         "ms", "<= 1.5x (or <= 2.5 ms)"),
        ("  its weight products alone (vs forward)",
         *paired_latency(lambda: txrl_products(ours), lambda: recurrent_forward(theirs), n),
         "ms", "(a floor)"),
        ("  the same, column-major vs row-major",
         *paired_latency(lambda: txrl_products(ours, column_major_copies=True),
                         lambda: txrl_products(ours), n),
         "ms", "(a layout)"),
        ("  the same step at d_model 8 (vs forward)",
         *paired_latency(lambda: txrl_act(narrow), lambda: recurrent_forward(theirs), n),
         "ms", "(per-op cost)"),
        ("predict, B=8", *paired_latency(lambda: predict(ours), lambda: predict(theirs), n),
         "ms", "<= 2x"),
        ("acting step, compile_step",
         *paired_latency(lambda: txrl_act(compiled), lambda: recurrent_forward(theirs), n),
         "ms", "<= 1.5x (or <= 2.5 ms)"),
        ("predict, B=8, compile_step",
         *paired_latency(lambda: predict(compiled), lambda: predict(theirs), n), "ms", "<= 2x"),
        ("  the same, deterministic (evaluate_policy)",
         *paired_latency(lambda: predict(compiled, deterministic=True),
                         lambda: predict(theirs, deterministic=True), n), "ms", "<= 2x"),
        ("learn() at the bench setup", *paired((ours, theirs), args.timesteps),
         "steps/s", ">= 1.0x"),
        ("learn() at the bench setup, compile_step", *paired((compiled, theirs), args.timesteps),
         "steps/s", ">= 1.0x"),
        ("learn() at quick-start size", *paired((quick_ours, quick_theirs), args.timesteps),
         "steps/s", ">= 2x"),
        ("txrl learn(), bench setup, bf16 vs fp32 pass", *paired((bf16, ours), args.timesteps),
         "steps/s", "(an option; GPU)"),
        ("txrl acting step, M=1024 vs M=64",
         *paired_latency(lambda: txrl_act(long_memory), lambda: txrl_act(ours), n), "ms", "<= 2x"),
        ("txrl trace bytes/transition, M=1024 vs 64",
         lambda: trace_bytes_per_transition(long_memory),
         lambda: trace_bytes_per_transition(ours), "B", "1.00x: independent of M"),
    ]  # fmt: skip
    for label, first, second, unit, target in figures:
        row(label, first(), second(), unit, target)


if __name__ == "__main__":
    main()
