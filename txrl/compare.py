"""``txrl compare``: a grid of variants x seeds, run in parallel, summarised from the runs' logs.

A compare config (:class:`txrl.config.CompareConfig`) expands into runs, one per variant and
seed. Each run is an ordinary training run (:func:`txrl.train.train`) in its own directory,
so a re-invoked comparison skips finished runs (their ``checkpoints/final.zip`` exists) and
resumes half-done ones from their last checkpoint; ``only`` (``--only AXIS=LABEL``,
``--only seed=N``) runs part of the grid, so a study can be spread over sessions or
machines into one output directory. Backends:

* ``local`` (default): a process pool (``spawn``) of ``workers`` processes, by default one
  per CPU core, each run with one torch thread; the workers end with the compare process,
  however it is stopped;
* ``ray``: the same runs as a Ray Tune grid (``tune.Tuner`` over ``tune.grid_search``, one CPU
  per trial) on a local Ray or an existing cluster (``--address``). On a multi-node cluster
  the output directory must be on a filesystem every node sees, and every node needs txrl.

Both write the same layout::

    OUT/                              default runs/<name>
      compare.yaml                    the resolved compare config
      runs/<variant>/seed_<s>/        one run directory each (see txrl.train)
      runs.csv                        one row per run: final metric, steps to threshold
      results.csv                     one row per variant: mean, IQM and its 95% CI across
                                      seeds of the final metric, median steps to the threshold
      results.md                      the same as tables (one per panel), the aggregate over
                                      panels, the ranking against the reference
      aggregate.csv                   with panels: each label combination over all panels
      curves.png                      learning curves (mean over seeds, 95% bootstrap band)
      final.png                       final metric per variant (IQM, CI, each seed)
      ranking.png                     with a reference: our IQM against the reference score
      ray/                            Ray Tune's own experiment state (ray backend only)

Statistics follow Agarwal et al. 2021 through :mod:`txrl.stats` (rliable): IQM over seeds
with stratified-bootstrap 95% CIs, probabilities of improvement, and Kendall's tau between
our ranking and a reference one (``reference:`` in the config, e.g. the gating ablation of
Parisotto et al. 2019, Table 1). Without rliable (the ``stats`` extra) the IQM's CI comes
from :func:`txrl.evaluate.bootstrap_ci` and results.md says what is missing.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import math
import multiprocessing
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from txrl import stats
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
from txrl.stats import Interval
from txrl.train import EVAL_LOG, finished_run, latest_checkpoint, read_eval_log

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
        if finished_run(run_dir):
            return "finished"
        if (run_dir / CONFIG_FILE).exists() and latest_checkpoint(run_dir) is not None:
            return "partial"
        return "new"


def plan(config: CompareConfig, out_dir: Path) -> list[RunSpec]:
    """Every run of the grid, in grid order (variants outer, seeds inner).

    Each run trains with one torch thread and no console tables; its progress goes to its
    ``train.log`` as a line every ``runtime.progress_every`` seconds (the log is not a
    terminal, so :class:`txrl.train.Progress` writes lines, not a bar). A run directory that
    holds a run of another config is an error (nothing is overwritten).
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
            data["runtime"].update(torch_threads=1, progress_bar=True, verbose=0)
            run_dir = (out_dir / "runs" / variant.name / f"seed_{seed}").resolve()
            spec = RunSpec(variant.name, variant.labels, seed, data, str(run_dir))
            _check_same_config(spec)
            specs.append(spec)
    return specs


#: Settings that change what a run prints, not what it learns: a run directory written with
#: other values (runs planned before compare logged progress) is still the same run.
DISPLAY_KEYS = frozenset({"runtime.progress_bar", "runtime.progress_every", "runtime.verbose"})


def _check_same_config(spec: RunSpec) -> None:
    path = Path(spec.run_dir) / CONFIG_FILE
    if not path.exists():
        return
    stored = yaml.safe_load(path.read_text())
    with contextlib.suppress(ConfigError):
        # as this version reads it: a setting added since the run started takes its default
        stored = TrainConfig.from_dict(stored).to_dict()
    changed = sorted(set(_diff(stored, spec.config)) - DISPLAY_KEYS)
    if changed:
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


#: Seconds between a pool worker's looks at whether the compare process is still there.
PARENT_CHECK_SECONDS = 1.0


