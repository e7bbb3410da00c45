"""Argument checks shared by the txrl tasks.

Every task is built from user kwargs (often straight from a YAML config or a sweep), so a bad
value must fail at construction with a message that names the argument, the value and what
would have been accepted, instead of surfacing later as an index error inside ``step``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np


def check_int(name: str, value: Any, *, minimum: int) -> int:
    """Return ``value`` as an ``int`` or raise ``ValueError`` if it is not an integer >= minimum."""
    # bool is an Integral, but `length=True` is always a mistake.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_non_negative(name: str, value: Any) -> float:
    """Return ``value`` as a ``float`` or raise ``ValueError`` unless it is finite and >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def check_choice(name: str, value: Any, choices: tuple[Any, ...]) -> Any:
    """Return ``value`` if it is one of ``choices``, else raise ``ValueError`` listing them."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices!r}, got {value!r}")
    return value


class RenderModeError(ValueError, TypeError):
    """A ``render_mode`` the task cannot draw in.

    Also a ``TypeError``: Stable-Baselines3's ``make_vec_env`` asks every env id for
    ``render_mode="rgb_array"`` and, on a ``TypeError`` (its sign of an env without that
    mode), makes the env again without it. So a task that draws nothing still vectorises,
    while a mode asked for explicitly (``env_kwargs`` or ``gym.make``) still fails here.
    """


def check_render_mode(value: Any, modes: Sequence[str], task: str) -> str | None:
    """Return ``value`` if it is ``None`` or one of ``modes``, else raise `RenderModeError`
    naming ``task`` and the valid modes."""
    choices = (None, *modes)
    if value not in choices:
        raise RenderModeError(f"render_mode must be one of {choices!r} for {task}, got {value!r}")
    return value


def log_uniform_int(rng: Any, low: int, high: int) -> int:
    """An integer drawn log-uniformly on [low, high] from ``rng`` (a numpy Generator), rounded:
    every scale between ``low`` and ``high`` about equally often."""
    drawn = round(float(np.exp(rng.uniform(np.log(low), np.log(high)))))
    return min(max(drawn, low), high)
