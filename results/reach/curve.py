"""The reach curve: how far each memory carries the passive T-maze's cue, and what it costs.

    python results/reach/curve.py results/reach --out results/reach

Reads every ``span_*``, ``tmaze_*`` and ``backbones/span_*`` study folder under the given
folder (each a ``txrl compare`` output copied by ``results/collect_study.py``: ``compare.yaml``
and ``runs/<memory>/seed_<s>/`` with ``config.yaml`` and ``eval.jsonl``; the backbones'
screen, ``backbones/screen_*``, chooses settings and is not drawn) and writes, for each
memory and span:

* ``reach.md``: the last and the best greedy success of each run, the first evaluation at or
  above the threshold (steps to 0.9), the env steps trained and the wall-clock;
* ``reach.csv``: the same, one row per run;
* ``reach.png``: success (last evaluation, mean over seeds, each seed a dot) and steps to
  0.9 against the span, a line per memory; below them, with a cost table (``--cost``,
  by default ``bench/results/reach_cost_backbones_cpu.txt``, written by
  ``bench/reach_cost.py --across-backbones``), what each backbone costs at each span: its
  training wall-clock per 100,000 env steps and the RAM it holds per env, a line per backbone
  in the colour of its success line.

The span of a run is its config's ``env.kwargs.length`` (the corridor's cells: the cue is
carried ``length + 1`` steps to the decision). A run trained on corridors of
``env.kwargs.min_length`` to ``length`` cells (a recipe's study, judged on ``length`` cells
only) is a line of its own, "<memory>, trained from <min_length> cells", beside the runs
trained on their span alone.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

THRESHOLD = 0.9
#: log10 of the factor between neighbouring memories' spans in the plot
X_NUDGE = 0.012
#: the table of what each backbone costs at each span, when it has been measured
COST_TABLE = (
    Path(__file__).resolve().parents[2] / "bench" / "results" / "reach_cost_backbones_cpu.txt"
)
#: the study folders read under the given folder, as globs of their run folders
STUDIES = ("span_*/runs/*/seed_*", "tmaze_*/runs/*/seed_*", "backbones/span_*/runs/*/seed_*")


@dataclass(frozen=True)
class Run:
    """One run's figures, read from its config and evaluation log."""

    memory: str
    span: int
    seed: int
    budget: int
    steps: int
    last: float
    best: float
    steps_to_threshold: int | None
    wall_time_s: float

    @property
    def finished(self) -> bool:
        """Trained to its budget, or stopped early by ``eval.stop_at`` once solved."""
        return self.steps >= self.budget or self.last >= THRESHOLD


def read_run(run_dir: Path) -> Run | None:
    """The figures of ``run_dir`` (``runs/<memory>/seed_<s>``), or None before its first
    evaluation."""
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    lines = (
        (run_dir / "eval.jsonl").read_text().splitlines()
        if (run_dir / "eval.jsonl").exists()
        else []
    )
    entries = [json.loads(line) for line in lines if line.strip()]
    if not entries:
        return None
    successes = [float(e["success_rate"]) for e in entries]
    reached = next((int(e["timesteps"]) for e in entries if e["success_rate"] >= THRESHOLD), None)
    kwargs = config["env"]["kwargs"]
    memory = run_dir.parent.name
    if kwargs.get("min_length") is not None:
        memory = f"{memory}, trained from {int(kwargs['min_length'])} cells"
    return Run(
        memory=memory,
        span=int(kwargs["length"]),
        seed=int(run_dir.name.removeprefix("seed_")),
        budget=int(config["budget"]),
        steps=int(entries[-1]["timesteps"]),
        last=successes[-1],
        best=max(successes),
        steps_to_threshold=reached,
        wall_time_s=float(entries[-1].get("wall_time_s", math.nan)),
    )


def read_runs(folder: Path) -> list[Run]:
    """Every run of every study of `STUDIES` under ``folder``, by span, memory and seed."""
    runs = []
    run_dirs = [run_dir for pattern in STUDIES for run_dir in folder.glob(pattern)]
    for run_dir in sorted(run_dirs):
        run = read_run(run_dir)
        if run is not None:
            runs.append(run)
    return sorted(runs, key=lambda r: (r.span, r.memory, r.seed))