def _exit_with_parent(parent: int) -> None:
    """Pool initializer: end this worker when the compare process that started it is gone.

    A compare stopped by ``kill`` (SIGTERM or SIGKILL; Ctrl-C reaches the workers anyway)
    would otherwise leave its workers training on, holding their runs' locks, so the next
    ``txrl compare`` would find those runs taken. The worker's run resumes from its last
    checkpoint (written atomically) the next time.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="txrl-exit-with-parent", daemon=True).start()


def run_local(specs: Sequence[RunSpec], workers: int, report: Report) -> list[dict[str, Any]]:
    """Run ``specs`` in a pool of ``workers`` processes (spawned: no forked torch state),
    which end with this process however it ends (:func:`_exit_with_parent`)."""
    outcomes = []
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_exit_with_parent,
        initargs=(os.getpid(),),
    ) as pool:
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
    seconds_to_threshold: float | None = None  # the run's wall-clock at that evaluation
    wall_time_s: float | None = None  # at its last evaluation (every session of the run)


_SCORE_TEXT = {
    "final": "Final = the evaluation at the end of the budget.",
    "mean": "Mean = each run's mean over all its evaluations (the area under its learning curve "
    "over its length): learning sooner scores higher. The columns mean, IQM and 95% CI are "
    "of that score.",
}


def read_run(spec: RunSpec, metric: str, threshold: float, score: str = "final") -> RunRecord:
    entries = read_eval_log(Path(spec.run_dir) / EVAL_LOG)
    timesteps = [int(e["timesteps"]) for e in entries]
    values = [math.nan if e.get(metric) is None else float(e[metric]) for e in entries]
    finished = finished_run(spec.run_dir) and bool(entries)
    first = next((i for i, v in enumerate(values) if v >= threshold), None)
    reached = None if first is None else timesteps[first]
    clock = [e.get("wall_time_s") for e in entries]
    return RunRecord(
        spec=spec,
        finished=finished,
        timesteps=timesteps,
        values=values,
        final=(values[-1] if score == "final" else float(np.mean(values)))
        if finished
        else math.nan,
        final_return=float(entries[-1]["mean_return"]) if finished else math.nan,
        steps_to_threshold=reached,
        seconds_to_threshold=None if first is None else clock[first],
        wall_time_s=clock[-1] if clock else None,
    )


NO_ESTIMATE = Interval(math.nan, math.nan, math.nan)


def estimate(scores: np.ndarray, reps: int = 2000) -> Interval:
    """IQM of a (runs,) or (runs, tasks) score array with its 95% stratified-bootstrap CI.

    rliable's estimator and bootstrap (Agarwal et al. 2021) through :mod:`txrl.stats`; without
    rliable, :func:`txrl.evaluate.iqm` with a percentile bootstrap over all scores (not
    stratified). No scores give NaNs.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return NO_ESTIMATE
    if stats.available() is None:
        return stats.interval_estimates({"x": scores}, "iqm", reps=reps)["x"]
    flat = scores.ravel()
    return Interval(iqm(flat), *bootstrap_ci(flat, iqm, n_resamples=reps))


@dataclass
class VariantSummary:
    """A variant's runs and the estimate of its final metric across them."""

    variant: str
    labels: tuple[tuple[str, str], ...]
    records: list[RunRecord]
    reps: int = 2000
    """Bootstrap resamples of :attr:`estimate`."""
    _estimate: Interval | None = field(default=None, repr=False)

    @property
    def finals(self) -> list[float]:
        return [r.final for r in self.records if r.finished and not math.isnan(r.final)]

    @property
    def estimate(self) -> Interval:
        """IQM of the final metric over finished seeds, 95% CI (computed once)."""
        if self._estimate is None:
            self._estimate = estimate(np.array(self.finals), self.reps)
        return self._estimate

    def label(self, axis: str) -> str:
        return dict(self.labels).get(axis, "")

    def row(self) -> dict[str, Any]:
        finals = self.finals
        reached = [r.steps_to_threshold for r in self.records if r.steps_to_threshold is not None]
        seconds = [
            r.seconds_to_threshold for r in self.records if r.seconds_to_threshold is not None
        ]
        returns = [r.final_return for r in self.records if r.finished]
        return {
            "variant": self.variant,
            **dict(self.labels),
            "seeds": len(self.records),
            "finished": sum(r.finished for r in self.records),
            "mean": float(np.mean(finals)) if finals else math.nan,
            "iqm": self.estimate.value,
            "ci_low": self.estimate.low,
            "ci_high": self.estimate.high,
            "steps_to_threshold": float(np.median(reached)) if reached else math.nan,
            "reached": len(reached),
            "seconds_to_threshold": float(np.median(seconds)) if seconds else math.nan,
            "mean_return": float(np.mean(returns)) if returns else math.nan,
        }


@dataclass
class GroupSummary:
    """One label combination of the non-panel axes, aggregated over the panels (tasks).

    ``scores`` is (R, K): the normalised final metric of the R seeds finished on all K
    panels (see :func:`aggregate_over_panels`).
    """

    labels: tuple[tuple[str, str], ...]
    scores: np.ndarray  # (R, K)
    estimate: Interval

    def label(self, axis: str) -> str:
        return dict(self.labels).get(axis, "")


