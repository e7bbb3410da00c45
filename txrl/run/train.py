"""The entry point of training: [`train`][txrl.run.train.train] runs a config's agent recipe in a run directory.

Before anything is written it resolves the config (the checks that need the backbone
registry, the env or the device) and warns about a budget below one rollout; while the
recipe runs it holds the run directory's lock, and it turns Ctrl-C outside the learner's
loop and a non-finite update into one-line errors that name the newest checkpoint.

The run directory itself (its layout, what a resume restores, crash safety) is
`txrl.run.run_dir`'s; the callbacks that evaluate and checkpoint are
`txrl.run.callbacks`'. This module is the top of the run layer: the recipe it calls,
given by its caller (`txrl.agents.recipe`), wires the modules below it, none of which
imports this one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from txrl.config import ConfigError, TrainConfig
from txrl.errors import TrainingDiverged, print_warning
from txrl.run.checkpoint import import_dynamo_without_litter, latest_checkpoint
from txrl.run.preflight import resolve
from txrl.run.run_dir import TrainResult, interrupted
from txrl.run.run_files import default_run_dir, run_lock


def warn_short_budget(config: TrainConfig, warn: Callable[[str], None] | None = None) -> None:
    """Warn when the budget is below one rollout: the learner collects whole rollouts, so
    such a run trains a whole one, several times its budget."""
    n_steps = getattr(config.learner_settings, "n_steps", None)
    if n_steps is None:
        return
    rollout = n_steps * config.env.n_envs
    if config.budget < rollout:
        (warn or print_warning)(
            f"budget {config.budget:,} is below one rollout ({config.algo}.n_steps * env.n_envs "
            f"= {n_steps} * {config.env.n_envs} = {rollout:,} steps): the run trains one whole "
            f"rollout, {rollout:,} steps; set budget >= {rollout:,} or lower {config.algo}.n_steps"
        )


#: An agent recipe: ``recipe(config, run_dir, resume=..., until=...)`` trains one run in
#: ``run_dir`` (txrl's: :func:`txrl.agents.recipe.main`).
Recipe = Callable[..., TrainResult]


def train(
    config: TrainConfig,
    run_dir: str | Path | None = None,
    *,
    recipe: Recipe,
    resume: bool = False,
    until: int | None = None,
) -> TrainResult:
    """Train ``config`` in ``run_dir`` (default ``runs/<name>-<time>``) with the agent
    ``recipe``, which the caller passes (``txrl train`` and ``txrl compare``:
    `txrl.agents.recipe.main`): the recipe wires the modules of this layer, so this
    module, above them, does not import it.

    ``resume=True`` continues the run in ``run_dir`` from its last checkpoint (see
    `txrl.run.run_dir` for what that restores); ``config`` must be the run's own, changed at
    most in `txrl.config.RESUME_KEYS` (a larger budget extends a finished run).
    ``until`` pauses the run at the first rollout start at or after that step, with a
    checkpoint there, and raises `txrl.errors.TrainingPaused`; the budget and the
    ``lin_`` schedules stay the config's, so a resume goes on as if it had never paused (a
    screen of a long run's first steps, a run split over sessions).
    The checks that need the backbone registry, the env or the device run first
    ([`txrl.run.preflight.resolve`][txrl.run.preflight.resolve]); nothing is written when they fail.
    """
    if until is not None and until < 1:
        raise ConfigError(f"until must be a step >= 1, got {until}")
    config = resolve(config)
    run_dir = Path(run_dir) if run_dir is not None else default_run_dir(config)
    if not resume:
        warn_short_budget(config)
    import_dynamo_without_litter()
    # Resuming a directory that does not exist fails in Run.open with its own message.
    held = run_lock(run_dir) if not resume or run_dir.is_dir() else contextlib.nullcontext()
    try:
        with held:
            return recipe(config, run_dir, resume=resume, until=until)
    except KeyboardInterrupt:
        # Ctrl-C outside the learner's loop (the recipe names the step inside it).
        raise interrupted(run_dir, None) from None
    except FloatingPointError as e:
        # Raised by the learners before ``optimizer.step()``: no weight changed and no
        # checkpoint was written from the bad update, so the newest one is the last good state.
        newest = latest_checkpoint(run_dir)
        kept = (
            f"the newest checkpoint, {newest}, holds the weights of the last good update"
            if newest is not None
            else "no checkpoint had been written yet"
        )
        raise TrainingDiverged(f"training stopped in {run_dir}: {e}\n{kept}") from e


__all__ = ["Recipe", "TrainResult", "train", "warn_short_budget"]
