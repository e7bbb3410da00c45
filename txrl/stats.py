"""Statistics for comparing agents over seeds and tasks, after Agarwal et al. 2021.

"Deep Reinforcement Learning at the Edge of the Statistical Precipice" (NeurIPS 2021) asks
for interval estimates instead of point estimates when only a handful of runs exist:

- the interquartile mean (IQM) of the run × task scores, the mean of the middle 50%;
- 95% confidence intervals from a *stratified* bootstrap: runs are resampled with
  replacement within each task, so each task keeps its number of runs;
- the probability of improvement P(X > Y), the Mann–Whitney U statistic averaged over
  tasks, with its own stratified-bootstrap interval;
- performance profiles: the fraction of runs whose score exceeds τ, for a grid of τ;
- pointwise intervals of a learning curve (the paper's sample-efficiency curves).

The estimators and the bootstrap are `rliable`'s (the paper's own library); this module only
fixes the conventions txrl uses (shapes, seeded resampling, one call per question) and adds
the rank correlation of a ranking against a reference ranking (Kendall's τ, with a CI from
the same stratified bootstrap over runs).

Runs of different variants are not paired (seed 3 of one model has nothing to do with seed 3
of another), so wherever two or more variants enter one statistic (probability of
improvement, τ) each variant's runs are resampled on their own, with rliable's
``StratifiedBootstrap``; variants may then have different numbers of runs.

Legend: R runs (seeds) of one variant, K tasks. A score matrix is (R, K), higher is better,
and scores of different tasks should be on one scale (success rates, or normalised returns).

Everything above needs rliable (and its scipy); importing the module needs neither, so
callers can ask [`available`][txrl.stats.available] and fall back. rliable 1.2 imports ``arch``, whose 7.x releases (the ones rliable accepts) do not import
under pandas 3: install the ``stats`` extra, which pins the working pair.

The rest is numpy only: the small-sample intervals of one evaluation (Wilson's score interval
of a success rate, a percentile bootstrap of a mean return), the plain IQM, and the estimates
``txrl compare`` draws in its tables and plots ([`iqm_interval`][txrl.stats.iqm_interval], [`mean_band`][txrl.stats.mean_band]),
which use rliable when it imports and fall back to the percentile bootstrap when it does not.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "NO_ESTIMATE",
    "Interval",
    "bootstrap_ci",
    "curve_intervals",
    "interval_estimates",
    "iqm",
    "iqm_interval",
    "kendall_tau",
    "mean_band",
    "performance_profiles",
    "probability_of_improvement",
    "wilson_interval",
]

METRICS = ("iqm", "mean", "median", "optimality_gap")


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval."""

    value: float
    low: float
    high: float


@functools.cache
def available() -> str | None:
    """``None`` when rliable imports, else the reason and how to install it (asked once)."""
    try:
        _rliable()
    except ImportError as exc:
        return str(exc)
    return None


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

    0.5 means no difference; the interval comes from resampling each side's runs per task,
    independently (the sides may have different numbers of runs).
    """
    _, metrics = _rliable()
    matrices = _as_matrices(scores)
    unknown = sorted({n for pair in pairs for n in pair} - set(matrices))
    if unknown:
        raise ValueError(f"unknown variants {unknown}; valid: {sorted(matrices)}")
    out: dict[tuple[str, str], Interval] = {}
    for x, y in pairs:
        point = float(metrics.probability_of_improvement(matrices[x], matrices[y]))
        with _seeded(seed):
            draws = np.array(
                [
                    metrics.probability_of_improvement(bx, by)
                    for bx, by in _independent_draws([matrices[x], matrices[y]], reps)
                ]
            )
        out[(x, y)] = Interval(point, *_percentile(draws, confidence))
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
    variant's runs within each task (rliable's stratified bootstrap, each variant on its
    own), recomputes every variant's aggregate and τ (τ-b, scipy's, so ties count): it
    says how firmly our seeds pin down our own ranking, not how uncertain the reference is.
    """
    _rliable()
    from scipy import stats as scipy_stats  # a dependency of rliable, not of txrl

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
        draws = np.array([tau(*drawn) for drawn in _independent_draws(arrays, reps)])
    draws = draws[np.isfinite(draws)]  # a draw with all ties has no defined τ
    return Interval(point, *_percentile(draws, confidence))


