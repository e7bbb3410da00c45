"""Statistics for comparing agents over seeds and tasks, after Agarwal et al. 2021.

"Deep Reinforcement Learning at the Edge of the Statistical Precipice" (NeurIPS 2021) asks
for interval estimates instead of point estimates when only a handful of runs exist:

- the interquartile mean (IQM) of the run × task scores, the mean of the middle 50%;
- 95% confidence intervals from a *stratified* bootstrap: runs are resampled with
  replacement within each task, so each task keeps its number of runs;
- the probability of improvement P(X > Y), the Mann–Whitney U statistic averaged over
  tasks, with its own stratified-bootstrap interval;
- performance profiles: the fraction of runs whose score exceeds τ, for a grid of τ.

The estimators and the bootstrap are `rliable`'s (the paper's own library); this module only
fixes the conventions txrl uses (shapes, seeded resampling, one call per question) and adds
the rank correlation of a ranking against a reference ranking (Kendall's τ, with a CI from
the same stratified bootstrap over runs).

Legend: R runs (seeds) of one variant, K tasks. A score matrix is (R, K), higher is better,
and scores of different tasks should be on one scale (success rates, or normalised returns).

rliable 1.2 imports ``arch``, whose 7.x releases (the ones rliable accepts) do not import
under pandas 3: install the ``stats`` extra, which pins the working pair.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

__all__ = [
    "Interval",
    "interval_estimates",
    "kendall_tau",
    "performance_profiles",
    "probability_of_improvement",
]

METRICS = ("iqm", "mean", "median", "optimality_gap")


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval."""

    value: float
    low: float
    high: float


def _rliable() -> tuple[Any, Any]:
    try:
        from rliable import library, metrics
    except (ImportError, TypeError) as exc:  # arch 7 raises TypeError under pandas 3
        raise ImportError(
            "txrl.stats needs rliable (and arch<8 with pandas<3 for it to import): "
            "pip install 'txrl[stats]'"
        ) from exc
    return library, metrics


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """rliable's resampling draws from numpy's global RNG: seed it, then restore it.

    arch warns that rliable passes its deprecated ``random_state``; that is rliable's to fix.
    """
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "random_state is deprecated", FutureWarning)
            yield
    finally:
        np.random.set_state(saved)


def _as_matrices(scores: Mapping[str, Any]) -> dict[str, np.ndarray]:
    if not scores:
        raise ValueError("scores is empty: give at least one variant's (runs, tasks) matrix")
    out: dict[str, np.ndarray] = {}
    n_tasks = None
    for name, value in scores.items():
        array = np.asarray(value, dtype=np.float64)
        if array.ndim == 1:
            array = array[:, None]  # (R,) -> (R, 1): one task
        if array.ndim != 2 or array.shape[0] == 0:
            raise ValueError(
                f"scores[{name!r}] has shape {np.shape(value)}; expected (runs, tasks) or (runs,)"
            )
        if not np.isfinite(array).all():
            raise ValueError(f"scores[{name!r}] holds NaN or inf; every run needs a finite score")
        if n_tasks is not None and array.shape[1] != n_tasks:
            raise ValueError(
                f"scores[{name!r}] has {array.shape[1]} tasks, the others {n_tasks}: "
                "every variant must be scored on the same tasks"
            )
        n_tasks = array.shape[1]
        out[name] = array
    return out


def _metric(name: str) -> Callable[[np.ndarray], float]:
    _, metrics = _rliable()
    table = {
        "iqm": metrics.aggregate_iqm,
        "mean": metrics.aggregate_mean,
        "median": metrics.aggregate_median,
        "optimality_gap": metrics.aggregate_optimality_gap,
    }
    if name not in table:
        raise ValueError(f"unknown metric {name!r}; valid: {', '.join(METRICS)}")
    return table[name]


