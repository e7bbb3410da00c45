"""What memory reach costs: the acting step, the training pass and the bytes of a GTrXL policy
as its memory length M grows; and, with ``--across-backbones``, what a run of each backbone of
the reach study costs at each span.

    python bench/reach_cost.py --out bench/results/reach_cost_cpu.txt   # M = 128 ... 10000
    python bench/reach_cost.py --memory 128,1000 --quick                # a quick, noisy look
    python bench/reach_cost.py --across-backbones --out bench/results/reach_cost_backbones_cpu.txt

The policy and learner are the long T-maze recipe's (``configs/tmaze_long.yaml``: GTrXL,
d_model 32, 1 layer, 2 heads, GRU gate; 8 envs; PPO with n_steps 128, segments of 32,
minibatches of 256, 4 epochs), built by the recipe from that file (``--config``) with
``policy.memory_length`` set to each M, on the CPU with one torch thread (``--threads``).
For each M, and for the references M = 64 (acting, ``--act-reference``) and M = 128
(training, ``--train-reference``):

* ``act ms``: one ``policy.act`` for all envs, in inference mode as a rollout takes it, with
  all M slots valid (the state is filled directly: its layer inputs drawn at random, their
  keys and values projected with the policy's weights, every slot marked valid, episode time
  M); median and minimum over the calls, every M timed in alternating blocks of calls so that
  a change in the machine's load falls on all of them; the ratio of medians to M = 64;
* ``train ms/step``: one ``train()`` of the learner itself (every epoch and minibatch:
  forward, backward, optimizer step) on a rollout just collected by its own
  ``collect_rollouts``, divided by the rollout's n_steps x n_envs env steps; median and
  minimum over the passes (after one warm-up pass), the Ms in turn within each round; the
  ratio of medians to M = 128. Which slots are valid does not change the pass's work (every
  slot is projected and scored, the invalid ones masked), so the rollout starts from the
  learner's own memory;
* ``act floor`` and ``train floor``: the least time the acting step and the training pass
  per env step must take on this CPU, the larger of their multiply-adds at a large
  matrix product's measured rate and the bytes they must move at a large copy's measured
  rate (:func:`act_floor`, :func:`train_floor` count them); ``/floor``: the median over it;
* ``state B/env``: the bytes of the acting state's tensors per env;
* ``buffer B/tr``: the rollout buffer's memory streams per transition
  (``trace_nbytes_per_transition``, what the learner logs as
  ``train/memory_bytes_per_transition``: each step's layer inputs plus the memory carried
  into the rollout); ``segments B/tr``: the states of all segment starts that the buffer
  keeps for the rollout's minibatches (``txrl.sb3.buffer``), per transition;
* ``RSS MiB``: how much one rollout and one ``train()`` raise the peak resident set of a
  fresh process per M over its resident set after the imports and the learner's
  construction (Linux: the peak reset there through ``/proc/self/clear_refs`` and read as
  ``VmHWM``; elsewhere ``getrusage``'s peak, and the peak so far stands in for the resident
  set); ``--no-rss`` skips these processes.

Targets: the acting step at M = 1000 within 2x of M = 64, and the training pass per env step
at M = 1000 within 3x of M = 128 (ratios of medians); every row is marked against the same
bounds. Figures on a shared machine move with its load: compare rows of one run.

An acting step reads each layer's cached keys and values (B, M, D) in place, so its cost
grows as O(M D) per env and layer, with no copy of the memory (a step's M scores, mask
entries and slot distances per env and head aside). The training pass per env step is the
network's own work on that step (O(L D^2), whatever M), plus the step's attention over its
segment's M + S keys (O(L (M + S) D)), plus its share of re-projecting each segment's M-slot
memory into keys and values with the current weights at every minibatch of every epoch
(O(L M D^2 / S)), each forward and backward; the last two grow linearly with M.

``--across-backbones`` measures instead each backbone of the reach study
(``results/reach/README.md``) at the settings its runs train with, read from the study's
compare configs (`BACKBONE_STUDIES`: txrl's GTrXL at 1,000 and 3,000 cells from the recipe's
own studies, every backbone of ``results/reach/backbones/span_*``), one point per backbone
and span (``env.kwargs.length``), each built as its run builds it (the config's learner, its
8 envs, its PPO settings). For each point, one after another (``--only-backbones`` and
``--spans`` pick some):

* ``rollout_s/100k``, ``update_s/100k``: the seconds of one rollout (``collect_rollouts``,
  n_steps x n_envs env steps) and of one ``train()`` on it, per 100,000 env steps; the
  minimum over the rounds (after one warm-up round), the least the machine's load let them
  take; ``train_s/100k``: the minimum of their sum, a run's training wall-clock per 100,000
  env steps (its evaluations and checkpoints aside);
* ``state_B/env``: the bytes of the acting state's tensors per env;
* ``buffer_B/env``: the bytes of every array and tensor the rollout buffer keeps for one
  rollout (:func:`rollout_nbytes`), per env; ``RAM_MiB/env``: the two together, the memory
  a run holds per env between updates (the training pass's activations come and go with
  each minibatch and are not per env).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from scaling import one_rollout  # bench/ is sys.path[0] when run as a script

from txrl.agents.recipe import make_learner
from txrl.config import TrainConfig, load_compare_config
from txrl.config.files import load_train_config
from txrl.files import atomic_write
from txrl.nn.state import state_nbytes
from txrl.run.envs import make_train_env

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "tmaze_long.yaml"
MEMORY_LENGTHS = (128, 1000, 4000, 10000)
ACT_REFERENCE, TRAIN_REFERENCE = 64, 128
#: the targets: at M = TARGET_AT, acting within ACT_BOUND x and training within TRAIN_BOUND x
TARGET_AT, ACT_BOUND, TRAIN_BOUND = 1000, 2.0, 3.0
#: (key of a row, heading, format) of each column of the table, in order
COLUMNS = (
    ("memory_length", "M", "{:d}"),
    ("act_ms_median", "act ms", "{:.3f}"),
    ("act_ms_min", "act min", "{:.3f}"),
    ("act_ratio", "act x", "{:.2f}"),
    ("act_target", f"act <={ACT_BOUND:g}x", "{}"),
    ("train_ms_per_step_median", "train ms/step", "{:.4f}"),
    ("train_ms_per_step_min", "train min", "{:.4f}"),
    ("train_ratio", "train x", "{:.2f}"),
    ("train_target", f"train <={TRAIN_BOUND:g}x", "{}"),
    ("act_floor_ms", "act floor", "{:.3f}"),
    ("act_over_floor", "act/floor", "{:.1f}"),
    ("train_floor_ms_per_step", "train floor", "{:.4f}"),
    ("train_over_floor", "train/floor", "{:.1f}"),
    ("state_bytes_per_env", "state B/env", "{:d}"),
    ("buffer_bytes_per_transition", "buffer B/tr", "{:.0f}"),
    ("segment_state_bytes_per_transition", "segments B/tr", "{:.0f}"),
    ("rss_growth_mib", "RSS MiB", "{:.1f}"),
)

REACH = Path(__file__).resolve().parents[1] / "results" / "reach"
#: The reach study's grids ``--across-backbones`` measures: each compare config and the labels
#: of its variants to take (None: every one). txrl's GTrXL at 1,000 and 3,000 cells trains in
#: the recipe's own studies; the other backbones, and GTrXL at 10,000, in ``backbones/``.
BACKBONE_STUDIES: tuple[tuple[Path, tuple[str, ...] | None], ...] = (
    (REACH / "tmaze_1000" / "compare.yaml", ("gtrxl",)),
    (REACH / "tmaze_3000" / "compare.yaml", ("gtrxl",)),
    (REACH / "backbones" / "span_1000" / "compare.yaml", None),
    (REACH / "backbones" / "span_3000" / "compare.yaml", None),
    (REACH / "backbones" / "span_10000" / "compare.yaml", None),
)
#: env steps the training wall-clock is given per
PER_STEPS = 100_000
#: (key of a row, heading, format) of each column of ``--across-backbones``' table; the
#: headings are single words, so that a script can read the table back by them
#: (``results/reach/curve.py``)
BACKBONE_COLUMNS = (
    ("backbone", "backbone", "{}"),
    ("span", "span", "{:d}"),
    ("rollout_s_per_100k", "rollout_s/100k", "{:.1f}"),
    ("update_s_per_100k", "update_s/100k", "{:.1f}"),
    ("train_s_per_100k", "train_s/100k", "{:.1f}"),
    ("state_bytes_per_env", "state_B/env", "{:d}"),
    ("buffer_bytes_per_env", "buffer_B/env", "{:d}"),
    ("ram_mib_per_env", "RAM_MiB/env", "{:.2f}"),
)


def positive_ints(what: str, example: str) -> Callable[[str], list[int]]:
    """An argparse ``type`` for positive integers, comma-separated: ``what`` names them in
    the error, ``example`` shows a valid value."""

    def parse(text: str) -> list[int]:
        try:
            values = [int(part) for part in text.split(",")]
        except ValueError:
            values = []
        if not values or min(values) < 1:
            raise argparse.ArgumentTypeError(
                f"takes positive {what}, comma-separated (e.g. {example}), got {text!r}"
            )
        return values

    return parse


#: ``--memory``'s value: positive memory lengths, comma-separated.
memory_lengths = positive_ints("memory lengths", "128,1000")


def build(config: Path, memory_length: int) -> Any:
    """The recipe's learner for ``config`` with ``policy.memory_length`` set, on its envs."""
    settings = load_train_config(config, [f"policy.memory_length={memory_length}"])
    return make_learner(settings, make_train_env(settings))


