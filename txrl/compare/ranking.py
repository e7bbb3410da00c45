"""Our ranking against a reference one (``reference:`` in the compare config).

Per panel, over all panels, or for the whole grid, the labels of the reference axis are
ranked by our IQM and set against the reference's scores: Kendall's τ with its CI and the
probabilities of improvement, both from [`txrl.stats`][txrl.stats] (rliable; Agarwal et al. 2021).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from txrl import stats
from txrl.compare.summary import GroupSummary, VariantSummary, panels
from txrl.config import CompareConfig
from txrl.stats import Interval


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

    Kendall's τ and its CI come from [`txrl.stats.kendall_tau`][txrl.stats.kendall_tau] (Agarwal et al. 2021's
    stratified bootstrap over runs), the probabilities of improvement from
    [`txrl.stats.probability_of_improvement`][txrl.stats.probability_of_improvement]; without rliable only the ranks are given.
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
    for title, members in panels(config, list(variants)).items():
        found = [(v.label(axis), np.array(v.finals), v.estimate) for v in members]
        out.append(compare_to_reference(config, title, found))
    if groups:
        found = [(g.label(axis), g.scores, g.estimate) for g in groups]
        out.append(compare_to_reference(config, f"all {config.panels}s", found))
    return out
