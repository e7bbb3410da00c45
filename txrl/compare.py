"""``txrl compare``: a grid of variants x seeds, run in parallel, summarised from the runs' logs.

A compare config (:class:`txrl.config.CompareConfig`) expands into runs, one per variant and
seed. Each run is an ordinary training run (:func:`txrl.train.train`) in its own directory,
so a re-invoked comparison skips finished runs (their ``checkpoints/final.zip`` exists) and
resumes half-done ones from their last checkpoint. Backends:

* ``local`` (default): a process pool (``spawn``) of ``workers`` processes, by default one
  per CPU core, each run with one torch thread;
* ``ray``: the same runs as a Ray Tune grid (``tune.Tuner`` over ``tune.grid_search``, one CPU
  per trial) on a local Ray or an existing cluster (``--address``). On a multi-node cluster
  the output directory must be on a filesystem every node sees, and every node needs txrl.

Both write the same layout::

    OUT/                              default runs/<name>
      compare.yaml                    the resolved compare config
      runs/<variant>/seed_<s>/        one run directory each (see txrl.train)
      runs.csv                        one row per run: final metric, steps to threshold
      results.csv, results.md         one row per variant: mean, IQM and bootstrap 95% CI across
                                      seeds of the final metric, median steps to the threshold
      curves.png                      learning curves (mean over seeds, 95% bootstrap band)
      final.png                       final metric per variant (mean, CI, each seed)
      ray/                            Ray Tune's own experiment state (ray backend only)
"""

from __future__ import annotations

import contextlib
import csv
import math
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from txrl.config import (
    CONFIG_FILE,
    CompareConfig,
    ConfigError,
    TrainConfig,
    dump_yaml,
    resolve,
    to_plain,
)
from txrl.evaluate import bootstrap_ci, iqm
from txrl.train import EVAL_LOG, is_finished, latest_checkpoint, read_eval_log

TRAIN_LOG = "train.log"


@dataclass(frozen=True)
class RunSpec:
    """One run of a comparison: which variant, which seed, where."""

    variant: str
    labels: tuple[tuple[str, str], ...]  # ((axis, label), ...)
    seed: int
    config: dict[str, Any]  # TrainConfig.to_dict() of this run
    run_dir: str  # absolute

    def status(self) -> str:
        """``finished``, ``partial`` (has a checkpoint to resume) or ``new``."""
        run_dir = Path(self.run_dir)
        if is_finished(run_dir):
            return "finished"
        if (run_dir / CONFIG_FILE).exists() and latest_checkpoint(run_dir) is not None:
            return "partial"
        return "new"


def plan(config: CompareConfig, out_dir: Path) -> list[RunSpec]:
    """Every run of the grid, in grid order (variants outer, seeds inner).

    Each run trains with one torch thread, no progress bar and no console tables; a run
    directory that holds a run of another config is an error (nothing is overwritten).
    """
    variants = config.variants()
    problems = []
    for variant in variants:  # the checks that build a backbone and an env, once per variant
        try:
            resolve(variant.config)
        except ConfigError as e:
            problems += [f"variant {variant.name}: {p}" for p in e.problems]
    if problems:
        raise ConfigError(problems)
    specs = []
    for variant in variants:
        for seed in config.seeds:
            data = variant.config.to_dict()
            data["seed"] = seed
            data["runtime"].update(torch_threads=1, progress_bar=False, verbose=0)
            run_dir = (out_dir / "runs" / variant.name / f"seed_{seed}").resolve()
            spec = RunSpec(variant.name, variant.labels, seed, data, str(run_dir))
            _check_same_config(spec)
            specs.append(spec)
    return specs