def full_state(model: Any) -> Any:
    """An acting state of every env with all M slots valid (``MemoryState``, its tensors laid
    out as ``initial_state`` makes them): layer inputs drawn from a standard normal, their keys
    and values projected with the policy's weights (``refresh_state``), episode time M."""
    backbone = model.policy.backbone
    state = model.policy.initial_state(model.n_envs)
    with torch.no_grad():
        state.hidden.normal_(generator=torch.Generator().manual_seed(0))
        refreshed = backbone.refresh_state(state)
        state.keys.copy_(refreshed.keys)
        state.values.copy_(refreshed.values)
        state.valid.fill_(True)
        state.step.fill_(backbone.memory_length)
    return state


def acting_step(model: Any) -> Callable[[], None]:
    """One ``policy.act`` for all envs from a full memory (:func:`full_state`), the state it
    returns passed to the next call, as in a rollout."""
    policy = model.policy
    policy.set_training_mode(False)
    obs = torch.as_tensor(np.stack([model.observation_space.sample() for _ in range(model.n_envs)]))
    starts = torch.zeros(model.n_envs, dtype=torch.bool)
    holder = {"state": full_state(model)}

    def step() -> None:
        with torch.inference_mode():
            *_, out = policy.act(obs, holder["state"], starts)
        holder["state"] = out.state

    return step


