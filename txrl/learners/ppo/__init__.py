"""MemoryPPO: PPO (Schulman et al. 2017) on a txrl memory policy, ``algo: ppo``.

* :mod:`~txrl.learners.ppo.settings`: its settings (the ``ppo:`` section), torch-free;
* :mod:`~txrl.learners.ppo.loss`: PPO's objective;
* :mod:`~txrl.learners.ppo.algorithm`: :class:`~txrl.learners.ppo.algorithm.MemoryPPO`, the
  SB3 algorithm.

Importing the package loads only the settings (no torch); :data:`LEARNER` is the learner's
record in the registry (:data:`txrl.learners.LEARNERS`), and :func:`memory_ppo` the one
function that imports the algorithm, when a run trains it.
"""

from __future__ import annotations

from txrl.learners.ppo.settings import MemoryPPOSettings, PPOLossSettings
from txrl.learners.record import Learner, memory_policy


def memory_ppo() -> type:
    """:class:`txrl.learners.ppo.algorithm.MemoryPPO`, imported (with torch) when a run trains it."""
    from txrl.learners.ppo.algorithm import MemoryPPO

    return MemoryPPO


LEARNER = Learner(
    name="ppo",
    settings=MemoryPPOSettings,
    algorithm=memory_ppo,
    policy=memory_policy,
    zoo_name="memory_ppo",
)

__all__ = ["LEARNER", "MemoryPPOSettings", "PPOLossSettings", "memory_ppo"]
