"""The POPGym recall and counting studies in one table: final greedy return and MMER beside the paper's.

    python results/popgym_recall/summary.py --out results/popgym_recall/summary.md

Reads each task folder of ``results/popgym_recall/`` as ``results/collect_study.py`` leaves
it (``compare.yaml``, ``runs/<variant>/seed_<s>/`` with ``eval.jsonl``, ``finished.json``
and, where judged, ``eval_100_episodes.json``) and its ``training_scalars.csv`` (the
``rollout/ep_rew_mean`` curve of every run, from ``results/tb_scalars.py``).

Per run: the final greedy mean return over 100 episodes with its 95% CI (``txrl eval RUN
--episodes 100``, the judging seeds), the env steps at which the run ended (``eval.stop_at``
ends it early), its wall-clock, and its MMER as POPGym defines it (Morad et al. 2023): the
maximum over training of the mean episodic return, here SB3's ``rollout/ep_rew_mean`` (the
mean return of the last 100 training episodes, stochastic actions). A run still going or
paused shows its last evaluation and says so.

A study trained on episodes of several lengths (``env.kwargs.min_decks``) and judged on the
task's own has no MMER on the task: its training episodes are not the task's. Its MMER column
holds instead the best greedy evaluation during training (32 episodes of the task each,
``eval.jsonl``), marked "greedy".

The paper's figures (MMER after 15M env steps, mean over 3 trials, as transcribed in
``docs/results/published.md``) stand beside: its GRU and its best of 13 memory models.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

import yaml

from txrl.files import atomic_write

HERE = Path(__file__).resolve().parent

#: Task folder -> (POPGym env, the paper's GRU MMER, the paper's best MMER and its model).
PAPER = {
    "repeat_previous_medium": ("RepeatPreviousMedium", -0.315, 0.789, "LMU"),
    "repeat_first_medium": ("RepeatFirstMedium", 1.000, 1.000, "GRU"),
    "repeat_first_hard": ("RepeatFirstHard", 0.940, 0.969, "IndRNN"),
    "repeat_first_hard_decks": ("RepeatFirstHard, trained on 1-16 decks", 0.940, 0.969, "IndRNN"),
    "count_recall_easy": ("CountRecallEasy", 0.177, 0.509, "LSTM"),
}


def mmer(scalars: Path) -> dict[str, float]:
    """``{"<variant>/seed_<s>": max rollout/ep_rew_mean}`` from a study's training scalars."""
    best: dict[str, float] = defaultdict(lambda: float("-inf"))
    if scalars.exists():
        with open(scalars, newline="") as f:
            for row in csv.DictReader(f):
                if row["tag"] == "rollout/ep_rew_mean":
                    best[row["run"]] = max(best[row["run"]], float(row["value"]))
    return dict(best)


def run_rows(folder: Path) -> list[dict]:
    """One row per run of a task folder, GTrXL first, then by seed."""
    config = yaml.safe_load((folder / "compare.yaml").read_text())
    models = list(config["axes"]["model"])
    best = mmer(folder / "training_scalars.csv")
    mixed = config["base"]["env"].get("kwargs", {}).get("min_decks") is not None
    rows = []
    for run in sorted((folder / "runs").glob("*/seed_*")):
        model = run.parent.name.rsplit("__", 1)[-1]
        evals = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
        finished = run / "finished.json"
        record = json.loads(finished.read_text()) if finished.exists() else None
        judged = run / "eval_100_episodes.json"
        judge = json.loads(judged.read_text()) if judged.exists() else None
        rows.append(
            {
                "model": model,
                "seed": int(run.name.removeprefix("seed_")),
                "finished": record is not None,
                "steps": record["timesteps"] if record else evals[-1]["timesteps"],
                "budget": config["base"]["budget"],
                "stopped": bool(record and record["stopped_at_target"]),
                "wall_s": record["wall_time_s"] if record else evals[-1]["wall_time_s"],
                "last_eval": evals[-1]["mean_return"],
                "judge": judge,
                "mmer": (
                    max(e["mean_return"] for e in evals)
                    if mixed
                    else best.get(f"{run.parent.name}/{run.name}")
                ),
                "mmer_greedy": mixed,
            }
        )
    rows.sort(key=lambda r: (models.index(r["model"]) if r["model"] in models else 99, r["seed"]))
    return rows


def describe(row: dict) -> str:
    judge = row["judge"]
    if judge is not None:
        lo, hi = judge["return_ci95"]
        final = f"{judge['mean_return']:.3f} [{lo:.3f}, {hi:.3f}]"
    else:
        final = f"{row['last_eval']:.3f} (32 episodes)"
    if not row["finished"]:
        final += f", unfinished at {row['steps'] / 1e6:.2f}M"
    ended = f"{row['steps'] / 1e6:.2f}M" + (" (stop_at)" if row["stopped"] else "")
    mmer_text = "–" if row["mmer"] is None else f"{row['mmer']:.3f}"
    if row["mmer"] is not None and row["mmer_greedy"]:
        mmer_text += " (greedy)"
    return f"{final} | {mmer_text} | {ended} | {row['wall_s'] / 60:.0f} min"


def table(folders: list[Path]) -> str:
    lines = [
        "| task | memory | seed | final greedy return, 100 episodes [95% CI] | MMER | ended at "
        "| wall-clock | paper's GRU / best (MMER, 15M) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for folder in folders:
        task, gru, best, best_model = PAPER[folder.name]
        for row in run_rows(folder):
            paper = f"{gru:.3f} / {best:.3f} ({best_model})"
            lines.append(f"| {task} | {row['model']} | {row['seed']} | {describe(row)} | {paper} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write the table here")
    parser.add_argument(
        "--root", type=Path, default=HERE, help="the folder holding the task folders"
    )
    args = parser.parse_args(argv)
    folders = [args.root / name for name in PAPER if (args.root / name / "runs").is_dir()]
    text = "# POPGym recall: final greedy return and MMER per run\n\n" + table(folders)
    if args.out is None:
        print(text, end="")
    else:
        atomic_write(args.out, text.encode())


if __name__ == "__main__":
    main()