def aggregate_over_panels(
    config: CompareConfig, variants: Sequence[VariantSummary]
) -> list[GroupSummary]:
    """IQM over all runs and panels of each label combination of the other axes.

    Normalisation, per panel, so that panels weigh alike: a success rate is used as it is
    (already in [0, 1]); a mean return is min-max normalised over the scores (final, or mean
    over training with ``score: mean``) of every finished run of that panel (all variants),
    0 for the worst and 1 for the best (all 0 when they are equal). Only seeds finished on every panel count; the CI is rliable's stratified
    bootstrap (runs resampled within each panel).
    """
    panel = config.panels
    assert panel is not None
    panels = list(dict.fromkeys(v.label(panel) for v in variants))
    scale: dict[str, tuple[float, float]] = {}
    for p in panels:
        finals = [f for v in variants if v.label(panel) == p for f in v.finals]
        if config.metric == "success_rate" or not finals:
            scale[p] = (0.0, 1.0)
        else:
            low, high = min(finals), max(finals)
            scale[p] = (low, high - low if high > low else math.inf)
    groups: dict[tuple[tuple[str, str], ...], dict[str, dict[int, float]]] = {}
    for v in variants:
        key = tuple((axis, label) for axis, label in v.labels if axis != panel)
        low, width = scale[v.label(panel)]
        groups.setdefault(key, {})[v.label(panel)] = {
            r.spec.seed: (r.final - low) / width
            for r in v.records
            if r.finished and not math.isnan(r.final)
        }
    out = []
    for key, by_panel in groups.items():
        seeds = sorted(set.intersection(*(set(by_panel.get(p, {})) for p in panels)))
        scores = np.array([[by_panel[p][s] for p in panels] for s in seeds]).reshape(
            len(seeds), len(panels)
        )  # (R, K)
        out.append(GroupSummary(key, scores, estimate(scores, config.bootstrap_reps)))
    return out


def summarise(
    config: CompareConfig,
    specs: Sequence[RunSpec],
    out_dir: Path,
    echo: Callable[[str], None] | None = None,
) -> list[VariantSummary]:
    """Read every run's eval log and write runs.csv, results.csv, results.md and the plots.

    With ``panels``, also aggregate.csv (each label combination over all panels); with a
    ``reference``, ranking.png (our IQM against the reference score).
    """
    missing = stats.available()
    if missing is not None and echo is not None:
        echo(f"{missing}; the summaries fall back to a percentile bootstrap, without tau's CI")
    records = [read_run(spec, config.metric, config.threshold, config.score) for spec in specs]
    summaries: dict[str, VariantSummary] = {}
    for record in records:
        spec = record.spec
        summaries.setdefault(
            spec.variant, VariantSummary(spec.variant, spec.labels, [], config.bootstrap_reps)
        )
        summaries[spec.variant].records.append(record)
    variants = list(summaries.values())
    _write_csv(
        out_dir / "runs.csv",
        [
            {
                "variant": r.spec.variant,
                **dict(r.spec.labels),
                "seed": r.spec.seed,
                "status": "finished" if r.finished else r.spec.status(),
                "timesteps": r.timesteps[-1] if r.timesteps else 0,
                f"{config.score}_{config.metric}": r.final,
                "final_mean_return": r.final_return,
                "steps_to_threshold": r.steps_to_threshold,
                "seconds_to_threshold": r.seconds_to_threshold,
                "wall_time_s": r.wall_time_s,
                "run_dir": os.path.relpath(r.spec.run_dir, out_dir),
            }
            for r in records
        ],
    )
    _write_csv(out_dir / "results.csv", [v.row() for v in variants])
    groups = aggregate_over_panels(config, variants) if config.panels and variants else []
    if groups:
        _write_csv(
            out_dir / "aggregate.csv",
            [
                {
                    **dict(g.labels),
                    "panels": g.scores.shape[1],
                    "runs": g.scores.shape[0],
                    "iqm": g.estimate.value,
                    "ci_low": g.estimate.low,
                    "ci_high": g.estimate.high,
                }
                for g in groups
            ],
        )
    comparisons = reference_comparisons(config, variants, groups)
    (out_dir / "results.md").write_text(
        results_markdown(config, variants, list(config.axes), groups, comparisons, missing)
    )
    plot_curves(config, variants, out_dir / "curves.png")
    plot_finals(config, variants, out_dir / "final.png")
    if comparisons:
        plot_ranking(config, comparisons, out_dir / "ranking.png")
    else:  # not left over from an earlier summary with a reference
        (out_dir / "ranking.png").unlink(missing_ok=True)
    if not groups:
        (out_dir / "aggregate.csv").unlink(missing_ok=True)
    return variants


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        path.write_text("")
        return
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


# ---------------------------------------------------------------------------- the reference


@dataclass
class RankEntry:
    """One label of the reference axis in one comparison."""

    label: str
    reference: float  # nan when the reference does not score it
    estimate: Interval  # our IQM (nan without finished runs)
    scores: np.ndarray  # (R,) or (R, K) finished runs
    reference_rank: int | None = None  # among the ranked labels (both scored), 1 = best
    our_rank: int | None = None