def interleaved_seconds(
    calls: Sequence[Callable[[], Any]], repeats: int, block: int, warmup: int
) -> list[list[float]]:
    """Wall-clock seconds of ``repeats`` calls of each of ``calls``, after ``warmup`` calls
    each, timed in turns of ``block`` calls of each: a change in the machine's load falls on
    every one of them alike."""
    for call in calls:
        for _ in range(warmup):
            call()
    times: list[list[float]] = [[] for _ in calls]
    while len(times[-1]) < repeats:
        for call, taken in zip(calls, times, strict=True):
            for _ in range(min(block, repeats - len(taken))):
                began = time.perf_counter()
                call()
                taken.append(time.perf_counter() - began)
    return times


def train_seconds(models: Sequence[Any], repeats: int, warmup: int) -> list[list[float]]:
    """Seconds of ``train()`` of each model, each on a rollout it has just collected
    (untimed), in ``warmup + repeats`` rounds over the models; the warm-up rounds' passes
    (first allocations, the optimizer's state) are dropped."""
    times: list[list[float]] = [[] for _ in models]
    for round_ in range(warmup + repeats):
        for model, taken in zip(models, times, strict=True):
            one_rollout(model)
            began = time.perf_counter()
            model.train()
            if round_ >= warmup:
                taken.append(time.perf_counter() - began)
    return times


class Machine(NamedTuple):
    """What this CPU moves per second with the bench's torch threads, measured."""

    flops: float  # a large float32 matrix product's rate, FLOP/s
    bytes_per_s: float  # a large float32 copy's rate, bytes read plus written per second


