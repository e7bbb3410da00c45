"""Whether runs keep what they learn: best, final and the largest drop of each run, with the
training diagnostics around each drop.

    python results/stability/summarize.py runs/stability/* --out results/stability/before_fix

Reads each run directory (``txrl train``'s: ``eval.jsonl``, ``tb/``, ``config.yaml``,
``finished.json``; or a copy kept in ``results/`` with the diagnostics' scalars in
``scalars.csv`` in place of ``tb/``, as ``--keep`` writes it) and writes into the study
folder ``--out``:

* ``summary.md`` and ``summary.csv``, one row per run: the best and the final evaluation,
  where the run first reached 0.8 of its best, the largest drop after that and the largest
  drop over the whole run (each with its step);
* ``diagnostics.csv``, and a table of ``summary.md``: for each drop, the training
  diagnostics at the logged steps nearest the best it fell from and the evaluation it fell
  to: ``train/entropy_loss``, ``train/approx_kl``, ``train/clip_fraction``,
  ``train/explained_variance``, ``train/grad_norm``, ``train/value_loss``,
  ``train/advantage_std`` (where logged) and the memory's ``memory/*attention_entropy*``
  and ``memory/*gate*`` (those a run logged; a V-MPO run has no clip fraction, a recurrent
  memory no attention);
* ``phases.csv``: each diagnostic's mean before the run first reached 0.8 of its best and
  from there to the end;
* ``<run>.png`` per run: the evaluation curve with the drops marked, the diagnostics as
  panels below it on the same steps.

Definitions. A run's score is its evaluations' (:func:`txrl.run.evaluate.eval_score`: the
success rate, else the mean return). A *drop* at an evaluation is the best score before it
minus its score (what the run had reached and lost, so a run still learning does not drop).
*Reached 0.8 of its best*: the first evaluation at ``floor + 0.8 * (best - floor)``, where the
floor is the bottom of the score's range: 0 for a success rate (so 0.8 × best), and
``--return-floor`` (default -1, POPGym's range [-1, 1]) for a mean return. The largest drop
after it is the largest at the evaluations that follow. Every file is written atomically
(txrl's ``atomic_write``); the TensorBoard scalars are read with ``results/tb_scalars.py``.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import fnmatch
import io
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from txrl.files import atomic_write
from txrl.run.evaluate import eval_score
from txrl.run.run_files import finished_run, read_eval_log

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # results/, for tb_scalars
from tb_scalars import read_scalars

#: Diagnostics read where a run logged them: exact tags, then patterns of the memory's.
DIAGNOSTICS = (
    "train/entropy_loss",
    "train/approx_kl",
    "train/clip_fraction",
    "train/explained_variance",
    "train/grad_norm",
    "train/value_loss",
    "train/advantage_std",
    "memory/*attention_entropy*",
    "memory/*gate*",
)
#: How near its best a run must come before a drop counts as losing what it learned.
REACHED = 0.8


@dataclass(frozen=True)
class Drop:
    """A fall from the best evaluation so far (``peak``, at ``peak_step``) to a later one."""

    peak_step: int
    peak: float
    low_step: int
    low: float

    @property
    def size(self) -> float:
        return self.peak - self.low

    def __str__(self) -> str:
        return (
            f"{self.size:.3f} at {_steps(self.low_step)} "
            f"({self.peak:.3f} at {_steps(self.peak_step)} -> {self.low:.3f})"
        )


def largest_drop(evals: list[tuple[int, float]], start: int = 0) -> Drop | None:
    """The largest drop (best score before an evaluation minus its score) at the evaluations
    ``evals[start + 1:]``, the best counted from the first evaluation; None where no later
    evaluation falls below the best before it. On a tie, the earliest."""
    found: Drop | None = None
    peak_step, peak = evals[0]
    for i, (step, score) in enumerate(evals[1:], start=1):
        if i > start and peak - score > 0 and (found is None or peak - score > found.size):
            found = Drop(peak_step, peak, step, score)
        if score > peak:
            peak_step, peak = step, score
    return found


def first_reaching(evals: list[tuple[int, float]], level: float) -> int | None:
    """The index of the first evaluation that scores ``level`` or more."""
    return next((i for i, (_, score) in enumerate(evals) if score >= level), None)


@dataclass(frozen=True)
class RunSummary:
    """One run's figures (see the module doc)."""

    name: str
    metric: str  # success_rate or mean_return
    evals: list[tuple[int, float]]  # (step, score) of each evaluation
    budget: int | None
    finished: bool
    level: float  # REACHED of the way from the floor to the best
    reached_step: int | None
    drop_after: Drop | None  # the largest drop after reaching ``level``
    drop_any: Drop | None  # the largest drop over the run

    @property
    def best(self) -> tuple[int, float]:
        return max(self.evals, key=lambda e: (e[1], -e[0]))  # the earliest on a tie

    @property
    def final(self) -> tuple[int, float]:
        return self.evals[-1]

    @property
    def drops(self) -> dict[str, Drop]:
        """The drops with diagnostics: after reaching ``level``, and over the run where that
        is another one."""
        drops = {}
        if self.drop_after is not None:
            drops["after reaching"] = self.drop_after
        if self.drop_any is not None and self.drop_any != self.drop_after:
            drops["over the run"] = self.drop_any
        return drops


