"""MemoryPPO: PPO (Schulman et al. 2017) on a txrl memory policy, ``algo: ppo``.

* :mod:`~txrl.learners.ppo.settings`: its settings (the ``ppo:`` section) and its record,
  torch-free;
* :mod:`~txrl.learners.ppo.loss`: PPO's objective;
* :mod:`~txrl.learners.ppo.algorithm`: :class:`~txrl.learners.ppo.algorithm.MemoryPPO`, the
  SB3 algorithm.

Importing the package loads only the settings (no torch); their names are attributes here.
"""

from txrl.learners.ppo.settings import LEARNER, MemoryPPOSettings, PPOLossSettings

__all__ = ["LEARNER", "MemoryPPOSettings", "PPOLossSettings"]
