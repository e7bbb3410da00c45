"""What long backpropagation through time costs the recurrent memories: time and peak memory
per env step of a rollout and of a PPO update, as the training sequence grows.

    python bench/bptt_cost.py --out bench/results/bptt_cost_cpu.txt   # segments 32, 256, 1024
    python bench/bptt_cost.py --models gru --lengths 8,16 --quick     # a quick, noisy look

Each model at each length ("BPTT": how many steps a gradient reaches back) learns on the
passive T-maze of 400 cells (episodes of 402 steps, near POPGym's RepeatFirstMedium's 416),
4 envs, 1,024 steps per env per rollout, 4 epochs, on the CPU with one torch thread
(``--threads``), at POPGym's width (256):

* ``gru``, ``lstm``, ``ffm``: :class:`txrl.MemoryPPO` with that backbone (``d_model`` 256, one
  layer), ``segment_length`` = BPTT, minibatches of 2,048 transitions (2 segments of 1,024,
  64 of 32);
* ``recurrent_ppo``: sb3-contrib's RecurrentPPO (an LSTM of 256 for the actor and another
  for the critic, its defaults), ``n_steps`` = BPTT (its sequences are cut at the rollout's
  and the minibatch's edges, so a gradient reaches back at most ``n_steps`` steps),
  minibatches of min(2048, n_steps x 4) transitions.

Every setting runs in a fresh process: one rollout and one update as a warm-up, then
``--repeats`` rollouts and updates timed (``rollout ms/step``, ``update ms/step``: medians
over them of a ``collect_rollouts`` and a ``train()``, divided by the rollout's env steps).
``peak MiB``: how far the first rollout and update raise the process's peak resident set
over its resident set after the model's construction (Linux: ``VmHWM`` after
``/proc/self/clear_refs``; see ``bench/reach_cost.py``), and ``KiB/step`` that divided by
the rollout's env steps. Figures on a shared machine move with its load: compare rows of one
run.

A recurrent update's work per env step does not grow with BPTT (each step is recomputed
once per epoch whatever the length), but its parallelism does shrink: a minibatch of 2,048
transitions holds 64 segments of 32 and 2 of 1,024, and the recurrence runs step after step
over each segment's length.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from reach_cost import (  # bench/ is sys.path[0] when run as a script
    cpu_model,
    load_average,
    load_line,
    peak_rss_kib,
    positive_ints,
    reset_peak_rss,
)

from txrl.files import atomic_write

MODELS = ("gru", "lstm", "ffm", "recurrent_ppo")
LENGTHS = (32, 256, 1024)
#: RecurrentPPO's BPTT is its rollout length: the lengths it runs at
RECURRENT_PPO_LENGTHS = (128, 256, 1024)
N_ENVS, N_STEPS, BATCH, EPOCHS, WIDTH, CORRIDOR = 4, 1024, 2048, 4, 256, 400
#: (key of a row, heading, format) of each column of the table, in order
COLUMNS = (
    ("model", "model", "{}"),
    ("bptt", "BPTT", "{:d}"),
    ("rollout_ms_per_step", "rollout ms/step", "{:.3f}"),
    ("update_ms_per_step", "update ms/step", "{:.3f}"),
    ("update_ms_per_step_min", "update min", "{:.3f}"),
    ("peak_mib", "peak MiB", "{:.1f}"),
    ("peak_kib_per_step", "KiB/step", "{:.2f}"),
)


#: ``--lengths``'s and ``--recurrent-ppo-lengths``' value: positive lengths, comma-separated.
positive_list = positive_ints("lengths", "32,256,1024")


def model_list(text: str) -> list[str]:
    """``--models``'s value: names among :data:`MODELS`, comma-separated."""
    names = [part.strip() for part in text.split(",")]
    unknown = [name for name in names if name not in MODELS]
    if unknown or not text:
        raise argparse.ArgumentTypeError(
            f"takes models among {', '.join(MODELS)}, comma-separated, got {text!r}"
        )
    return names


def build(model: str, bptt: int, n_steps: int) -> Any:
    """The learner of ``model`` at BPTT length ``bptt`` (see the module docstring)."""
    from stable_baselines3.common.env_util import make_vec_env

    import txrl.envs  # noqa: F401 - registers the tasks

    env = make_vec_env(
        "txrl/TMazePassive-v0", n_envs=N_ENVS, seed=0, env_kwargs={"length": CORRIDOR}
    )
    if model == "recurrent_ppo":
        from txrl.learners.recurrent_ppo.algorithm import RecurrentPPO

        return RecurrentPPO(
            "MlpLstmPolicy", env, n_steps=bptt, batch_size=min(BATCH, bptt * N_ENVS),
            n_epochs=EPOCHS, seed=0, policy_kwargs={"lstm_hidden_size": WIDTH},
        )  # fmt: skip
    from txrl import MemoryPPO

    return MemoryPPO(
        "MlpMemoryPolicy", env, n_steps=n_steps, batch_size=max(BATCH, bptt),
        segment_length=bptt, n_epochs=EPOCHS, seed=0,
        policy_kwargs={"backbone": model, "d_model": WIDTH, "n_layers": 1},
    )  # fmt: skip


def one_rollout(model: Any) -> float:
    """Seconds of one ``collect_rollouts``, as ``learn`` does before each ``train()``."""
    model._setup_learn(model.n_steps * model.n_envs, reset_num_timesteps=False)
    callback = model._init_callback(None)
    began = time.perf_counter()
    model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)
    return time.perf_counter() - began