def measure_machine(repeats: int = 5) -> Machine:
    """The best of ``repeats`` (1024 x 1024) @ (1024 x 1024) float32 products and of
    ``repeats`` copies of 128 MiB (more than the last-level cache): the rates a floor is
    taken at (:func:`act_floor`, :func:`train_floor`)."""
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    src, dst = torch.randn(2**25), torch.empty(2**25)
    product, copy = float("inf"), float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        torch.mm(a, b)
        product = min(product, time.perf_counter() - began)
        began = time.perf_counter()
        dst.copy_(src)
        copy = min(copy, time.perf_counter() - began)
    return Machine(2 * 1024**3 / product, 2 * src.numel() * src.element_size() / copy)


class Shape(NamedTuple):
    """The sizes the floor counts with, read from a learner."""

    layers: int  # L
    width: int  # D
    memory: int  # M
    segment: int  # T, steps per segment
    envs: int  # B
    batch: int  # transitions per minibatch
    epochs: int
    weights: int  # P, the policy's matrix entries: the multiply-adds of one step's network
    itemsize: int  # bytes per float


def shape_of(model: Any) -> Shape:
    backbone = model.policy.backbone
    return Shape(
        backbone.depth, backbone.config.d_model, backbone.memory_length, model.segment_length,
        model.n_envs, model.batch_size, model.n_epochs,
        sum(p.numel() for p in model.policy.parameters() if p.dim() == 2),
        model.policy.backbone.embed.weight.element_size(),
    )  # fmt: skip


def act_floor(shape: Shape, machine: Machine) -> float:
    """Seconds one acting step for all envs must take at least: per env and layer, the step's
    query against M + 1 keys in content (a)+(c) and position (b)+(d) and the weighted sum of
    M + 1 values, 3 (M + 1) D multiply-adds, plus the network's P; and the bytes of each
    env's M cached keys and values and the layers' M + 1 positional keys, read once. The
    larger of the two times at the measured rates (a roofline)."""
    n_layers, d, m, b = shape.layers, shape.width, shape.memory, shape.envs
    flops = 2 * b * (n_layers * 3 * (m + 1) * d + shape.weights)
    moved = shape.itemsize * n_layers * (2 * b * m * d + (m + 1) * d)
    return max(flops / machine.flops, moved / machine.bytes_per_s)


def train_floor(shape: Shape, machine: Machine) -> float:
    """Seconds the training pass must take per env step at least. A minibatch of G = batch
    / T segments must, per layer: project each segment's M memory slots to keys and values
    with the current weights, G M D 2D multiply-adds, and take their weights' gradient, as
    many again (the memory is stop-gradient, the weights are not: no projection made with
    earlier weights can serve); score T queries against K = M + T keys in (a)+(c) and
    (b)+(d) and sum K values, 3 G T K D, forward and twice backward; and run the network on
    its G T steps, P each, forward and twice backward. Bytes: each segment's memory inputs,
    keys and values, (M, D) each, written or read once forward and once backward (a fused
    kernel need not store the T x K scores). The larger of the two times at the measured
    rates, times the epochs, per transition."""
    n_layers, d, m, t = shape.layers, shape.width, shape.memory, shape.segment
    g = shape.batch // t
    macs = (
        n_layers * (2 * g * m * d * 2 * d + 3 * 3 * g * t * (m + t) * d) + 3 * g * t * shape.weights
    )
    moved = shape.itemsize * 2 * 3 * g * n_layers * m * d
    per_batch = max(2 * macs / machine.flops, moved / machine.bytes_per_s)
    return per_batch * shape.epochs / shape.batch


def buffer_bytes(model: Any) -> tuple[float, float | None]:
    """The rollout buffer's memory streams per transition, and the states of the segment
    starts it keeps for the minibatches per transition (None when it keeps none: above its
    size cap each minibatch rebuilds its own). Read after a ``train()`` on the rollout."""
    buffer = model.rollout_buffer
    transitions = buffer.buffer_size * buffer.n_envs
    kept = buffer._segment_states  # (backbone, segment length, states or None)
    segments = None if kept is None or kept[2] is None else state_nbytes(kept[2]) / transitions
    return buffer.trace_nbytes_per_transition(), segments


