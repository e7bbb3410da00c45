"""Where the runs of a comparison train: a local process pool, or a Ray Tune grid.

Both backends call `execute_run` once per run and report each run as it ends, through
a `Report` callback; a failing run is reported, not raised, so the others go on.
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
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from txrl.compare.plan import TRAIN_LOG, RunSpec
from txrl.config import CONFIG_FILE, TrainConfig


def execute_run(spec: RunSpec) -> dict[str, Any]:
    """Train (or resume) one run in this process; its console output goes to ``train.log``.

    Used by both backends; returns ``{"status": "finished" | "paused" | "stopped" |
    "failed", ...}`` (paused: at ``spec.until``; stopped: by a Ctrl-C or SIGTERM; both at a
    checkpoint to go on from, which ``message`` names; failed: ``error`` says where) and
    never raises, so one failing run does not stop the others.
    """
    import torch

    from txrl.agents import recipe
    from txrl.errors import TrainingInterrupted, TrainingPaused
    from txrl.run.train import train

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
            result = train(
                TrainConfig.from_dict(spec.config),
                run_dir,
                recipe=recipe.main,
                resume=resume,
                until=spec.until,
            )
        except (TrainingPaused, TrainingInterrupted) as ended:  # at a checkpoint to go on from
            print(f"txrl train: {ended}")
            return {
                "status": "paused" if isinstance(ended, TrainingPaused) else "stopped",
                "run_dir": spec.run_dir,
                "message": str(ended),
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


#: Seconds between a pool worker's looks at whether the compare process is still there,
#: and between a Ray trial's looks at the stop file (:data:`STOP_FILE`).
PARENT_CHECK_SECONDS = 1.0

#: What a compare prints at its first Ctrl-C or SIGTERM, on either backend.
STOPPING = (
    "txrl compare: stopping: each running run ends after its rollout's update, with a "
    "checkpoint there (Ctrl-C again stops at once)"
)

#: The file a stopped Ray compare writes in its Tune storage folder (``OUT/ray``, which
#: every node sees): each trial stops its run there as a first Ctrl-C would, and a trial
#: that has not begun its run does not begin it.
STOP_FILE = "stop-requested"


#: In a local pool's worker: the event its compare sets when it is stopped
#: (:func:`_exit_with_parent`), read before a run begins (:func:`_execute_unless_stopped`).
_STOPPING: Any = None


def _execute_unless_stopped(spec: RunSpec) -> dict[str, Any]:
    """`execute_run` in a local pool's worker, unless the compare has been stopped: a
    run handed to the worker before the stop (a process pool queues one more than it runs)
    is not begun, and is reported as ``cancelled``."""
    if _STOPPING is not None and _STOPPING.is_set():
        return {"status": "cancelled", "run_dir": spec.run_dir}
    return execute_run(spec)


def _exit_with_parent(parent: int, stop: Any, graceful: Any) -> None:
    """Pool initializer: end this worker when the compare process that started it is gone,
    or when it sets ``stop`` (a ``multiprocessing`` event); when it sets ``graceful``, stop
    this worker's run as a first Ctrl-C would (`txrl.run.callbacks.request_stop`: at the
    end of its rollout, with a checkpoint there).

    A compare stopped by ``kill -9`` would otherwise leave its workers training on, holding
    their runs' locks, so the next ``txrl compare`` would find those runs taken. SIGINT is
    ignored here: a terminal's Ctrl-C reaches the whole process group, and the compare
    process, which gets it too, tells its workers (`run_local`).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _STOPPING
    _STOPPING = graceful

    def watch() -> None:
        from txrl.run.callbacks import request_stop

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
    which end with this process however it ends (`_exit_with_parent`).

    Ctrl-C (or SIGTERM) stops the running runs as it stops ``txrl train``: each goes on to
    the end of its rollout and its update, writes a checkpoint there and ends, so a resume
    loses no step; the runs not started are cancelled, the stopped ones reported, and the
    ``KeyboardInterrupt`` propagates. A second Ctrl-C ends the workers at once (each run
    then resumes from its newest checkpoint). Any other exception ends them at once too."""
    from txrl.run.callbacks import handling_signals

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
            futures = {pool.submit(_execute_unless_stopped, spec): spec for spec in specs}
            reported: set[Future[dict[str, Any]]] = set()
            try:
                for future in as_completed(futures):
                    outcome = future.result()
                    report(futures[future], outcome)
                    reported.add(future)
                    outcomes.append(outcome)
            except KeyboardInterrupt:
                graceful.set()
                print(STOPPING, file=sys.stderr, flush=True)
                pool.shutdown(wait=True, cancel_futures=True)
                for future, spec in futures.items():  # the runs it stopped, as they ended
                    ended = future.done() and not future.cancelled()
                    if future in reported or not ended or future.exception() is not None:
                        continue
                    if future.result()["status"] != "cancelled":  # "cancelled": not begun
                        report(spec, future.result())
                raise
    except BaseException:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return outcomes


def _tune_trainable(param: dict[str, Any]) -> None:
    """Ray Tune function trainable: one run of the grid, reported once at its end. It stops
    its run as a first Ctrl-C would when the compare writes its stop file
    (`_watch_stop_file`); a run the compare was stopped before is not begun, and is
    reported as ``cancelled``."""
    from ray import tune

    run = param["run"]
    stop_file = Path(param["stop_file"])
    if stop_file.exists():
        tune.report({"status": "cancelled", "run_dir": run["run_dir"]})
        return
    labels = tuple((axis, label) for axis, label in run["labels"])
    finished = threading.Event()
    threading.Thread(
        target=_watch_stop_file, args=(stop_file, finished), name="txrl-stop-file", daemon=True
    ).start()
    try:
        outcome = execute_run(RunSpec(**{**run, "labels": labels}))
    finally:
        finished.set()
    tune.report({k: v for k, v in outcome.items() if v is not None})


def _watch_stop_file(stop_file: Path, finished: threading.Event) -> None:
    """Until ``finished`` is set: once ``stop_file`` exists, stop this process's run as a
    first Ctrl-C would (`txrl.run.callbacks.request_stop`: after its rollout's update, with
    a checkpoint there). A file, not a signal: a trial runs in a thread of a Ray worker that
    may be on another node, and the compare's storage folder is one every node sees."""
    from txrl.run.callbacks import request_stop

    while not finished.wait(PARENT_CHECK_SECONDS):
        if stop_file.exists():
            request_stop()
            return


