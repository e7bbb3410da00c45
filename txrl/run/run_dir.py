"""The run directory of a training run: its layout, periodic evaluation, atomic checkpoints,
resume, the finished record and the lock that keeps one process in it.

A `Run` is one training session in its directory; the agent recipe
(`txrl.agents.recipe`) opens one and wires it to its learner, and ``txrl train`` and
``txrl compare`` call the recipe through [`txrl.run.train.train`][txrl.run.train.train]. The SB3 callbacks that
drive it from inside the learner's loop (when to evaluate and checkpoint, progress) are
`txrl.run.callbacks`', which import it: a run knows nothing of the loop.

Run directory::

    RUN_DIR/
      config.yaml                    the resolved config (every default filled in)
      eval.jsonl                     one JSON line per evaluation (timesteps, success, return, CIs)
      resumes.jsonl                  one line per resume: from which step, envs exact or restarted
      tb/                            TensorBoard events (SB3 logger): rollout/, train/, eval/, time/
      checkpoints/step_<T>.zip       periodic checkpoints at env step T (the last ``keep``)
      checkpoints/best.zip           the model of the best evaluation so far (``eval.save_best``)
      checkpoints/final.zip          written last: the run is finished
      finished.json                  and what it finished at (step, budget, clock), the mark
                                     of a finished run that survives copying the record
                                     without its checkpoints (``txrl compare`` reads it)

A checkpoint is one zip file, written atomically between rollouts, where the learner's
state is consistent (the previous update done, the next rollout not begun); its format is
[`txrl.run.checkpoint`][txrl.run.checkpoint]'s.

What resume restores (``txrl train --resume RUN_DIR``) from the last checkpoint:

* exactly: the weights, the optimizer state, the step, update and episode counters and
  SB3's episode-info buffers (SB3's archive); the python, numpy and torch RNG states;
  ``VecNormalize`` statistics; each env's live memory (``model.get_memory()``) and the
  last observations and episode-start flags;
* the environments: with ``env.vec_env: dummy`` (the default) the envs live in the
  training process and are pickled into the checkpoint (their internal state and RNG), so
  the in-flight episodes continue exactly where they were, with their memory. Envs that
  cannot be pickled, and ``subproc`` envs, are rebuilt instead: re-seeded with
  ``seed + T``, their in-flight episodes restart (the restored memory is then cleared by
  the episode starts, as it must be) and training continues from there. ``resumes.jsonl``
  says which happened.

What it cannot restore after a crash or ``kill -9``: work after the last checkpoint is
redone (up to ``checkpoint.every`` steps); a Ctrl-C or SIGTERM writes a checkpoint where it
stops, so nothing is redone. The eval log is cut back to the checkpoint and so are the
TensorBoard files (their events after the checkpoint's step are dropped), so both hold each
step once, in order (a ``best.zip`` from after the checkpoint goes too: the evaluation it
won is no longer in the log), and the resumed run's points continue them in the same ``tb/``
directory (the ``train/`` values of the update just before the checkpoint, which SB3 logs
with the next rollout, are the one point missing). A checkpoint that cannot be read (a truncated copy) is named, set aside as
``<name>.corrupt`` and the newest readable one used ([`txrl.run.checkpoint`][txrl.run.checkpoint]).
A resume never replaces a record it cannot continue: with no checkpoint to resume from,
a run killed before its first checkpoint starts over (its logs reach no further than a
restart writes them again), while a directory holding a ``finished.json`` or logs past the
first checkpoint's step (a record copied without its checkpoints) is refused, unchanged
(`check_nothing_to_lose`). A ``config.yaml`` edited by hand away from the
checkpoint's config, outside what ``--set`` may change on a resume, is refused too, naming
each key (`check_config_of_checkpoint`).
With dummy envs and deterministic torch kernels (CPU), a resumed run reproduces the
uninterrupted one; ``tests/test_cli.py`` checks that. Ctrl-C or SIGTERM ends a run after the
rollout under way and its update, with a checkpoint at the next rollout start
(`txrl.run.callbacks.StopOnInterrupt`, `Run.save_on_stop`; a second one at once),
and one line: that step, the checkpoint and the command that resumes it. ``until``
([`txrl.run.train.train`][txrl.run.train.train], ``--until``) pauses a run the same way at a chosen step
(`Run.paused`), its budget unchanged.

A larger budget (``txrl train --resume RUN_DIR --set budget=N``, also how a finished run is
extended) changes one thing besides the length: ``lin_<x>`` schedules (learning rate, clip
range, ...) are functions of the budget, ``x * (1 - step / budget)`` (SB3's progress
remaining), so they are stretched over the new one. At the step the run resumes from they
stand where a run of the new budget would stand there and fall to 0 at its end: a run that
finished at 2,048 steps (learning rate 0) and is extended to 4,096 goes on at half its
start. This is chosen over continuing from where the schedule ended, which for a finished
run is 0 and would train nothing; the resume prints the schedules' values (see
`schedule_note`). An interrupted run resumed with its own budget continues exactly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.logger import Logger, configure
from stable_baselines3.common.vec_env import VecEnv, sync_envs_normalization

from txrl.config import (
    CONFIG_FILE,
    RESUME_KEYS,
    TrainConfig,
    changed_keys,
    check_resume_changes,
    dump_yaml,
    read_run_config,
)
from txrl.errors import RunError, TrainingInterrupted, TrainingPaused, print_warning
from txrl.run.checkpoint import (
    CheckpointError,
    ResumeState,
    atomic_write,
    find_vec_normalize,
    latest_checkpoint,
    newest_readable_checkpoint,
    periodic_checkpoints,
    periodic_path,
    read_resume_state,
    restore_rng,
    save_checkpoint,
)
from txrl.run.envs import EVAL_SEED_OFFSET, make_train_env, restore_envs
from txrl.run.evaluate import EvalResult, drop_from_best, eval_score, evaluate
from txrl.run.run_files import (
    BEST_CHECKPOINT,
    CHECKPOINT_DIR,
    EVAL_LOG,
    FINAL_CHECKPOINT,
    FINISHED_RECORD,
    RESUME_LOG,
    RUN_FILES,
    TB_DIR,
    EvalLog,
    clear_dir,
    default_run_dir,
    read_eval_log,
    read_finished_record,
    tensorboard_last_step,
    truncate_tensorboard,
    write_finished_record,
)


@dataclass
class TrainResult:
    """What a finished training run returns: `Run.finish` makes it, the recipe and
    [`txrl.run.train.train`][txrl.run.train.train] return it."""

    run_dir: Path
    timesteps: int
    final_eval: dict[str, Any]  # EvalResult.summary() at the final step
    checkpoint: Path  # the final checkpoint
    resumed_from: int | None = None  # step of the checkpoint this session started from
    wall_time_s: float = 0.0
    stopped_at_target: bool = False  # ended by eval.stop_at before the budget was spent


@dataclass
class Run:
    """One run directory and the bookkeeping of a training session in it."""

    config: TrainConfig
    run_dir: Path
    checkpoint: Path | None = None  # the checkpoint this session resumes from
    resume_state: ResumeState | None = None
    last_eval: int | None = None  # step of the last evaluation in the log
    last_checkpoint: int = 0
    exact_envs: bool = False  # resumed with the checkpointed envs (not restarted ones)
    best_score: float | None = None  # the best evaluation's score so far (see eval_score)
    target_reached: bool = False  # eval.stop_at met: learn() ends at the next env step
    started: float = field(default_factory=time.monotonic)
    eval_log: EvalLog = field(init=False)

    def __post_init__(self) -> None:
        self.eval_log = EvalLog(self.run_dir / EVAL_LOG)

    @classmethod
    def open(
        cls,
        config: TrainConfig,
        run_dir: str | Path | None = None,
        *,
        resume: bool = False,
        warn: Callable[[str], None] | None = None,
    ) -> Run:
        """Create a fresh run directory, or reopen one to resume (see [`txrl.run.train.train`][txrl.run.train.train]).

        A resumed run may be given a config that differs from its own in the keys of
        `txrl.config.RESUME_KEYS` (a larger budget continues a finished run). An
        unreadable checkpoint is reported through ``warn``, set aside, and the newest
        readable one used instead.
        """
        warn = warn or print_warning
        if config.runtime.torch_threads is not None:
            torch.set_num_threads(config.runtime.torch_threads)
        run_dir = Path(run_dir) if run_dir is not None else default_run_dir(config)
        if not resume:
            if any((run_dir / name).exists() for name in RUN_FILES):
                raise RunError(
                    f"{run_dir} already holds a run; "
                    f"resume it with `txrl train --resume {run_dir}` or choose another --run-dir"
                )
            run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write(run_dir / CONFIG_FILE, dump_yaml(config.to_dict()).encode())
            return cls(config, run_dir)
        stored = read_run_config(run_dir)
        if stored != config:
            check_resume_changes(stored, config)
        for stale in [*run_dir.glob(".*.tmp-*"), *run_dir.glob(f"{CHECKPOINT_DIR}/.*.tmp-*")]:
            stale.unlink()  # a write that a crash cut short; the file it was for is intact
        run = cls(config, run_dir)
        had_checkpoints = latest_checkpoint(run_dir) is not None
        readable = newest_readable_checkpoint(run_dir, set_aside=True, warn=warn)
        if readable is None and had_checkpoints:
            raise RunError(
                f"no checkpoint of {run_dir} can be read (see the warnings above); nothing was "
                "changed: restore a checkpoint from a copy, or train anew in another --run-dir"
            )
        if readable is None:
            check_nothing_to_lose(run_dir, stored)
            found = None
        else:
            check_config_of_checkpoint(run_dir, readable[0], readable[2], config)
            found = readable[:2]
        if found is not None and found[0].name == FINAL_CHECKPOINT:
            step = found[1].num_timesteps
            if config.budget <= step:
                raise RunError(
                    f"run {run_dir} is already finished at step {step} ({FINAL_CHECKPOINT} exists); "
                    f"to train it further raise its budget: --set budget=N with N > {step}"
                )
            # A larger budget: the final checkpoint becomes the periodic one it continues from.
            periodic = periodic_path(run_dir, step)
            os.replace(found[0], periodic)
            found = (periodic, found[1])
        (run_dir / FINISHED_RECORD).unlink(missing_ok=True)  # training goes on: not finished
        if stored != config:
            atomic_write(run_dir / CONFIG_FILE, dump_yaml(config.to_dict()).encode())
        if found is not None and stored.budget != config.budget:
            print(schedule_note(stored, config, found[1].num_timesteps), flush=True)
        if found is None:
            # Killed before its first checkpoint (check_nothing_to_lose): start over in the
            # same directory; what the record holds a restart writes again.
            run.eval_log.truncate(-1)
            clear_dir(run_dir / TB_DIR)
            run.forget_best_after(-1, [])
            return run
        run.checkpoint, run.resume_state = found
        step = run.resume_state.num_timesteps
        run.eval_log.truncate(step)
        # The clock goes on from the checkpoint's; a checkpoint from before it kept one goes
        # on from its last evaluation's.
        before = run.eval_log.read()
        clock = vars(found[1]).get("wall_time_s")
        if clock is None:
            clock = before[-1].get("wall_time_s", 0.0) if before else 0.0
        run.started = time.monotonic() - clock
        truncate_tensorboard(run_dir / TB_DIR, step)
        run.last_checkpoint = step
        done = [e["timesteps"] for e in before]
        run.last_eval = max(done) if done else None
        run.forget_best_after(step, before)
        return run

    # -------------------------------------------------------------- wiring helpers

    def envs(self) -> VecEnv:
        """The training envs: new ones, or the checkpointed ones when resuming."""
        if self.resume_state is None:
            return make_train_env(self.config)
        env, self.exact_envs = restore_envs(self.config, self.resume_state)
        return env

    def restore(self, algo: type[BaseAlgorithm], env: VecEnv) -> BaseAlgorithm:
        """The learner of the checkpoint, with its envs, memory and RNG state in place."""
        assert self.checkpoint is not None and self.resume_state is not None
        state = self.resume_state
        model = algo.load(self.checkpoint, env=env, device=self.config.runtime.device)
        if self.exact_envs:
            model._last_obs = state.last_obs
            model._last_episode_starts = state.last_episode_starts.copy()
        else:
            # The envs restarted: new episodes everywhere, memory cleared by the starts.
            assert model.env is not None
            model.env.seed(self.config.seed + state.num_timesteps)
            model._last_obs = model.env.reset()  # type: ignore[assignment]  # VecEnv.reset() is declared wider than _last_obs
            model._last_episode_starts = np.ones(model.env.num_envs, dtype=bool)
        if state.memory is not None:
            model.set_memory(state.memory)  # type: ignore[attr-defined]  # only memory learners store a memory
        restore_rng(state.rng)  # last: loading re-seeded the global generators
        note = {"from": state.num_timesteps, "envs": "exact" if self.exact_envs else "restarted"}
        with open(self.run_dir / RESUME_LOG, "a") as f:
            f.write(json.dumps({**note, "checkpoint": self.checkpoint.name}) + "\n")
        return model

    def logger(self) -> Logger:
        """SB3 logger writing TensorBoard events to ``tb/`` (and tables to stdout if verbose)."""
        formats = ["tensorboard"] + (["stdout"] if self.config.runtime.verbose >= 1 else [])
        return configure(str(self.run_dir / TB_DIR), formats)

    def remaining(self, model: BaseAlgorithm) -> int:
        """Env steps left in the budget, for ``learn(..., reset_num_timesteps=False)``."""
        return max(0, self.config.budget - model.num_timesteps)

    # -------------------------------------------------------------- bookkeeping

    def eval_due(self, step: int) -> bool:
        every = self.config.eval.every
        return every > 0 and (self.last_eval is None or step // every > self.last_eval // every)

    def checkpoint_due(self, step: int) -> bool:
        every = self.config.checkpoint.every
        return every > 0 and step // every > self.last_checkpoint // every

    def evaluate(self, model: BaseAlgorithm, eval_env: VecEnv) -> EvalResult:
        """Evaluate, log to TensorBoard (``eval/...``) and append to the eval log."""
        step = int(model.num_timesteps)
        train_env = model.get_env()
        if find_vec_normalize(eval_env) is not None and train_env is not None:
            sync_envs_normalization(train_env, eval_env)
        # Same seeds at every evaluation: each one plays the same episode set-ups.
        eval_env.seed(self.config.seed + EVAL_SEED_OFFSET)
        result = evaluate(
            model, eval_env, self.config.eval.episodes, deterministic=self.config.eval.deterministic
        )
        summary = result.summary()
        entry = {"timesteps": step, **summary}
        fall = drop_from_best([*self.eval_log.read(), entry], self.config.eval.warn_drop)
        save_best = self.config.eval.save_best
        warning = fall.message(entry, self.run_dir, save_best=save_best) if fall.warn else None
        with _only_these_values(model.logger):
            model.logger.record("eval/mean_reward", summary["mean_return"])
            model.logger.record("eval/mean_ep_length", summary["mean_length"])
            if summary["success_rate"] is not None:
                model.logger.record("eval/success_rate", summary["success_rate"])
            model.logger.record("eval/drop_from_best", fall.drop)
            if warning:  # TensorBoard shows it under its TEXT tab
                model.logger.record("eval/warning", warning, exclude="stdout")
            model.logger.dump(step)
        if warning:
            print_warning(warning)
        self.eval_log.append(
            {"timesteps": step, **summary, "wall_time_s": round(self.elapsed(), 3)}
        )
        self.last_eval = step
        self.update_best(model, summary)
        self.target_reached = self.reached_stop_score()
        return result

    def reached_stop_score(self) -> bool:
        """Whether the last ``eval.stop_after`` evaluations all scored ``eval.stop_at`` or more."""
        target, needed = self.config.eval.stop_at, self.config.eval.stop_after
        if target is None:
            return False
        recent = self.eval_log.read()[-needed:]
        return len(recent) == needed and all(eval_score(e) >= target for e in recent)

    def update_best(self, model: BaseAlgorithm, summary: dict[str, Any]) -> bool:
        """Save ``best.zip`` if this evaluation's score beats every earlier one of the run
        (strictly, as SB3's ``EvalCallback``: on a tie the earlier model stays)."""
        score = eval_score(summary)
        if not self.config.eval.save_best or (
            self.best_score is not None and not score > self.best_score
        ):
            return False
        path = self.run_dir / CHECKPOINT_DIR / BEST_CHECKPOINT
        save_checkpoint(model, path, self.config, self.elapsed())
        self.best_score = score
        return True

    def forget_best_after(self, step: int, evals: list[dict[str, Any]]) -> None:
        """On resume from ``step``: the best score of the evaluations kept in the log, and
        ``best.zip`` removed if it was saved after ``step`` (or cannot be read), since the
        evaluation that made it was cut from the log; the resumed run saves it again when
        it gets there."""
        scores = [eval_score(e) for e in evals]
        self.best_score = max(scores) if scores else None
        path = self.run_dir / CHECKPOINT_DIR / BEST_CHECKPOINT
        if not path.exists():
            return
        try:
            stale = read_resume_state(path).num_timesteps > step
        except CheckpointError:
            stale = True
        if stale:
            path.unlink()

    def save_periodic(self, model: BaseAlgorithm) -> Path:
        step = int(model.num_timesteps)
        path = periodic_path(self.run_dir, step)
        save_checkpoint(model, path, self.config, self.elapsed())
        self.last_checkpoint = step
        keep = self.config.checkpoint.keep
        if keep:
            for old in periodic_checkpoints(path.parent)[:-keep]:
                old.unlink(missing_ok=True)
        return path

    def save_on_stop(self, model: BaseAlgorithm) -> int:
        """The checkpoint of a stop at a rollout start (`txrl.run.callbacks.StopOnInterrupt`):
        a periodic one at this step, unless one was just written here. Returns its step."""
        step = int(model.num_timesteps)
        if self.last_checkpoint != step or latest_checkpoint(self.run_dir) is None:
            self.save_periodic(model)
        return step

    def finish(self, model: BaseAlgorithm, eval_env: VecEnv) -> TrainResult:
        """Final evaluation (unless one was just made) and the final checkpoint."""
        step = int(model.num_timesteps)
        if self.last_eval != step and not self.target_reached:
            # (a run stopped at eval.stop_at took one env step since its last evaluation,
            # with the evaluated weights: that evaluation stands as the final one)
            self.evaluate(model, eval_env)
        final = self.eval_log.read()[-1]
        path = self.run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT
        save_checkpoint(model, path, self.config, self.elapsed())
        stopped = self.target_reached and step < self.config.budget
        write_finished_record(
            self.run_dir,
            timesteps=step,
            budget=self.config.budget,
            stopped_at_target=stopped,
            wall_time_s=round(self.elapsed(), 3),
        )
        eval_env.close()
        env = model.get_env()
        if env is not None:
            env.close()
        return TrainResult(
            run_dir=self.run_dir,
            timesteps=step,
            final_eval={k: v for k, v in final.items() if k not in ("timesteps", "wall_time_s")},
            checkpoint=path,
            resumed_from=self.resume_state.num_timesteps if self.resume_state else None,
            wall_time_s=self.elapsed(),
            stopped_at_target=stopped,
        )

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def interrupted(self, step: int | None) -> TrainingInterrupted:
        """What Ctrl-C at ``step`` left: the run's newest checkpoint and how to resume."""
        return interrupted(self.run_dir, step)

    def paused(self, step: int, until: int) -> TrainingPaused:
        """A pause at ``step`` (the first rollout start at or after ``until``), whose
        checkpoint `save_on_stop` wrote: that checkpoint and how to continue."""
        checkpoint = periodic_path(self.run_dir, step)
        return TrainingPaused(
            f"paused at step {step:,} (until {until:,}) of {self.config.budget:,}; checkpoint "
            f"{checkpoint}; continue with: txrl train --resume {self.run_dir}"
        )


def check_nothing_to_lose(run_dir: Path, config: TrainConfig) -> None:
    """Before a resume with no checkpoint starts ``run_dir`` over: raise `RunError`
    when its record holds training a restart would not write again.

    A run killed before its first checkpoint, at step ``checkpoint.every``, has logged at
    most that far, and its restart logs the same steps again. A record reaching further, or
    a ``finished.json``, is a run whose checkpoints are gone (a record copied without them,
    as ``results/`` keeps runs; ``checkpoint.every: 0`` and a crash): starting over would cut
    its eval log, delete its TensorBoard events and replace its finished record, so nothing
    is changed and the error says how to train its config anew elsewhere.
    """
    held = []
    finished = read_finished_record(run_dir)
    if finished is not None:
        held.append(f"{FINISHED_RECORD} (step {finished.get('timesteps', '?')})")
    evals = [e["timesteps"] for e in read_eval_log(run_dir / EVAL_LOG)]
    first_checkpoint = config.checkpoint.every
    if evals and (max(evals) > first_checkpoint or (first_checkpoint == 0 and max(evals) > 0)):
        held.append(f"{EVAL_LOG} (up to step {max(evals)})")
    last = tensorboard_last_step(run_dir / TB_DIR)
    if last is not None and (last > first_checkpoint or (first_checkpoint == 0 and last > 0)):
        held.append(f"TensorBoard events in {TB_DIR}/ (up to step {last})")
    if not held:
        return
    where = run_dir / CHECKPOINT_DIR
    missing = f"{where}/ is missing" if not where.exists() else f"{where}/ holds none"
    raise RunError(
        f"{run_dir} has no checkpoint to resume from ({missing}), but holds the record of a "
        f"run trained further: {', '.join(held)}; starting it over would replace that record, "
        f"so nothing was changed. To train its config again, start a new run from it: "
        f"txrl train {run_dir / CONFIG_FILE} --run-dir NEW_RUN_DIR (add --set budget=N for "
        "another budget)"
    )


def check_config_of_checkpoint(
    run_dir: Path, checkpoint: Path, saved: TrainConfig, config: TrainConfig
) -> None:
    """Raise `RunError` when the config a run resumes with (its ``config.yaml`` with
    any ``--set``) differs from the one its checkpoint was trained with in a key a resume may
    not change (outside `txrl.config.RESUME_KEYS`): a ``config.yaml`` edited by hand
    would otherwise be recorded as the run's while the checkpoint's model, envs and learner
    go on as they were."""
    old, new = saved.to_dict(), config.to_dict()
    fixed = [k for k in changed_keys(old, new) if k.split(".")[0] not in RESUME_KEYS]
    if not fixed:
        return
    values = ", ".join(
        f"{k} (checkpoint: {_at(old, k)!r}, {CONFIG_FILE}: {_at(new, k)!r})" for k in fixed
    )
    allowed = ", ".join(k + ("" if k == "budget" else ".*") for k in RESUME_KEYS)
    raise RunError(
        f"{run_dir / CONFIG_FILE} differs from its checkpoint {checkpoint.name} in {values}; "
        f"the checkpoint holds what the run learned with its own config, so --resume may "
        f"change only {allowed}; nothing was changed: undo the edit, or start a new run from "
        f"the edited config: txrl train {run_dir / CONFIG_FILE} --run-dir NEW_RUN_DIR"
    )


def _at(data: Any, dotted: str) -> Any:
    """The value at dotted key ``dotted`` of nested mappings (None where it is absent)."""
    for part in dotted.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def interrupted(run_dir: Path, step: int | None) -> TrainingInterrupted:
    """The error of a run in ``run_dir`` stopped by Ctrl-C at ``step`` (``None``: before its
    learner ran): the step, its newest checkpoint and how to go on."""
    if not (run_dir / CONFIG_FILE).exists():
        return TrainingInterrupted(
            f"interrupted before {run_dir} was set up; nothing to resume: run the same command again"
        )
    reached = f"at step {step:,}" if step is not None else "before training began"
    newest = latest_checkpoint(run_dir)
    kept = "no checkpoint saved yet (a resume starts the run over)"
    if newest is not None:
        with contextlib.suppress(CheckpointError):
            kept = f"last checkpoint {newest} (step {read_resume_state(newest).num_timesteps:,})"
    return TrainingInterrupted(
        f"interrupted {reached}; {kept}; resume with: txrl train --resume {run_dir}"
    )


def schedule_note(stored: TrainConfig, config: TrainConfig, step: int) -> str:
    """The line a resume with a new budget prints: the budgets and where the ``lin_``
    schedules of the learner stand at ``step`` under the new budget (see the module doc)."""
    note = f"budget {stored.budget:,} -> {config.budget:,}"
    linear = {
        f.name: float(value.removeprefix("lin_"))
        for f in dataclasses.fields(config.learner_settings)
        if isinstance(value := getattr(config.learner_settings, f.name), str)
        and value.startswith("lin_")
    }
    if not linear:
        return note
    now = max(0.0, 1 - step / config.budget)
    before = max(0.0, 1 - step / stored.budget)
    values = ", ".join(f"{config.algo}.{k} {v * now:.3g}" for k, v in linear.items())
    return (
        f"{note}: lin_ schedules are stretched over the new budget: at step {step:,} they go on "
        f"from {now:.0%} of their start ({values}; the old budget had them at {before:.0%}) "
        f"and fall to 0 at step {config.budget:,}"
    )


@contextlib.contextmanager
def _only_these_values(logger: Logger) -> Any:
    """Dump only what is recorded inside the block; values recorded before wait for their
    own dump. An evaluation dumps at a step that the learner's own dump also reaches, so
    without this its pending ``train/`` values would land on that step twice."""
    pending = (logger.name_to_value, logger.name_to_count, logger.name_to_excluded)
    logger.name_to_value, logger.name_to_count = defaultdict(float), defaultdict(int)
    logger.name_to_excluded = {}
    try:
        yield
    finally:
        logger.name_to_value, logger.name_to_count, logger.name_to_excluded = pending
