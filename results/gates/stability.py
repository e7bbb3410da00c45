"""How well each run of a study keeps what it learned: a table from its evaluation logs.

    python results/gates/stability.py results/gates/minigrid

For every variant and seed of a study folder (``runs/<variant>/seed_<s>/eval.jsonl``, as
``txrl compare`` and ``results/collect_study.py`` leave it): the first evaluation at or above
the study's threshold, the lowest evaluation after it, how many later evaluations fell below
it, and the final one; then the same per variant over its seeds. A memory that learns and
then forgets shows here where a mean over training or a final score alone can hide it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from txrl.run.run_files import read_eval_log


def read_log(path: Path, metric: str) -> list[tuple[int, float]]:
    """``(env steps, metric)`` of each evaluation in the log at ``path``."""
    return [(r["timesteps"], r[metric]) for r in read_eval_log(path)]


def after_first(
    values: list[tuple[int, float]], threshold: float
) -> tuple[int, list[float]] | None:
    """The step of the first evaluation at or above ``threshold`` and the evaluations after it."""
    first = next((i for i, (_, v) in enumerate(values) if v >= threshold), None)
    if first is None:
        return None
    return values[first][0], [v for _, v in values[first + 1 :]]


def run_row(values: list[tuple[int, float]], threshold: float) -> tuple[str, str, str, str]:
    final = f"{values[-1][1]:.2f}"
    found = after_first(values, threshold)
    if found is None:
        return "never", "–", "–", final
    step, later = found
    lowest = f"{min(later):.2f}" if later else "–"
    below = f"{sum(v < threshold for v in later)}/{len(later)}"
    return f"{step / 1000:.0f}k", lowest, below, final


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", type=Path, help="a study folder (compare.yaml and runs/)")
    args = parser.parse_args(argv)
    config = yaml.safe_load((args.study / "compare.yaml").read_text())
    metric, threshold = config.get("metric", "success_rate"), float(config["threshold"])
    (axis,) = config["axes"]  # one axis: its labels in the config's order
    logs = {
        (label, seed): read_log(path, metric)
        for label in config["axes"][axis]
        for seed in config["seeds"]
        if (path := args.study / "runs" / label / f"seed_{seed}" / "eval.jsonl").exists()
    }
    print(f"| {axis} | seed | first >= {threshold:g} | lowest after | below after | final |")
    print("|---|---|---|---|---|---|")
    for (label, seed), values in logs.items():
        print(f"| {label} | {seed} | " + " | ".join(run_row(values, threshold)) + " |")
    print()
    print(
        f"| {axis} | seeds reaching {threshold:g} | evaluations after that below it | lowest after |"
    )
    print("|---|---|---|---|")
    for label in config["axes"][axis]:
        runs = [after_first(v, threshold) for (lab, _), v in logs.items() if lab == label]
        reached = [r for r in runs if r is not None]
        later = [v for _, vs in reached for v in vs]
        below = sum(v < threshold for v in later)
        lowest = f"{min(later):.2f}" if later else "–"
        share = f"{below}/{len(later)} ({below / len(later):.0%})" if later else "–"
        print(f"| {label} | {len(reached)}/{len(runs)} | {share} | {lowest} |")


if __name__ == "__main__":
    main()