@dataclass
class ReferenceComparison:
    """Our ranking of the labels of the reference axis against the reference's, in one scope
    (a panel, all panels aggregated, or the whole grid)."""

    title: str
    entries: list[RankEntry]  # the ranked ones in reference order, then the others
    tau: Interval | None  # None: fewer than 3 ranked labels, or no rliable
    improvement: dict[tuple[str, str], Interval]  # (X, Y) -> P(X > Y), X above Y in the reference

    @property
    def ranked(self) -> list[RankEntry]:
        return [e for e in self.entries if e.reference_rank is not None]


def compare_to_reference(
    config: CompareConfig, title: str, estimates: Sequence[tuple[str, np.ndarray, Interval]]
) -> ReferenceComparison:
    """Rank ``(label, scores, estimate)`` by IQM against ``config.reference``.

    Kendall's τ and its CI come from :func:`txrl.stats.kendall_tau` (Agarwal et al. 2021's
    stratified bootstrap over runs), the probabilities of improvement from
    :func:`txrl.stats.probability_of_improvement`; without rliable only the ranks are given.
    """
    reference = config.reference.scores
    reps = config.bootstrap_reps
    entries = [
        RankEntry(label, reference.get(label, math.nan), interval, scores)
        for label, scores, interval in estimates
    ]
    ranked = sorted(
        (e for e in entries if e.label in reference and e.scores.size),
        key=lambda e: -e.reference,
    )
    others = sorted(
        (e for e in entries if e not in ranked),
        key=lambda e: -e.estimate.value if e.scores.size else math.inf,
    )
    for e in ranked:
        e.reference_rank = 1 + sum(o.reference > e.reference for o in ranked)
        e.our_rank = 1 + sum(o.estimate.value > e.estimate.value for o in ranked)
    scores = {e.label: e.scores for e in ranked}
    tau: Interval | None = None
    improvement: dict[tuple[str, str], Interval] = {}
    if len(ranked) >= 3 and stats.available() is None:
        tau = stats.kendall_tau(scores, reference, reps=reps)
    if len(ranked) >= 2 and stats.available() is None:
        names = [e.label for e in ranked]
        if config.reference.pairs == "adjacent":
            pairs = list(itertools.pairwise(names))
        else:
            pairs = [(names[0], other) for other in names[1:]]
        improvement = stats.probability_of_improvement(scores, pairs, reps=reps)
    return ReferenceComparison(title, ranked + others, tau, improvement)


def reference_comparisons(
    config: CompareConfig, variants: Sequence[VariantSummary], groups: Sequence[GroupSummary]
) -> list[ReferenceComparison]:
    """One comparison per panel and one over all panels; or one for the whole grid."""
    if not config.reference.scores or not variants:
        return []
    axis = config.reference.resolved_axis(list(config.axes), config.panels)
    out = []
    for title, members in _panels(config, list(variants)).items():
        found = [(v.label(axis), np.array(v.finals), v.estimate) for v in members]
        out.append(compare_to_reference(config, title, found))
    if groups:
        found = [(g.label(axis), g.scores, g.estimate) for g in groups]
        out.append(compare_to_reference(config, f"all {config.panels}s", found))
    return out


# ---------------------------------------------------------------------------- results.md


def _num(x: float) -> str:
    return "–" if math.isnan(x) else f"{x:.3f}"


def _steps(x: float) -> str:
    return "–" if math.isnan(x) else (f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}")


def _seconds(x: float) -> str:
    if math.isnan(x):
        return "–"
    return f"{x / 60:.1f} min" if x >= 600 else f"{x:.0f} s"


def _ci(interval: Interval) -> str:
    return "–" if math.isnan(interval.low) else f"[{_num(interval.low)}, {_num(interval.high)}]"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [_md_row(header), _md_row(["---"] * len(header)), *map(_md_row, rows)]


