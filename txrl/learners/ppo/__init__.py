"""MemoryPPO: PPO (Schulman et al. 2017) on a txrl memory policy, ``algo: ppo``.

* [`settings`][txrl.learners.ppo.settings]: its settings (the ``ppo:`` section), torch-free;
* `loss`: PPO's objective;
* `algorithm`: [`MemoryPPO`][txrl.learners.ppo.algorithm.MemoryPPO], the
  SB3 algorithm.

Importing the package loads only the settings (no torch); `LEARNER` is the learner's
record in the registry ([`txrl.learners.LEARNERS`][txrl.learners.LEARNERS]), and `memory_ppo` the one
function that imports the algorithm, when a run trains it.
"""

from __future__ import annotations

from txrl.learners.ppo.settings import MemoryPPOSettings, PPOLossSettings
from txrl.learners.record import Learner, memory_policy


def memory_ppo() -> type:
    """[`txrl.learners.ppo.algorithm.MemoryPPO`][txrl.learners.ppo.algorithm.MemoryPPO], imported (with torch) when a run trains it."""
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
