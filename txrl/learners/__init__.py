"""The learners txrl trains: one registry of name -> (settings dataclass, policy, abilities).

Each learner declares itself once, in one module of this package: a frozen settings
dataclass whose documented fields are every constructor argument a user may set (the
algorithm's own defaults are read from it, or, for a learner from another library, checked
against it by the tests), and a :class:`Learner` record named ``LEARNER``, built from the
pieces of :mod:`txrl.learners.common`. :data:`BUILTIN_LEARNERS` below lists them, in order.
Everything that needs the list of learners reads it here: the config (the ``algo`` key and
its section), training, ``txrl compare`` and the rl-zoo3 entry point.

The modules here import no torch and name no algorithm class, so a config is checked in a
fraction of a second; the class that trains each learner is in the run layer's table,
:data:`txrl.run.algorithms.ALGORITHMS`. Adding a learner is its algorithm
(``txrl/sb3/<name>.py``), its declaration here, its row in that table, and its test. Outside
txrl, call :func:`register_learner` and add the algorithm to the table.
"""

from __future__ import annotations

from txrl.learners import ppo, recurrent_ppo, vmpo
from txrl.learners.common import (
    MEMORY_POLICY_NAMES,
    WIRING_ARGUMENTS,
    CheckFinite,
    Learner,
    MemoryLearnerSettings,
    SB3LearnerSettings,
    memory_policy,
    schedule,
    settings_disagreements,
)

#: The learners txrl ships, in the order they are listed (``ppo`` first: the default).
BUILTIN_LEARNERS = (ppo.LEARNER, vmpo.LEARNER, recurrent_ppo.LEARNER)

_REGISTRY: dict[str, Learner] = {learner.name: learner for learner in BUILTIN_LEARNERS}


def register_learner(learner: Learner) -> Learner:
    """Add ``learner`` to the registry (a name already taken is an error)."""
    known = _REGISTRY.get(learner.name)
    if known is not None and known != learner:
        raise ValueError(
            f"a learner named {learner.name!r} is already registered ({known.settings.__name__})"
        )
    _REGISTRY[learner.name] = learner
    return learner


def learner_names() -> list[str]:
    return list(_REGISTRY)


def learners() -> list[Learner]:
    return list(_REGISTRY.values())


def get_learner(name: str) -> Learner:
    """The learner named ``name``; an unknown name is a ValueError listing the valid ones."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown learner {name!r}; valid: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


__all__ = [
    "BUILTIN_LEARNERS",
    "MEMORY_POLICY_NAMES",
    "WIRING_ARGUMENTS",
    "CheckFinite",
    "Learner",
    "MemoryLearnerSettings",
    "SB3LearnerSettings",
    "get_learner",
    "learner_names",
    "learners",
    "memory_policy",
    "register_learner",
    "schedule",
    "settings_disagreements",
]