def summarize_run(run_dir: Path, return_floor: float) -> RunSummary:
    """The figures of ``run_dir`` from its eval log, config and finished record."""
    log = read_eval_log(run_dir / "eval.jsonl")
    if not log:
        raise SystemExit(f"{run_dir} has no evaluations in eval.jsonl: is it a txrl train run?")
    metric = "mean_return" if log[0].get("success_rate") is None else "success_rate"
    evals = [(int(e["timesteps"]), eval_score(e)) for e in log]
    config_file = run_dir / "config.yaml"
    budget = yaml.safe_load(config_file.read_text())["budget"] if config_file.exists() else None
    floor = 0.0 if metric == "success_rate" else return_floor
    best = max(score for _, score in evals)
    level = floor + REACHED * (best - floor)
    reached = first_reaching(evals, level)
    return RunSummary(
        name=run_dir.name,
        metric=metric,
        evals=evals,
        budget=budget,
        finished=finished_run(run_dir),
        level=level,
        reached_step=None if reached is None else evals[reached][0],
        drop_after=None if reached is None else largest_drop(evals, reached),
        drop_any=largest_drop(evals),
    )


#: The file a kept copy of a run holds its diagnostics' scalars in (``run,tag,step,value``,
#: the columns of ``results/tb_scalars.py``).
KEPT_SCALARS = "scalars.csv"


def diagnostic_tags(run_dir: Path) -> list[str]:
    """The tags of :data:`DIAGNOSTICS` that ``run_dir`` logged, in that order."""
    logged: set[str] = set()
    for file in (run_dir / "tb").rglob("events.out.tfevents.*"):
        events = EventAccumulator(str(file), size_guidance={"scalars": 1})
        events.Reload()
        logged.update(events.Tags()["scalars"])
    if not logged and (run_dir / KEPT_SCALARS).exists():
        with (run_dir / KEPT_SCALARS).open(newline="") as kept:
            logged.update(row["tag"] for row in csv.DictReader(kept))
    return [tag for pattern in DIAGNOSTICS for tag in sorted(fnmatch.filter(logged, pattern))]