class _StopRequests:
    """The compare's SIGINT and SIGTERM handler while a Ray grid runs: the first signal
    writes the stop file (`STOP_FILE`), which the trials watch; the second raises
    ``KeyboardInterrupt`` (Ray then ends the trials at once; each run resumes from its
    newest checkpoint)."""

    def __init__(self, stop_file: Path) -> None:
        self.stop_file = stop_file
        self.requested = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.stop_file.parent.mkdir(parents=True, exist_ok=True)
        self.stop_file.touch()
        print(STOPPING, file=sys.stderr, flush=True)


def run_ray(
    specs: Sequence[RunSpec],
    workers: int | None,
    address: str | None,
    storage: Path,
    report: Report,
) -> list[dict[str, Any]]:
    """Run ``specs`` as a Ray Tune grid (1 CPU per trial) on a local Ray or at ``address``.

    Ctrl-C (or SIGTERM) stops it as it stops the local backend: instead of Tune's own handler
    (which ends the trials where they are), the compare writes a stop file in ``storage``,
    each running trial ends its run after its rollout's update with a checkpoint there, the
    trials not begun begin nothing, the stopped runs are reported and ``KeyboardInterrupt``
    is raised. A second Ctrl-C ends the trials at once."""
    from txrl.run.callbacks import handling_signals

    try:
        import ray
        from ray import tune
    except ImportError as e:
        raise ImportError("the ray backend needs Ray Tune: pip install 'txrl[ray]'") from e

    by_dir = {spec.run_dir: spec for spec in specs}
    stop_file = storage.resolve() / STOP_FILE
    stop_file.unlink(missing_ok=True)  # an earlier stop's
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
            param_space={"run": tune.grid_search(params), "stop_file": str(stop_file)},
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
        # Tune's own Ctrl-C handler (which ends the trials where they are) stays off; the
        # caller's handlers (a Python session's, the CLI's) are back after the fit
        requests = _StopRequests(stop_file)
        with (
            _environment(TUNE_SIGINT_OFF, "1"),
            handling_signals((signal.SIGINT, signal.SIGTERM), requests),
        ):
            grid = tuner.fit()  # a ResultGrid: indexed, not iterable for a type checker
        outcomes = []
        for i in range(len(grid)):
            result = grid[i]
            assert result.config is not None  # every trial of a Tuner runs with its config
            outcome = _ray_outcome(result.config["run"]["run_dir"], result)
            if outcome["status"] != "cancelled":
                outcomes.append(outcome)
        if requests.requested:
            raise KeyboardInterrupt
        return outcomes
    finally:
        if started_here:
            ray.shutdown()


#: The environment variable that keeps Ray Tune from installing its SIGINT handler.
TUNE_SIGINT_OFF = "TUNE_DISABLE_SIGINT_HANDLER"


@contextlib.contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    """The environment variable ``name`` set to ``value`` for the block, as it was after."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def _ray_outcome(run_dir: str, result: Any) -> dict[str, Any]:
    """An outcome like `execute_run`'s from a Tune result (``.metrics``, ``.error``)."""
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
            if result.get("status") == "cancelled":  # not begun: the compare was stopped
                return
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