def results_markdown(
    config: CompareConfig,
    variants: list[VariantSummary],
    axes: list[str],
    groups: Sequence[GroupSummary] = (),
    comparisons: Sequence[ReferenceComparison] = (),
    missing: str | None = None,
) -> str:
    """results.md: a table of variants (one per panel), the aggregate over panels, and the
    comparisons with the reference."""
    metric = config.metric.replace("_", " ")
    threshold = f"{config.threshold:g}"
    if missing is None:
        how = (
            "IQM: interquartile mean over seeds; 95% CI: stratified bootstrap of the IQM "
            f"({config.bootstrap_reps} resamples, rliable; Agarwal et al. 2021)."
        )
    else:
        how = (
            f"IQM: interquartile mean over seeds; 95% CI: percentile bootstrap of the IQM "
            f"(txrl.evaluate), because {missing}."
        )
    lines = [
        f"# {config.name}: {config.score} {metric} across seeds",
        "",
        f"Seeds: {', '.join(map(str, config.seeds))}. {_SCORE_TEXT[config.score]} {how} Steps to {threshold}: median over the seeds that reached it (first "
        f"evaluation with {metric} >= {threshold}), and how many did; time to {threshold}: "
        "the median wall-clock of those runs at that evaluation (evaluations included, on the "
        "machine and load the runs had). Seeds shows "
        "finished/all when some runs are unfinished; only finished runs count.",
    ]
    by_title = {c.title: c for c in comparisons}
    panels = _panels(config, variants)
    shown = [a for a in axes if a != config.panels]
    for title, members in panels.items():
        if title:
            lines += ["", f"## {config.panels}: {title}"]
        lines += ["", *_variant_table(config, members, shown if title else axes)]
        if title in by_title:
            lines += ["", *_reference_markdown(config, by_title[title], level=3 if title else 2)]
    if groups:
        lines += ["", *_aggregate_markdown(config, groups, shown)]
        title = f"all {config.panels}s"
        if title in by_title:
            lines += ["", *_reference_markdown(config, by_title[title], level=3)]
    rows = [v.row() for v in variants]
    finished = any(row["finished"] for row in rows)
    if config.metric == "success_rate" and finished and all(math.isnan(r["mean"]) for r in rows):
        lines += ["", 'No run reported `info["is_success"]`; use `metric: mean_return`.']
    return "\n".join(lines) + "\n"


def _variant_table(
    config: CompareConfig, variants: Sequence[VariantSummary], axes: Sequence[str]
) -> list[str]:
    threshold = f"{config.threshold:g}"
    header = [*axes, "seeds", "mean", "IQM", "95% CI", f"steps to {threshold}"]
    header += [f"time to {threshold}", "mean return"]
    rows = []
    for v in variants:
        row = v.row()
        finished, seeds = row["finished"], row["seeds"]
        rows.append(
            [
                *(v.label(axis) for axis in axes),
                str(finished) if finished == seeds else f"{finished}/{seeds}",
                _num(row["mean"]),
                _num(row["iqm"]),
                _ci(v.estimate),
                f"{_steps(row['steps_to_threshold'])} ({row['reached']}/{seeds})",
                _seconds(row["seconds_to_threshold"]),
                _num(row["mean_return"]),
            ]
        )
    return _md_table(header, rows)


def _aggregate_markdown(
    config: CompareConfig, groups: Sequence[GroupSummary], axes: Sequence[str]
) -> list[str]:
    if config.metric == "success_rate":
        rule = "success rates as they are"
    else:
        score = "final returns" if config.score == "final" else "mean returns over training"
        rule = (
            f"each {config.panels}'s {score} min-max normalised over all its finished "
            "runs, 0 the worst run and 1 the best"
        )
    header = [*axes, "runs", "IQM", "95% CI"]
    rows = [
        [
            *(g.label(a) for a in axes),
            str(g.scores.shape[0]),
            _num(g.estimate.value),
            _ci(g.estimate),
        ]
        for g in groups
    ]
    return [
        f"## All {config.panels}s",
        "",
        f"IQM over all runs and {config.panels}s ({rule}); runs: seeds finished on every "
        f"{config.panels}; 95% CI: stratified bootstrap, runs resampled within each "
        f"{config.panels} (Agarwal et al. 2021).",
        "",
        *_md_table(header, rows),
    ]


def _reference_markdown(
    config: CompareConfig, comparison: ReferenceComparison, level: int
) -> list[str]:
    reference = config.reference
    axis = reference.resolved_axis(list(config.axes), config.panels)
    cited = reference.name or "the reference"
    rows = [
        [
            e.label,
            "–" if math.isnan(e.reference) else f"{e.reference:g}",
            "–" if e.reference_rank is None else str(e.reference_rank),
            _num(e.estimate.value),
            _ci(e.estimate),
            "–" if e.our_rank is None else str(e.our_rank),
        ]
        for e in comparison.entries
    ]
    left_out = [e.label for e in comparison.entries if e.reference_rank is None]
    lines = [
        f"{'#' * level} Ranking against {cited}",
        "",
        f"Labels of {axis} in the reference's order; ranks (1 = best, ties share a rank) are "
        "among the labels that have both a reference score and finished runs"
        + (
            f"; left out of tau (no reference score or no finished runs): {', '.join(left_out)}."
            if left_out
            else "."
        ),
        "",
        *_md_table([axis, "reference", "reference rank", "IQM", "95% CI", "our rank"], rows),
        "",
    ]
    tau = comparison.tau
    if tau is not None:
        lines.append(
            f"Kendall's tau (our IQM against the reference, {len(comparison.ranked)} labels): "
            f"{tau.value:.3f}, 95% CI {_ci(tau)} (each label's runs resampled, IQMs and tau "
            "recomputed; Agarwal et al. 2021)."
        )
    elif stats.available() is not None:
        lines.append(f"Kendall's tau and the probabilities of improvement: –, {stats.available()}.")
    else:
        lines.append("Kendall's tau: – (needs 3 labels with a reference score and finished runs).")
    if comparison.improvement:
        which = (
            "neighbours in the reference order"
            if reference.pairs == "adjacent"
            else "the reference's best against each other label"
        )
        lines += [
            "",
            f"Probability of improvement, {which}: P(X > Y), the chance that a run of X beats "
            "a run of Y (Agarwal et al. 2021); X is above Y in the reference, so P > 0.5 "
            "agrees with it.",
            "",
            *_md_table(
                ["X", "Y", "P(X > Y)", "95% CI"],
                [[x, y, _num(p.value), _ci(p)] for (x, y), p in comparison.improvement.items()],
            ),
        ]
    return lines


