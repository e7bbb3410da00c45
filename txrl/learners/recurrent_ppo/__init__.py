"""sb3-contrib's RecurrentPPO as a txrl learner, ``algo: recurrent_ppo``.

* :mod:`~txrl.learners.recurrent_ppo.settings`: its settings (the ``recurrent_ppo:``
  section), the policy a config gives it, and its record, torch-free;
* :mod:`~txrl.learners.recurrent_ppo.algorithm`:
  :class:`~txrl.learners.recurrent_ppo.algorithm.RecurrentPPO`, sb3-contrib's algorithm
  with the memory access a run needs. Its loss is sb3-contrib's.

Importing the package loads only the settings (no torch); their names are attributes here.
"""

from txrl.learners.recurrent_ppo.settings import LEARNER, RecurrentPPOSettings, lstm_policy

__all__ = ["LEARNER", "RecurrentPPOSettings", "lstm_policy"]
