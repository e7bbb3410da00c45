"""Learning curves and a summary table of ``txrl train`` runs, from their ``eval.jsonl``.

Each run directory holds one JSON line per periodic evaluation (success rate with its 95%
interval, mean return, wall-clock). This script draws success rate (or, for tasks without
one, the mean return) against env steps, one line per run, and writes a Markdown table of the last evaluation of each run::

    python results/plot_runs.py RUN_DIR [RUN_DIR ...] --out results/minigrid_memory_s9

It writes ``curves.png`` and ``summary.md`` into ``--out`` (atomically: temporary file, then
rename), and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from txrl.compare import MAX_CURVES_PER_PANEL, steps_axis


def read_evals(run: Path) -> list[dict]:
    """The evaluations of one run, in step order."""
    path = run / "eval.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{run} has no eval.jsonl: is it a txrl train run directory?")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(rows, key=lambda r: r["timesteps"])


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories of txrl train")
    parser.add_argument("--out", type=Path, required=True, help="folder for curves.png, summary.md")
    parser.add_argument(
        "--title", default=None, help="figure title (default: the out folder's name)"
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    names = [run.name for run in args.runs]
    if len(set(names)) < len(names):  # e.g. <variant>/seed_<s> of a compare study
        names = [f"{run.parent.name}/{run.name}" for run in args.runs]
    runs = {name: read_evals(run) for name, run in zip(names, args.runs, strict=True)}

    # success rate where every evaluation has one; else the mean return (e.g. POPGym)
    success = all(r.get("success_rate") is not None for rows in runs.values() for r in rows)
    metric, ci_key = ("success_rate", "success_ci95") if success else ("mean_return", "return_ci95")
    fig, ax = plt.subplots(figsize=(7.5, 3.6), layout="constrained")
    bands = len(runs) <= MAX_CURVES_PER_PANEL  # more bands than that hide each other
    for name, rows in runs.items():
        steps = [r["timesteps"] for r in rows]
        (line,) = ax.plot(steps, [r[metric] for r in rows], marker=".", label=name)
        if bands:
            low = [r[ci_key][0] for r in rows]
            high = [r[ci_key][1] for r in rows]
            ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.15)
    if success:
        ax.axhline(0.5, color="grey", linestyle=":", linewidth=1, label="chance")
        ax.set_ylim(-0.02, 1.02)
    steps_axis(ax)
    ax.set_xlabel("env steps")
    ax.set_ylabel("success rate (greedy)" if success else "mean return (greedy)")
    ax.set_title(f"{args.title or args.out.name}" + ("" if bands else " (one line a run)"))
    ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize="x-small" if len(runs) > 12 else "small",
    )
    _atomic_write(args.out / "curves.png", lambda p: fig.savefig(p, dpi=120, format="png"))

    header = (
        "| run | env steps | success | 95% CI | mean return | episodes | wall-clock (s) "
        "| env steps/s (evaluations included) |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    for name, rows in runs.items():
        last = rows[-1]
        rate = "–" if last.get("success_rate") is None else f"{last['success_rate']:.2f}"
        ci = "–" if rate == "–" else "[{:.2f}, {:.2f}]".format(*last["success_ci95"])
        lines.append(
            f"| {name} | {last['timesteps']} | {rate} | {ci} | "
            f"{last['mean_return']:.3f} | {last['episodes']} | {last['wall_time_s']:.0f} | "
            f"{last['timesteps'] / max(last['wall_time_s'], 1e-9):.0f} |"
        )
    table = "\n".join(lines) + "\n"
    _atomic_write(args.out / "summary.md", lambda p: Path(p).write_text(table))
    print(table)


if __name__ == "__main__":
    main()
