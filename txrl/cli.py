"""The ``txrl`` command line: ``train``, ``eval``, ``compare``, ``inspect`` and ``demo``.

Bad input (a config key, type or value; a run directory that cannot be used) ends with a
message naming what is wrong and what is valid, exit status 2, before any training starts.
Arguments and configs are checked before torch is imported, so ``--help`` and mistakes
answer at once. Each subcommand is a ``_<name>(args) -> exit status`` handler registered in
`build_parser`.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def _demo(args: argparse.Namespace) -> int:
    import torch

    from txrl.backbones import backbone_config_class, backbone_names, make_backbone

    names = backbone_names()
    if args.backbone not in names:
        raise UsageError(f"--backbone must be one of {', '.join(names)}, got {args.backbone!r}")
    fields = {f.name for f in dataclasses.fields(backbone_config_class(args.backbone))}
    if args.memory_length is not None and "memory_length" not in fields:
        raise UsageError(
            f"--memory-length does not apply to backbone {args.backbone!r} (it keeps no "
            "window of past steps); leave it out"
        )
    memory_length = 16 if args.memory_length is None else args.memory_length
    wanted = {"d_model": 64, "n_layers": 2, "n_heads": 4, "memory_length": memory_length}
    settings = {k: v for k, v in wanted.items() if k in fields}
    torch.manual_seed(args.seed)
    backbone = make_backbone(args.backbone, input_dim=8, **settings).eval()
    n_envs = 4
    state = backbone.initial_state(n_envs)
    xs = torch.randn(args.steps, n_envs, 8)  # (T, B, 8)
    starts = torch.zeros(args.steps, n_envs, dtype=torch.bool)  # (T, B)
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
    shown = ", ".join(f"{k} {v}" for k, v in settings.items())
    print(f"{args.backbone}: {params} parameters ({shown}), {n_envs} envs")
    print(f"stepped {args.steps} steps at {per_step * 1e3:.2f} ms/step")
    print(f"max |step-by-step - whole sequence| = {gap:.2e}")
    return 0


def _train(args: argparse.Namespace) -> int:
    # Arguments and the config are checked before torch is imported (txrl.run.train imports it):
    # a mistake is reported in a fraction of a second.
    from txrl.config import load_train_config, read_run_config, resume_config

    if args.resume is not None:
        if args.config is not None or args.run_dir is not None:
            raise UsageError(
                "--resume RUN_DIR continues a run with its own config: give no CONFIG or "
                "--run-dir (--set may change budget, eval.*, checkpoint.* and runtime.*)"
            )
        run_dir: Path | None = Path(args.resume)
        assert run_dir is not None
        stored = read_run_config(run_dir)
        config = resume_config(stored, args.set)
        from txrl.run.run_files import CHECKPOINT_DIR, FINAL_CHECKPOINT, checkpoint_intact

        # (a truncated final.zip is no finished run: the resume sets it aside and finishes it)
        if config == stored and checkpoint_intact(run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT):
            print(
                f"{run_dir} is finished (checkpoints/final.zip exists): nothing to resume; "
                "to train it further: --set budget=N"
            )
            return 0
    elif args.config is None:
        raise UsageError("give a CONFIG.yaml to train, or --resume RUN_DIR")
    else:
        config = load_train_config(args.config, args.set)
        run_dir = Path(args.run_dir) if args.run_dir is not None else None

    from txrl.agents import recipe
    from txrl.errors import TrainingPaused
    from txrl.run.preflight import resolve
    from txrl.run.run_files import TB_DIR, default_run_dir
    from txrl.run.train import train

    config = resolve(config)
    run_dir = run_dir or default_run_dir(config)
    args.run_dir_used = run_dir  # named by a disk error's message (see main)
    verb = "resuming" if args.resume is not None else "training"
    print(
        f"{verb} {config.name} ({config.algo}, {config.policy.backbone}) on {config.env.id} in {run_dir}"
    )
    print(f"follow it with: tensorboard --logdir {run_dir / TB_DIR}", flush=True)
    try:
        result = train(
            config, run_dir, recipe=recipe.main, resume=args.resume is not None, until=args.until
        )
    except TrainingPaused as paused:  # what --until asked for
        print(f"txrl train: {paused}")
        return 0
    print(f"trained {result.timesteps} steps in {result.wall_time_s:.0f} s", end="")
    print(f" (resumed from step {result.resumed_from})" if result.resumed_from is not None else "")
    if result.stopped_at_target:
        stop = config.eval
        print(f"stopped early: {stop.stop_after} evaluations in a row at >= {stop.stop_at}")
    _print_summary(result.final_eval)
    print(f"evaluation log: {result.run_dir / 'eval.jsonl'}; final checkpoint: {result.checkpoint}")
    return 0


def _print_summary(summary: dict) -> None:
    from txrl.run.evaluate import format_summary

    print(format_summary(summary))


def _eval(args: argparse.Namespace) -> int:
    from txrl.run.evaluate import evaluate_checkpoint

    summary = evaluate_checkpoint(
        args.target,
        episodes=args.episodes,
        seed=args.seed,
        deterministic=False if args.stochastic else None,
        best=args.best,
        overrides=args.set,
    )
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        first, last = summary["seed"], summary["seed"] + summary["n_envs"] - 1
        actions = "greedy" if summary["deterministic"] else "sampled"
        print(
            f"{summary['checkpoint']} ({summary['judged']}, step {summary['timesteps']}): "
            f"{actions} actions, eval env seeds {first}-{last}"
        )
        if "env_kwargs" in summary:
            print(f"env kwargs: {summary['env_kwargs']}")
        _print_summary(summary)
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from txrl.inspect import InspectError, inspect_run

    try:
        result = inspect_run(
            args.target,
            episodes=args.episodes,
            seed=args.seed,
            out_dir=args.out,
            video=args.video,
            per_head=args.per_head,
            deterministic=False if args.stochastic else None,
            probe=args.probe,
            probe_align=args.probe_align,
        )
    except InspectError as e:
        raise UsageError(str(e)) from e
    print(f"{result.checkpoint}: {len(result.files)} files in {result.out_dir}")
    for path in result.files:
        print(f"  {path.name}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from txrl.compare import compare, parse_only
    from txrl.config import load_compare_config

    config = load_compare_config(args.config, args.set)
    _, outcomes = compare(
        config,
        args.out,
        backend=args.backend,
        workers=args.workers,
        address=args.address,
        aggregate_only=args.aggregate_only,
        only=parse_only(args.only),
        until=args.until,
    )
    print()
    print((Path(args.out or Path("runs") / str(config.name)) / "results.md").read_text())
    failed = [o for o in outcomes if o.get("status") not in ("finished", "paused")]
    return 1 if failed else 0


class UsageError(Exception):
    """Arguments that do not fit together."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def _seed(text: str) -> int:
    """A seed as ``train`` takes it (``seed`` of a config): an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="txrl", description="Transformer memory for RL agents.")
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser(
        "train",
        help="train an agent from a YAML config, or resume a run",
        description="Train from CONFIG.yaml, or continue an interrupted run with --resume "
        "RUN_DIR. configs/quickstart.yaml explains each of its keys; every key of every "
        "section, with its valid values and default, is in the docs' config reference "
        "(Reference > Config); a mistake in a config is reported with what the key accepts.",
    )
    train.add_argument("config", nargs="?", help="training config (YAML)")
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set ppo.learning_rate=1e-4 --set env.kwargs.length=20 "
        "(VALUE is YAML; repeatable); with --resume: budget, eval.*, checkpoint.*, runtime.*",
    )
    train.add_argument("--run-dir", help="run directory (default: runs/<name>-<date-time>)")
    train.add_argument(
        "--resume", metavar="RUN_DIR", help="continue this run from its last checkpoint"
    )
    train.add_argument(
        "--until",
        type=_positive_int,
        metavar="STEP",
        help="pause at the first rollout start at or after STEP, with a checkpoint there "
        "(--resume continues it; the budget and its lin_ schedules stay the config's)",
    )
    train.set_defaults(handler=_train)

    evaluate = commands.add_parser(
        "eval",
        help="evaluate a run or checkpoint: success rate and return with 95%% CIs",
    )
    evaluate.add_argument("target", metavar="RUN_DIR|CHECKPOINT")
    evaluate.add_argument(
        "--episodes", type=_positive_int, help="default: the config's eval.episodes"
    )
    evaluate.add_argument(
        "--seed",
        type=_seed,
        help="first seed of the eval envs (default: the run's seed + 2,000,000, apart from the "
        "seeds of its evaluations during training)",
    )
    evaluate.add_argument(
        "--stochastic", action="store_true", help="sample actions instead of greedy"
    )
    evaluate.add_argument(
        "--best",
        action="store_true",
        help="the run's best checkpoint (checkpoints/best.zip, its best periodic evaluation)",
    )
    evaluate.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="eval.KEY=VALUE",
        help="judge with other eval settings, e.g. --set eval.env_kwargs.length=3000 (the eval "
        "envs' keyword arguments: env.kwargs updated by eval.env_kwargs); only eval.* keys "
        "(VALUE is YAML; repeatable)",
    )
    evaluate.add_argument(
        "--json",
        action="store_true",
        help="print JSON: the summary, the checkpoint judged (final, best, periodic or file) "
        "and its step, the first eval env seed and n_envs, greedy or not",
    )
    evaluate.set_defaults(handler=_eval)

    insp = commands.add_parser(
        "inspect",
        help="play episodes and draw what the memory does: attention, gates, value (PNG, NPZ, MP4)",
        description="Play episodes with a run's (or checkpoint's) agent and record, per step, each "
        "layer's and head's attention over absolute episode steps, the gates' mean activations, "
        "the value and action probabilities; write an attention map and traces per episode, a "
        "summary across episodes, the data as .npz and, with --video, an MP4 per episode.",
    )
    insp.add_argument("target", metavar="RUN_DIR|CHECKPOINT")
    insp.add_argument(
        "--episodes", type=_positive_int, default=None, help="default: 4; 64 with --probe"
    )
    insp.add_argument("--seed", type=_seed, help="seed of the env (default: the eval seed)")
    insp.add_argument(
        "--out", help="output directory (default: RUN_DIR/inspect, or inspect-NAME by a checkpoint)"
    )
    insp.add_argument(
        "--video", action="store_true", help="also an MP4 per episode (needs rgb_array frames)"
    )
    insp.add_argument("--per-head", action="store_true", help="one map panel per head as well")
    insp.add_argument("--stochastic", action="store_true", help="sample actions instead of greedy")
    insp.add_argument(
        "--probe",
        metavar="TARGET",
        help="instead of pictures, ask what the memory holds and when: fit a linear probe of each "
        "layer's output for TARGET (cue, success, info:KEY, obs:INDEX[@STEP|@cue]) per step, scored "
        "on held-out episodes against chance (probe.csv, probe.json, probe.png)",
    )
    insp.add_argument(
        "--probe-align",
        choices=["start", "cue", "decision"],
        default="start",
        help="count probe steps from the episode's start, its cue step or its decision step",
    )
    insp.set_defaults(handler=_inspect)

    comp = commands.add_parser(
        "compare",
        help="run a grid of variants x seeds in parallel and summarise it",
        description="Run every variant x seed of a compare config (finished runs are skipped, "
        "half-done ones resumed), then write results.csv, results.md and plots.",
    )
    comp.add_argument("config", help="compare config (YAML)")
    comp.add_argument("--backend", choices=["local", "ray"], default="local")
    comp.add_argument("--address", help="Ray cluster address (ray backend; default: a local Ray)")
    comp.add_argument("--workers", type=_positive_int, help="parallel runs (default: CPU cores)")
    comp.add_argument("--out", help="output directory (default: runs/<name>)")
    comp.add_argument(
        "--until",
        type=_positive_int,
        metavar="STEP",
        help="pause each run at the first rollout start at or after STEP, with a checkpoint "
        "there (the same command without --until continues them)",
    )
    comp.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key of the compare config, e.g. --set base.budget=2000",
    )
    comp.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="AXIS=LABEL[,LABEL]",
        help="run only these runs of the grid (repeatable; seed=N[,N] picks seeds), e.g. "
        "--only model=recurrent_ppo --only seed=0,1; the summary covers every finished run",
    )
    comp.add_argument(
        "--aggregate-only", action="store_true", help="only summarise the runs already there"
    )
    comp.set_defaults(handler=_compare)
    demo = commands.add_parser(
        "demo", help="build a memory backbone and step it, checking step == sequence"
    )
    demo.add_argument("--backbone", default="gtrxl", help="any name of txrl.backbone_names()")
    demo.add_argument(
        "--memory-length",
        type=_positive_int,
        help="steps of memory, >= 1 as in a config (backbones that keep a window; default 16)",
    )
    demo.add_argument("--steps", type=_positive_int, default=64, help="steps to run (>= 1)")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(handler=_demo)
    return parser


#: Errors of a directory txrl writes (run directory, compare output) that a user can fix:
#: no permission, a read-only file system, a full disk or quota.
DISK_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT)
INTERRUPTED = 130  # the shell's status of a process ended by SIGINT (128 + 2)


def disk_error_message(error: OSError, run_dir: Path | None) -> str:
    """One line for an `DISK_ERRNOS` error: the path, the cause and what to do next."""
    cause = f"{error.filename or 'a file'}: {error.strerror} [{errno.errorcode.get(error.errno or 0, error.errno)}]"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        todo = "free space on that disk (or raise the quota)"
    else:
        todo = "make that directory writable, or write somewhere else (--run-dir, --out)"
    if run_dir is not None and (run_dir / "config.yaml").exists():
        todo += f", then resume with: txrl train --resume {run_dir}"
    elif run_dir is not None:
        todo += ", then run the same command again"
    return f"cannot write {cause}; {todo}"


def main(argv: Sequence[str] | None = None) -> int:
    from txrl.errors import ConfigError, RunError, TrainingInterrupted

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except (ConfigError, UsageError) as e:
        parser.exit(2, f"txrl {args.command}: error: {e}\n")
    except TrainingInterrupted as e:
        print(f"txrl {args.command}: {e}", file=sys.stderr)
        return INTERRUPTED
    except RunError as e:
        print(f"txrl {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"txrl {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except OSError as e:
        if e.errno not in DISK_ERRNOS:
            raise
        run_dir = getattr(args, "run_dir_used", None)
        print(f"txrl {args.command}: {disk_error_message(e, run_dir)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
