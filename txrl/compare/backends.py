"""Where the runs of a comparison train: a local process pool, or a Ray Tune grid.

Both backends call :func:`execute_run` once per run and report each run as it ends, through
a :data:`Report` callback; a failing run is reported, not raised, so the others go on.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from txrl.compare.plan import TRAIN_LOG, RunSpec
from txrl.config import CONFIG_FILE, TrainConfig


def execute_run(spec: RunSpec) -> dict[str, Any]:
    """Train (or resume) one run in this process; its console output goes to ``train.log``.

    Used by both backends; returns ``{"status": "finished" | "stopped" | "failed", ...}``
    (stopped: by a Ctrl-C or SIGTERM, with a checkpoint to resume from; ``error`` says
    where) and never raises, so one failing run does not stop the others.
    """
    import torch

    from txrl.errors import TrainingInterrupted
    from txrl.train import train

    torch.set_num_threads(1)
    run_dir = Path(spec.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    resume = (run_dir / CONFIG_FILE).exists()
    with (
        open(run_dir / TRAIN_LOG, "a") as log,
        contextlib.redirect_stdout(log),
        contextlib.redirect_stderr(log),
    ):
        try:
            result = train(TrainConfig.from_dict(spec.config), run_dir, resume=resume)
        except TrainingInterrupted as stopped:
            print(f"txrl train: {stopped}")
            return {
                "status": "stopped",
                "run_dir": spec.run_dir,
                "error": str(stopped),
                "seconds": time.monotonic() - began,
            }
        except Exception:
            traceback.print_exc()
            return {
                "status": "failed",
                "run_dir": spec.run_dir,
                "error": traceback.format_exc(limit=3).strip().splitlines()[-1],
                "seconds": time.monotonic() - began,
            }
    return {
        "status": "finished",
        "run_dir": spec.run_dir,
        "timesteps": result.timesteps,
        "success_rate": result.final_eval.get("success_rate"),
        "mean_return": result.final_eval.get("mean_return"),
        "seconds": time.monotonic() - began,
    }


Report = Callable[[RunSpec, dict[str, Any]], None]


#: Seconds between a pool worker's looks at whether the compare process is still there.
PARENT_CHECK_SECONDS = 1.0


def _exit_with_parent(parent: int, stop: Any, graceful: Any) -> None:
    """Pool initializer: end this worker when the compare process that started it is gone,
    or when it sets ``stop`` (a ``multiprocessing`` event); when it sets ``graceful``, stop
    this worker's run as a first Ctrl-C would (:func:`txrl.callbacks.request_stop`: at the
    end of its rollout, with a checkpoint there).

    A compare stopped by ``kill -9`` would otherwise leave its workers training on, holding
    their runs' locks, so the next ``txrl compare`` would find those runs taken. SIGINT is
    ignored here: a terminal's Ctrl-C reaches the whole process group, and the compare
    process, which gets it too, tells its workers (:func:`run_local`).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        from txrl.callbacks import request_stop

        # polled, never waited on: a multiprocessing event's set() blocks on any process that
        # ended inside its wait() (a worker that finished its run and exited)
        asked = False
        while os.getppid() == parent and not stop.is_set():
            if not asked and graceful.is_set():
                request_stop()
                asked = True
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="txrl-exit-with-parent", daemon=True).start()


def run_local(specs: Sequence[RunSpec], workers: int, report: Report) -> list[dict[str, Any]]:
    """Run ``specs`` in a pool of ``workers`` processes (spawned: no forked torch state),
    which end with this process however it ends (:func:`_exit_with_parent`).

    Ctrl-C (or SIGTERM) stops the running runs as it stops ``txrl train``: each goes on to
    the end of its rollout and its update, writes a checkpoint there and ends, so a resume
    loses no step; the runs not started are cancelled, the stopped ones reported, and the
    ``KeyboardInterrupt`` propagates. A second Ctrl-C ends the workers at once (each run
    then resumes from its newest checkpoint). Any other exception ends them at once too."""
    from txrl.callbacks import handling_signals

    outcomes = []
    context = multiprocessing.get_context("spawn")
    stop, graceful = context.Event(), context.Event()
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_exit_with_parent,
        initargs=(os.getpid(), stop, graceful),
    )
    try:
        # SIGTERM (``kill PID``, a cluster scheduler) stops the runs as Ctrl-C does
        with handling_signals((signal.SIGTERM,), signal.default_int_handler):
            futures = {pool.submit(execute_run, spec): spec for spec in specs}
            reported: set[Future[dict[str, Any]]] = set()
            try:
                for future in as_completed(futures):
                    outcome = future.result()
                    report(futures[future], outcome)
                    reported.add(future)
                    outcomes.append(outcome)
            except KeyboardInterrupt:
                graceful.set()
                print(
                    "txrl compare: stopping: each running run ends after its rollout's update, "
                    "with a checkpoint there (Ctrl-C again stops at once)",
                    file=sys.stderr,
                    flush=True,
                )
                pool.shutdown(wait=True, cancel_futures=True)
                for future, spec in futures.items():  # the runs it stopped, as they ended
                    ended = future.done() and not future.cancelled()
                    if future not in reported and ended and future.exception() is None:
                        report(spec, future.result())
                raise
    except BaseException:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return outcomes


