"""Export TensorBoard scalars of ``txrl train`` runs to one CSV, for the results folders.

A run's ``tb/`` holds what the learner logged every update (policy entropy, the memory's
attention entropy, rollout return, ...); ``eval.jsonl`` holds only the periodic greedy
evaluations. This keeps the training-side curves a write-up cites::

    python results/tb_scalars.py RUN_DIR [RUN_DIR ...] --out FILE.csv \
        --tags train/entropy_loss rollout/ep_rew_mean --every 10

Columns: ``run`` (the directory's name, or ``parent/name`` with ``--qualify``), ``tag``,
``step`` (env steps), ``value``. ``--every N`` keeps every N-th point of each tag (the
last one always). The file is written atomically (txrl's ``atomic_write``).
"""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from txrl.files import atomic_write


def read_scalars(run: Path, tags: list[str]) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` over every event file under ``run/tb`` (a resumed run
    writes more than one), in step order, the later file winning on a repeated step."""
    files = sorted((run / "tb").rglob("events.out.tfevents.*"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise FileNotFoundError(f"{run} has no tb/ event files: is it a txrl train run directory?")
    points: dict[str, dict[int, float]] = {tag: {} for tag in tags}
    for file in files:
        events = EventAccumulator(str(file), size_guidance={"scalars": 0})
        events.Reload()
        available = set(events.Tags()["scalars"])
        for tag in tags:
            if tag in available:
                points[tag].update((e.step, e.value) for e in events.Scalars(tag))
    missing = [tag for tag, values in points.items() if not values]
    if missing:
        raise KeyError(f"{run}: no scalars logged under {', '.join(missing)}")
    return {tag: sorted(values.items()) for tag, values in points.items()}


def thin(points: list[tuple[int, float]], every: int) -> list[tuple[int, float]]:
    """Every ``every``-th point, and the last."""
    kept = points[::every]
    if points and kept[-1] != points[-1]:
        kept.append(points[-1])
    return kept


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tags", nargs="+", required=True)
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument(
        "--qualify", action="store_true", help="name runs parent/name (e.g. variant/seed_0)"
    )
    args = parser.parse_args(argv)
    if args.every < 1:
        parser.error(f"--every must be at least 1, got {args.every}")
    rows = []
    for run in args.runs:
        name = f"{run.parent.name}/{run.name}" if args.qualify else run.name
        for tag, points in read_scalars(run, args.tags).items():
            rows += [(name, tag, step, f"{value:.6g}") for step, value in thin(points, args.every)]
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["run", "tag", "step", "value"])
    writer.writerows(rows)
    atomic_write(args.out, text.getvalue().encode())
    print(f"{len(rows)} points of {len(args.tags)} tags from {len(args.runs)} runs -> {args.out}")


if __name__ == "__main__":
    main()
