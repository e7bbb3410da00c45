"""What a learner declares: the :class:`Learner` record, and how its settings meet its algorithm.

Each learner's ``settings.py`` builds one record, ``LEARNER``; the registry
(:data:`txrl.learners.LEARNERS`) lists them. The record is torch-free: it names its
algorithm class by import path, which the run layer resolves when it trains
(:func:`txrl.run.algorithms.algorithm_class`).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from txrl.policy_names import memory_policy_name

#: Constructor arguments that are not learner settings: the run wires them from the rest of
#: the config (``policy``, ``env``, ``seed``, ``runtime``) or they are SB3 plumbing.
WIRING_ARGUMENTS = frozenset(
    {
        "policy",
        "env",
        "tensorboard_log",
        "policy_kwargs",
        "verbose",
        "seed",
        "device",
        "_init_setup_model",
    }
)

_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


@dataclass(frozen=True)
class Learner:
    """One learner: what the ``algo`` key names and how a run builds it."""

    name: str
    """The config's ``algo`` value and the name of its settings section (``ppo:``)."""
    settings: type
    """Frozen dataclass of the learner's settings (the YAML section); documented fields,
    one per constructor argument a user may set, with the constructor's defaults."""
    algorithm: str
    """The algorithm class that trains it, as ``"package.module:Class"`` (in txrl, the
    ``algorithm`` module of the learner's own folder: ``txrl.learners.ppo.algorithm:MemoryPPO``).
    A path, not the class, so that reading the record needs no torch; the run layer imports
    it (:data:`txrl.run.algorithms.ALGORITHMS`)."""
    policy: Callable[[Any, str], tuple[str, dict[str, Any]]]
    """``policy(policy_config, encoder_prefix) -> (SB3 policy name, policy_kwargs)``; the
    prefix (``Mlp``, ``Cnn`` or ``MultiInput``) is the one the run's observations need
    (:func:`txrl.run.algorithms.encoder_prefix`)."""
    backbones: tuple[str, ...] | None = None
    """Backbones it can train (``policy.backbone``); ``None``: every registered one."""
    action_spaces: tuple[str, ...] = ("Box", "Discrete", "MultiDiscrete", "MultiBinary")
    """The gymnasium action spaces it trains, by class name; a run on another is refused
    before it starts (:mod:`txrl.run.preflight`)."""
    trains_memory_policies: bool = True
    """Whether it trains txrl's memory policies (:mod:`txrl.sb3.policies`): their
    ``policy_kwargs``, training precision and auxiliary losses apply to it."""
    zoo_name: str | None = None
    """Its ``--algo`` name in rl-baselines3-zoo (``python -m txrl.zoo``), if it joins it."""

    def __post_init__(self) -> None:
        if not _IMPORT_PATH.fullmatch(self.algorithm):
            raise ValueError(
                f"learner {self.name!r}: algorithm must be an import path "
                f"'package.module:Class', got {self.algorithm!r}"
            )


def memory_policy(policy: Any, encoder_prefix: str) -> tuple[str, dict[str, Any]]:
    """The policy of a txrl memory learner: the memory policy of the config's backbone
    (:func:`txrl.policy_names.memory_policy_name`) and the ``policy_kwargs`` its config gives."""
    return memory_policy_name(encoder_prefix, policy.backbone), policy.policy_kwargs()


def settings_disagreements(settings: type, algorithm: type) -> list[str]:
    """How the constructor of ``algorithm`` and the ``settings`` dataclass disagree (empty:
    they agree).

    Compares the names of the constructor's arguments (less :data:`WIRING_ARGUMENTS`) with
    the settings fields, and each default with the field's default.
    """
    parameters = {
        name: p
        for name, p in inspect.signature(algorithm).parameters.items()
        if name not in WIRING_ARGUMENTS and p.kind is not p.VAR_KEYWORD
    }
    fields = {f.name: f for f in dataclasses.fields(settings)}
    problems = [
        f"constructor argument {n} has no settings field" for n in parameters if n not in fields
    ]
    problems += [
        f"settings field {n} is no constructor argument" for n in fields if n not in parameters
    ]
    for name in set(parameters) & set(fields):
        field = fields[name]
        default = (
            field.default_factory()
            if field.default_factory is not dataclasses.MISSING
            else field.default
        )
        if parameters[name].default != default:
            problems.append(
                f"{name}: constructor default {parameters[name].default!r} != settings default {default!r}"
            )
    return problems


__all__ = ["WIRING_ARGUMENTS", "Learner", "memory_policy", "settings_disagreements"]