def _check_same_config(spec: RunSpec) -> None:
    path = Path(spec.run_dir) / CONFIG_FILE
    if not path.exists():
        return
    stored = yaml.safe_load(path.read_text())
    if stored != spec.config:
        changed = sorted(_diff(stored, spec.config))
        raise ConfigError(
            f"{spec.run_dir} holds a run of a different config (changed: {', '.join(changed)}); "
            "delete it or choose another output directory (--out)"
        )


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        return [d for k in keys for d in _diff(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [prefix.rstrip(".")]


# ---------------------------------------------------------------------------- one run


def execute_run(spec: RunSpec) -> dict[str, Any]:
    """Train (or resume) one run in this process; its console output goes to ``train.log``.

    Used by both backends; returns ``{"status": "finished" | "failed", ...}`` and never
    raises, so one failing run does not stop the others.
    """
    import torch

    from txrl.train import train

    torch.set_num_threads(1)
    run_dir = Path(spec.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    resume = (run_dir / CONFIG_FILE).exists()
    with (
        open(run_dir / TRAIN_LOG, "a") as log,
        contextlib.redirect_stdout(log),
        contextlib.redirect_stderr(log),
    ):
        try:
            result = train(TrainConfig.from_dict(spec.config), run_dir, resume=resume)
        except Exception:
            traceback.print_exc()
            return {
                "status": "failed",
                "run_dir": spec.run_dir,
                "error": traceback.format_exc(limit=3).strip().splitlines()[-1],
                "seconds": time.monotonic() - began,
            }
    return {
        "status": "finished",
        "run_dir": spec.run_dir,
        "timesteps": result.timesteps,
        "success_rate": result.final_eval.get("success_rate"),
        "mean_return": result.final_eval.get("mean_return"),
        "seconds": time.monotonic() - began,
    }


Report = Callable[[RunSpec, dict[str, Any]], None]


def run_local(specs: Sequence[RunSpec], workers: int, report: Report) -> list[dict[str, Any]]:
    """Run ``specs`` in a pool of ``workers`` processes (spawned: no forked torch state)."""
    outcomes = []
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(execute_run, spec): spec for spec in specs}
        for future in as_completed(futures):
            outcome = future.result()
            report(futures[future], outcome)
            outcomes.append(outcome)
    return outcomes


def _tune_trainable(param: dict[str, Any]) -> None:
    """Ray Tune function trainable: one run of the grid, reported once at its end."""
    from ray import tune

    run = param["run"]
    labels = tuple((axis, label) for axis, label in run["labels"])
    outcome = execute_run(RunSpec(**{**run, "labels": labels}))
    tune.report({k: v for k, v in outcome.items() if v is not None})


def run_ray(
    specs: Sequence[RunSpec],
    workers: int | None,
    address: str | None,
    storage: Path,
    report: Report,
) -> list[dict[str, Any]]:
    """Run ``specs`` as a Ray Tune grid (1 CPU per trial) on a local Ray or at ``address``."""
    try:
        import ray
        from ray import tune
    except ImportError as e:
        raise ImportError("the ray backend needs Ray Tune: pip install 'txrl[ray]'") from e

    by_dir = {spec.run_dir: spec for spec in specs}
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers or _cpu_count(), include_dashboard=False, log_to_driver=False)
    try:
        params = [
            {**spec.__dict__, "labels": [list(pair) for pair in spec.labels]} for spec in specs
        ]
        tuner = tune.Tuner(
            tune.with_resources(_tune_trainable, {"cpu": 1}),
            param_space={"run": tune.grid_search(params)},
            tune_config=tune.TuneConfig(
                max_concurrent_trials=workers,
                reuse_actors=True,  # one process per worker imports torch once, not per run
                trial_name_creator=_trial_name,
                trial_dirname_creator=_trial_name,
            ),
            run_config=tune.RunConfig(
                storage_path=str(storage.resolve()),
                name=time.strftime("grid-%Y%m%d-%H%M%S"),
                verbose=0,
                callbacks=[_report_trials(by_dir, report)],
            ),
        )
        return [_ray_outcome(result.config["run"]["run_dir"], result) for result in tuner.fit()]
    finally:
        if started_here:
            ray.shutdown()


def _ray_outcome(run_dir: str, result: Any) -> dict[str, Any]:
    """An outcome like :func:`execute_run`'s from a Tune result (``.metrics``, ``.error``)."""
    if result.error is not None:
        return {"status": "failed", "run_dir": run_dir, "error": str(result.error)}
    return {"status": "failed", **(result.metrics or {}), "run_dir": run_dir}


def _report_trials(by_dir: dict[str, RunSpec], report: Report) -> Any:
    """A Ray Tune callback that reports each run as its trial ends, as the local backend does."""
    from ray import tune

    class ReportTrials(tune.Callback):
        def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            run_dir = trial.config["run"]["run_dir"]
            result = trial.last_result or {}
            report(by_dir[run_dir], {"status": "failed", **result, "run_dir": run_dir})

        def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            run_dir = trial.config["run"]["run_dir"]
            error = f"Ray trial {trial.trial_id} failed (see {trial.local_path})"
            report(by_dir[run_dir], {"status": "failed", "run_dir": run_dir, "error": error})

    return ReportTrials()


def _trial_name(trial: Any) -> str:
    run = trial.config["run"]
    return f"{run['variant']}-seed_{run['seed']}"


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# ---------------------------------------------------------------------------- summaries


@dataclass
class RunRecord:
    """One run's logs, read back for the summaries."""

    spec: RunSpec
    finished: bool
    timesteps: list[int]
    values: list[float]  # the metric at each evaluation
    final: float  # the metric at the final evaluation (nan when unfinished)
    final_return: float
    steps_to_threshold: int | None


def read_run(spec: RunSpec, metric: str, threshold: float) -> RunRecord:
    entries = read_eval_log(Path(spec.run_dir) / EVAL_LOG)
    timesteps = [int(e["timesteps"]) for e in entries]
    values = [math.nan if e.get(metric) is None else float(e[metric]) for e in entries]
    finished = is_finished(Path(spec.run_dir)) and bool(entries)
    reached = next((t for t, v in zip(timesteps, values, strict=True) if v >= threshold), None)
    return RunRecord(
        spec=spec,
        finished=finished,
        timesteps=timesteps,
        values=values,
        final=values[-1] if finished else math.nan,
        final_return=float(entries[-1]["mean_return"]) if finished else math.nan,
        steps_to_threshold=reached,
    )


@dataclass
class VariantSummary:
    variant: str
    labels: tuple[tuple[str, str], ...]
    records: list[RunRecord]

    @property
    def finals(self) -> list[float]:
        return [r.final for r in self.records if r.finished and not math.isnan(r.final)]

    def row(self) -> dict[str, Any]:
        finals = self.finals
        lo, hi = bootstrap_ci(finals) if finals else (math.nan, math.nan)
        reached = [r.steps_to_threshold for r in self.records if r.steps_to_threshold is not None]
        returns = [r.final_return for r in self.records if r.finished]
        return {
            "variant": self.variant,
            **dict(self.labels),
            "seeds": len(self.records),
            "finished": sum(r.finished for r in self.records),
            "mean": float(np.mean(finals)) if finals else math.nan,
            "iqm": iqm(finals),
            "ci_low": lo,
            "ci_high": hi,
            "steps_to_threshold": float(np.median(reached)) if reached else math.nan,
            "reached": len(reached),
            "mean_return": float(np.mean(returns)) if returns else math.nan,
        }


def summarise(
    config: CompareConfig, specs: Sequence[RunSpec], out_dir: Path
) -> list[VariantSummary]:
    """Read every run's eval log and write runs.csv, results.csv, results.md and the plots."""
    records = [read_run(spec, config.metric, config.threshold) for spec in specs]
    summaries: dict[str, VariantSummary] = {}
    for record in records:
        spec = record.spec
        summaries.setdefault(spec.variant, VariantSummary(spec.variant, spec.labels, []))
        summaries[spec.variant].records.append(record)
    variants = list(summaries.values())
    axes = list(config.axes)
    _write_csv(
        out_dir / "runs.csv",
        [
            {
                "variant": r.spec.variant,
                **dict(r.spec.labels),
                "seed": r.spec.seed,
                "status": "finished" if r.finished else r.spec.status(),
                "timesteps": r.timesteps[-1] if r.timesteps else 0,
                f"final_{config.metric}": r.final,
                "final_mean_return": r.final_return,
                "steps_to_threshold": r.steps_to_threshold,
                "run_dir": os.path.relpath(r.spec.run_dir, out_dir),
            }
            for r in records
        ],
    )
    _write_csv(out_dir / "results.csv", [v.row() for v in variants])
    (out_dir / "results.md").write_text(results_markdown(config, variants, axes))
    plot_curves(config, variants, out_dir / "curves.png")
    plot_finals(config, variants, out_dir / "final.png")
    return variants


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        path.write_text("")
        return
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def results_markdown(config: CompareConfig, variants: list[VariantSummary], axes: list[str]) -> str:
    """The Markdown table of results.md: one row per variant, one label column per axis."""

    def num(x: float) -> str:
        return "–" if math.isnan(x) else f"{x:.3f}"

    def steps(x: float) -> str:
        return "–" if math.isnan(x) else (f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}")

    def md_row(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    metric = config.metric.replace("_", " ")
    threshold = f"{config.threshold:g}"
    header = [*axes, "seeds", "mean", "IQM", "95% CI", f"steps to {threshold}", "mean return"]
    lines = [
        f"# {config.name}: final {metric} across seeds",
        "",
        f"Seeds: {', '.join(map(str, config.seeds))}. Final = the evaluation at the end of the "
        "budget. IQM: interquartile mean; CI: 95% percentile bootstrap of the mean over seeds. "
        f"Steps to {threshold}: median over the seeds that reached it (first evaluation with "
        f"{metric} >= {threshold}), and how many did. Seeds shows finished/all when some "
        "runs are unfinished; only finished runs count.",
        "",
        md_row(header),
        md_row(["---"] * len(header)),
    ]
    rows = [v.row() for v in variants]
    for v, row in zip(variants, rows, strict=True):
        finished, seeds = row["finished"], row["seeds"]
        lines.append(
            md_row(
                [
                    *(dict(v.labels).get(axis, "") for axis in axes),
                    str(finished) if finished == seeds else f"{finished}/{seeds}",
                    num(row["mean"]),
                    num(row["iqm"]),
                    f"[{num(row['ci_low'])}, {num(row['ci_high'])}]",
                    f"{steps(row['steps_to_threshold'])} ({row['reached']}/{seeds})",
                    num(row["mean_return"]),
                ]
            )
        )
    if config.metric == "success_rate" and all(math.isnan(row["mean"]) for row in rows):
        lines += ["", 'No run reported `info["is_success"]`; use `metric: mean_return`.']
    return "\n".join(lines) + "\n"


def _panels(
    config: CompareConfig, variants: list[VariantSummary]
) -> dict[str, list[VariantSummary]]:
    if config.panels is None:
        return {"": variants}
    panels: dict[str, list[VariantSummary]] = {}
    for v in variants:
        panels.setdefault(dict(v.labels)[config.panels], []).append(v)
    return panels


def _line_label(config: CompareConfig, v: VariantSummary) -> str:
    parts = [label for axis, label in v.labels if axis != config.panels]
    return " ".join(parts) or v.variant


def _mean_curve(v: VariantSummary) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Common timesteps, mean over seeds and its bootstrap band (seeds interpolated onto them)."""
    curves = [(np.array(r.timesteps), np.array(r.values)) for r in v.records if r.timesteps]
    curves = [(t, y) for t, y in curves if not np.all(np.isnan(y))]
    if not curves:
        return None
    grid = np.unique(np.concatenate([t for t, _ in curves]))
    end = min(t[-1] for t, _ in curves)
    grid = grid[grid <= end]
    ys = np.stack([np.interp(grid, t, y) for t, y in curves])  # (seeds, T)
    band = np.array([bootstrap_ci(ys[:, i], n_resamples=1000) for i in range(grid.size)])  # (T, 2)
    return grid, ys.mean(0), band[:, 0], band[:, 1]


def _figure_class() -> Any:
    try:
        from matplotlib.figure import Figure  # the OO API: no pyplot, no display backend
    except ImportError as e:
        raise ImportError(
            "txrl compare draws its plots with matplotlib: pip install 'txrl[plots]'"
        ) from e
    return Figure


def plot_curves(config: CompareConfig, variants: list[VariantSummary], path: Path) -> None:
    """Learning curves: one panel per label of ``config.panels``, one line per variant."""
    Figure = _figure_class()
    panels = _panels(config, variants)
    fig = Figure(figsize=(5.5 * len(panels), 4.0), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(panels), squeeze=False)[0])
    for ax, (title, members) in zip(axes, panels.items(), strict=True):
        for v in members:
            curve = _mean_curve(v)
            if curve is None:
                continue
            t, mean, lo, hi = curve
            (line,) = ax.plot(t, mean, label=_line_label(config, v))
            ax.fill_between(t, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
        if config.metric == "success_rate":
            ax.axhline(config.threshold, color="grey", linestyle=":", linewidth=1)
            ax.set_ylim(-0.02, 1.02)
        ax.set_title(title or config.name or "")
        ax.set_xlabel("env steps")
        ax.set_ylabel(config.metric.replace("_", " "))
        ax.grid(alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize="small")
    fig.savefig(path, dpi=120)


def plot_finals(config: CompareConfig, variants: list[VariantSummary], path: Path) -> None:
    """Final metric per variant: mean with its 95% bootstrap CI, and each seed as a dot."""
    Figure = _figure_class()

    fig = Figure(figsize=(6.5, 0.45 * len(variants) + 1.5), layout="constrained")
    ax = fig.subplots()
    for i, v in enumerate(variants):
        row = v.row()
        if not math.isnan(row["mean"]):
            err = [[row["mean"] - row["ci_low"]], [row["ci_high"] - row["mean"]]]
            ax.errorbar(row["mean"], i, xerr=err, fmt="o", color="C0", capsize=3)
        ax.scatter(v.finals, [i] * len(v.finals), color="C1", s=12, alpha=0.7, zorder=3)
    if config.metric == "success_rate":
        ax.set_xlim(-0.02, 1.02)
    ax.set_yticks(range(len(variants)), [v.variant for v in variants])
    ax.invert_yaxis()
    ax.set_xlabel(f"final {config.metric.replace('_', ' ')} (mean, 95% CI; dots: seeds)")
    ax.grid(axis="x", alpha=0.3)
    fig.savefig(path, dpi=120)


# ---------------------------------------------------------------------------- entry point


def compare(
    config: CompareConfig,
    out_dir: str | Path | None = None,
    *,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    aggregate_only: bool = False,
    echo: Callable[[str], None] = print,
) -> tuple[list[VariantSummary], list[dict[str, Any]]]:
    """Run the grid (skipping finished runs, resuming partial ones) and summarise it."""
    if backend not in ("local", "ray"):
        raise ConfigError(f"backend must be local or ray, got {backend!r}")
    out = Path(out_dir) if out_dir is not None else Path("runs") / (config.name or "compare")
    out.mkdir(parents=True, exist_ok=True)
    specs = plan(config, out)
    (out / "compare.yaml").write_text(dump_yaml(to_plain(config)))
    status = {spec.run_dir: spec.status() for spec in specs}
    todo = [s for s in specs if status[s.run_dir] != "finished"]
    counts = {k: sum(v == k for v in status.values()) for k in ("finished", "partial", "new")}
    workers = workers or config.workers or _cpu_count()
    echo(
        f"{len(specs) // len(config.seeds)} variants x {len(config.seeds)} seeds = {len(specs)} runs: "
        f"{counts['finished']} finished (skipped), {counts['partial']} to resume, {counts['new']} new"
    )
    outcomes: list[dict[str, Any]] = []
    if todo and not aggregate_only:
        echo(f"running {len(todo)} on the {backend} backend with {workers} workers -> {out}")
        done = [0]

        def report(spec: RunSpec, outcome: dict[str, Any]) -> None:
            done[0] += 1
            head = f"[{done[0]}/{len(todo)}] {spec.variant} seed {spec.seed}"
            if outcome.get("status") == "finished":
                score = outcome.get(config.metric)
                shown = "n/a" if score is None else f"{score:.3f}"
                echo(
                    f"{head}: finished, final {config.metric} {shown} ({outcome.get('seconds', 0):.0f} s)"
                )
            else:
                echo(
                    f"{head}: FAILED: {outcome.get('error')} (see {Path(spec.run_dir) / TRAIN_LOG})"
                )

        if backend == "local":
            outcomes = run_local(todo, min(workers, len(todo)), report)
        else:
            outcomes = run_ray(
                todo, workers if address is None else None, address, out / "ray", report
            )
    variants = summarise(config, specs, out)
    echo(
        f"results: {out / 'results.md'}, {out / 'results.csv'}, {out / 'curves.png'}, {out / 'final.png'}"
    )
    return variants, outcomes
