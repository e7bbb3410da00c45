"""The errors txrl's command line turns into messages, and its warnings: light to import
(no torch).

``txrl`` checks what it is given before it imports torch, so these live apart from the
modules that raise them most ([`txrl.config`][txrl.config], `txrl.run.run_dir`, `txrl.run.train`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


class ConfigError(ValueError):
    """A config is wrong; the message names each bad key (dotted path) and what would be valid.

    ``problems`` holds one line per problem, so that a config with several mistakes is
    reported whole, not one mistake per attempt.
    """

    def __init__(self, message: str | Sequence[str], *, note: str | None = None) -> None:
        problems = [message] if isinstance(message, str) else list(message)
        self.problems = problems
        self.note = note
        if len(problems) == 1:
            text = problems[0]
        else:
            text = f"{len(problems)} problems:\n" + "\n".join(f"  - {p}" for p in problems)
        super().__init__(text if note is None else f"{text}\n{note}")


class RunError(RuntimeError):
    """A run directory cannot be used as asked (exists, missing, finished, ...)."""


class TrainingDiverged(RunError):
    """Training stopped at an update whose loss or gradient was not finite. The update was
    not applied and nothing was saved from it: the run's newest checkpoint is still good."""


class TrainingInterrupted(RunError):
    """Training was stopped by the user (Ctrl-C, SIGINT or SIGTERM); the message says where
    the run got to, its newest checkpoint and the command that resumes it (``txrl train``
    exits 130)."""


class TrainingPaused(RunError):
    """Training reached the step it was asked to pause at (``until``; ``txrl train
    --until``): the message names the step, its checkpoint and the command that continues
    the run, which then goes on as if it had never paused (``txrl train`` exits 0)."""


def print_warning(message: str) -> None:
    """One line on stderr, ``warning: <message>``: a problem that does not stop the command
    (a checkpoint set aside, a budget below one rollout)."""
    print(f"warning: {message}", file=sys.stderr, flush=True)