# ---------------------------------------------------------------------------- plots


def _panels(
    config: CompareConfig, variants: list[VariantSummary]
) -> dict[str, list[VariantSummary]]:
    if config.panels is None:
        return {"": variants}
    panels: dict[str, list[VariantSummary]] = {}
    for v in variants:
        panels.setdefault(dict(v.labels)[config.panels], []).append(v)
    return panels


def _line_key(config: CompareConfig, v: VariantSummary) -> tuple[str, ...]:
    return tuple(label for axis, label in v.labels if axis != config.panels)


def _line_label(config: CompareConfig, v: VariantSummary) -> str:
    """The variant's labels besides the panel's, and how many seeds its curve averages."""
    parts = _line_key(config, v)
    n = sum(1 for r in v.records if any(not math.isnan(y) for y in r.values))
    return f"{' '.join(parts) or v.variant} (n={n})"


def _mean_curve(
    v: VariantSummary, reps: int = 1000
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Common timesteps, mean over seeds and its 95% band (seeds interpolated onto them).

    The band is rliable's stratified bootstrap at each timestep
    (:func:`txrl.stats.curve_intervals`), or txrl's percentile bootstrap without rliable.
    """
    curves = [(np.array(r.timesteps), np.array(r.values)) for r in v.records if r.timesteps]
    curves = [(t[~np.isnan(y)], y[~np.isnan(y)]) for t, y in curves]  # evaluations with a value
    curves = [(t, y) for t, y in curves if t.size]
    if not curves:
        return None
    grid = np.unique(np.concatenate([t for t, _ in curves]))
    end = min(t[-1] for t, _ in curves)
    grid = grid[grid <= end]
    ys = np.stack([np.interp(grid, t, y) for t, y in curves])  # (seeds, T)
    if stats.available() is None:
        _, band = stats.curve_intervals({"v": ys}, "mean", reps=reps)["v"]  # band: (2, T)
        return grid, ys.mean(0), band[0], band[1]
    band = np.array([bootstrap_ci(ys[:, i], n_resamples=reps) for i in range(grid.size)])  # (T, 2)
    return grid, ys.mean(0), band[:, 0], band[:, 1]


def _figure_class() -> Any:
    try:
        from matplotlib.figure import Figure  # the OO API: no pyplot, no display backend
    except ImportError as e:
        raise ImportError(
            "txrl compare draws its plots with matplotlib: pip install 'txrl[plots]'"
        ) from e
    return Figure


#: Most curves drawn in one panel; with more variants each gets its own small panel.
MAX_CURVES_PER_PANEL = 4


def _steps_text(x: float, _pos: Any = None) -> str:
    """Tick label of an env-step axis: 0, 50k, 1.5M."""
    if abs(x) >= 1e6:
        return f"{x / 1e6:g}M"
    return f"{x / 1e3:g}k" if abs(x) >= 1e3 else f"{x:g}"


def steps_axis(ax: Any) -> None:
    """At most five ticks in short form, so a narrow panel's labels do not run together."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    ax.xaxis.set_major_formatter(FuncFormatter(_steps_text))


def _curve_axes(config: CompareConfig, ax: Any, title: str) -> None:
    if config.metric == "success_rate":
        ax.axhline(config.threshold, color="grey", linestyle=":", linewidth=1)
        ax.set_ylim(-0.02, 1.02)
    ax.set_title(title, fontsize="medium")
    ax.grid(alpha=0.3)
    steps_axis(ax)


def plot_curves(config: CompareConfig, variants: list[VariantSummary], path: Path) -> None:
    """Learning curves (mean over seeds, 95% band), one block per label of ``config.panels``.

    With up to :data:`MAX_CURVES_PER_PANEL` variants a block is one panel with a line each;
    with more, overlapping bands hide each other, so each variant gets its own small panel
    (shared axes, the other variants' means in grey behind it). Legends and titles give the
    number of seeds each curve averages.
    """
    Figure = _figure_class()
    panels = _panels(config, variants)
    reps = min(config.bootstrap_reps, 1000)
    curves = {v.variant: _mean_curve(v, reps) for v in variants}
    lines = list(dict.fromkeys(_line_key(config, v) for v in variants))  # same colour per panel
    colours = {v.variant: f"C{lines.index(_line_key(config, v)) % 10}" for v in variants}
    widest = max(len(members) for members in panels.values())
    ylabel = config.metric.replace("_", " ")
    if widest <= MAX_CURVES_PER_PANEL:
        fig = Figure(figsize=(max(4.5, 4.0 * len(panels)), 3.6), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(panels), squeeze=False)[0])
        for ax, (title, members) in zip(axes, panels.items(), strict=True):
            for v in members:
                curve = curves[v.variant]
                if curve is None:
                    continue
                t, mean, lo, hi = curve
                colour = colours[v.variant]
                ax.plot(t, mean, color=colour, label=_line_label(config, v))
                ax.fill_between(t, lo, hi, color=colour, alpha=0.2, linewidth=0)
            _curve_axes(config, ax, title or config.name or "")
            ax.set_xlabel("env steps")
            ax.set_ylabel(ylabel)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize="small")
        fig.savefig(path, dpi=120)
        return
    cols = min(widest, 3 if len(panels) > 1 else math.ceil(math.sqrt(widest)))
    rows = math.ceil(widest / cols)
    fig = Figure(figsize=(2.4 * cols * len(panels) + 0.6, 2.1 * rows + 0.9), layout="constrained")
    blocks = fig.subfigures(1, len(panels), squeeze=False)[0]
    for block, (title, members) in zip(blocks, panels.items(), strict=True):
        grid = block.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)
        for ax, v in itertools.zip_longest(grid.flat, members):
            if v is None:
                ax.set_visible(False)
                continue
            for other in members:
                curve = curves[other.variant]
                if other is not v and curve is not None:
                    ax.plot(curve[0], curve[1], color="0.75", linewidth=0.8)
            curve = curves[v.variant]
            if curve is not None:
                t, mean, lo, hi = curve
                ax.plot(t, mean, color=colours[v.variant])
                ax.fill_between(t, lo, hi, color=colours[v.variant], alpha=0.25, linewidth=0)
            _curve_axes(config, ax, _line_label(config, v))
            ax.tick_params(labelsize="small")
        block.supxlabel("env steps", fontsize="medium")
        block.supylabel(ylabel, fontsize="medium")
        heading = title or config.name or ""
        if heading:
            block.suptitle(f"{heading} (grey: the other variants' means)", fontsize="medium")
    fig.savefig(path, dpi=120)