def one_update(model: Any) -> float:
    """Seconds of one ``train()`` on the rollout in the buffer."""
    began = time.perf_counter()
    model.train()
    return time.perf_counter() - began


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """In this process: the row of ``--measure MODEL:BPTT`` (see the module docstring)."""
    torch.set_num_threads(args.threads)
    name, _, bptt_text = args.measure.partition(":")
    bptt = int(bptt_text)
    model = build(name, bptt, max(args.n_steps, bptt))
    steps = model.n_steps * model.n_envs
    gc.collect()
    reset_peak_rss()
    before = peak_rss_kib()
    one_rollout(model)
    one_update(model)  # the warm-up: first allocations, the optimizer's state
    peak_kib = peak_rss_kib() - before
    rollouts, updates = [], []
    for _ in range(args.repeats):
        rollouts.append(one_rollout(model))
        updates.append(one_update(model))
    return {
        "model": name,
        "bptt": bptt,
        "rollout_ms_per_step": statistics.median(rollouts) * 1e3 / steps,
        "update_ms_per_step": statistics.median(updates) * 1e3 / steps,
        "update_ms_per_step_min": min(updates) * 1e3 / steps,
        "peak_mib": peak_kib / 1024,
        "peak_kib_per_step": peak_kib / steps,
    }


def measure_in_fresh_process(args: argparse.Namespace, model: str, bptt: int) -> dict[str, Any]:
    """:func:`measure` of ``model`` at ``bptt``, in a process of its own."""
    command = [sys.executable, __file__, "--measure", f"{model}:{bptt}",
               "--threads", str(args.threads), "--repeats", str(args.repeats),
               "--n-steps", str(args.n_steps)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"measuring {model} at BPTT {bptt} failed:\n{done.stderr[-3000:]}")
    row: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return row


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    cells = [[form.format(row[key]) for key, _, form in COLUMNS] for row in rows]
    widths = [
        max(len(heading), *(len(line[i]) for line in cells))
        for i, (_, heading, _) in enumerate(COLUMNS)
    ]
    lines = [" ".join(f"{h:>{w}}" for (_, h, _), w in zip(COLUMNS, widths, strict=True))]
    for line in cells:
        lines.append(" ".join(f"{c:>{w}}" for c, w in zip(line, widths, strict=True)))
    return lines


def header_lines(args: argparse.Namespace, load: tuple[float | None, float | None]) -> list[str]:
    lines = [
        f"passive T-maze of {CORRIDOR} cells, {N_ENVS} envs; txrl's MemoryPPO: n_steps "
        f"{args.n_steps} (or the BPTT length where longer), segment_length = BPTT, minibatches "
        f"of {BATCH}, {EPOCHS} epochs, backbone d_model {WIDTH}, 1 layer; sb3-contrib's "
        f"RecurrentPPO: n_steps = BPTT, minibatches of min({BATCH}, n_steps x {N_ENVS}), "
        f"{EPOCHS} epochs, LSTMs of {WIDTH} (actor and critic)",
        f"CPU {cpu_model()}, {os.cpu_count()} logical CPUs; torch {torch.__version__}, "
        f"{args.threads} thread(s); python {platform.python_version()}",
        load_line(load),
    ]
    if args.note:
        lines.append(args.note)
    lines.append(
        f"one process per row: a warm-up rollout and update, then {args.repeats} of each "
        "timed (medians, and the update's minimum); peak MiB: the first rollout and update's "
        "rise of the peak resident set"
    )
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", type=model_list, default=list(MODELS), help="models, comma-separated")  # fmt: skip
    parser.add_argument(
        "--lengths", type=positive_list, default=list(LENGTHS),
        help="txrl's segment lengths (BPTT), comma-separated",
    )  # fmt: skip
    parser.add_argument(
        "--recurrent-ppo-lengths", type=positive_list, default=list(RECURRENT_PPO_LENGTHS),
        help="RecurrentPPO's n_steps (its BPTT), comma-separated",
    )  # fmt: skip
    parser.add_argument("--n-steps", type=int, default=N_STEPS, help="txrl's steps per env per rollout")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--repeats", type=int, help="timed rollouts and updates per row (2)")
    parser.add_argument("--quick", action="store_true", help="one timed rollout and update")
    parser.add_argument("--note", help="a line to add to the header (e.g. what shared the CPUs)")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # the process per row
    args = parser.parse_args(argv)
    for name in ("n_steps", "threads", "repeats"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    if args.repeats is None:
        args.repeats = 1 if args.quick else 2
    return args


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Measure every model at every length, print the table (and write it with ``--out``);
    returns its rows."""
    args = parse_args(argv)
    if args.measure is not None:
        print(json.dumps(measure(args)))
        return []
    load_before = load_average()
    rows = []
    for model in args.models:
        lengths = args.recurrent_ppo_lengths if model == "recurrent_ppo" else args.lengths
        for bptt in lengths:
            rows.append(measure_in_fresh_process(args, model, bptt))
            print(f"measured {model} at BPTT {bptt}", file=sys.stderr, flush=True)
    lines = header_lines(args, (load_before, load_average()))
    text = "\n".join([*lines, *table_lines(rows)]) + "\n"
    print(text, end="", flush=True)
    if args.out is not None:
        atomic_write(args.out, text.encode())
    return rows


if __name__ == "__main__":
    main()