def interval_estimates(
    scores: Mapping[str, Any],
    metric: str = "iqm",
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Interval]:
    """Aggregate metric of each variant with a stratified-bootstrap confidence interval.

    ``scores`` maps a variant's name to its (R, K) score matrix (or (R,) for one task).
    With a single run there is nothing to resample: the interval collapses to the point.
    """
    library, _ = _rliable()
    matrices = _as_matrices(scores)
    aggregate = _metric(metric)
    with _seeded(seed):
        points, intervals = library.get_interval_estimates(
            matrices,
            lambda x: np.array([aggregate(x)]),
            reps=reps,
            confidence_interval_size=confidence,
        )
    return {
        name: Interval(
            float(points[name][0]), float(intervals[name][0, 0]), float(intervals[name][1, 0])
        )
        for name in matrices
    }


def probability_of_improvement(
    scores: Mapping[str, Any],
    pairs: Sequence[tuple[str, str]],
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[tuple[str, str], Interval]:
    """P(X > Y) for each (X, Y) pair: the chance that a run of X beats a run of Y on a task.

    0.5 means no difference; the interval comes from resampling both sides' runs per task.
    """
    library, metrics = _rliable()
    matrices = _as_matrices(scores)
    unknown = sorted({n for pair in pairs for n in pair} - set(matrices))
    if unknown:
        raise ValueError(f"unknown variants {unknown}; valid: {sorted(matrices)}")
    paired = {f"{x}\t{y}": (matrices[x], matrices[y]) for x, y in pairs}
    with _seeded(seed):
        points, intervals = library.get_interval_estimates(
            paired,
            metrics.probability_of_improvement,
            reps=reps,
            confidence_interval_size=confidence,
        )
    out: dict[tuple[str, str], Interval] = {}
    for x, y in pairs:
        key = f"{x}\t{y}"
        point = float(np.asarray(points[key]).reshape(-1)[0])
        interval = np.asarray(intervals[key]).reshape(-1)
        out[(x, y)] = Interval(point, float(interval[0]), float(interval[-1]))
    return out


def performance_profiles(
    scores: Mapping[str, Any],
    taus: Sequence[float] | np.ndarray,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Fraction of runs with score > τ for each τ, with bootstrap bands.

    Returns ``(taus, profiles, bands)``: ``profiles[name]`` is (len(taus),) and
    ``bands[name]`` is (2, len(taus)), the lower and upper edges.
    """
    library, _ = _rliable()
    matrices = _as_matrices(scores)
    grid = np.asarray(taus, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"taus must be a non-empty 1-D grid of thresholds, got shape {grid.shape}")
    with _seeded(seed):
        profiles, bands = library.create_performance_profile(
            matrices, grid, reps=reps, confidence_interval_size=confidence
        )
    return (
        grid,
        {k: np.asarray(v) for k, v in profiles.items()},
        {k: np.asarray(v) for k, v in bands.items()},
    )


def kendall_tau(
    scores: Mapping[str, Any],
    reference: Mapping[str, float],
    metric: str = "iqm",
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Kendall's τ between the ranking of ``scores`` by ``metric`` and a reference ranking.

    Only variants present in both are ranked (at least three). The interval resamples each
    variant's runs within each task (rliable's stratified bootstrap), recomputes every
    variant's aggregate and τ: it says how firmly our seeds pin down our own ranking, not
    how uncertain the reference is.
    """
    library, _ = _rliable()
    matrices = _as_matrices(scores)
    names = [n for n in reference if n in matrices]
    if len(names) < 3:
        raise ValueError(
            f"kendall_tau needs at least 3 variants in both scores and reference; shared: {names}"
        )
    aggregate = _metric(metric)
    ref = np.array([reference[n] for n in names], dtype=np.float64)

    def tau(*arrays: np.ndarray) -> float:
        ours = np.array([aggregate(a) for a in arrays])
        return float(scipy_stats.kendalltau(ours, ref).statistic)

    arrays = [matrices[n] for n in names]
    point = tau(*arrays)
    with _seeded(seed):
        bootstrap = library.StratifiedBootstrap(*arrays)
        draws = np.array([tau(*pos) for pos, _ in bootstrap.bootstrap(reps)])
    draws = draws[np.isfinite(draws)]  # a draw with all ties has no defined τ
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha]) if draws.size else (np.nan, np.nan)
    return Interval(point, float(low), float(high))