def peak_rss_kib() -> int:
    """This process's peak resident set in KiB: Linux's ``VmHWM`` (``/proc/self/status``),
    the peak of this process alone; elsewhere ``getrusage``'s ``ru_maxrss`` (bytes on macOS).
    On Linux ``ru_maxrss`` cannot serve: a process started by ``subprocess`` keeps the peak
    of its parent's copy from before its ``exec`` in it, so a large parent hides the child's."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak


def reset_peak_rss() -> None:
    """Set this process's peak resident set to its current one where the system allows it
    (Linux's ``clear_refs``), so that a peak read later is that of what ran since."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def rss_growth(args: argparse.Namespace) -> None:
    """In a fresh process (``--rss-of M``): print, as JSON, how much one rollout and one
    ``train()`` raise the peak resident set over the resident set after the imports and the
    learner's construction (over the peak so far where the peak cannot be reset)."""
    torch.set_num_threads(args.threads)
    model = build(args.config, args.rss_of)
    gc.collect()
    reset_peak_rss()
    before = peak_rss_kib()
    one_rollout(model)
    model.train()
    growth = (peak_rss_kib() - before) / 1024
    print(json.dumps({"rss_growth_mib": growth}))


def rss_growth_in_fresh_process(args: argparse.Namespace, memory_length: int) -> float:
    """:func:`rss_growth` at ``memory_length``, in a process of its own, in MiB."""
    command = [sys.executable, __file__, "--rss-of", str(memory_length),
               "--config", str(args.config), "--threads", str(args.threads)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"measuring the peak RSS at M = {memory_length} failed:\n{done.stderr}")
    return float(json.loads(done.stdout.splitlines()[-1])["rss_growth_mib"])


def target_mark(memory_length: int, reference: int, ratio: float, bound: float) -> str:
    if memory_length == reference:
        return "ref"
    return "met" if ratio <= bound else "not met"


def cpu_model() -> str:
    """The CPU's model name as ``/proc/cpuinfo`` gives it (Linux), else as ``lscpu`` does,
    else ``platform.processor()``."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        listing = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in listing.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Model name":
                return value.strip()
    return platform.processor() or "unknown CPU"


def load_average() -> float | None:
    """The machine's 1-minute load average (other jobs on it slow every figure)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def load_line(load: tuple[float | None, float | None]) -> str:
    """The load average at the start and the end, and whether other work shared the CPUs."""
    if None in load:
        return "load average unknown"
    line = f"load average {load[0]:.1f} at the start, {load[1]:.1f} at the end"
    if max(v for v in load if v is not None) > (os.cpu_count() or 1):
        line += ": the CPUs were shared with other work, so every figure is slower and noisier"
    return line


def header_lines(
    args: argparse.Namespace,
    model: Any,
    act: tuple[int, int, int],
    load: tuple[float | None, float | None],
) -> list[str]:
    """What was measured, on what, and the targets."""
    policy = load_train_config(args.config).policy
    repeats, block, warmup = act
    train_warmup = "no" if args.quick else "one"
    return [
        f"{args.config.name}: {policy.backbone} d_model {policy.d_model}, {policy.n_layers} "
        f"layer(s), {policy.n_heads} heads, {policy.gate} gate; {model.n_envs} envs; n_steps "
        f"{model.n_steps}, segments of {model.segment_length}, batch {model.batch_size}, "
        f"{model.n_epochs} epochs",
        f"CPU {cpu_model()}, {os.cpu_count()} logical CPUs; torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s); python {platform.python_version()}",
        load_line(load),
        f"acting: {repeats} calls per M in alternating blocks of {block}, after {warmup}; "
        f"training: {args.train_repeats} pass(es) per M after {train_warmup} warm-up, the Ms "
        "in turn; ms are medians and minimums",
        f"targets: acting step at M = {TARGET_AT} within {ACT_BOUND:g}x of M = "
        f"{args.act_reference}; training per env step at M = {TARGET_AT} within "
        f"{TRAIN_BOUND:g}x of M = {args.train_reference} (ratios of medians; every row marked)",
    ]


def table_lines(
    rows: list[dict[str, Any]], columns: Sequence[tuple[str, str, str]] = COLUMNS
) -> list[str]:
    """The rows under their ``columns`` (key, heading, format), right-aligned, "-" for None."""
    cells = [["-" if row[key] is None else form.format(row[key]) for key, _, form in columns]
             for row in rows]  # fmt: skip
    widths = [max(len(heading), 8, *(len(r[i]) for r in cells))
              for i, (_, heading, _) in enumerate(columns)]  # fmt: skip
    lines = [" ".join(f"{h:>{w}}" for (_, h, _), w in zip(columns, widths, strict=True))]
    for row_cells in cells:
        lines.append(" ".join(f"{c:>{w}}" for c, w in zip(row_cells, widths, strict=True)))
    return lines


class Point(NamedTuple):
    """One backbone at one span, as the reach study trains it."""

    backbone: str  # the variant's label in its compare config
    span: int  # env.kwargs.length: corridor cells
    config: TrainConfig  # the run's training config (seed aside)


def study_points(
    studies: Sequence[tuple[Path, Sequence[str] | None]],
    backbones: Sequence[str] | None = None,
    spans: Sequence[int] | None = None,
) -> list[Point]:
    """Every variant of each compare config in ``studies`` (those of its labels when given),
    each checked as ``txrl compare`` checks it; only ``backbones`` and ``spans`` when given.
    By span, then each backbone where it first appears in the studies."""
    points = []
    for path, labels in studies:
        for variant in load_compare_config(path).variants():
            span = int(variant.config.env.kwargs["length"])
            if labels is not None and variant.name not in labels:
                continue
            if (backbones and variant.name not in backbones) or (spans and span not in spans):
                continue
            points.append(Point(variant.name, span, variant.config))
    first = {name: i for i, name in reversed(list(enumerate(p.backbone for p in points)))}
    return sorted(points, key=lambda p: (p.span, first[p.backbone]))


def settings_line(point: Point) -> str:
    """The point's backbone settings (the policy's given fields and ``backbone_kwargs``) and
    its auxiliary losses' weights, in a line."""
    policy = point.config.policy
    given = {"gate": policy.gate, **policy.backbone_settings()}
    words = [f"{key} {value}" for key, value in given.items() if value is not None]
    aux = getattr(point.config.learner_settings, "aux_loss_coef", None)
    if aux:
        words.append("aux_loss_coef " + ", ".join(f"{k} {v:g}" for k, v in aux.items()))
    return f"  {point.backbone} at {point.span}: {policy.backbone}, " + ", ".join(words)


def rollout_nbytes(buffer: Any) -> int:
    """Bytes of every array and tensor a memory rollout buffer (`txrl.sb3.buffer`) keeps for
    its rollout: SB3's arrays (observations, actions, rewards, values, log-probabilities,
    advantages, returns, episode starts), the memory streams (each step's trace and the
    memory carried into the rollout), a learner's per-step extras and the states of the
    segment starts kept for the minibatches."""
    arrays = [value for value in vars(buffer).values() if isinstance(value, np.ndarray)]
    if isinstance(buffer.observations, dict):
        arrays += list(buffer.observations.values())
    total = sum(array.nbytes for array in arrays)
    total += state_nbytes(buffer.trace) + state_nbytes(buffer.initial_memory)
    total += state_nbytes(tuple(buffer.extras.values()))
    kept = buffer._segment_states  # (backbone, segment length, states or None)
    if kept is not None and kept[2] is not None:
        total += state_nbytes(kept[2])
    return total


def measure_point(point: Point, repeats: int, warmup: int) -> dict[str, Any]:
    """One row of ``--across-backbones``' table: the point's learner built as its run builds
    it, then ``warmup + repeats`` rounds of one rollout and one ``train()`` (the warm-up
    rounds dropped); the minimum seconds per `PER_STEPS` env steps, and the bytes per env."""
    model = make_learner(point.config, make_train_env(point.config))
    rollout_s, update_s, total_s = [], [], []
    for round_ in range(warmup + repeats):
        began = time.perf_counter()
        one_rollout(model)
        collected = time.perf_counter()
        model.train()
        ended = time.perf_counter()
        if round_ >= warmup:
            rollout_s.append(collected - began)
            update_s.append(ended - collected)
            total_s.append(ended - began)
    per = PER_STEPS / (model.n_steps * model.n_envs)
    state = state_nbytes(model.policy.initial_state(model.n_envs)) // model.n_envs
    buffer = rollout_nbytes(model.rollout_buffer) // model.n_envs
    model.env.close()
    return {
        "backbone": point.backbone,
        "span": point.span,
        "rollout_s_per_100k": min(rollout_s) * per,
        "update_s_per_100k": min(update_s) * per,
        "train_s_per_100k": min(total_s) * per,
        "state_bytes_per_env": state,
        "buffer_bytes_per_env": buffer,
        "ram_mib_per_env": (state + buffer) / 2**20,
    }


def shown(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it."""
    root = REACH.parents[1]
    resolved = path.resolve()
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(path)


def backbone_header_lines(
    args: argparse.Namespace, points: Sequence[Point], load: tuple[float | None, float | None]
) -> list[str]:
    """What ``--across-backbones`` measured, on what, and each point's settings."""
    first = points[0].config
    ppo = first.learner_settings
    warmup = "no" if args.quick else "one"
    return [
        "the reach study's backbones at the settings their runs train with (passive T-maze, "
        f"corridors from {first.env.kwargs.get('min_length')} cells to the span; "
        f"{first.env.n_envs} envs; {first.algo} n_steps {ppo.n_steps}, segments of "
        f"{ppo.segment_length}, batch {ppo.batch_size}, {ppo.n_epochs} epochs), from "
        + ", ".join(shown(path) for path, _ in args.studies),
        f"CPU {cpu_model()}, {os.cpu_count()} logical CPUs; torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s); python {platform.python_version()}",
        load_line(load),
        f"each point a fresh learner: {warmup} warm-up round, then {args.train_repeats} "
        "timed round(s) of one rollout and one train(), the points one after another; seconds are "
        f"the rounds' minimum per {PER_STEPS:,} env steps (train = rollout + update, the "
        "minimum of the sum; a run's evaluations and checkpoints aside)",
        "RAM_MiB/env = state_B/env (the acting state's tensors) + buffer_B/env (every array "
        "and tensor of one rollout in the buffer: SB3's arrays, trace, carried-in memory, "
        "kept segment-start states), per env",
        "settings:",
        *(settings_line(point) for point in points),
    ]


def across_backbones(args: argparse.Namespace) -> list[dict[str, Any]]:
    """``--across-backbones``: a row per backbone and span, printed (and written with
    ``--out``); returns the rows."""
    torch.set_num_threads(args.threads)
    load_before = load_average()
    points = study_points(args.studies, args.only_backbones, args.spans)
    if not points:
        raise SystemExit("no backbone and span of the studies matches --only-backbones/--spans")
    rows = []
    for point in points:
        rows.append(measure_point(point, args.train_repeats, warmup=0 if args.quick else 1))
        print(f"measured {point.backbone} at {point.span}", file=sys.stderr, flush=True)
        gc.collect()
    lines = backbone_header_lines(args, points, (load_before, load_average()))
    text = "\n".join([*lines, *table_lines(rows, BACKBONE_COLUMNS)]) + "\n"
    print(text, end="", flush=True)
    if args.out is not None:
        atomic_write(args.out, text.encode())
    return rows


def study_spec(text: str) -> tuple[Path, tuple[str, ...] | None]:
    """``--study``'s value, ``PATH`` or ``PATH:LABEL,LABEL``: a compare config and the labels
    of its variants to measure."""
    path, _, labels = text.partition(":")
    if not Path(path).is_file():
        raise argparse.ArgumentTypeError(
            f"takes a compare config, PATH[:LABEL,...]: no file {path!r}"
        )
    return Path(path), tuple(labels.split(",")) if labels else None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--memory", type=memory_lengths, default=list(MEMORY_LENGTHS),
        help="memory lengths M, comma-separated (the references are added)",
    )  # fmt: skip
    parser.add_argument("--config", type=Path, default=CONFIG, help="the recipe's config file")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--act-reference", type=int, default=ACT_REFERENCE, help="acting's M")
    parser.add_argument("--train-reference", type=int, default=TRAIN_REFERENCE)
    parser.add_argument("--act-repeats", type=int, help="timed acting calls per M (1000)")
    parser.add_argument(
        "--train-repeats",
        type=int,
        help="timed train() passes per M (6); rounds per point with --across-backbones (3)",
    )
    parser.add_argument("--quick", action="store_true", help="few repeats, no warm-up pass")
    parser.add_argument("--no-rss", action="store_true", help="skip the process per M")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    parser.add_argument("--rss-of", type=int, help=argparse.SUPPRESS)  # the process per M
    across = parser.add_argument_group("--across-backbones: the reach study's backbones")
    across.add_argument(
        "--across-backbones",
        action="store_true",
        help="measure each backbone of the reach study at each span instead",
    )
    across.add_argument(
        "--study",
        dest="studies",
        type=study_spec,
        action="append",
        help="a compare config to measure, PATH[:LABEL,...] (repeatable; "
        "default: BACKBONE_STUDIES)",
    )
    across.add_argument(
        "--only-backbones",
        type=lambda text: text.split(","),
        help="only these labels, comma-separated",
    )
    across.add_argument("--spans", type=positive_ints("spans", "1000,3000"),
                        help="only these spans (corridor cells), comma-separated")  # fmt: skip
    args = parser.parse_args(argv)
    for name in ("threads", "act_reference", "train_reference", "act_repeats", "train_repeats"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    if not args.config.is_file():
        parser.error(f"--config {args.config} is not a file")
    if args.act_repeats is None:
        args.act_repeats = 20 if args.quick else 1000
    if args.train_repeats is None:
        args.train_repeats = 1 if args.quick else (3 if args.across_backbones else 6)
    if args.studies is None:
        args.studies = list(BACKBONE_STUDIES)
    return args


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Measure every M, print the table (and write it with ``--out``); returns its rows."""
    args = parse_args(argv)
    if args.rss_of is not None:
        rss_growth(args)
        return []
    if args.across_backbones:
        return across_backbones(args)
    torch.set_num_threads(args.threads)
    load_before = load_average()
    lengths = sorted({*args.memory, args.act_reference, args.train_reference})
    models = [build(args.config, m) for m in lengths]
    n_steps = models[0].n_steps * models[0].n_envs

    act = (args.act_repeats, 10 if args.quick else 50, 5 if args.quick else 20)
    acting = interleaved_seconds([acting_step(model) for model in models], *act)
    print(f"acting timed at M = {lengths}", file=sys.stderr, flush=True)
    training = train_seconds(models, args.train_repeats, warmup=0 if args.quick else 1)
    print(f"training timed at M = {lengths}", file=sys.stderr, flush=True)
    machine = measure_machine()

    rows: list[dict[str, Any]] = []
    for m, model, act_s, train_s in zip(lengths, models, acting, training, strict=True):
        buffer, segments = buffer_bytes(model)
        shape = shape_of(model)
        rows.append({
            "memory_length": m,
            "act_ms_median": statistics.median(act_s) * 1e3,
            "act_ms_min": min(act_s) * 1e3,
            "train_ms_per_step_median": statistics.median(train_s) * 1e3 / n_steps,
            "train_ms_per_step_min": min(train_s) * 1e3 / n_steps,
            "act_floor_ms": act_floor(shape, machine) * 1e3,
            "train_floor_ms_per_step": train_floor(shape, machine) * 1e3,
            "state_bytes_per_env": state_nbytes(model.policy.initial_state(model.n_envs))
            // model.n_envs,
            "buffer_bytes_per_transition": buffer,
            "segment_state_bytes_per_transition": segments,
            "rss_growth_mib": None if args.no_rss else rss_growth_in_fresh_process(args, m),
        })  # fmt: skip
    by_length = {row["memory_length"]: row for row in rows}
    act_ref = by_length[args.act_reference]["act_ms_median"]
    train_ref = by_length[args.train_reference]["train_ms_per_step_median"]
    for row in rows:
        m = row["memory_length"]
        row["act_ratio"] = row["act_ms_median"] / act_ref
        row["act_target"] = target_mark(m, args.act_reference, row["act_ratio"], ACT_BOUND)
        row["train_ratio"] = row["train_ms_per_step_median"] / train_ref
        row["train_target"] = target_mark(m, args.train_reference, row["train_ratio"], TRAIN_BOUND)
        row["act_over_floor"] = row["act_ms_median"] / row["act_floor_ms"]
        row["train_over_floor"] = row["train_ms_per_step_median"] / row["train_floor_ms_per_step"]

    lines = header_lines(args, models[0], act, (load_before, load_average()))
    lines.append(
        f"floor: {machine.flops / 1e9:.1f} GFLOP/s (float32 matrix product), "
        f"{machine.bytes_per_s / 1e9:.1f} GB/s (copy, read + written) measured here; "
        "'floor' is the least time a step's products and bytes take at those rates "
        "(act_floor, train_floor), '/floor' the median over it"
    )
    text = "\n".join([*lines, *table_lines(rows)]) + "\n"
    print(text, end="", flush=True)
    if args.out is not None:
        atomic_write(args.out, text.encode())
    return rows


if __name__ == "__main__":
    main()
