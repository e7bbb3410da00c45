"""Copy what a ``txrl compare`` study needs to be read and reproduced into ``results/``.

    python results/collect_study.py runs/study_tmaze_long results/tmaze_long

Copies the study's summary files (``results.md``, ``results.csv``, ``runs.csv``,
``aggregate.csv``, ``curves.png``, ``final.png``, ``ranking.png``, ``compare.yaml``: those
that exist; a ``compare.yaml`` already in the destination, the declared study, is kept when
it holds the same settings) and, for every run, its resolved ``config.yaml``, ``eval.jsonl``
and, where one was made
(``txrl eval RUN --episodes 100 --json > RUN/eval_100_episodes.json``), its 100-episode
evaluation, ``finished.json``, the mark of a finished run, and ``resumes.jsonl``, where it
was resumed from a checkpoint; not its
checkpoints or TensorBoard events. The ``runs/<variant>/seed_<s>/`` layout is kept. Then
writes ``summary.md`` (last evaluation, wall-clock and env steps/s of every run, through
``plot_runs.py``). The copy is a study folder ``txrl compare`` can summarise again:
``txrl compare STUDY.yaml --out DEST --aggregate-only`` redraws its tables and plots from
the copied logs.

Collecting into a folder that already holds runs of the same study (more seeds or
variants, run later into a fresh ``--out`` folder) adds the new runs beside the old ones
and redraws the tables, plots and ``per_run/summary.md`` from every run the folder then
holds, so that nothing committed before drops out of them.

    python results/collect_study.py runs/study_tmaze_long results/tmaze_long --resume-points
    python results/collect_study.py --restore results/tmaze_long runs/study_tmaze_long

A run too long for one sitting is carried to the next through ``results/``, since ``runs/``
may not outlive the machine it ran on: ``--resume-points`` also copies the newest periodic
checkpoint of each unfinished run (one zip: model, optimiser, envs, memory and RNG states,
`txrl.run.checkpoint`) into its copy's ``checkpoints/``, replacing the one kept before, and
a finished run keeps none. ``--restore`` puts each kept resume point back into a ``--out``
folder (its config, eval log and checkpoint), where the same ``txrl compare`` resumes it
exactly; a run there with a checkpoint as new or newer is left as it is.

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
from txrl.run.run_files import CHECKPOINT_DIR

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
RUN_FILES = (
    "config.yaml",
    "eval.jsonl",
    "finished.json",
    "eval_100_episodes.json",
    "resumes.jsonl",
)


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


def keep_resume_point(run_dir: Path, target: Path) -> Path | None:
    """Copy ``run_dir``'s newest periodic checkpoint into ``target/checkpoints/`` (removing
    any other kept there) when the run is unfinished; remove them all when it is finished.
    Returns the kept copy."""
    from txrl.run.checkpoint import periodic_checkpoints
    from txrl.run.run_files import finished_run

    kept_dir = target / CHECKPOINT_DIR
    periodic = [] if finished_run(run_dir) else periodic_checkpoints(run_dir / CHECKPOINT_DIR)
    newest = periodic[-1] if periodic else None
    if newest is not None:
        kept_dir.mkdir(exist_ok=True)
        tmp = kept_dir / f".{newest.name}.tmp"
        shutil.copy2(newest, tmp)
        tmp.replace(kept_dir / newest.name)
    for old in kept_dir.glob("*.zip") if kept_dir.exists() else []:
        if newest is None or old.name != newest.name:
            old.unlink()
    if kept_dir.exists() and not any(kept_dir.iterdir()):
        kept_dir.rmdir()
    return None if newest is None else kept_dir / newest.name


def _step(checkpoint: Path) -> int:
    return int(checkpoint.stem.removeprefix("step_"))


def restore(record: Path, out: Path) -> list[Path]:
    """Copy each unfinished run of ``record`` that has a kept checkpoint into ``out`` (the
    ``txrl compare --out`` folder it resumes in), unless the run there already has a
    checkpoint as new or newer. Returns the runs restored."""
    from txrl.run.checkpoint import periodic_checkpoints
    from txrl.run.run_files import finished_run

    restored = []
    for kept in sorted(record.glob(f"runs/*/seed_*/{CHECKPOINT_DIR}")):
        run_dir = kept.parent
        point = periodic_checkpoints(kept)
        if finished_run(run_dir) or not point:
            continue
        target = out / run_dir.relative_to(record)
        there = periodic_checkpoints(target / CHECKPOINT_DIR)
        if there and _step(there[-1]) >= _step(point[-1]):
            print(
                f"{target}: has {there[-1].name}, as new as the kept {point[-1].name}; left as it is"
            )
            continue
        (target / CHECKPOINT_DIR).mkdir(parents=True, exist_ok=True)
        for name in RUN_FILES:
            if (run_dir / name).exists():
                shutil.copy2(run_dir / name, target / name)
        shutil.copy2(point[-1], target / CHECKPOINT_DIR / point[-1].name)
        restored.append(target)
    return restored


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


def redraw(dest: Path) -> None:
    """Write the study's tables and plots (``results.md``, ``runs.csv``, ...) from every run
    ``dest`` holds, as ``txrl compare --aggregate-only`` does, keeping its declared
    ``compare.yaml``."""
    from txrl.compare.pipeline import summarise
    from txrl.compare.plan import plan

    config = load_compare_config(dest / "compare.yaml")
    summarise(config, plan(config, dest), dest, print)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("study", type=Path, help="the --out folder of txrl compare")
    parser.add_argument("dest", type=Path, nargs="?", help="the results/<name> folder")
    parser.add_argument(
        "--mark-finished",
        action="store_true",
        help="only mark the finished runs of the record STUDY (see above)",
    )
    parser.add_argument(
        "--resume-points",
        action="store_true",
        help="also keep the newest checkpoint of each unfinished run (see above)",
    )
    parser.add_argument(
        "--restore",
        action="store_true",
        help="put the kept checkpoints of the record STUDY back into the --out folder DEST",
    )
    args = parser.parse_args(argv)
    if args.restore:
        if args.dest is None:
            parser.error("give the --out folder to restore the unfinished runs into")
        restored = restore(args.study, args.dest)
        print(f"restored {len(restored)} unfinished runs into {args.dest}")
        for run in restored:
            print(f"  {run}")
        return
    if args.mark_finished:
        marked = mark_finished(args.study)
        print(f"marked {len(marked)} finished runs in {args.study}")
        return
    if args.dest is None:
        parser.error("give the results/<name> folder to copy the study into")
    args.dest.mkdir(parents=True, exist_ok=True)
    run_dirs = sorted(p.parent for p in (args.study / "runs").glob("*/seed_*/eval.jsonl"))
    copied = {r.relative_to(args.study) for r in run_dirs}
    held = {p.parent.relative_to(args.dest) for p in args.dest.glob("runs/*/seed_*/eval.jsonl")}
    merging = bool(held - copied)
    for name in SUMMARY_FILES:
        if not (args.study / name).exists():
            continue
        if name == "compare.yaml" and (args.dest / name).exists():
            keep_declared_study(args.dest / name, args.study / name)
            continue
        if not merging or name == "compare.yaml":
            shutil.copy2(args.study / name, args.dest / name)
    for run_dir in run_dirs:
        target = args.dest / run_dir.relative_to(args.study)
        target.mkdir(parents=True, exist_ok=True)
        for name in RUN_FILES:
            if (run_dir / name).exists():
                shutil.copy2(run_dir / name, target / name)
        if args.resume_points or (target / CHECKPOINT_DIR).exists():
            keep_resume_point(run_dir, target)
    if merging:
        redraw(args.dest)
    copies = sorted(args.dest / r for r in copied | held)
    plot = Path(__file__).with_name("plot_runs.py")
    subprocess.run(
        [sys.executable, str(plot), *map(str, copies), "--out", str(args.dest / "per_run")],
        check=True,
    )


if __name__ == "__main__":
    main()
