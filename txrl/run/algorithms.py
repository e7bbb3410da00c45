"""The Stable-Baselines3 algorithm that trains each learner, the arguments and the policy a
run gives it.

The learners' records ([`txrl.learners.LEARNERS`][txrl.learners.LEARNERS]) are torch-free: each holds the
function that imports its algorithm class from the learner's own folder. This module, in the
layer that may import torch, calls it: [`ALGORITHMS`][txrl.run.algorithms.ALGORITHMS] is the registry's table with the
classes in place of the records, as rl-zoo3's ``ALGOS``, read from the registry each time,
so a learner registered from outside txrl ([`txrl.learners.register_learner`][txrl.learners.register_learner]) is in it
at once. The recipe, evaluation and the preflight checks read it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.preprocessing import is_image_space

from txrl.config import PolicyConfig
from txrl.errors import ConfigError
from txrl.learners import get_learner, learner_names
from txrl.sb3.extractors import is_symbolic_grid
from txrl.sb3.schedule import setting_argument


def algorithm_class(algo: str) -> type[BaseAlgorithm]:
    """The algorithm class of learner ``algo``, from its record's function; an unknown learner
    is the ValueError of [`txrl.learners.get_learner`][txrl.learners.get_learner], a function that returns no
    algorithm class a ConfigError."""
    learner = get_learner(algo)
    found = learner.algorithm()
    if not (isinstance(found, type) and issubclass(found, BaseAlgorithm)):
        raise ConfigError(
            f"learner {learner.name!r}: its algorithm function returned {found!r}, which is no "
            "Stable-Baselines3 algorithm class"
        )
    return found


class _Algorithms(Mapping[str, type[BaseAlgorithm]]):
    """Learner name -> algorithm class: [`txrl.learners.LEARNERS`][txrl.learners.LEARNERS] with each record's
    class imported on access ([`algorithm_class`][txrl.run.algorithms.algorithm_class])."""

    def __getitem__(self, algo: str) -> type[BaseAlgorithm]:
        if algo not in learner_names():
            raise KeyError(algo)
        return algorithm_class(algo)

    def __iter__(self) -> Iterator[str]:
        return iter(learner_names())

    def __len__(self) -> int:
        return len(learner_names())

    def __repr__(self) -> str:
        return f"ALGORITHMS({', '.join(learner_names())})"


#: Learner name -> the algorithm class that trains it, derived from the registry of learners.
ALGORITHMS: Mapping[str, type[BaseAlgorithm]] = _Algorithms()


def settings_kwargs(settings: Any) -> dict[str, Any]:
    """Keyword arguments of an algorithm's constructor for a learner's ``settings`` (one per
    field; a ``lin_<x>`` value becomes SB3's linear schedule,
    [`txrl.sb3.schedule.setting_argument`][txrl.sb3.schedule.setting_argument])."""
    return {
        f.name: setting_argument(getattr(settings, f.name)) for f in dataclasses.fields(settings)
    }


def encoder_prefix(encoder: str, observation_space: Any) -> str:
    """SB3 policy-name prefix for ``policy.encoder``: Mlp, Cnn or MultiInput.

    ``auto``: MultiInput for Dict observations; Cnn for images as SB3 sees them
    (``is_image_space``: uint8 pixels in [0, 255], e.g. Memory Gym's 84x84 RGB frames), which
    flattened into an MLP would lose their layout; Mlp for the rest, MiniGrid-style code grids
    included: SB3 counts them as images too, but their cells hold object, colour and state
    codes, not intensities (the memory policies embed them with
    `txrl.sb3.extractors.SymbolicGridExtractor`).
    """
    from gymnasium import spaces

    if encoder != "auto":
        return {"mlp": "Mlp", "cnn": "Cnn", "multi_input": "MultiInput"}[encoder]
    if isinstance(observation_space, spaces.Dict):
        return "MultiInput"
    if is_image_space(observation_space) and not is_symbolic_grid(observation_space):
        return "Cnn"
    return "Mlp"


def policy_for(
    algo: str, policy: PolicyConfig, observation_space: Any
) -> tuple[str, dict[str, Any]]:
    """The SB3 policy name and ``policy_kwargs`` that learner ``algo`` builds for the config's
    ``policy`` section on ``observation_space`` (its `txrl.learners.Learner.policy`,
    given the encoder's prefix)."""
    prefix = encoder_prefix(policy.encoder, observation_space)
    return get_learner(algo).policy(policy, prefix)
