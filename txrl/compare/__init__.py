"""``txrl compare``: a grid of variants x seeds, run in parallel, summarised from the runs' logs.

A compare config ([`txrl.config.CompareConfig`][txrl.config.CompareConfig]) expands into runs, one per variant and
seed. Each run is an ordinary training run ([`txrl.run.train.train`][txrl.run.train.train]) in its own directory,
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

On either backend a first Ctrl-C or SIGTERM stops each running run after its rollout's update,
with a checkpoint there (the Ray backend tells its trials through a stop file in ``OUT/ray/``),
begins no further run and raises ``KeyboardInterrupt``; the same call resumes them all.

Both write the same layout::

    OUT/                              default runs/<name>
      compare.yaml                    the resolved compare config
      runs/<variant>/seed_<s>/        one run directory each (see txrl.run.train)
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
                                      and the stop file of a stopped Ray compare

Statistics follow Agarwal et al. 2021 through [`txrl.stats`][txrl.stats] (rliable): IQM over seeds
with stratified-bootstrap 95% CIs, probabilities of improvement, and Kendall's tau between
our ranking and a reference one (``reference:`` in the config, e.g. the gating ablation of
Parisotto et al. 2019, Table 1). Without rliable (the ``stats`` extra) the IQM's CI comes
from [`txrl.stats.bootstrap_ci`][txrl.stats.bootstrap_ci] and results.md says what is missing.

Modules, one job each (each imports only those above it):

* `plan`: the grid's runs (`RunSpec`), their status, the order they
  start in, ``--only``;
* `backends`: one run in a worker (`execute_run`), the local pool
  and the Ray Tune grid;
* `summary`: the runs' logs read back, the estimates per variant and
  over panels, runs.csv, results.csv and aggregate.csv;
* `ranking`: our ranking against the reference;
* `report`: results.md;
* `plots`: curves.png, final.png and ranking.png;
* `pipeline`: `compare` and `summarise`, which tie them together.
"""

from __future__ import annotations

from txrl.compare.backends import execute_run, run_local, run_ray
from txrl.compare.pipeline import compare, summarise
from txrl.compare.plan import TRAIN_LOG, RunSpec, launch_order, parse_only, plan, select_runs
from txrl.compare.plots import (
    MAX_CURVES_PER_PANEL,
    plot_curves,
    plot_finals,
    plot_ranking,
    steps_axis,
)
from txrl.compare.ranking import (
    RankEntry,
    ReferenceComparison,
    compare_to_reference,
    reference_comparisons,
)
from txrl.compare.report import results_markdown
from txrl.compare.summary import (
    GroupSummary,
    RunRecord,
    VariantSummary,
    aggregate_over_panels,
    read_run,
)

__all__ = [
    "MAX_CURVES_PER_PANEL",
    "TRAIN_LOG",
    "GroupSummary",
    "RankEntry",
    "ReferenceComparison",
    "RunRecord",
    "RunSpec",
    "VariantSummary",
    "aggregate_over_panels",
    "compare",
    "compare_to_reference",
    "execute_run",
    "launch_order",
    "parse_only",
    "plan",
    "plot_curves",
    "plot_finals",
    "plot_ranking",
    "read_run",
    "reference_comparisons",
    "results_markdown",
    "run_local",
    "run_ray",
    "select_runs",
    "steps_axis",
    "summarise",
]