def curve_intervals(
    curves: Mapping[str, Any],
    metric: str = "mean",
    *,
    reps: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Pointwise aggregate of learning curves with stratified-bootstrap bands.

    ``curves`` maps a variant to its (R, T) or (R, K, T) scores at T common evaluation
    points; each point is aggregated over runs and tasks (``mean`` or ``iqm``) as in the
    sample-efficiency curves of Agarwal et al. 2021 (Fig. 8). Returns, per variant, the
    (T,) curve and its (2, T) band (lower, upper).
    """
    library, _ = _rliable()
    from scipy import stats as scipy_stats  # a dependency of rliable, not of txrl

    if metric not in ("mean", "iqm"):
        raise ValueError(f"curve_intervals aggregates by mean or iqm, got {metric!r}")
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, value in curves.items():
        array = np.asarray(value, dtype=np.float64)
        if array.ndim == 2:
            array = array[:, None, :]  # (R, T) -> (R, 1, T): one task
        if array.ndim != 3 or array.shape[0] == 0 or not np.isfinite(array).all():
            raise ValueError(
                f"curves[{name!r}] has shape {np.shape(value)} or non-finite values; "
                "expected finite (runs, T) or (runs, tasks, T)"
            )
        steps = array.shape[-1]

        def aggregate(x: np.ndarray, steps: int = steps) -> np.ndarray:
            flat = x.reshape(-1, steps)  # (R * K, T)
            if metric == "mean":
                return flat.mean(axis=0)
            return np.asarray(scipy_stats.trim_mean(flat, 0.25, axis=0))

        with _seeded(seed):
            points, bands = library.get_interval_estimates(
                {name: array}, aggregate, reps=reps, confidence_interval_size=confidence
            )
        out[name] = (np.asarray(points[name]), np.asarray(bands[name]).reshape(2, steps))
    return out


def _independent_draws(arrays: Sequence[np.ndarray], reps: int) -> Iterator[list[np.ndarray]]:
    """``reps`` bootstrap draws of every array at once, each resampled on its own.

    Each array's runs are resampled within each task by rliable's ``StratifiedBootstrap``;
    draws come from numpy's global RNG (seed it with `_seeded`).
    """
    library, _ = _rliable()
    streams = [library.StratifiedBootstrap(a).bootstrap(reps) for a in arrays]
    for drawn in zip(*streams, strict=True):
        yield [pos[0] for pos, _ in drawn]


def _percentile(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile interval of bootstrap ``draws`` (NaN when there are none)."""
    if draws.size == 0:
        return (float("nan"), float("nan"))
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha])
    return (float(low), float(high))


# ---------------------------------------------------------------------------- without rliable

Z_95 = 1.959963984540054  # standard normal quantile of 0.975


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95% by default)."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # The bounds are exact at the ends (0 successes: low 0; all: high 1); avoid rounding there.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    statistic: Any = np.mean,
    *,
    level: float = 0.95,
    n_resamples: int = 5000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of ``statistic(values)``; a single value gives (v, v)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return (math.nan, math.nan)
    if x.size == 1 or np.all(x == x[0]):
        return (float(x[0]), float(x[0]))
    rng = np.random.default_rng(seed)
    samples = x[rng.integers(0, x.size, size=(n_resamples, x.size))]  # (R, n)
    draws = (
        np.apply_along_axis(statistic, 1, samples) if statistic is not np.mean else samples.mean(1)
    )
    alpha = (1 - level) / 2
    low, high = np.quantile(draws, [alpha, 1 - alpha])
    return (float(low), float(high))


def iqm(values: Sequence[float]) -> float:
    """Interquartile mean: the mean of the middle 50% (25% trimmed from each end)."""
    x = np.sort(np.asarray(values, dtype=float))
    if x.size == 0:
        return math.nan
    cut = int(0.25 * x.size)
    return float(x[cut : x.size - cut].mean())


#: The estimate of no scores at all (a variant without finished runs).
NO_ESTIMATE = Interval(math.nan, math.nan, math.nan)


def iqm_interval(scores: Any, reps: int = 2000) -> Interval:
    """IQM of a (runs,) or (runs, tasks) score array with its 95% stratified-bootstrap CI.

    rliable's estimator and bootstrap ([`interval_estimates`][txrl.stats.interval_estimates]); without rliable,
    [`iqm`][txrl.stats.iqm] with a percentile bootstrap over all scores (not stratified). No scores
    give [`NO_ESTIMATE`][txrl.stats.NO_ESTIMATE].
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return NO_ESTIMATE
    if available() is None:
        return interval_estimates({"x": scores}, "iqm", reps=reps)["x"]
    flat = scores.ravel()
    return Interval(iqm(flat), *bootstrap_ci(flat, iqm, n_resamples=reps))


def mean_band(curves: np.ndarray, reps: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """The 95% band, (lower, upper) each (T,), of the mean of (runs, T) learning curves.

    rliable's stratified bootstrap at each point ([`curve_intervals`][txrl.stats.curve_intervals]), or without
    rliable a percentile bootstrap of each point's mean.
    """
    if available() is None:
        _, band = curve_intervals({"v": curves}, "mean", reps=reps)["v"]  # band: (2, T)
        return band[0], band[1]
    band = np.array(
        [bootstrap_ci(curves[:, i], n_resamples=reps) for i in range(curves.shape[1])]
    )  # (T, 2)
    return band[:, 0], band[:, 1]