def plot_finals(config: CompareConfig, variants: list[VariantSummary], path: Path) -> None:
    """Final metric per variant: IQM with its 95% CI, and each seed as a dot."""
    Figure = _figure_class()

    fig = Figure(figsize=(6.5, 0.45 * len(variants) + 1.5), layout="constrained")
    ax = fig.subplots()
    for i, v in enumerate(variants):
        est = v.estimate
        if not math.isnan(est.value):
            err = [[est.value - est.low], [est.high - est.value]]
            ax.errorbar(est.value, i, xerr=err, fmt="o", color="C0", capsize=3)
        ax.scatter(v.finals, [i] * len(v.finals), color="C1", s=12, alpha=0.7, zorder=3)
    if config.metric == "success_rate":
        ax.set_xlim(-0.02, 1.02)
    ax.set_yticks(range(len(variants)), [v.variant for v in variants])
    ax.invert_yaxis()
    ax.set_xlabel(f"{config.score} {config.metric.replace('_', ' ')} (IQM, 95% CI; dots: seeds)")
    ax.grid(axis="x", alpha=0.3)
    fig.savefig(path, dpi=120)


def plot_ranking(
    config: CompareConfig, comparisons: Sequence[ReferenceComparison], path: Path
) -> None:
    """Our IQM (95% CI) against the reference score, one panel per comparison, τ in the title.

    Labels whose reference scores lie close together would overprint each other as text
    beside the points, so each label has its own colour and marker, named once in a legend
    (with its reference score) beside the panels.
    """
    import textwrap

    from matplotlib.lines import Line2D

    Figure = _figure_class()
    fig = Figure(figsize=(4.0 * len(comparisons) + 1.8, 4.2), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(comparisons), squeeze=False)[0])
    markers = "osD^v<>pP*Xh"
    order = sorted(
        {(e.reference, e.label) for c in comparisons for e in c.ranked}, reverse=True
    )  # highest reference score first, as the reference ranks them
    style = {label: (f"C{i % 10}", markers[i % len(markers)]) for i, (_, label) in enumerate(order)}
    for ax, comparison in zip(axes, comparisons, strict=True):
        for e in comparison.ranked:
            est = e.estimate
            err = [[est.value - est.low], [est.high - est.value]]
            colour, marker = style[e.label]
            ax.errorbar(
                e.reference, est.value, yerr=err, fmt=marker, color=colour, capsize=3, alpha=0.9
            )
        tau = comparison.tau
        title = comparison.title or config.name or ""
        if tau is not None:
            title += f"\nKendall's tau {tau.value:.2f} [{tau.low:.2f}, {tau.high:.2f}]"
        ax.set_title(title, fontsize="medium")
        reference = textwrap.fill(f"reference: {config.reference.name or 'score'}", 40)
        ax.set_xlabel(reference, fontsize="small")
        ax.set_ylabel(f"our {config.score} {config.metric.replace('_', ' ')} (IQM, 95% CI)")
        ax.grid(alpha=0.3)
    handles = [
        Line2D([], [], color=style[label][0], marker=style[label][1], linestyle="none")
        for _, label in order
    ]
    names = [f"{label} ({reference:g})" for reference, label in order]
    fig.legend(handles, names, loc="outside right upper", fontsize="small", title="reference")
    fig.savefig(path, dpi=120)


