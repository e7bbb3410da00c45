"""results.md: the comparison as markdown tables, for a reader who has not seen the config.

One table of variants per panel (seeds, mean, IQM with its 95% CI, steps and wall-clock time
to the threshold, mean return), the aggregate over panels, and the rankings against the
reference; the text above each table says how every number was computed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from txrl import stats
from txrl.compare.ranking import ReferenceComparison
from txrl.compare.summary import GroupSummary, VariantSummary, panels
from txrl.config import CompareConfig
from txrl.stats import Interval

_SCORE_TEXT = {
    "final": "Final = the evaluation at the end of the budget.",
    "mean": "Mean = each run's mean over all its evaluations (the area under its learning curve "
    "over its length): learning sooner scores higher. The columns mean, IQM and 95% CI are "
    "of that score.",
}


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
            f"(txrl.stats), because {missing}."
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
    shown = [a for a in axes if a != config.panels]
    for title, members in panels(config, variants).items():
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
    lines += _unfinished_markdown(config, variants, axes)
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


def _unfinished_markdown(
    config: CompareConfig, variants: Sequence[VariantSummary], axes: Sequence[str]
) -> list[str]:
    """Where each unfinished run that has been evaluated stands: a study cut short by its
    compute still says how far each run got, which the tables above leave out."""
    metric = config.metric.replace("_", " ")
    rows = [
        [
            *(v.label(axis) for axis in axes),
            str(r.spec.seed),
            f"{_steps(r.timesteps[-1])} of {_steps(r.spec.config['budget'])}",
            _num(r.values[-1]),
            _num(max((x for x in r.values if not math.isnan(x)), default=math.nan)),
            "–" if r.wall_time_s is None else _seconds(r.wall_time_s),
        ]
        for v in variants
        for r in v.records
        if not r.finished and r.timesteps
    ]
    if not rows:
        return []
    header = [*axes, "seed", "last evaluation at", metric, f"best {metric}", "wall-clock"]
    return [
        "",
        "## Unfinished runs",
        "",
        "Left out of the tables above: each run's last evaluation so far (env steps of its "
        "budget), the best of its evaluations, and its wall-clock at the last one. Running the "
        "same `txrl compare` again resumes them.",
        "",
        *_md_table(header, rows),
    ]


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
