"""The CPU benchmark scripts measure what their docstrings say (their figures come from full
runs on the machine, never from a test): ``bench/throughput.py``'s floor of weight products
is the acting step's own products, and its latency figures and ``bench/scaling.py``'s FLOP
figures run at tiny sizes."""

from __future__ import annotations

import argparse
import math
import runpy
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

BENCH = Path(__file__).resolve().parents[2] / "bench"
#: the bench setup's sizes, made small: 2 layers, d_model 16, 2 heads, M = 8
SMALL = {"n_layers": 2, "d_model": 16, "n_heads": 2, "memory_length": 8}
ARGS = argparse.Namespace(
    n_envs=2, length=3, n_steps=16, batch_size=32, n_epochs=1, segment_length=8
)


@pytest.fixture(scope="module")
def throughput() -> dict[str, Any]:
    return runpy.run_path(str(BENCH / "throughput.py"), run_name="bench_throughput")


class WeightProducts(TorchDispatchMode):
    """Records the (out, in) shape of the weight of each product of rows with a 2-D weight
    (``linear``; ``mm`` and ``addmm``, whose second operand is the weight transposed), in
    call order. The batched products over the memory (``bmm``, ``baddbmm``) are not."""

    def __init__(self) -> None:
        super().__init__()
        self.weights: list[tuple[int, int]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten.linear.default:
            self.weights.append(tuple(args[1].shape))
        elif func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
            n_in, n_out = args[-1].shape
            self.weights.append((n_out, n_in))
        return func(*args, **(kwargs or {}))


def test_the_products_floor_is_the_acting_steps_own_products(throughput: dict[str, Any]) -> None:
    """``txrl_products`` times the products of ``step_products``: they must be the
    products the acting step makes, one for one and of the same shapes, or the floor the
    README quotes would be of some other step."""
    model = throughput["build"]("txrl", "bench", ARGS, **SMALL)
    policy = model.policy.eval()
    obs = torch.zeros(ARGS.n_envs, *model.observation_space.shape)
    starts = torch.zeros(ARGS.n_envs, dtype=torch.bool)
    state = policy.initial_state(ARGS.n_envs)
    with torch.inference_mode():
        *_, out = policy.act(obs, state, starts)  # builds the cached derived weights
        with WeightProducts() as step:
            policy.act(obs, out.state, starts)
    expected = [tuple(weight.shape) for weight, _ in throughput["step_products"](policy)]
    assert sorted(step.weights) == sorted(expected)
    # the embedding; a layer's k/v and scaled q, output, two GRU gates of 3 and the MLP's
    # two; the actor's and the critic's two-layer MLPs; the two heads (40 at 3 layers)
    assert len(expected) == 1 + 11 * SMALL["n_layers"] + 4 + 2


def test_latency_figures_run_at_a_tiny_size(throughput: dict[str, Any]) -> None:
    ours = throughput["build"]("txrl", "bench", ARGS, **SMALL)
    theirs = throughput["build"]("recurrent", "bench", ARGS)
    paired = throughput["paired_seconds"]
    figures = [
        *paired((throughput["txrl_act"](ours), throughput["recurrent_forward"](theirs)), 3),
        *paired((throughput["txrl_products"](ours), throughput["predict"](ours)), 3),
        *paired(
            (
                throughput["txrl_products"](ours, column_major_copies=False),
                throughput["predict"](ours),
            ),
            3,
        ),
        *paired(
            (throughput["predict"](theirs, deterministic=True), throughput["predict"](theirs)), 3
        ),
    ]
    assert all(0 < seconds < 1 for seconds in figures)
    assert throughput["trace_bytes_per_transition"](ours) > 0


def test_the_two_sides_of_a_latency_ratio_are_timed_in_alternating_blocks(
    throughput: dict[str, Any],
) -> None:
    """Each side's warm-up calls come first, then blocks of ``block`` calls of each in turn,
    until each side has ``repeats`` timed calls (the last block cut short)."""
    calls: list[str] = []
    first = (lambda: calls.append("a"), 2)
    second = (lambda: calls.append("b"), 1)
    figures = throughput["paired_seconds"]((first, second), 5, block=2)
    assert "".join(calls) == "aab" + "aabb" + "aabb" + "ab"
    assert len(figures) == 2 and all(seconds >= 0 for seconds in figures)


def test_scaling_counts_flops_per_env_step_independent_of_the_envs() -> None:
    """``bench/scaling.py`` divides each count by the env steps it covers, so a learner's
    FLOPs per env step are about the same at 2 and 4 envs (its work grows with the envs).
    Not exactly: the relative attention's positional keys (W_kR R) are one product per pass
    for all envs, in acting (once a rollout) and in training (forward and backward)."""
    scaling = runpy.run_path(str(BENCH / "scaling.py"), run_name="bench_scaling")
    txrl = scaling["LEARNERS"][0]
    two, four = (scaling["measure"](txrl, n, 16, 1) for n in (2, 4))
    for key in ("act_mflop", "train_mflop"):
        assert two[key] > 0
        assert math.isclose(two[key], four[key], rel_tol=0.05), (key, two[key], four[key])
    assert two["steps_per_s"] > 0 and two["train_gflops"] > 0


def test_gpu_bench_figures_run_on_the_cpu_at_a_tiny_size() -> None:
    """``bench/gpu_throughput.py`` runs on a lent GPU only; its measuring functions are device
    generic, so a tiny model on the CPU checks that each returns a figure (the CUDA-graph
    replay is the one that needs a GPU)."""
    bench = runpy.run_path(str(BENCH / "gpu_throughput.py"), run_name="bench_gpu_throughput")
    args = argparse.Namespace(n_envs=2, length=3, n_steps=32, batch_size=64)  # segments of 32
    ours = bench["build"]("txrl", "cpu", args, **SMALL)
    theirs = bench["build"]("recurrent", "cpu", args)
    rollout = args.n_steps * args.n_envs
    assert 0 < bench["learn_steps_per_second"](ours, rollout // 2) < 1e6
    assert ours.num_timesteps == 2 * rollout  # the warm-up's and one whole rollout, counted
    figures = [
        bench["txrl_act_seconds"](ours, 3),
        bench["recurrent_forward_seconds"](theirs, 3),
        bench["predict_seconds"](ours, 3),
        bench["predict_seconds"](theirs, 3),
    ]
    assert all(0 < seconds < 1 for seconds in figures)