@dataclass(frozen=True)
class Cost:
    """What one backbone costs at one span (a row of the cost table)."""

    backbone: str
    span: int
    train_s_per_100k: float  # training wall-clock per 100,000 env steps, seconds
    ram_mib_per_env: float  # acting state and one rollout's buffer, per env


def read_costs(path: Path) -> list[Cost]:
    """The rows of a cost table written by ``bench/reach_cost.py --across-backbones``: the
    line that starts ``backbone span`` names the columns, one word each, and a row follows
    per backbone and span."""
    lines = path.read_text().splitlines()
    start = next(
        (i for i, line in enumerate(lines) if line.split()[:2] == ["backbone", "span"]), None
    )
    if start is None:
        raise ValueError(f"{path}: no table (a line starting 'backbone span')")
    headings = lines[start].split()
    costs = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        row = dict(zip(headings, line.split(), strict=True))
        costs.append(
            Cost(
                backbone=row["backbone"],
                span=int(row["span"]),
                train_s_per_100k=float(row["train_s/100k"]),
                ram_mib_per_env=float(row["RAM_MiB/env"]),
            )
        )
    return costs


def _steps(value: int | None) -> str:
    if value is None:
        return "never"
    return f"{value / 1000:.0f}k" if value >= 1000 else str(value)


