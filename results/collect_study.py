"""Copy what a ``txrl compare`` study needs to be read and reproduced into ``results/``.

    python results/collect_study.py runs/study_tmaze_long results/tmaze_long

Copies the study's summary files (``results.md``, ``results.csv``, ``runs.csv``,
``aggregate.csv``, ``curves.png``, ``final.png``, ``ranking.png``, ``compare.yaml``: those
that exist; a ``compare.yaml`` already in the destination, the declared study, is kept when
it holds the same settings) and, for every run, its resolved ``config.yaml``, ``eval.jsonl``
and, where one was made
(``txrl eval RUN --episodes 100 --json > RUN/eval_100_episodes.json``), its 100-episode
evaluation, and ``finished.json``, the mark of a finished run; not its
checkpoints or TensorBoard events. The ``runs/<variant>/seed_<s>/`` layout is kept. Then
writes ``summary.md`` (last evaluation, wall-clock and env steps/s of every run, through
``plot_runs.py``). The copy is a study folder ``txrl compare`` can summarise again:
``txrl compare STUDY.yaml --out DEST --aggregate-only`` redraws its tables and plots from
the copied logs, and more seeds can be added to it by copying their runs in.

    python results/collect_study.py --mark-finished results/gates/popgym

writes ``finished.json`` into copied runs from before that file existed, for each run whose
evaluation log reached the budget of its ``config.yaml`` (and for no other).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from txrl.config import load_compare_config

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
RUN_FILES = ("config.yaml", "eval.jsonl", "finished.json", "eval_100_episodes.json")


def mark_finished(record: Path) -> list[Path]:
    """Write ``finished.json`` into each run of ``record`` whose eval log reached its config's
    budget and that has none; returns the runs marked."""
    from txrl.config import read_run_config
    from txrl.run.run_files import EVAL_LOG, FINISHED_RECORD, read_eval_log, write_finished_record

    marked = []
    for log in sorted(record.glob(f"runs/*/seed_*/{EVAL_LOG}")):
        run_dir = log.parent
        if (run_dir / FINISHED_RECORD).exists():
            continue
        entries = read_eval_log(log)
        budget = read_run_config(run_dir).budget
        if not entries or entries[-1]["timesteps"] < budget:
            continue
        write_finished_record(
            run_dir,
            timesteps=entries[-1]["timesteps"],
            budget=budget,
            stopped_at_target=False,
            wall_time_s=entries[-1].get("wall_time_s"),
            **{"from": "eval log (written by collect_study.py --mark-finished)"},
        )
        marked.append(run_dir)
    return marked


def keep_declared_study(declared: Path, ran: Path) -> None:
    """Keep the study file committed before the runs (its comments say why each setting is
    what it is) in place of the copy ``txrl compare`` wrote beside the runs, which has none,
    once both hold the same settings (the copy spells out the defaults); exit naming both
    when they do not."""
    if load_compare_config(declared) != load_compare_config(ran):
        raise SystemExit(
            f"{ran} holds other settings than the declared {declared}: the runs did not run "
            "the declared study; collect them into another folder"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("study", type=Path, help="the --out folder of txrl compare")
    parser.add_argument("dest", type=Path, nargs="?", help="the results/<name> folder")
    parser.add_argument(
        "--mark-finished",
        action="store_true",
        help="only mark the finished runs of the record STUDY (see above)",
    )
    args = parser.parse_args(argv)
    if args.mark_finished:
        marked = mark_finished(args.study)
        print(f"marked {len(marked)} finished runs in {args.study}")
        return
    if args.dest is None:
        parser.error("give the results/<name> folder to copy the study into")
    args.dest.mkdir(parents=True, exist_ok=True)
    for name in SUMMARY_FILES:
        if not (args.study / name).exists():
            continue
        if name == "compare.yaml" and (args.dest / name).exists():
            keep_declared_study(args.dest / name, args.study / name)
            continue
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
