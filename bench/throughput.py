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

What the profile (``torch.profiler``, 50 acting steps, bench setup) said and what helped,
in ms per acting step at the bench setup on the 2-core machine (one thread, shared):

======================================================  =========  ============================
change                                                  act ms     profile before -> after
======================================================  =========  ============================
before: slide the (B, L, M, D) memory by ``cat``        7.8        ``aten::cat`` 36 % (12/step)
ring buffer: write one slot in place (``position``)     3.5        cat 1 %, ``copy_`` 28 %
``torch.inference_mode`` for rollouts and ``predict``   2.8        no autograd bookkeeping
memory read in place (one batched product over the      2.7        ``copy_`` 28 % -> < 1 %
(M, D) memory with a block-diagonal query, no
per-head transpose copies)
new step's q, k, v in one product (cached [W_q; W_kE;   (in the    3 products -> 1 per layer
W_v]); positional keys W_kR R cached per head layout    above)
tried, not kept: GRU gate's input-side products as one  2.46 ->    the extra ``cat`` of [y; x]
product of [y; x] with a cached (3D, 2D) block matrix   2.54       costs what the call saves
training pass: fused Adam (the policies' default now)   --         ``train()`` 0.85 -> 0.77 s
                                                                   per rollout; the rest is
                                                                   ``mm`` (forward/backward)
memory scores as (B, H, D) x (B, D, M) (block-diagonal  2.87 ->    that ``bmm`` 95 -> 13 us
(q + u) on the left) instead of (B, M, D) x (B, D, H)   2.57       (alone, B = 8, M = 64)
one product for (q + u)/sqrt(E), (q + v)/sqrt(E), k    (in the    per layer: the biases and
and v (cached (4D, D) matrix and bias); one ring plan   above)     the scale folded into the
(key order, -inf mask) shared by the layers; slot                  product; slot writes
writes by ``index_copy_`` on (B L M, D) rows                       ``index_put_`` 14 -> 9 us
tried, not kept: (b)+(d) folded into that product too   --         M = 1024 vs 64: 2.66x (one
(a cached (H K, D) matrix W_q^T W_kR R per head: the               loaded run): the matrix is
scores are linear in z)                                            2 MB a layer at M = 1024
GRU gate: sums folded into ``addmm``, ``lerp`` for      (in the    the gate alone 65 -> 48 us
(1 - z) x + z h_hat (training path too)                 above)     (15 ops -> 9)
``predict``: actor only, a discrete draw straight from  predict    no value head, log-prob,
the logits (``multinomial`` as ``Categorical``), a      3.18 ->    ``Categorical`` validation,
vector batch without SB3's ``obs_to_tensor``, the       2.34       ``obs_to_tensor`` copy
state it returned taken back without field checks
truncated episodes' bootstrap value on the ring step    --         ``value_of`` was a ``run``
(a copy of that env's memory), not ``run``                         with ``ordered`` + slides,
                                                                   3.3 ms a call (cProfile)
tried, not kept: explicit softmax instead of            --         ``train()`` 1.04 -> 1.18 s
``scaled_dot_product_attention`` in training
``act``: a discrete action and its log-probability     -0.15 to   SB3's ``Categorical`` path
from one log-softmax (the same ``multinomial`` draw),   -0.4 (A/B, (build, validate, sample,
the ``Categorical`` built only when asked for           loaded)    log-prob) 170 -> 32 us
tried, not kept: ``torch.compile`` of the ring step     3.70 ->    the step is products and
again, on the current code (36 s to compile)            3.86       per-op cost; no gain
``compile_step`` (an option): the ring step's layer     3.7-4.0    that compile had 11 graphs:
loop compiled as one graph; the derived weights (fused  -> 1.9-2.6 the parameter cache (a dict
q/k/v, positional keys) looked up outside and passed    (layers    keyed on weight versions)
in; a C++ wrapper (``cpp_wrapper``), since with the     alone,     broke it at each lookup;
Python wrapper the same graph took 3.2 ms               one        ~250 ops -> 40 products
                                                        process)   and 16 fused kernels
truncated episodes' bootstrap values from one step     --         one call per truncated env
over all envs (the others' values dropped), not one                before (100 a 4096-step
``value_of`` per truncated env                                     rollout of the bench)
tried, not kept: ``torch.compile`` of the training      1.19-1.34  the training pass is
pass (``run`` with gradients; 100 s to compile)         -> 1.09-   products and backward;
                                                        1.31 s     no gain per ``train()``
tried, not kept: ``torch.jit.trace`` of the layer loop  4.0 ->     no Python per op, but
                                                        2.8-3.1    ``torch.jit`` is deprecated
                                                                   in torch 2.13
tried, not kept: MKL packed (``_mkl_linear``) and       --         (8, 128) x (128, 512): 40 us
oneDNN packed weights; other GEMM layouts                          per product as ``F.linear``,
                                                                   43 packed (MKL), 71 (oneDNN)
tried, not kept: Dynamo's recursive dict-tag guards     --         compiled loop at S9's size
(``use_recursive_dict_tags_for_guards``)                           0.26-0.33 ms either way
``compile_step``: one compiled call per acting step:    predict    outside the graph before:
the layer loop, the ring write in place (index copies   d_model 8  ring write 73 us, 4 clones
into the state's tensors, no copy of the memory) and    0.63-0.66  14 us, heads 99 us, device
the policy's heads (log-softmax, value); x and the      -> 0.51    read 4 times a call (in
flags cloned only when not inference tensors;           (RecPPO    situ, d_model 8; A/B in one
``predict`` takes the acting step's heads and reads     0.46)      process)
the device once
compiled attention over the memory as multiply-sums     compiled   4x fewer products than the
(fused into one pass over the keys, one over the        step min   block-diagonal ``baddbmm``
values) instead of the block-diagonal ``baddbmm`` and   1.29-1.77  and ``bmm``; eager path
``bmm`` (eager keeps the products)                      -> 1.14-   unchanged
                                                        1.17 ms
tried, not kept: Dynamo guard filters                   compiled   guards are ~40 us of the
(``skip_guard_on_all_nn_modules_unsafe``,               loop, d 8  call; unsafe: a dtype,
``skip_all_guards_unsafe``)                             230 -> 206 stride or hook change would
                                                        / 189 us   go unseen
not applicable: one product for an operand shared by    --         the ``baddbmm``'s second
the envs                                                           operand is each env's own
                                                                   memory keys; the positional
                                                                   keys are already one
                                                                   ``bmm`` over all envs
``predict``: the observation and flags made as          predict    the compiled step cloned
inference tensors (the compiled step takes them         d_model 8  both before; ``predict`` also
without a copy), no trace, the state kept past          0.46 ->    paid ``nn.Module``'s
``nn.Module.__setattr__``, the device read off the      0.43       ``__setattr__`` and SB3's
actor head's weight                                     (RecPPO    ``device`` walk each call
                                                        0.44)      (mins of 3 x 300 calls)
the attention's derived weights looked up with its      predict    a lookup 7.5 -> 2.6 us
five parameters read from the modules' own dicts        -20 us     (``nn.Module.__getattr__``
(``ring_parameters``), not ``__getattr__``                         ~0.6 us each, 8 a layer)
tried, not kept: guard filters again, on the whole      predict    A/B in one process with the
compiled step (``keep_portable_guards_unsafe``:         0.88-1.06  training runs paused; the
tensor metadata and global state only; 450 guards       -> 0.86-   step's other 365 guards
-> 85)                                                  0.95 ms    (module types, hooks, ids)
                                                                   are what a hook or swapped
                                                                   submodule would trip
tried, not kept: inductor's C++ GEMM template           no change  the template needs constant
(``max_autotune``, ``max_autotune_gemm_backends``                  (frozen) weights; the step's
``CPP,ATEN``)                                                      weights change with training
``compile_step``: the products on column-major copies   predict    x (8, in) by W^T runs faster
of the weights (``txrl.nn.layout``: W^T contiguous,     det.       with W^T contiguous: 30 of the
derived while the weights are unchanged and put in      1.20-1.21  step's products alone 555-690
place of the parameters inside the graph; the heads'    -> 1.04-   -> 340-445 us. Column-major
too), the fused q/k/v weight cached column-major        1.12 ms    parameters instead: train()
                                                        (A/B, two  13-21 % slower (gradient and
                                                        processes  fused-Adam copies)
                                                        each)
the eager step on the same copies, put in the modules'  act vs     torch's reparametrization
parameter dicts for the step (``Swapped``, two dict     forward    costs 140 us eager; the dict
writes a weight)                                        2.65-3.07x writes about 15 us
                                                        -> 2.36-
                                                        2.89x
eager attention over the memory: the query spread over  act M=1024 the scores' batched product
the heads kept row-major (an (H, D) one-hot buffer)     vs M=64    took 1.4 ms a layer at M =
instead of with H fastest (a (D, H) buffer's ``.T``)    4.85x ->   1024 with H fastest (MKL's
                                                        2.12x (A/B slow path for that operand),
                                                        in two     0.23 ms row-major; M = 64
                                                        processes) unchanged
the acting wing (``txrl.nn.acting``): the same copies   after /    the model is never written
in a replica of the module tree that the wing owns      before,    (two threads, a copy taken
(linears copied, all else shared) instead of written    medians:   mid-step, weight norm and
into the modules' parameter dicts (``Swapped``) or      act 1.00-  pruning, autograd through
reparametrized in the graph; the fused q/k/v weight     1.01,      ``act``: tests/sb3/
column-major in the wing's cache, not the attention's;  compiled   test_acting_safety.py);
``predict`` compares a sample of the parameters for     0.96-0.97; ``predict``'s sample 14 us a
writes through ``p.data`` (``bench/weight_writes.py``)  predict    call, 0.5 % of it; fewer
                                                        0.98-1.04, Dynamo guards in the
                                                        compiled   compiled step (289 against
                                                        0.97-1.03  361 lines)
                                                        (A/B, two
                                                        processes,
                                                        loaded)
======================================================  =========  ============================

Around the compiled call of ``predict`` (commit 3358b0e, bench setup, timed loops of 2,000-5,000
calls, the machine's speed varying by up to half between processes): Dynamo's guard check 21 us
(its guard manager's ``check`` alone, 552 guards), the check that the column-major copies are
current 22-40 us for the backbone's 28 weights (12-21 us since each module on their paths is
looked up once, commit 368ec47) and 4-10 us for the heads' 6, the attention's fused
weights 14 us for 3 layers.

The act and predict figures of the new rows are minimums over 5 x 200 calls in one process
with other jobs on the machine (their medians move by up to 2x from run to run). The same
acting step with d_model 8 instead of 128 takes 0.87 ms: that much of a step is per-op
cost (Python, dispatch), the rest the products themselves (~30 GFLOP/s per product at
B = 8 on this CPU, near what MKL gives for (8, 128) x (128, 384) alone).

Where the rest goes (``torch.profiler`` with shapes, 50 steps): the (8, 128) x (128, 512)
products take about 100 us each inside the step against 21 us in a loop over one weight.
The step reads about 4.6 MB of fp32 weights (3 layers: fused q/k/v, two GRU gates, FFN) for
8 rows each, more than the 2 MB L2 cache, so they come from the shared L3 every step: the
same product over 20 different weights (5.2 MB) takes 36 us, and other jobs on the machine
push it further. The products' arithmetic is about 0.4 ms of a step at the rate they reach
hot; the rest is weights streamed in and per-op cost. bf16 weights would halve the stream
but break acting = training in fp32, so the acting step stays fp32.

``predict`` no longer sends the memory to numpy and back: the state it returns is the
backbone's tensors (a NamedTuple), which ``evaluate_policy`` passes back as it is.
``torch.compile`` of the step was tried before (no gain on this CPU) and is not used.
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
from txrl.nn.acting.replica import column_major
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
    """(weight, bias) of every product an acting step makes with a weight, in step order:
    the embedding, per layer the fused (q + u, q + v, key, value) product, the output
    projection, the gates' and the MLP's products, then the heads. The positional keys
    are cached between updates and the query / key-value weights are read through the fused
    one, so they are not among them."""
    fused_away: set[torch.nn.Module] = set()
    products: list[tuple[torch.Tensor, torch.Tensor | None]] = []
    with torch.inference_mode():
        for module in policy.modules():  # pre-order: an attention before its own linears
            if isinstance(module, RelativeMultiHeadAttention):
                products.append(module.ring_weights(policy.backbone.memory_length + 1)[:2])
                fused_away |= {module.query, module.key_value, module.position_key}
            elif isinstance(module, torch.nn.Linear) and module not in fused_away:
                products.append((module.weight, module.bias))
    return products


def txrl_products(model: MemoryPPO, column_major_copies: bool = True) -> Timed:
    """The acting step's weight products alone (:func:`step_products` on B rows each): what
    a step costs with no per-op cost at all, a floor for any implementation in fp32. On
    column-major copies of the weights, as the acting step on a CPU takes them
    (:mod:`txrl.nn.acting.replica`), or, with ``column_major_copies=False``, on row-major weights
    (``nn.Linear``'s layout, what the step took before)."""
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
         *paired_latency(lambda: txrl_products(ours),
                         lambda: txrl_products(ours, column_major_copies=False), n),
         "ms", "(txrl.nn.acting)"),
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