def table(runs: list[Run]) -> str:
    """``reach.md``: one row per run."""
    lines = [
        "| span | memory | seed | last success | best success | steps to 0.9 | env steps (budget) | wall-clock |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        status = "" if r.finished else " (unfinished)"
        lines.append(
            f"| {r.span} | {r.memory} | {r.seed} | {r.last:.2f}{status} | {r.best:.2f} | "
            f"{_steps(r.steps_to_threshold)} | {r.steps:,} ({r.budget:,}) | "
            f"{r.wall_time_s / 60:.0f} min |"
        )
    return "\n".join(lines) + "\n"


def _write_atomically(path: Path, write: Any) -> None:
    """Write ``path`` through a temporary file beside it, replaced in one step."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _backbone(memory: str) -> str:
    """The backbone of a memory's line ("gtrxl, trained from 100 cells": gtrxl)."""
    return memory.split(",")[0]


def plot(runs: list[Run], path: Path, costs: list[Cost] | None = None) -> Any:
    """``reach.png``: success and steps to 0.9 against the span, a line per memory; with
    ``costs``, below them the training wall-clock per 100k env steps and the RAM per env
    against the span, a line per backbone. A backbone has one colour in every panel; its
    runs trained on their span alone are dashed, those trained from short corridors (the
    recipe's) solid. Returns the figure."""
    from matplotlib.figure import Figure

    rows = 2 if costs else 1
    fig = Figure(figsize=(12.5, 4.2 * rows), layout="constrained")
    axes = fig.subplots(rows, 2, squeeze=False)
    success_ax, steps_ax = axes[0]
    memories = sorted({r.memory for r in runs})
    backbones = [_backbone(m) for m in memories] + [c.backbone for c in costs or []]
    colours = {b: f"C{i % 10}" for i, b in enumerate(dict.fromkeys(backbones))}
    for index, memory in enumerate(memories):
        mine = [r for r in runs if r.memory == memory]
        # each memory's points sit a little apart along the span axis, so that memories
        # with the same score at a span (many reach 1.0) stay visible side by side
        nudge = 10 ** ((index - (len(memories) - 1) / 2) * X_NUDGE)
        spans = sorted({r.span for r in mine})
        means = [
            sum(r.last for r in mine if r.span == s) / sum(r.span == s for r in mine) for s in spans
        ]
        style = "-" if "trained from" in memory else "--"
        (line,) = success_ax.plot([s * nudge for s in spans], means, marker="o", ls=style,
                                  label=memory, color=colours[_backbone(memory)])  # fmt: skip
        success_ax.scatter([r.span * nudge for r in mine], [r.last for r in mine],
                           color=line.get_color(), s=12, alpha=0.5)  # fmt: skip
        reached = [(r.span, r.steps_to_threshold) for r in mine if r.steps_to_threshold is not None]
        if reached:
            # the mean over the seeds that reached it, a line; each seed a dot
            xs = sorted({span for span, _ in reached})
            ys = [
                sum(v for s, v in reached if s == x) / sum(s == x for s, _ in reached) for x in xs
            ]
            steps_ax.plot([x * nudge for x in xs], ys, marker="o", ls=style,
                          color=line.get_color(), label=memory)  # fmt: skip
            steps_ax.scatter(
                [s * nudge for s, _ in reached],
                [v for _, v in reached],
                color=line.get_color(),
                s=12,
                alpha=0.5,
            )
    success_ax.axhline(0.5, color="grey", lw=0.8, ls=":", label="chance")
    success_ax.set(
        xscale="log",
        xlabel="span (corridor cells)",
        ylabel="greedy success, last evaluation",
        ylim=(-0.02, 1.02),
    )
    success_ax.set_title(
        "a dot per seed, the line through their mean; memories nudged apart along the span",
        fontsize=8,
    )
    steps_ax.set(
        xscale="log", xlabel="span (corridor cells)", ylabel=f"env steps to success {THRESHOLD}"
    )
    steps_ax.set_title("runs that never reached it are not drawn", fontsize=8)
    # one legend for both panels of the row, outside them, where it hides no point
    handles, labels = success_ax.get_legend_handles_labels()
    steps_ax.legend(handles, labels, fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    if costs:
        _plot_costs(costs, axes[1], colours)
    fig.suptitle("Passive T-maze: reach of each memory" + (" and its cost" if costs else ""))
    _write_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    return fig


def _plot_costs(costs: list[Cost], axes: Any, colours: dict[str, str]) -> None:
    """The training wall-clock per 100k env steps (minutes) and the RAM per env (MiB)
    against the span on ``axes``, a line per backbone in its colour of ``colours``."""
    time_ax, ram_ax = axes
    for backbone in dict.fromkeys(c.backbone for c in costs):
        mine = sorted((c for c in costs if c.backbone == backbone), key=lambda c: c.span)
        colour = colours[backbone]
        spans = [c.span for c in mine]
        time_ax.plot(spans, [c.train_s_per_100k / 60 for c in mine], marker="o", color=colour,
                     label=backbone)  # fmt: skip
        ram_ax.plot(spans, [c.ram_mib_per_env for c in mine], marker="o", color=colour,
                    label=backbone)  # fmt: skip
    time_ax.set(xscale="log", yscale="log", xlabel="span (corridor cells)",
                ylabel="training wall-clock per 100k env steps (min)")  # fmt: skip
    time_ax.set_title("one CPU thread, the machine of the cost table", fontsize=8)
    ram_ax.set(xscale="log", yscale="log", xlabel="span (corridor cells)",
               ylabel="RAM per env (MiB): acting state + rollout buffer")  # fmt: skip
    ram_ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="folder of span_* and tmaze_* studies")
    parser.add_argument(
        "--out", type=Path, required=True, help="folder to write reach.md/.csv/.png"
    )
    parser.add_argument(
        "--cost",
        type=Path,
        default=COST_TABLE if COST_TABLE.is_file() else None,
        help="cost table of bench/reach_cost.py --across-backbones (default: the committed "
        "one, when there); --no-cost draws none",
    )
    parser.add_argument("--no-cost", action="store_true", help="draw no cost panels")
    args = parser.parse_args(argv)
    runs = read_runs(args.folder)
    if not runs:
        parser.error(f"no evaluated run under {args.folder}/ ({', '.join(STUDIES)})")
    costs = None if args.no_cost or args.cost is None else read_costs(args.cost)
    args.out.mkdir(parents=True, exist_ok=True)
    _write_atomically(args.out / "reach.md", lambda tmp: tmp.write_text(table(runs)))

    def write_csv(tmp: Path) -> None:
        with tmp.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(
                [
                    "span",
                    "memory",
                    "seed",
                    "last",
                    "best",
                    "steps_to_0.9",
                    "steps",
                    "budget",
                    "wall_time_s",
                ]
            )
            for r in runs:
                writer.writerow(
                    [
                        r.span,
                        r.memory,
                        r.seed,
                        r.last,
                        r.best,
                        r.steps_to_threshold or "",
                        r.steps,
                        r.budget,
                        r.wall_time_s,
                    ]
                )

    _write_atomically(args.out / "reach.csv", write_csv)
    plot(runs, args.out / "reach.png", costs)
    print(table(runs), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
