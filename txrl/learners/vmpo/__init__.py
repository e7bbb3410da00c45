"""V-MPO (Song et al. 2019) on a txrl memory policy, ``algo: vmpo``.

* :mod:`~txrl.learners.vmpo.settings`: its settings (the ``vmpo:`` section), the loss's
  configuration and its record, torch-free;
* :mod:`~txrl.learners.vmpo.loss`: the loss, value regression + E-step + M-step;
* :mod:`~txrl.learners.vmpo.multipliers`: the Lagrange multipliers eta and alpha;
* :mod:`~txrl.learners.vmpo.popart`: PopArt value normalisation;
* :mod:`~txrl.learners.vmpo.algorithm`: :class:`~txrl.learners.vmpo.algorithm.VMPO`, the SB3
  algorithm.

Importing the package loads only the settings (no torch); their names are attributes here.
"""

from txrl.learners.vmpo.settings import LEARNER, VMPOConfig, VMPOLossSettings, VMPOSettings

__all__ = ["LEARNER", "VMPOConfig", "VMPOLossSettings", "VMPOSettings"]