# ---------------------------------------------------------------------------- entry point


def parse_only(texts: Sequence[str]) -> dict[str, set[str]]:
    """``["model=gtrxl,lstm", "seed=0"]`` -> ``{"model": {"gtrxl", "lstm"}, "seed": {"0"}}``."""
    only: dict[str, set[str]] = {}
    for text in texts:
        key, sep, labels = text.partition("=")
        values = {v.strip() for v in labels.split(",") if v.strip()}
        if not sep or not key.strip() or not values:
            raise ConfigError(
                f"--only takes AXIS=LABEL[,LABEL...] (or seed=N[,N...]), got {text!r}"
            )
        only.setdefault(key.strip(), set()).update(values)
    return only


def select_runs(
    config: CompareConfig, specs: Sequence[RunSpec], only: Mapping[str, set[str]]
) -> list[RunSpec]:
    """The runs of ``specs`` whose label on each axis of ``only`` (and seed, under the key
    ``seed``) is one of those given; an unknown axis or label is an error naming the valid ones."""
    valid: dict[str, set[str]] = {"seed": {str(seed) for seed in config.seeds}}
    for spec in specs:
        for axis, label in spec.labels:
            valid.setdefault(axis, set()).add(label)
    problems = []
    for key, labels in only.items():
        if key not in valid:
            problems.append(f"--only: no axis {key!r}; axes: {', '.join(sorted(valid))}")
        elif labels - valid[key]:
            problems.append(
                f"--only {key}: no label {', '.join(sorted(labels - valid[key]))}; "
                f"valid: {', '.join(sorted(valid[key]))}"
            )
    if problems:
        raise ConfigError(problems)

    def wanted(spec: RunSpec) -> bool:
        labels = {**dict(spec.labels), "seed": str(spec.seed)}
        return all(labels[key] in allowed for key, allowed in only.items())

    return [spec for spec in specs if wanted(spec)]


def compare(
    config: CompareConfig,
    out_dir: str | Path | None = None,
    *,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    aggregate_only: bool = False,
    only: Mapping[str, set[str]] | None = None,
    echo: Callable[[str], None] = print,
) -> tuple[list[VariantSummary], list[dict[str, Any]]]:
    """Run the grid (skipping finished runs, resuming partial ones) and summarise it.

    ``only`` (see :func:`select_runs`) runs part of the grid, e.g. one learner or some seeds
    on another machine into the same ``out_dir``; the summary covers every finished run of
    the grid, whichever process ran it.
    """
    if backend not in ("local", "ray"):
        raise ConfigError(f"backend must be local or ray, got {backend!r}")
    out = Path(out_dir) if out_dir is not None else Path("runs") / (config.name or "compare")
    specs = plan(config, out)
    chosen = select_runs(config, specs, only) if only else specs
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.yaml").write_text(dump_yaml(to_plain(config)))
    status = {spec.run_dir: spec.status() for spec in specs}
    todo = [s for s in chosen if status[s.run_dir] != "finished"]
    counts = {k: sum(v == k for v in status.values()) for k in ("finished", "partial", "new")}
    workers = workers or config.workers or _cpu_count()
    echo(
        f"{len(specs) // len(config.seeds)} variants x {len(config.seeds)} seeds = {len(specs)} runs: "
        f"{counts['finished']} finished (skipped), {counts['partial']} to resume, {counts['new']} new"
    )
    if only:
        echo(f"--only: {len(chosen)} of them selected, {len(todo)} to run")
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
    variants = summarise(config, specs, out, echo)
    written = [
        "results.md",
        "results.csv",
        "aggregate.csv",
        "curves.png",
        "final.png",
        "ranking.png",
    ]
    echo("results: " + ", ".join(str(out / name) for name in written if (out / name).exists()))
    return variants, outcomes
