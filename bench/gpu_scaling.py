"""``learn()`` on a GPU as envs grow: MemoryPPO's GTrXL against sb3-contrib's RecurrentPPO at
64, 256 and 1,024 envs, with CUDA graphs and the bf16 training pass on and off, and where
the time goes (collection against training, and a profile of the largest setting).

    python bench/gpu_scaling.py --out bench/results/gpu_scaling.txt    # needs a CUDA GPU
    python bench/gpu_scaling.py --device cpu --n-envs 4 8 --models 1x16 --n-steps 8   # a dry run

The task is the passive T-maze (length 20), a cheap task: stepping even 1,024 of them costs
the host little next to the learners' work, so the figures are the learners'. Every
learner collects ``n_steps`` (64) per env and trains 4 epochs over minibatches of ``16 * n_envs`` transitions
(segments of 16 steps for txrl), so a rollout's work grows with the envs while the number
of gradient steps stays the same (16). Models: GTrXL 2 layers x 128 and 3 layers x 256 (4
heads, GRU gates, a memory of as many steps as the width: M = 128 and 256), RecurrentPPO
with an LSTM of the same width.

For each setting the script prints env steps/s over ``learn()`` after one warm-up rollout
and update (at least ``--min-rollouts`` rollouts and ``--min-seconds`` seconds timed), the
seconds per rollout spent collecting and training (the GPU synchronised before each clock
read), and the peak GPU memory allocated while timed (the earlier settings' models are
collected before each setting is built). The txrl variants: ``graph`` (fp32, acting through a CUDA
graph: the default on a GPU), ``eager`` (``cuda_graph=False``), ``bf16`` (the graph and
``training_precision="bf16"``). Rows print as they finish; ``--out PATH`` also writes
them to PATH with the suffixes ``.txt`` and ``.json`` (atomically, after each row).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch
from gpu_throughput import make_env, sync  # bench/ is sys.path[0] when run as a script
from sb3_contrib import RecurrentPPO

from txrl import MemoryPPO

VARIANTS = {
    "graph": {"cuda_graph": True},
    "eager": {"cuda_graph": False},
    "bf16": {"cuda_graph": True},  # and the policy's training_precision="bf16"
}


def parse_model(text: str) -> tuple[int, int]:
    """``"2x128"`` -> (2 layers, d_model 128)."""
    try:
        layers, width = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a model is LAYERSxWIDTH, e.g. 2x128; got {text!r}"
        ) from None
    return layers, width


def build(learner: str, n_envs: int, args: argparse.Namespace, model: tuple[int, int]) -> Any:
    layers, width = model
    env = make_env(n_envs, 20)
    common = {"n_steps": args.n_steps, "batch_size": 16 * n_envs, "n_epochs": 4}
    common |= {"seed": 0, "device": args.device}
    if learner == "recurrent":
        kwargs = {"lstm_hidden_size": width}
        return RecurrentPPO("MlpLstmPolicy", env, policy_kwargs=kwargs, **common)
    heads = 4 if width % 4 == 0 else 1
    gtrxl = {"n_layers": layers, "d_model": width, "n_heads": heads}
    gtrxl |= {"memory_length": width, "gate": "gru"}
    if learner == "bf16":
        gtrxl["training_precision"] = "bf16"
    return MemoryPPO(
        "MlpGTrXLPolicy", env, segment_length=min(16, args.n_steps), policy_kwargs=gtrxl,
        **VARIANTS[learner], **common,
    )  # fmt: skip


class Timed:
    """Wraps a model's ``collect_rollouts`` and ``train`` to add up their seconds."""

    def __init__(self, model: Any) -> None:
        self.model, self.seconds = model, {"collect": 0.0, "train": 0.0}
        for name, method in (("collect", model.collect_rollouts), ("train", model.train)):
            setattr(model, "collect_rollouts" if name == "collect" else "train",
                    self._wrap(name, method))  # fmt: skip

    def _wrap(self, name: str, method: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            sync(self.model.device.type)
            began = time.perf_counter()
            result = method(*args, **kwargs)
            sync(self.model.device.type)
            self.seconds[name] += time.perf_counter() - began
            return result

        return timed


def measure(model: Any, args: argparse.Namespace) -> dict[str, float]:
    per_rollout = model.n_steps * model.n_envs
    model.learn(per_rollout)  # warm-up: first calls, allocations, the first capture
    timed = Timed(model)
    if model.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    rollouts, began = 0, time.perf_counter()
    while rollouts < args.min_rollouts or time.perf_counter() - began < args.min_seconds:
        model.learn(per_rollout, reset_num_timesteps=False)
        rollouts += 1
    sync(model.device.type)
    seconds = time.perf_counter() - began
    peak = torch.cuda.max_memory_allocated() / 2**30 if model.device.type == "cuda" else 0.0
    return {
        "steps_per_s": rollouts * per_rollout / seconds,
        "collect_s": timed.seconds["collect"] / rollouts,
        "train_s": timed.seconds["train"] / rollouts,
        "rollouts": rollouts,
        "peak_gib": peak,
    }


def profile(args: argparse.Namespace, n_envs: int, model_size: tuple[int, int]) -> str:
    """torch.profiler's tables (host time, then device time) of one rollout and update."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    model = build("graph", n_envs, args, model_size)
    per_rollout = model.n_steps * model.n_envs
    model.learn(per_rollout)
    activities = [ProfilerActivity.CPU]
    if model.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with torch_profile(activities=activities) as prof:
        model.learn(per_rollout, reset_num_timesteps=False)
        sync(model.device.type)
    tables = [prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)]
    if model.device.type == "cuda":
        tables.append(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=15))
    return "\n".join(tables)


def write(out: Path | None, lines: list[str], rows: list[dict[str, Any]]) -> None:
    if out is None:
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    for suffix, text in ((".txt", "\n".join(lines) + "\n"),
                         (".json", json.dumps(rows, indent=2) + "\n")):  # fmt: skip
        target = out.with_suffix(suffix)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(target)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with ``models`` as (layers, width) pairs, defaults included."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--n-envs", type=int, nargs="+", default=[1024, 256, 64])
    parser.add_argument("--models", type=parse_model, nargs="+", default=["2x128", "3x256"])
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--n-steps", type=int, default=64, help="rollout length per env")
    parser.add_argument("--min-rollouts", type=int, default=2)
    parser.add_argument("--min-seconds", type=float, default=8.0)
    parser.add_argument("--no-recurrent", action="store_true", help="skip RecurrentPPO")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument(
        "--out", type=Path, help="also write the rows to this path as .txt and .json"
    )
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device is cuda but torch sees no CUDA GPU; use --device cpu for a dry run")
    # argparse converts the values given, not a list default's items
    args.models = [parse_model(m) if isinstance(m, str) else m for m in args.models]
    return args


def main() -> None:
    args = parse_args()
    models = args.models
    gpu = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "none"
    lines = [
        f"txrl/TMazePassive-v0 length 20, n_steps {args.n_steps}, batch 16 x n_envs, 4 epochs; "
        f"device {args.device} ({gpu}); host {platform.machine()}, {torch.get_num_threads()} "
        f"torch threads; torch {torch.__version__}; python {sys.version.split()[0]}",
        f"{'n_envs':>6} {'learner':<28} {'steps/s':>9} {'collect s':>10} {'train s':>9} "
        f"{'rollouts':>8} {'GiB':>6}",
    ]
    print("\n".join(lines), flush=True)
    rows: list[dict[str, Any]] = []
    for n_envs in args.n_envs:
        for layers, width in models:
            learners = list(args.variants) + ([] if args.no_recurrent else ["recurrent"])
            for learner in learners:
                name = (f"RecurrentPPO LSTM-{width}" if learner == "recurrent"
                        else f"txrl GTrXL {layers}x{width} {learner}")  # fmt: skip
                gc.collect()  # the last setting's model (SB3's hold reference cycles)
                if args.device.startswith("cuda"):
                    torch.cuda.empty_cache()
                try:
                    m = measure(build(learner, n_envs, args, (layers, width)), args)
                except Exception as error:  # a setting that fails is reported, not fatal
                    line = f"{n_envs:>6} {name:<28} failed: {type(error).__name__}: {error}"
                    m = {"error": str(error)}
                else:
                    line = (
                        f"{n_envs:>6} {name:<28} {m['steps_per_s']:>9.0f} "
                        f"{m['collect_s']:>10.3f} {m['train_s']:>9.3f} "
                        f"{m['rollouts']:>8} {m['peak_gib']:>6.2f}"
                    )
                print(line, flush=True)
                lines.append(line)
                rows.append({"n_envs": n_envs, "learner": name} | m)
                write(args.out, lines, rows)
    if not args.no_profile:
        n_envs, model = max(args.n_envs), models[0]
        lines.append(f"\nprofile: one rollout and update, {n_envs} envs, GTrXL {model}, graph")
        lines.append(profile(args, n_envs, model))
        print("\n".join(lines[-2:]), flush=True)
        write(args.out, lines, rows)


if __name__ == "__main__":
    main()
