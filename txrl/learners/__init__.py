"""The learners txrl trains, in one table: [`LEARNERS`][txrl.learners.LEARNERS], a config's ``algo`` -> its record.

Each learner is one folder, ``txrl/learners/<name>/``:

* ``__init__.py``: its [`Learner`][txrl.learners.Learner] record, ``LEARNER``, with the function whose one
  line imports its algorithm; torch-free;
* ``settings.py``: its settings dataclass, whose documented fields are every constructor
  argument a user may set, with their defaults (the YAML section named after the learner;
  txrl's algorithms derive their constructor from it); torch-free;
* ``loss.py`` (and, for V-MPO, the modules of its multipliers and PopArt): its loss, in torch;
* ``algorithm.py``: the Stable-Baselines3 algorithm that trains it, on the adapter of
  `txrl.sb3` (txrl's own learners subclass
  [`MemoryOnPolicyAlgorithm`][txrl.sb3.algorithm.MemoryOnPolicyAlgorithm]).

The package's ``__init__`` loads only ``settings.py``. The record holds a function whose one
line imports the algorithm (`txrl.learners.ppo.memory_ppo`), so this module,
the records and the settings import no torch and a config is checked without it; the run
layer calls it when it trains ([`txrl.run.algorithms.ALGORITHMS`][txrl.run.algorithms.ALGORITHMS], read from this table).
Everything that needs the list of learners reads it here: the config (the ``algo`` key and
its section), training, ``txrl compare`` and the rl-zoo3 entry point.

Adding a learner is its folder and its row below. Outside txrl, a package of the same shape
anywhere on the path and one call, ``register_learner(LEARNER)``.
"""

from __future__ import annotations

from txrl.learners import ppo, recurrent_ppo, vmpo
from txrl.learners.record import Learner, memory_policy
from txrl.learners.settings import CheckFinite, MemoryLearnerSettings, SB3LearnerSettings

#: Every learner, by the name a config's ``algo`` gives it: txrl's, in this order (``ppo``
#: first: the default), then those :func:`register_learner` added. Each record names its
#: settings dataclass and the function that imports its algorithm class (:class:`Learner`).
LEARNERS: dict[str, Learner] = {
    "ppo": ppo.LEARNER,  # MemoryPPO
    "vmpo": vmpo.LEARNER,  # VMPO
    "recurrent_ppo": recurrent_ppo.LEARNER,  # sb3-contrib's RecurrentPPO
}


def register_learner(learner: Learner) -> Learner:
    """Add ``learner`` to [`LEARNERS`][txrl.learners.LEARNERS] under its name (a name already taken by another
    record is an error)."""
    known = LEARNERS.get(learner.name)
    if known is not None and known != learner:
        raise ValueError(
            f"a learner named {learner.name!r} is already registered ({known.settings.__name__})"
        )
    LEARNERS[learner.name] = learner
    return learner


def learner_names() -> list[str]:
    return list(LEARNERS)


def learners() -> list[Learner]:
    return list(LEARNERS.values())


def get_learner(name: str) -> Learner:
    """The learner named ``name``; an unknown name is a ValueError listing the valid ones."""
    if name not in LEARNERS:
        raise ValueError(f"unknown learner {name!r}; valid: {', '.join(LEARNERS)}")
    return LEARNERS[name]


__all__ = [
    "LEARNERS",
    "CheckFinite",
    "Learner",
    "MemoryLearnerSettings",
    "SB3LearnerSettings",
    "get_learner",
    "learner_names",
    "learners",
    "memory_policy",
    "register_learner",
]
