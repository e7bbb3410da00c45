"""``txrl compare`` from end to end: plan the grid, run what is left, summarise it all."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from txrl import stats
from txrl.compare.backends import cpu_count, run_local, run_ray
from txrl.compare.plan import TRAIN_LOG, RunSpec, launch_order, plan, select_runs
from txrl.compare.plots import plot_curves, plot_finals, plot_ranking
from txrl.compare.ranking import reference_comparisons
from txrl.compare.report import results_markdown
from txrl.compare.summary import (
    VariantSummary,
    aggregate_over_panels,
    read_run,
    write_summaries,
)
from txrl.config import CompareConfig, ConfigError, dump_yaml, to_plain


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
    groups = aggregate_over_panels(config, variants) if config.panels and variants else []
    write_summaries(config, records, variants, groups, out_dir)
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
    return variants


def compare(
    config: CompareConfig,
    out_dir: str | Path | None = None,
    *,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    aggregate_only: bool = False,
    only: Mapping[str, set[str]] | None = None,
    until: int | None = None,
    echo: Callable[[str], None] = print,
) -> tuple[list[VariantSummary], list[dict[str, Any]]]:
    """Run the grid (skipping finished runs, resuming partial ones) and summarise it.

    Half-done runs start first, then the rest seed by seed (`launch_order`), so a
    compare stopped part-way leaves every variant on the same seeds.

    ``only`` (see `select_runs`) runs part of the grid, e.g. one learner or some seeds
    on another machine into the same ``out_dir``; the summary covers every finished run of
    the grid, whichever process ran it. ``until`` pauses each run at that step
    ([`txrl.run.train.train`][txrl.run.train.train]), e.g. a screen of the first steps of runs whose schedules
    span the whole budget; the same call without it continues them.
    """
    if backend not in ("local", "ray"):
        raise ConfigError(f"backend must be local or ray, got {backend!r}")
    out = Path(out_dir) if out_dir is not None else Path("runs") / (config.name or "compare")
    specs = plan(config, out)
    chosen = select_runs(config, specs, only) if only else specs
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.yaml").write_text(dump_yaml(to_plain(config)))
    status = {spec.run_dir: spec.status() for spec in specs}
    todo = launch_order(
        [s for s in chosen if status[s.run_dir] != "finished"], config.seeds, status
    )
    if until is not None:
        todo = [dataclasses.replace(spec, until=until) for spec in todo]
    counts = {k: sum(v == k for v in status.values()) for k in ("finished", "partial", "new")}
    workers = workers or config.workers or cpu_count()
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
            elif outcome.get("status") == "stopped":  # the same command resumes it
                echo(f"{head}: stopped: {outcome.get('message')}")
            elif outcome.get("status") == "paused":  # at --until; the same command continues it
                echo(f"{head}: {outcome.get('message')}")
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
