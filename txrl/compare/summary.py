"""Summaries of a comparison, read back from its runs' logs: runs.csv, results.csv and
aggregate.csv.

Each run's ``eval.jsonl`` gives its learning curve, its score (the final evaluation, or the
mean over all of them with ``score: mean``) and when it first reached the threshold; a
variant's score across seeds is the IQM with its 95% CI ([`txrl.stats.iqm_interval`][txrl.stats.iqm_interval]).
With ``panels`` (tasks), each label combination of the other axes is also aggregated over
every panel (`aggregate_over_panels`).
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from txrl import stats
from txrl.compare.plan import RunSpec
from txrl.config import CompareConfig
from txrl.run.run_files import EVAL_LOG, finished_run, read_eval_log
from txrl.stats import Interval


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


def read_run(spec: RunSpec, metric: str, threshold: float, score: str = "final") -> RunRecord:
    """``spec``'s eval log: its curve of ``metric``, its ``score`` (when finished) and the
    first evaluation at or above ``threshold``."""
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


@dataclass
class VariantSummary:
    """A variant's runs and the estimate of its final metric across them."""

    variant: str
    labels: tuple[tuple[str, str], ...]
    records: list[RunRecord]
    reps: int = 2000
    """Bootstrap resamples of `estimate`."""
    _estimate: Interval | None = field(default=None, repr=False)

    @property
    def finals(self) -> list[float]:
        return [r.final for r in self.records if r.finished and not math.isnan(r.final)]

    @property
    def estimate(self) -> Interval:
        """IQM of the final metric over finished seeds, 95% CI (computed once)."""
        if self._estimate is None:
            self._estimate = stats.iqm_interval(np.array(self.finals), self.reps)
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
    panels (see `aggregate_over_panels`).
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
        out.append(GroupSummary(key, scores, stats.iqm_interval(scores, config.bootstrap_reps)))
    return out


def panels(
    config: CompareConfig, variants: list[VariantSummary]
) -> dict[str, list[VariantSummary]]:
    """The variants by their label of ``config.panels`` (one block ``""`` without panels)."""
    if config.panels is None:
        return {"": variants}
    panels: dict[str, list[VariantSummary]] = {}
    for v in variants:
        panels.setdefault(dict(v.labels)[config.panels], []).append(v)
    return panels


def write_summaries(
    config: CompareConfig,
    records: Sequence[RunRecord],
    variants: Sequence[VariantSummary],
    groups: Sequence[GroupSummary],
    out_dir: Path,
) -> None:
    """runs.csv (one row per run), results.csv (per variant) and, with ``groups``,
    aggregate.csv (each label combination over all panels; removed when there are none, so
    none is left over from an earlier summary with panels)."""
    write_csv(
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
    write_csv(out_dir / "results.csv", [v.row() for v in variants])
    if not groups:
        (out_dir / "aggregate.csv").unlink(missing_ok=True)
        return
    write_csv(
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


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """``rows`` as a CSV with a header of the first row's keys (an empty file without rows)."""
    if not rows:
        path.write_text("")
        return
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
