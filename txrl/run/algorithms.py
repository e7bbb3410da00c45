"""The Stable-Baselines3 algorithm that trains each learner, and the policy a run gives it.

The learners' records (:mod:`txrl.learners`) are torch-free and name no class, so that a
config is checked without torch. This table, in the layer that imports the algorithms, ties
each learner's name (the config's ``algo``) to the class that trains it, as rl-zoo3's
``ALGOS`` does; the recipe, evaluation and the preflight checks read it, and a test holds it
to the registry of learners. A learner registered from outside txrl
(:func:`txrl.learners.register_learner`) adds its class here too:
``ALGORITHMS["name"] = TheAlgorithm``.
"""

from __future__ import annotations

from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.preprocessing import is_image_space

from txrl.config import PolicyConfig
from txrl.errors import ConfigError
from txrl.learners import get_learner
from txrl.sb3.extractors import is_symbolic_grid
from txrl.sb3.ppo import MemoryPPO
from txrl.sb3.recurrent_ppo import RecurrentPPO
from txrl.sb3.vmpo import VMPO

#: Learner name -> the algorithm class that trains it.
ALGORITHMS: dict[str, type[BaseAlgorithm]] = {
    "ppo": MemoryPPO,
    "vmpo": VMPO,
    "recurrent_ppo": RecurrentPPO,
}


def algorithm_class(algo: str) -> type[BaseAlgorithm]:
    """The algorithm class of learner ``algo``; an unknown learner is the ValueError of
    :func:`txrl.learners.get_learner`, a learner with no class here a ConfigError."""
    if algo not in ALGORITHMS:
        get_learner(algo)  # raises for a name that is no learner at all
        raise ConfigError(
            f"learner {algo!r} has no algorithm class in txrl.run.algorithms.ALGORITHMS "
            f"(which has {', '.join(ALGORITHMS)}); add it: ALGORITHMS[{algo!r}] = TheAlgorithm"
        )
    return ALGORITHMS[algo]


def encoder_prefix(encoder: str, observation_space: Any) -> str:
    """SB3 policy-name prefix for ``policy.encoder``: Mlp, Cnn or MultiInput.

    ``auto``: MultiInput for Dict observations; Cnn for images as SB3 sees them
    (``is_image_space``: uint8 pixels in [0, 255], e.g. Memory Gym's 84x84 RGB frames), which
    flattened into an MLP would lose their layout; Mlp for the rest, MiniGrid-style code grids
    included: SB3 counts them as images too, but their cells hold object, colour and state
    codes, not intensities (the memory policies embed them with
    :class:`txrl.sb3.extractors.SymbolicGridExtractor`).
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
    ``policy`` section on ``observation_space`` (its :attr:`txrl.learners.Learner.policy`,
    given the encoder's prefix)."""
    prefix = encoder_prefix(policy.encoder, observation_space)
    return get_learner(algo).policy(policy, prefix)
