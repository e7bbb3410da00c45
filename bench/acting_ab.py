"""Acting latency of two source trees of txrl, measured in one run (a paired A/B); and
``predict`` against sb3-contrib's RecurrentPPO and against its floor.

    python bench/acting_ab.py BEFORE_TREE AFTER_TREE [--blocks 40] [--block 25] [--out FILE]
    python bench/acting_ab.py --floor TREE [--blocks 40] [--block 25] [--out FILE]

Each tree (a checkout, e.g. ``git worktree add /tmp/before COMMIT``) gets one worker process
per kind of call, which builds ``bench/throughput.py``'s setup from its own code and times
single calls: the eager acting step (``act``), ``predict`` (deterministic, as
``evaluate_policy`` calls it), and both with ``compile_step``. The two workers of a kind are
timed in alternating blocks of calls, so a change in the machine's load falls on both. The
table gives each side's minimum and median, the ratios of both (after / before), and the
median over blocks of each block's ratio of medians (the paired figure: on a machine that
other processes share, a block's two halves see nearly the same load).

``--floor`` times, in the same alternating blocks, the tree's eager ``predict``,
RecurrentPPO's ``predict`` at the same setup (its LSTM of 128 units, deterministic) and the
floor of txrl's ``predict``: the weight products its step makes (the embedding, each
layer's, the actor's MLP and action head; ``bench/throughput.py``'s ``step_products``
without the critic's), alone, on the same B rows, with no other op, which any fp32
implementation of the same model pays. It prints ``predict`` / RecurrentPPO's and
``predict`` / floor.
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
#: the sides of ``--floor``: txrl's predict, RecurrentPPO's, the floor of txrl's
FLOOR_KINDS = ("predict", "recurrent_predict", "predict_floor")

WORKER = r"""
import argparse, json, sys, time
tree, kind = sys.argv[1], sys.argv[2]
sys.path.insert(0, tree + "/bench")
import torch
torch.set_num_threads(1)
from throughput import build, predict, txrl_act, txrl_products, step_products
setup = argparse.Namespace(n_envs=8, length=20, n_steps=128, batch_size=256, n_epochs=4, segment_length=32)
extra = {"backbone_kwargs": {"compile_step": True}} if kind.endswith("compiled") else {}
model = build("recurrent" if kind == "recurrent_predict" else "txrl", "bench", setup, **extra)
if kind == "predict_floor":
    policy = model.policy
    critic = {id(p) for m in (policy.value_net, policy.mlp_extractor.value_net) for p in m.parameters()}
    actor_only = [(w, b) for w, b in step_products(policy) if id(w) not in critic]
    import throughput
    throughput.step_products = lambda _: actor_only
    call, warm = txrl_products(model)
elif kind.startswith("act"):
    call, warm = txrl_act(model)
else:
    call, warm = predict(model, deterministic=True)
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


def timed_in_turns(sides: list[tuple[Path, str]], blocks: int, block: int) -> list[list[float]]:
    """Seconds per call of each (tree, kind) side, timed in ``blocks`` turns of ``block``
    calls a side, the sides in turn."""
    workers = [_worker(tree, kind) for tree, kind in sides]
    try:
        for proc, (tree, kind) in zip(workers, sides, strict=True):
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("ready"):
                raise RuntimeError(
                    f"the {kind} worker of {tree} did not start (run it by hand to see why)"
                )
        times: list[list[float]] = [[] for _ in sides]
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


def paired(trees: tuple[Path, Path], kind: str, blocks: int, block: int) -> list[list[float]]:
    """Seconds per call of each tree, timed in ``blocks`` alternating blocks of ``block``."""
    return timed_in_turns([(tree, kind) for tree in trees], blocks, block)


def ratio_row(name: str, base: list[float], other: list[float], block: int) -> str:
    """A row: each side's minimum and median (ms), the ratios of both (other / base) and the
    median over blocks of each block's ratio of medians."""
    low = [min(t) * 1e3 for t in (base, other)]
    med = [statistics.median(t) * 1e3 for t in (base, other)]
    by_block = [
        statistics.median(other[i : i + block]) / statistics.median(base[i : i + block])
        for i in range(0, len(base), block)
    ]
    return (
        f"{name:<18} {low[0]:>10.3f} {med[0]:>7.3f} {low[1]:>10.3f} {med[1]:>7.3f} "
        f"{low[1] / low[0]:>9.3f} {med[1] / med[0]:>7.3f} {statistics.median(by_block):>7.3f}"
    )


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
    parser.add_argument("before", type=Path, nargs="?")
    parser.add_argument("after", type=Path, nargs="?")
    parser.add_argument(
        "--floor", type=Path, help="a tree: predict against RecurrentPPO's and its floor"
    )
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--block", type=int, default=25)
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    trees = [args.floor] if args.floor is not None else [args.before, args.after]
    if any(tree is None for tree in trees) or (args.floor and args.before):
        parser.error("give BEFORE_TREE and AFTER_TREE, or --floor TREE alone")
    kinds = args.kinds.split(",")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown kinds {unknown}; valid: {', '.join(KINDS)}")
    for tree in trees:
        if not (tree / "bench" / "throughput.py").exists():
            parser.error(f"{tree} is not a txrl source tree (no bench/throughput.py)")
    title = (
        f"# predict against RecurrentPPO's and its floor: {args.floor}"
        if args.floor is not None
        else f"# acting latency A/B: before {args.before}, after {args.after}"
    )
    lines = [
        title,
        f"# {_cpu()}, {os.cpu_count()} logical CPUs, one torch thread a worker, "
        f"load average {os.getloadavg()[0]:.1f} at the start",
        f"# {args.blocks} alternating blocks of {args.block} calls a side",
    ]
    if args.floor is not None:
        lines.append(
            f"{'txrl predict vs':<18} {'base min':>10} {'median':>7} {'txrl min':>10} "
            f"{'median':>7} {'ratio min':>9} {'median':>7} {'paired':>7}"
        )
        print("\n".join(lines), flush=True)
        sides = [(args.floor, kind) for kind in FLOOR_KINDS]
        ours, recurrent, floor = timed_in_turns(sides, args.blocks, args.block)
        for name, base in (("RecurrentPPO", recurrent), ("its floor", floor)):
            lines.append(ratio_row(name, base, ours, args.block))
            print(lines[-1], flush=True)
    else:
        lines.append(
            f"{'kind':<18} {'before min':>10} {'median':>7} {'after min':>10} {'median':>7} "
            f"{'ratio min':>9} {'median':>7} {'paired':>7}"
        )
        print("\n".join(lines), flush=True)
        for kind in kinds:
            before, after = paired((args.before, args.after), kind, args.blocks, args.block)
            lines.append(ratio_row(kind, before, after, args.block))
            print(lines[-1], flush=True)
    lines.append(f"# load average {os.getloadavg()[0]:.1f} at the end")
    if args.out is not None:
        from txrl.files import atomic_write

        atomic_write(args.out, ("\n".join(lines) + "\n").encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
