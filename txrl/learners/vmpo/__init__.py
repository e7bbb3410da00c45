"""V-MPO (Song et al. 2019) on a txrl memory policy, ``algo: vmpo``.

* [`settings`][txrl.learners.vmpo.settings]: its settings (the ``vmpo:`` section) and its loss's,
  torch-free;
* [`loss`][txrl.learners.vmpo.loss]: the loss, value regression + E-step + M-step;
* `multipliers`: the Lagrange multipliers eta and alpha;
* [`popart`][txrl.learners.vmpo.popart]: PopArt value normalisation;
* `algorithm`: [`VMPO`][txrl.learners.vmpo.algorithm.VMPO], the SB3
  algorithm.

Importing the package loads only the settings (no torch); `LEARNER` is the learner's
record in the registry ([`txrl.learners.LEARNERS`][txrl.learners.LEARNERS]), and `vmpo` the one function
that imports the algorithm, when a run trains it.
"""

from __future__ import annotations

from txrl.learners.record import Learner, memory_policy
from txrl.learners.vmpo.settings import VMPOLossSettings, VMPOSettings


def vmpo() -> type:
    """[`txrl.learners.vmpo.algorithm.VMPO`][txrl.learners.vmpo.algorithm.VMPO], imported (with torch) when a run trains it."""
    from txrl.learners.vmpo.algorithm import VMPO

    return VMPO


LEARNER = Learner(
    name="vmpo",
    settings=VMPOSettings,
    algorithm=vmpo,
    policy=memory_policy,
    # the KL of Eq. (5) is implemented for categorical and diagonal-Gaussian policies
    action_spaces=("Discrete", "Box"),
    zoo_name="vmpo",
)

__all__ = ["LEARNER", "VMPOLossSettings", "VMPOSettings", "vmpo"]
