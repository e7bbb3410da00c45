"""A learner's settings as its algorithm's constructor takes them: ``lin_<x>`` as SB3's schedule.

A config writes a setting that decays over the run in rl-baselines3-zoo's notation,
``lin_<x>`` (`txrl.schema.LinearDecay`); the settings dataclasses keep that string, so
they are read without Stable-Baselines3. The algorithms take SB3's schedules instead, so the
string becomes one here: for the keyword arguments a run passes
([`txrl.run.algorithms.settings_kwargs`][txrl.run.algorithms.settings_kwargs]) and for the constructors' defaults, read from
the same settings dataclasses.
"""

from __future__ import annotations

from typing import Any

from stable_baselines3.common.utils import LinearSchedule


def schedule(value: str) -> LinearSchedule:
    """SB3's schedule for ``lin_<x>``: x at the start of training, falling linearly to 0 at
    its end (SB3's progress, which ``txrl train`` keeps over the whole budget across
    resumes)."""
    return LinearSchedule(float(value.removeprefix("lin_")), 0.0, 1.0)


def setting_argument(value: Any) -> Any:
    """A learner setting as the algorithm's constructor takes it: ``lin_<x>`` as
    [`schedule`][txrl.sb3.schedule.schedule], a dict as a copy (the algorithm keeps what it gets; the config's own
    stays as it is), anything else as it is."""
    if isinstance(value, str) and value.startswith("lin_"):
        return schedule(value)
    return dict(value) if isinstance(value, dict) else value


__all__ = ["schedule", "setting_argument"]