def _tune_trainable(param: dict[str, Any]) -> None:
    """Ray Tune function trainable: one run of the grid, reported once at its end."""
    from ray import tune

    run = param["run"]
    labels = tuple((axis, label) for axis, label in run["labels"])
    outcome = execute_run(RunSpec(**{**run, "labels": labels}))
    tune.report({k: v for k, v in outcome.items() if v is not None})


def run_ray(
    specs: Sequence[RunSpec],
    workers: int | None,
    address: str | None,
    storage: Path,
    report: Report,
) -> list[dict[str, Any]]:
    """Run ``specs`` as a Ray Tune grid (1 CPU per trial) on a local Ray or at ``address``."""
    try:
        import ray
        from ray import tune
    except ImportError as e:
        raise ImportError("the ray backend needs Ray Tune: pip install 'txrl[ray]'") from e

    by_dir = {spec.run_dir: spec for spec in specs}
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers or cpu_count(), include_dashboard=False, log_to_driver=False)
    try:
        params = [
            {**spec.__dict__, "labels": [list(pair) for pair in spec.labels]} for spec in specs
        ]
        tuner = tune.Tuner(
            tune.with_resources(_tune_trainable, {"cpu": 1}),
            param_space={"run": tune.grid_search(params)},
            tune_config=tune.TuneConfig(
                max_concurrent_trials=workers,
                reuse_actors=True,  # one process per worker imports torch once, not per run
                trial_name_creator=_trial_name,
                trial_dirname_creator=_trial_name,
            ),
            run_config=tune.RunConfig(
                storage_path=str(storage.resolve()),
                name=time.strftime("grid-%Y%m%d-%H%M%S"),
                verbose=0,
                callbacks=[_report_trials(by_dir, report)],
            ),
        )
        # Tune installs its own Ctrl-C handler for the fit and leaves it behind; the caller's
        # (a Python session's, the CLI's) is put back after.
        sigint = signal.getsignal(signal.SIGINT)
        try:
            grid = tuner.fit()  # a ResultGrid: indexed, not iterable for a type checker
        finally:
            if sigint is not None and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, sigint)
        outcomes = []
        for i in range(len(grid)):
            result = grid[i]
            assert result.config is not None  # every trial of a Tuner runs with its config
            outcomes.append(_ray_outcome(result.config["run"]["run_dir"], result))
        return outcomes
    finally:
        if started_here:
            ray.shutdown()


def _ray_outcome(run_dir: str, result: Any) -> dict[str, Any]:
    """An outcome like :func:`execute_run`'s from a Tune result (``.metrics``, ``.error``)."""
    if result.error is not None:
        return {"status": "failed", "run_dir": run_dir, "error": str(result.error)}
    return {"status": "failed", **(result.metrics or {}), "run_dir": run_dir}


def _report_trials(by_dir: dict[str, RunSpec], report: Report) -> Any:
    """A Ray Tune callback that reports each run as its trial ends, as the local backend does."""
    from ray import tune

    class ReportTrials(tune.Callback):
        def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            run_dir = trial.config["run"]["run_dir"]
            result = trial.last_result or {}
            report(by_dir[run_dir], {"status": "failed", **result, "run_dir": run_dir})

        def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            run_dir = trial.config["run"]["run_dir"]
            error = f"Ray trial {trial.trial_id} failed (see {trial.local_path})"
            report(by_dir[run_dir], {"status": "failed", "run_dir": run_dir, "error": error})

    return ReportTrials()


def _trial_name(trial: Any) -> str:
    run = trial.config["run"]
    return f"{run['variant']}-seed_{run['seed']}"


def cpu_count() -> int:
    """CPU cores this process may use (its affinity mask on Linux): the default worker count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
