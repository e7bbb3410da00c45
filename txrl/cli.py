"""The ``txrl`` command line."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    import torch

    from txrl import make_backbone

    torch.manual_seed(args.seed)
    backbone = make_backbone(
        args.backbone,
        input_dim=8,
        d_model=64,
        n_layers=2,
        n_heads=4,
        memory_length=args.memory_length,
    ).eval()
    n_envs = 4
    state = backbone.initial_state(n_envs)
    xs = torch.randn(args.steps, n_envs, 8)
    starts = torch.zeros(args.steps, n_envs, dtype=torch.bool)
    starts[0] = True
    starts[args.steps // 2, 0] = True  # env 0 begins a new episode half-way
    outputs = []
    began = time.perf_counter()
    with torch.no_grad():
        for t in range(args.steps):
            y, state = backbone(xs[t : t + 1], state, starts[t : t + 1])
            outputs.append(y)
        per_step = (time.perf_counter() - began) / args.steps
        y_seq, _ = backbone(xs, backbone.initial_state(n_envs), starts)
    gap = (torch.cat(outputs) - y_seq).abs().max().item()
    params = sum(p.numel() for p in backbone.parameters())
    print(f"{args.backbone}: {params} parameters, memory {args.memory_length}, {n_envs} envs")
    print(f"stepped {args.steps} steps at {per_step * 1e3:.2f} ms/step")
    print(f"max |step-by-step - whole sequence| = {gap:.2e}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="txrl", description="Transformer memory for RL agents.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="build a memory backbone and step it, checking step == sequence"
    )
    demo.add_argument("--backbone", default="gtrxl")
    demo.add_argument("--memory-length", type=int, default=16)
    demo.add_argument("--steps", type=int, default=64)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    raise SystemExit(main())
