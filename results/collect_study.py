"""Copy what a ``txrl compare`` study needs to be read and reproduced into ``results/``.

    python results/collect_study.py runs/study_tmaze_long results/tmaze_long

Copies the study's summary files (``results.md``, ``results.csv``, ``runs.csv``,
``aggregate.csv``, ``curves.png``, ``final.png``, ``ranking.png``, ``compare.yaml``: those
that exist) and, for every run, its resolved ``config.yaml``, ``eval.jsonl`` and, where one
was made (``txrl eval RUN --episodes 100 --json > RUN/eval_100_episodes.json``), its
100-episode evaluation; not its checkpoints or TensorBoard events. The
``runs/<variant>/seed_<s>/`` layout is kept. Then
writes ``summary.md`` (last evaluation, wall-clock and env steps/s of every run, through
``plot_runs.py``). ``txrl compare STUDY.yaml --out DEST --aggregate-only`` cannot redraw
the tables from the copy (it needs finished checkpoints); the copy is the record.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

SUMMARY_FILES = (
    "results.md",
    "results.csv",
    "runs.csv",
    "aggregate.csv",
    "curves.png",
    "final.png",
    "ranking.png",
    "compare.yaml",
)
RUN_FILES = ("config.yaml", "eval.jsonl", "eval_100_episodes.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("study", type=Path, help="the --out folder of txrl compare")
    parser.add_argument("dest", type=Path, help="the results/<name> folder")
    args = parser.parse_args()
    args.dest.mkdir(parents=True, exist_ok=True)
    for name in SUMMARY_FILES:
        if (args.study / name).exists():
            shutil.copy2(args.study / name, args.dest / name)
    run_dirs = sorted(p.parent for p in (args.study / "runs").glob("*/seed_*/eval.jsonl"))
    for run_dir in run_dirs:
        target = args.dest / run_dir.relative_to(args.study)
        target.mkdir(parents=True, exist_ok=True)
        for name in RUN_FILES:
            if (run_dir / name).exists():
                shutil.copy2(run_dir / name, target / name)
    copies = [args.dest / r.relative_to(args.study) for r in run_dirs]
    plot = Path(__file__).with_name("plot_runs.py")
    subprocess.run(
        [sys.executable, str(plot), *map(str, copies), "--out", str(args.dest / "per_run")],
        check=True,
    )


if __name__ == "__main__":
    main()
