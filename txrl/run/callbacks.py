"""The SB3 callbacks of a training run: when to evaluate and checkpoint, progress, and a
clean stop on Ctrl-C, SIGTERM or a chosen step.

They drive a `txrl.run.run_dir.Run` from inside the learner's loop, so they import it
and it knows nothing of them; `run_callbacks` builds the run's own for its learner.
They count env steps over the run's whole budget, not calls since their own start, so their
schedules and totals survive a resume (see `txrl.run.run_dir`).
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, TextIO

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv

from txrl.run.run_dir import Run


def run_callbacks(run: Run, eval_env: VecEnv) -> list[BaseCallback]:
    """The callbacks of ``run``: evaluation and checkpoints between rollouts
    (`BetweenRollouts`) and, with ``runtime.progress_bar``, progress over the whole
    budget (`Progress`)."""
    callbacks: list[BaseCallback] = [BetweenRollouts(run, eval_env)]
    if run.config.runtime.progress_bar:
        callbacks.append(Progress(run))
    return callbacks


class BetweenRollouts(BaseCallback):
    """Evaluates and checkpoints at rollout starts, on schedules of env steps.

    SB3's ``EvalCallback`` and ``CheckpointCallback`` count calls since their own start, so
    their schedules shift when a run resumes; these schedules are multiples of env steps
    and survive a resume. A rollout start is the one point where a checkpoint is consistent.
    """

    def __init__(self, run: Run, eval_env: VecEnv) -> None:
        super().__init__()
        self.run = run
        self.eval_env = eval_env

    def _on_rollout_start(self) -> None:
        step = int(self.model.num_timesteps)
        if self.run.eval_due(step):
            self.run.evaluate(self.model, self.eval_env)
        if self.run.checkpoint_due(step):
            self.run.save_periodic(self.model)

    def _on_step(self) -> bool:
        return not self.run.target_reached  # False ends learn() (eval.stop_at)


@contextlib.contextmanager
def handling_signals(
    signums: tuple[signal.Signals, ...], handler: Callable[[int, FrameType | None], Any]
) -> Iterator[None]:
    """``handler`` for each of ``signums`` during the block, their previous handlers back
    after it. Only in the main thread (the one Python delivers signals to), and not for a
    signal that is ignored (a background job's SIGINT, say): those are left as they are."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in signums}
    taken = [s for s, old in previous.items() if old not in (signal.SIG_IGN, None)]
    for signum in taken:
        signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum in taken:
            signal.signal(signum, previous[signum])


#: Set by :func:`request_stop`: every :class:`StopOnInterrupt` of this process then stops
#: its run as a first Ctrl-C would. ``txrl compare``'s workers set it when the compare is
#: interrupted (a thread, not a signal: a worker between runs has nothing to stop).
_STOP_REQUESTED = threading.Event()


def request_stop() -> None:
    """Ask every run of this process to stop as a first Ctrl-C does (thread-safe)."""
    _STOP_REQUESTED.set()


class StopOnInterrupt(BaseCallback):
    """Ctrl-C (SIGINT) or SIGTERM ends ``learn()`` cleanly, at a point a resume continues
    from without losing a step.

    A ``KeyboardInterrupt`` raised at an arbitrary point of training can leave a lock held
    (the TensorBoard writer's queue, a thread's condition) and hang the exit that follows.
    Inside `catching`, the first SIGINT or SIGTERM (what ``kill`` and cluster schedulers
    send before they end a job) only sets `requested`, as `request_stop` does.
    With ``save`` (a run's `txrl.run.run_dir.Run.save_on_stop`), training goes on to the
    end of the rollout under way and its update, ``save(model)`` writes a checkpoint at the
    next rollout start (the one point where a checkpoint is consistent, as the periodic ones
    are), and ``learn()`` ends there: the resumed run continues exactly where it stopped.
    Without ``save`` it ends at the next env step. A second signal raises
    ``KeyboardInterrupt`` at once (work since the newest checkpoint is then redone on
    resume). Outside the main thread, or for a signal that is ignored, nothing changes.

    ``at_step`` stops the same way, unasked, once training has reached that step: a pause
    (`paused`), for a run to be continued later or a screen of a long run's start
    with the long run's schedules.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(
        self, save: Callable[[BaseAlgorithm], int] | None = None, at_step: int | None = None
    ) -> None:
        super().__init__()
        self.save = save
        self.at_step = at_step
        self.requested = False
        #: whether a signal or :func:`request_stop` asked for the stop
        self.signalled = False
        #: the step of the checkpoint written at the stop (None: none written yet)
        self.saved_step: int | None = None

    def _request(self, signum: int, frame: FrameType | None) -> None:
        if self.signalled:  # the second signal: at once
            raise KeyboardInterrupt
        self.requested = self.signalled = True
        if self.save is not None:
            print(
                f"txrl: {signal.Signals(signum).name}: stopping after this rollout's update, "
                "with a checkpoint there (send it again to stop at once)",
                file=sys.stderr,
                flush=True,
            )

    def catching(self) -> contextlib.AbstractContextManager[None]:
        """Handle SIGINT and SIGTERM as above for the block (`handling_signals`)."""
        return handling_signals(self.SIGNALS, self._request)

    @property
    def stopping(self) -> bool:
        """Whether a stop was asked for (a signal, `request_stop`) or ``at_step`` is
        reached."""
        if _STOP_REQUESTED.is_set():
            self.requested = self.signalled = True
        if self.at_step is not None and self.model.num_timesteps >= self.at_step:
            self.requested = True
        return self.requested

    @property
    def paused(self) -> bool:
        """Whether training stopped at ``at_step``'s checkpoint, no signal asking for it."""
        return self.saved_step is not None and not self.signalled

    def _on_rollout_start(self) -> None:
        if self.stopping and self.save is not None and self.saved_step is None:
            self.saved_step = self.save(self.model)

    def _on_step(self) -> bool:
        # False ends learn() after this step: at once without ``save``; with it, at the
        # first step after the stop's checkpoint (which that step is not part of)
        return not (self.stopping and (self.save is None or self.saved_step is not None))


class Progress(BaseCallback):
    """Progress over the run's whole budget, counted from step 0 even after a resume.

    On a terminal: a bar (tqdm) that starts at the step the session resumed from. Otherwise
    (output to a file, as on a cluster): a line every ``runtime.progress_every`` seconds with
    the step, the steps per second of this session and the latest evaluation.
    """

    def __init__(self, run: Run, stream: TextIO | None = None) -> None:
        super().__init__()
        self.run = run
        self.stream = stream
        self.bar: Any = None
        self.began = 0.0
        self.first_step = 0
        self.last_line = 0.0

    def _on_training_start(self) -> None:
        stream = self.stream or sys.stdout
        self.first_step = int(self.model.num_timesteps)
        self.began = self.last_line = time.monotonic()
        if stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(
                total=self.run.config.budget,
                initial=self.first_step,
                unit="step",
                dynamic_ncols=True,
            )
        else:
            self._line()

    def _on_step(self) -> bool:
        if self.bar is not None:
            self.bar.update(self.training_env.num_envs)
        elif time.monotonic() - self.last_line >= self.run.config.runtime.progress_every:
            self._line()
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            self._line()

    def _line(self) -> None:
        now = time.monotonic()
        self.last_line = now
        step, budget = int(self.model.num_timesteps), self.run.config.budget
        rate = (step - self.first_step) / max(now - self.began, 1e-9)
        parts = [f"step {step:,}/{budget:,} ({100 * min(step / budget, 1):.0f}%)"]
        if step > self.first_step:
            left = max(budget - step, 0) / rate if rate > 0 else math.inf
            parts.append(f"{rate:,.0f} steps/s, {_duration(left)} left")
        entries = self.run.eval_log.read()
        if entries:
            last = entries[-1]
            shown = f"return {last['mean_return']:.3f}"
            if last.get("success_rate") is not None:
                shown = f"success {last['success_rate']:.3f}, {shown}"
            parts.append(f"eval at {last['timesteps']:,}: {shown}")
        print(" | ".join(parts), file=self.stream or sys.stdout, flush=True)


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
