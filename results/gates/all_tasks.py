"""The gating study over every task it ran on: one ranking, Kendall's tau against Table 1.

    python results/gates/all_tasks.py tmaze_long=results/gates results/gates/popgym \
        --out results/gates/all_tasks.md

Each argument is a study folder as ``results/collect_study.py`` leaves it (``compare.yaml``
and ``runs.csv``); ``NAME=FOLDER`` names the task of a study without panels (otherwise its
config's name), a study with ``panels: task`` brings its own task names. The studies differ in their base settings (a T-maze study and a POPGym
study), so ``txrl compare`` cannot summarise them as one grid; this reads what each wrote.

Per task, each run's score is the study's own (its ``score``: mean over training or final;
``metric``: success rate or return). Success rates are used as they are; returns are min-max
normalised per task over all of that task's runs, as ``txrl compare``'s aggregate does, so
tasks weigh alike. A memory's runs form an (R, K) matrix over the K tasks, R being the seeds
finished on every task (the seeds the studies share; where they share none, the first R
seeds of each task, R the fewest any task has). Then, with ``txrl.stats`` (rliable:
Agarwal et al. 2021): the IQM over all runs and tasks with its stratified-bootstrap 95% CI,
Kendall's tau between that ranking and the reference's (Parisotto et al. 2019, Table 1) with
its CI, and the same per task for comparison.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

import numpy as np
import yaml

from txrl import stats


def read_study(argument: str) -> tuple[dict, dict[tuple[str, str], dict[int, float]]]:
    """The study's config and {(memory, task): {seed: score}} of its finished runs."""
    name, _, path = argument.rpartition("=")
    folder = Path(path)
    config = yaml.safe_load((folder / "compare.yaml").read_text())
    axis = config["reference"]["axis"]
    panels = config.get("panels")
    column = f"{config.get('score', 'final')}_{config['metric']}"
    runs: dict[tuple[str, str], dict[int, float]] = {}
    with open(folder / "runs.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["status"] != "finished" or not row.get(column):
                continue
            task = row[panels] if panels else (name or config["name"])
            runs.setdefault((row[axis], task), {})[int(row["seed"])] = float(row[column])
    return config, runs


def normalised(config: dict, runs: dict[tuple[str, str], dict[int, float]]) -> None:
    """Min-max normalise returns per task in place (success rates stay as they are)."""
    if config["metric"] == "success_rate":
        return
    for task in {t for _, t in runs}:
        values = [v for (_, t), seeds in runs.items() if t == task for v in seeds.values()]
        low, high = min(values), max(values)
        for (_, t), seeds in runs.items():
            if t == task:
                for seed, v in seeds.items():
                    seeds[seed] = 0.0 if high == low else (v - low) / (high - low)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("studies", nargs="+", help="study folders, each FOLDER or NAME=FOLDER")
    parser.add_argument("--out", type=Path, required=True, help="the Markdown file to write")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap resamples")
    args = parser.parse_args(argv)

    reference: dict[str, float] = {}
    scores: dict[tuple[str, str], dict[int, float]] = {}
    for study in args.studies:
        config, runs = read_study(study)
        normalised(config, runs)
        reference = reference or config["reference"]["scores"]
        scores.update(runs)
    memories = sorted({m for m, _ in scores})
    tasks = sorted({t for _, t in scores})
    complete = [m for m in memories if all((m, t) in scores for t in tasks)]
    # per task, the seeds every complete memory finished there; a row of the matrix is one
    # seed of each task: the same seed where the studies share seeds, otherwise the k-th
    # seed of each task (the bootstrap resamples each task's runs on its own, so which run
    # of one task shares a row with which of another changes no estimate)
    task_seeds = {
        t: sorted(set.intersection(*(set(scores[m, t]) for m in complete))) if complete else []
        for t in tasks
    }
    shared = sorted(set.intersection(*(set(s) for s in task_seeds.values())))
    rows = len(shared) if shared else min(len(s) for s in task_seeds.values())
    if rows == 0 or len(complete) < 3:
        raise SystemExit(
            f"need >= 3 memories finished on every task; have {complete}, seeds {task_seeds}"
        )
    columns = {t: shared if shared else task_seeds[t][:rows] for t in tasks}
    matrix = {
        m: np.array([[scores[m, t][columns[t][r]] for t in tasks] for r in range(rows)])
        for m in complete
    }
    if shared:
        seed_note = f"seeds finished on every task: {', '.join(map(str, shared))}"
    else:
        seed_note = "the tasks share no seed; a task's seeds: " + "; ".join(
            f"{t} {', '.join(map(str, columns[t]))}" for t in tasks
        )
    overall = stats.interval_estimates(matrix, reps=args.reps)
    ranked = [m for m in complete if m in reference]
    tau = stats.kendall_tau({m: matrix[m] for m in ranked}, reference, reps=args.reps)
    per_task = {
        t: stats.kendall_tau({m: matrix[m][:, [k]] for m in ranked}, reference, reps=args.reps)
        for k, t in enumerate(tasks)
    }

    def rank_of(m: str) -> int:
        return 1 + sum(overall[o].value > overall[m].value for o in ranked)

    lines = [
        "# The gating study over all its tasks",
        "",
        f"Tasks: {', '.join(tasks)}; {seed_note}. "
        "Each run's score is its study's (mean over training where the study says `score: "
        "mean`); returns are min-max normalised per task. IQM over all runs and tasks with "
        "rliable's stratified-bootstrap 95% CI (Agarwal et al. 2021); generated by "
        "`results/gates/all_tasks.py`.",
        "",
        "| memory | IQM over all tasks [95% CI] | our rank | reference | reference rank | "
        + " | ".join(f"{t} (mean)" for t in tasks)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(tasks),
    ]
    by_reference = sorted(ranked, key=lambda m: -reference[m])
    for m in sorted(complete, key=lambda m: -overall[m].value):
        est = overall[m]
        ref = reference.get(m, math.nan)
        cells = [
            m,
            f"{est.value:.2f} [{est.low:.2f}, {est.high:.2f}]",
            str(rank_of(m)) if m in ranked else "–",
            "–" if math.isnan(ref) else f"{ref:g}",
            str(by_reference.index(m) + 1) if m in ranked else "–",
            *(f"{matrix[m][:, k].mean():.2f}" for k in range(len(tasks))),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Kendall's tau against the reference over all tasks ({len(ranked)} memories): "
        f"**{tau.value:.2f} [{tau.low:.2f}, {tau.high:.2f}]**.",
        "",
        "Per task: "
        + "; ".join(f"{t} {v.value:.2f} [{v.low:.2f}, {v.high:.2f}]" for t, v in per_task.items())
        + ".",
        "",
    ]
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text("\n".join(lines))
    tmp.replace(args.out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
