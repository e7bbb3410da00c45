"""What a learner declares: the [`Learner`][txrl.learners.record.Learner] record.

Each learner's package (its ``__init__``) builds one record, ``LEARNER``; the registry
([`txrl.learners.LEARNERS`][txrl.learners.LEARNERS]) lists them. The record is torch-free: it holds the
function that imports the learner's algorithm class, which the run layer calls when it trains
([`txrl.run.algorithms.algorithm_class`][txrl.run.algorithms.algorithm_class]).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from txrl.policy_names import memory_policy_name


@dataclass(frozen=True)
class Learner:
    """One learner: what the ``algo`` key names and how a run builds it."""

    name: str
    """The config's ``algo`` value and the name of its settings section (``ppo:``)."""
    settings: type
    """Frozen dataclass of the learner's settings (the YAML section): documented fields, one
    per constructor argument a user may set, with the constructor's defaults (txrl's
    algorithms derive their constructor from it, [`txrl.sb3.algorithm.MemoryOnPolicyAlgorithm`][txrl.sb3.algorithm.MemoryOnPolicyAlgorithm])."""
    algorithm: Callable[[], type]
    """Returns the algorithm class that trains it. A function, not the class, so that reading
    the record needs no torch: in txrl, a function beside the record whose one line imports
    the ``algorithm`` module of the learner's own folder
    (`txrl.learners.ppo.memory_ppo`); the run layer calls it
    ([`txrl.run.algorithms.ALGORITHMS`][txrl.run.algorithms.ALGORITHMS])."""
    policy: Callable[[Any, str], tuple[str, dict[str, Any]]]
    """``policy(policy_config, encoder_prefix) -> (SB3 policy name, policy_kwargs)``; the
    prefix (``Mlp``, ``Cnn`` or ``MultiInput``) is the one the run's observations need
    ([`txrl.run.algorithms.encoder_prefix`][txrl.run.algorithms.encoder_prefix])."""
    backbones: tuple[str, ...] | None = None
    """Backbones it can train (``policy.backbone``); ``None``: every registered one."""
    action_spaces: tuple[str, ...] = ("Box", "Discrete", "MultiDiscrete", "MultiBinary")
    """The gymnasium action spaces it trains, by class name; a run on another is refused
    before it starts (`txrl.run.preflight`)."""
    trains_memory_policies: bool = True
    """Whether it trains txrl's memory policies (`txrl.sb3.policies`): their
    ``policy_kwargs``, training precision and auxiliary losses apply to it."""
    zoo_name: str | None = None
    """Its ``--algo`` name in rl-baselines3-zoo (``python -m txrl.zoo``), if it joins it."""

    def __post_init__(self) -> None:
        if not callable(self.algorithm) or isinstance(self.algorithm, type):
            raise TypeError(
                f"learner {self.name!r}: algorithm must be a function that returns the "
                f"algorithm class (imported when a run trains it), got {self.algorithm!r}"
            )


def memory_policy(policy: Any, encoder_prefix: str) -> tuple[str, dict[str, Any]]:
    """The policy of a txrl memory learner: the memory policy of the config's backbone
    ([`txrl.policy_names.memory_policy_name`][txrl.policy_names.memory_policy_name]) and the ``policy_kwargs`` its config gives."""
    return memory_policy_name(encoder_prefix, policy.backbone), policy.policy_kwargs()


__all__ = ["Learner", "memory_policy"]