def run_scalars(run_dir: Path, tags: list[str]) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` of ``tags``, from ``run_dir/tb`` or, in a kept copy
    without one, from its :data:`KEPT_SCALARS`."""
    if not tags:
        return {}
    if (run_dir / "tb").is_dir():
        return read_scalars(run_dir, tags)
    points: dict[str, list[tuple[int, float]]] = {tag: [] for tag in tags}
    with (run_dir / KEPT_SCALARS).open(newline="") as kept:
        for row in csv.DictReader(kept):
            if row["tag"] in points:
                points[row["tag"]].append((int(row["step"]), float(row["value"])))
    return {tag: sorted(values) for tag, values in points.items()}


def keep_run(run_dir: Path, dest: Path, every: int) -> None:
    """Copy what the study reads of ``run_dir`` into ``dest``: its config, eval log and
    finished record, and every ``every``-th point of its diagnostics' scalars (the last one
    always) as :data:`KEPT_SCALARS`, not its checkpoints or TensorBoard events."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("config.yaml", "eval.jsonl", "finished.json"):
        if (run_dir / name).exists():
            atomic_write(dest / name, (run_dir / name).read_bytes())
    scalars = run_scalars(run_dir, diagnostic_tags(run_dir))
    rows = [
        {"run": dest.name, "tag": tag, "step": str(step), "value": repr(value)}
        for tag, points in scalars.items()
        for i, (step, value) in enumerate(points)
        if i % every == 0 or i == len(points) - 1
    ]
    if rows:
        atomic_write(dest / KEPT_SCALARS, csv_text(rows).encode())


def nearest(points: list[tuple[int, float]], step: int) -> tuple[int, float]:
    """The point logged nearest ``step`` (the earlier one on a tie)."""
    steps = [s for s, _ in points]
    i = bisect.bisect_left(steps, step)
    candidates = points[max(i - 1, 0) : i + 1]
    return min(candidates, key=lambda p: (abs(p[0] - step), p[0]))


def _steps(step: int) -> str:
    return f"{step / 1e6:.2f}M" if step >= 100_000 else f"{step:,}"


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def summary_rows(runs: list[RunSummary]) -> list[dict[str, str]]:
    rows = []
    for run in runs:
        (best_step, best), (final_step, final) = run.best, run.final
        done = "yes" if run.finished else f"no (at {_steps(final_step)})"
        rows.append(
            {
                "run": run.name,
                "score": run.metric,
                "finished": done,
                "budget": "–" if run.budget is None else _steps(run.budget),
                "evaluations": str(len(run.evals)),
                "best": f"{best:.3f}",
                "best_step": str(best_step),
                "final": f"{final:.3f}",
                "final_step": str(final_step),
                "reached_level": f"{run.level:.3f}",
                "reached_step": "" if run.reached_step is None else str(run.reached_step),
                "drop_after": "" if run.drop_after is None else f"{run.drop_after.size:.3f}",
                "drop_after_step": "" if run.drop_after is None else str(run.drop_after.low_step),
                "drop_any": "" if run.drop_any is None else f"{run.drop_any.size:.3f}",
                "drop_any_step": "" if run.drop_any is None else str(run.drop_any.low_step),
            }
        )
    return rows


def diagnostic_rows(
    runs: list[RunSummary], scalars: dict[str, dict[str, list[tuple[int, float]]]]
) -> list[dict[str, str]]:
    """One row per run, drop and diagnostic: its value at the steps nearest the drop's best
    and its low."""
    rows = []
    for run in runs:
        for which, drop in run.drops.items():
            for tag, points in scalars[run.name].items():
                at_peak, at_low = nearest(points, drop.peak_step), nearest(points, drop.low_step)
                rows.append(
                    {
                        "run": run.name,
                        "drop": which,
                        "size": f"{drop.size:.3f}",
                        "tag": tag,
                        "peak_step": str(at_peak[0]),
                        "at_peak": f"{at_peak[1]:.6g}",
                        "low_step": str(at_low[0]),
                        "at_low": f"{at_low[1]:.6g}",
                    }
                )
    return rows


def phase_rows(
    runs: list[RunSummary], scalars: dict[str, dict[str, list[tuple[int, float]]]]
) -> list[dict[str, str]]:
    """One row per run and diagnostic: its mean over the steps before the run first reached
    0.8 of its best (learning) and from there to the end (holding it, or not), so that runs
    that kept what they learned and runs that lost it compare over the same phase."""
    rows = []
    for run in runs:
        for tag, points in scalars[run.name].items():
            split = run.reached_step
            before = [v for step, v in points if split is None or step < split]
            after = [v for step, v in points if split is not None and step >= split]
            rows.append(
                {
                    "run": run.name,
                    "tag": tag,
                    "reached_step": "" if split is None else str(split),
                    "mean_before": f"{sum(before) / len(before):.6g}" if before else "",
                    "mean_after": f"{sum(after) / len(after):.6g}" if after else "",
                }
            )
    return rows


def markdown(runs: list[RunSummary], diagnostics: list[dict[str, str]]) -> str:
    lines = [
        "# Whether runs keep what they learn",
        "",
        "Written by `results/stability/summarize.py` (its docstring defines each column). "
        "Score: success rate, else mean return; a drop is the best score before an evaluation "
        f"minus its score; reached: the first evaluation at {REACHED} of the way from the "
        "floor of the score's range to the best.",
        "",
        "| run | steps | evaluations | best | final | reached | largest drop after reaching "
        "| largest drop over the run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        (best_step, best), (final_step, final) = run.best, run.final
        reached = (
            "never"
            if run.reached_step is None
            else f"{_steps(run.reached_step)} (≥ {run.level:.3f})"
        )
        done = _steps(final_step) + ("" if run.budget is None else f" of {_steps(run.budget)}")
        if not run.finished:
            done += ", unfinished"
        lines.append(
            f"| {run.name} | {done} | {len(run.evals)} | {best:.3f} at {_steps(best_step)} "
            f"| {final:.3f} at {_steps(final_step)} | {reached} "
            f"| {run.drop_after or '–'} | {run.drop_any or '–'} |"
        )
    if diagnostics:
        lines += [
            "",
            "Diagnostics at the logged steps nearest each drop's best and its low:",
            "",
            "| run | drop | diagnostic | at the best (step) | at the low (step) |",
            "|---|---|---|---|---|",
        ]
        for row in diagnostics:
            lines.append(
                f"| {row['run']} | {row['drop']} ({row['size']}) | {row['tag']} "
                f"| {float(row['at_peak']):.3g} ({_steps(int(row['peak_step']))}) "
                f"| {float(row['at_low']):.3g} ({_steps(int(row['low_step']))}) |"
            )
    return "\n".join(lines) + "\n"


def csv_text(rows: list[dict[str, str]]) -> str:
    text = io.StringIO()
    if rows:
        writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return text.getvalue()


def plot(run: RunSummary, scalars: dict[str, list[tuple[int, float]]]) -> bytes:
    """The run's evaluation curve with its drops marked, its diagnostics below (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 1 + len(scalars)
    fig, axes = plt.subplots(
        panels, 1, sharex=True, figsize=(8, 2.4 + 1.3 * len(scalars)), squeeze=False
    )
    top = axes[0][0]
    steps, scores = zip(*run.evals, strict=True)
    top.plot(steps, scores, marker=".", color="black")
    top.axhline(run.level, color="grey", linestyle=":", linewidth=1)
    colours = {"after reaching": "tab:red", "over the run": "tab:orange"}
    for which, drop in run.drops.items():
        top.axvspan(drop.peak_step, drop.low_step, color=colours[which], alpha=0.15)
        top.annotate(
            f"-{drop.size:.2f} ({which})",
            (drop.low_step, drop.low),
            textcoords="offset points",
            xytext=(4, -12),
            color=colours[which],
            fontsize=8,
        )
    top.set_ylabel(run.metric.replace("_", " "))
    top.set_title(f"{run.name}: best {run.best[1]:.3f}, final {run.final[1]:.3f}")
    for ax, (tag, points) in zip((row[0] for row in axes[1:]), scalars.items(), strict=True):
        ax.plot(*zip(*points, strict=True), linewidth=0.8)
        for which, drop in run.drops.items():
            ax.axvspan(drop.peak_step, drop.low_step, color=colours[which], alpha=0.15)
        ax.set_ylabel(tag.split("/", 1)[1], fontsize=7, rotation=0, ha="right")
        ax.tick_params(labelsize=7)
    axes[-1][0].set_xlabel("env steps")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="txrl train run directories")
    parser.add_argument("--out", type=Path, required=True, help="the study folder to write")
    parser.add_argument(
        "--return-floor",
        type=float,
        default=-1.0,
        help="the bottom of the mean return's range, for runs scored by return (default -1)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="first copy each run into KEEP/<run> (config, eval log, finished record and its "
        "diagnostics' scalars, thinned by --every) and summarise the copies",
    )
    parser.add_argument(
        "--every", type=int, default=4, help="with --keep: keep every N-th scalar point"
    )
    args = parser.parse_args(argv)
    if args.every < 1:
        parser.error(f"--every must be a positive integer, got {args.every}")
    names = [run.name for run in args.runs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        parser.error(f"run directories must have distinct names (they name the plots): {repeated}")
    if args.keep is not None:
        for run_dir in args.runs:
            keep_run(run_dir, args.keep / run_dir.name, args.every)
        args.runs = [args.keep / run_dir.name for run_dir in args.runs]
    runs = [summarize_run(run_dir, args.return_floor) for run_dir in args.runs]
    scalars = {
        run_dir.name: run_scalars(run_dir, diagnostic_tags(run_dir)) for run_dir in args.runs
    }
    diagnostics = diagnostic_rows(runs, scalars)
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out / "summary.md", markdown(runs, diagnostics).encode())
    atomic_write(args.out / "summary.csv", csv_text(summary_rows(runs)).encode())
    atomic_write(args.out / "diagnostics.csv", csv_text(diagnostics).encode())
    phases = phase_rows(runs, scalars)
    if phases:
        atomic_write(args.out / "phases.csv", csv_text(phases).encode())
    for run in runs:
        atomic_write(args.out / f"{run.name}.png", plot(run, scalars[run.name]))
    print(f"{len(runs)} runs -> {args.out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
