"""Acting latency of two source trees of txrl, measured in one run (a paired A/B).

    python bench/acting_ab.py BEFORE_TREE AFTER_TREE [--blocks 40] [--block 25] [--out FILE]

Each tree (a checkout, e.g. ``git worktree add /tmp/before COMMIT``) gets one worker process
per kind of call, which builds ``bench/throughput.py``'s setup from its own code and times
single calls: the eager acting step (``act``), ``predict`` (deterministic, as
``evaluate_policy`` calls it), and both with ``compile_step``. The two workers of a kind are
timed in alternating blocks of calls, so a change in the machine's load falls on both; the
table gives each side's median and 10th percentile and their ratio (after / before).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

KINDS = ("act", "predict", "act_compiled", "predict_compiled")

WORKER = r"""
import argparse, json, sys, time
tree, kind = sys.argv[1], sys.argv[2]
sys.path.insert(0, tree + "/bench")
import torch
torch.set_num_threads(1)
from throughput import build, predict, txrl_act
setup = argparse.Namespace(n_envs=8, length=20, n_steps=128, batch_size=256, n_epochs=4, segment_length=32)
extra = {"backbone_kwargs": {"compile_step": True}} if kind.endswith("compiled") else {}
model = build("txrl", "bench", setup, **extra)
call, warm = txrl_act(model) if kind.startswith("act") else predict(model, deterministic=True)
for _ in range(warm):
    call()
print("ready", flush=True)
for line in sys.stdin:
    times = []
    for _ in range(int(line)):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    print(json.dumps(times), flush=True)
"""


def _worker(tree: Path, kind: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tree), kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=tree,
    )


def paired(trees: tuple[Path, Path], kind: str, blocks: int, block: int) -> list[list[float]]:
    """Seconds per call of each tree, timed in ``blocks`` alternating blocks of ``block``."""
    workers = [_worker(tree, kind) for tree in trees]
    try:
        for proc, tree in zip(workers, trees, strict=True):
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("ready"):
                raise RuntimeError(
                    f"the {kind} worker of {tree} did not start (run it by hand to see why)"
                )
        times: list[list[float]] = [[], []]
        for _ in range(blocks):
            for proc, taken in zip(workers, times, strict=True):
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(f"{block}\n")
                proc.stdin.flush()
                taken.extend(json.loads(proc.stdout.readline()))
        return times
    finally:
        for proc in workers:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait()


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--block", type=int, default=25)
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown kinds {unknown}; valid: {', '.join(KINDS)}")
    for tree in (args.before, args.after):
        if not (tree / "bench" / "throughput.py").exists():
            parser.error(f"{tree} is not a txrl source tree (no bench/throughput.py)")
    lines = [
        f"# acting latency A/B: before {args.before}, after {args.after}",
        f"# {_cpu()}, {os.cpu_count()} logical CPUs, one torch thread a worker, "
        f"load average {os.getloadavg()[0]:.1f} at the start",
        f"# {args.blocks} alternating blocks of {args.block} calls a side",
        f"{'kind':<18} {'before ms':>10} {'p10':>7} {'after ms':>10} {'p10':>7} {'after/before':>13} {'p10':>6}",
    ]
    print("\n".join(lines), flush=True)
    for kind in kinds:
        before, after = paired((args.before, args.after), kind, args.blocks, args.block)
        med = [statistics.median(t) * 1e3 for t in (before, after)]
        p10 = [sorted(t)[len(t) // 10] * 1e3 for t in (before, after)]
        row = (
            f"{kind:<18} {med[0]:>10.3f} {p10[0]:>7.3f} {med[1]:>10.3f} {p10[1]:>7.3f} "
            f"{med[1] / med[0]:>13.3f} {p10[1] / p10[0]:>6.3f}"
        )
        lines.append(row)
        print(row, flush=True)
    lines.append(f"# load average {os.getloadavg()[0]:.1f} at the end")
    if args.out is not None:
        from txrl.files import atomic_write

        atomic_write(args.out, ("\n".join(lines) + "\n").encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
