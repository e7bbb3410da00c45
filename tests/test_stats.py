"""txrl.stats: rliable's interval estimates under txrl's conventions, and Kendall's τ."""

import numpy as np
import pytest
from scipy import stats as scipy_stats

from txrl import stats

PARISOTTO = {"gru": 117.6, "output": 112.8, "trxl_i": 107.0, "input": 51.2, "trxl": 5.0}


def _scores(offsets: dict[str, float], runs: int = 6, tasks: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    return {name: off + 0.1 * rng.random((runs, tasks)) for name, off in offsets.items()}


def test_iqm_point_is_the_trimmed_mean_of_all_runs_and_tasks():
    scores = _scores({"a": 0.0, "b": 1.0}, runs=8)
    est = stats.interval_estimates(scores, reps=100)
    for name, matrix in scores.items():
        assert est[name].value == pytest.approx(scipy_stats.trim_mean(matrix.ravel(), 0.25))
        assert est[name].low <= est[name].value <= est[name].high


def test_separated_variants_get_disjoint_intervals_and_the_seed_reproduces_them():
    scores = _scores({"good": 1.0, "bad": 0.0})
    est = stats.interval_estimates(scores, reps=300, seed=3)
    assert est["good"].low > est["bad"].high
    assert stats.interval_estimates(scores, reps=300, seed=3) == est


def test_single_run_interval_collapses_to_the_point():
    est = stats.interval_estimates({"a": [0.7]}, metric="mean", reps=20)
    assert est["a"] == stats.Interval(0.7, 0.7, 0.7)


def test_probability_of_improvement_is_one_when_separated_and_half_when_equal():
    scores = _scores({"x": 1.0, "y": 0.0})
    scores["z"] = scores["x"].copy()
    poi = stats.probability_of_improvement(scores, [("x", "y"), ("y", "x"), ("x", "z")], reps=200)
    assert poi[("x", "y")].value == pytest.approx(1.0)
    assert poi[("y", "x")].value == pytest.approx(0.0)
    assert poi[("x", "z")].value == pytest.approx(0.5)


def test_kendall_tau_is_one_for_the_reference_order_and_minus_one_reversed():
    order = {name: -rank for rank, name in enumerate(PARISOTTO)}  # same order as the table
    same = stats.kendall_tau(_scores(order), PARISOTTO, reps=200)
    assert same.value == pytest.approx(1.0)
    assert same.low <= 1.0 and same.high == pytest.approx(1.0)
    reversed_ = stats.kendall_tau(_scores({k: -v for k, v in order.items()}), PARISOTTO, reps=200)
    assert reversed_.value == pytest.approx(-1.0)


def test_kendall_tau_interval_widens_when_variants_overlap():
    close = {name: -0.01 * rank for rank, name in enumerate(PARISOTTO)}
    tau = stats.kendall_tau(_scores(close, runs=5), PARISOTTO, reps=300)
    assert tau.high - tau.low > 0.2


def test_performance_profile_is_one_below_every_score_and_zero_above():
    scores = _scores({"a": 0.5})
    _, profiles, bands = stats.performance_profiles(scores, [0.0, 0.55, 1.0], reps=50)
    assert profiles["a"][0] == 1.0 and profiles["a"][-1] == 0.0
    assert bands["a"].shape == (2, 3)


@pytest.mark.parametrize(
    ("scores", "match"),
    [
        ({}, "at least one variant"),
        ({"a": np.zeros((2, 2, 2))}, r"expected \(runs, tasks\)"),
        ({"a": [np.nan, 1.0]}, "NaN or inf"),
        ({"a": np.zeros((3, 2)), "b": np.zeros((3, 1))}, "same tasks"),
    ],
)
def test_bad_score_tables_are_named(scores, match):
    with pytest.raises(ValueError, match=match):
        stats.interval_estimates(scores, reps=10)


def test_bad_metric_pairs_and_too_few_shared_variants_are_named():
    scores = _scores({"gru": 1.0, "trxl": 0.0})
    with pytest.raises(ValueError, match="valid: iqm, mean, median"):
        stats.interval_estimates(scores, metric="best", reps=10)
    with pytest.raises(ValueError, match="unknown variants"):
        stats.probability_of_improvement(scores, [("gru", "lstm")], reps=10)
    with pytest.raises(ValueError, match="at least 3 variants"):
        stats.kendall_tau(scores, PARISOTTO, reps=10)


def test_variants_may_have_different_numbers_of_runs():
    scores = {"gru": [0.9, 1.0, 1.0], "output": [0.6, 0.7], "trxl_i": [0.3, 0.4, 0.5, 0.2]}
    scores |= {"input": [0.1], "trxl": [0.0, 0.05]}
    tau = stats.kendall_tau(scores, PARISOTTO, reps=200)
    assert (tau.value, tau.low, tau.high) == pytest.approx((1.0, 1.0, 1.0))  # every resample
    poi = stats.probability_of_improvement(scores, [("gru", "output"), ("output", "gru")], reps=200)
    gru_output = poi[("gru", "output")]
    assert (gru_output.value, gru_output.low, gru_output.high) == pytest.approx((1.0, 1.0, 1.0))
    assert poi[("output", "gru")].value == pytest.approx(0.0)


def test_kendall_tau_point_counts_concordant_pairs_by_hand():
    # Reference gru > output > trxl_i > input > trxl; ours swaps output and trxl_i and puts
    # trxl above input: 10 pairs, 2 discordant, tau = (8 - 2) / 10.
    ours = {"gru": 5.0, "output": 3.0, "trxl_i": 4.0, "input": 1.0, "trxl": 2.0}
    tau = stats.kendall_tau({k: [v, v] for k, v in ours.items()}, PARISOTTO, reps=50)
    assert tau.value == pytest.approx(0.6)


def test_curve_intervals_band_the_pointwise_aggregate():
    rng = np.random.default_rng(0)
    curves = np.cumsum(rng.random((5, 12)), axis=1)  # (R, T)
    (point, band), (iqm_point, _) = (
        stats.curve_intervals({"a": curves}, reps=200)["a"],
        stats.curve_intervals({"a": curves}, "iqm", reps=200)["a"],
    )
    assert np.allclose(point, curves.mean(axis=0))
    assert np.allclose(iqm_point, scipy_stats.trim_mean(curves, 0.25, axis=0))
    assert band.shape == (2, 12) and np.all(band[0] <= point) and np.all(point <= band[1])
    with pytest.raises(ValueError, match="mean or iqm"):
        stats.curve_intervals({"a": curves}, "median")


def test_small_sample_helpers_need_no_rliable():
    assert stats.iqm([0.0, 1.0, 2.0, 3.0]) == pytest.approx(1.5)  # mean of the middle two
    assert stats.iqm([0.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 100.0]) == pytest.approx(10.0)
    lo, hi = stats.wilson_interval(20, 20)
    assert hi == 1.0 and 0.83 < lo < 0.84  # the known Wilson bound for 20/20
    assert stats.wilson_interval(0, 10)[0] == 0.0
    lo, hi = stats.bootstrap_ci([0.0, 1.0] * 50)
    assert lo < 0.5 < hi and hi - lo < 0.3
    assert stats.bootstrap_ci([0.7]) == (0.7, 0.7)


@pytest.mark.parametrize("rliable", [True, False])
def test_iqm_interval_and_mean_band_with_and_without_rliable(monkeypatch, rliable):
    if not rliable:
        monkeypatch.setattr(stats, "available", lambda: "txrl.stats needs rliable")
    scores = np.array([0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 5.0, -5.0])
    est = stats.iqm_interval(scores, reps=200)
    assert est.value == pytest.approx(scipy_stats.trim_mean(scores, 0.25))
    assert est.low <= est.value <= est.high
    assert stats.iqm_interval(np.array([]), reps=200) is stats.NO_ESTIMATE
    curves = np.array([[0.0, 0.5, 1.0], [0.0, 0.7, 0.8], [0.0, 0.6, 0.9]])  # (runs, T)
    low, high = stats.mean_band(curves, reps=200)
    assert low.shape == high.shape == (3,)
    assert low[0] == high[0] == 0.0  # every run agrees at the start
    assert np.all(low <= curves.mean(0)) and np.all(curves.mean(0) <= high)
    assert np.all(low[1:] < high[1:])
