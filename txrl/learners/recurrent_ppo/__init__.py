"""sb3-contrib's RecurrentPPO as a txrl learner, ``algo: recurrent_ppo``.

* [`settings`][txrl.learners.recurrent_ppo.settings]: its settings (the ``recurrent_ppo:``
  section) and the policy a config gives it, torch-free;
* `algorithm`:
  [`RecurrentPPO`][txrl.learners.recurrent_ppo.algorithm.RecurrentPPO], sb3-contrib's algorithm
  with the memory access a run needs. Its loss is sb3-contrib's.

Importing the package loads only the settings (no torch); `LEARNER` is the learner's
record in the registry ([`txrl.learners.LEARNERS`][txrl.learners.LEARNERS]), and `recurrent_ppo` the one
function that imports the algorithm, when a run trains it.
"""

from __future__ import annotations

from txrl.learners.record import Learner
from txrl.learners.recurrent_ppo.settings import RecurrentPPOSettings, lstm_policy


def recurrent_ppo() -> type:
    """[`txrl.learners.recurrent_ppo.algorithm.RecurrentPPO`][txrl.learners.recurrent_ppo.algorithm.RecurrentPPO], imported (with torch and
    sb3-contrib) when a run trains it."""
    from txrl.learners.recurrent_ppo.algorithm import RecurrentPPO

    return RecurrentPPO


LEARNER = Learner(
    name="recurrent_ppo",
    settings=RecurrentPPOSettings,
    algorithm=recurrent_ppo,
    policy=lstm_policy,
    backbones=("lstm",),
    # sb3-contrib stores MultiBinary actions as int8, which its Bernoulli log-probability
    # (``binary_cross_entropy_with_logits``) cannot take: it fails in torch
    action_spaces=("Box", "Discrete", "MultiDiscrete"),
    trains_memory_policies=False,
)

__all__ = ["LEARNER", "RecurrentPPOSettings", "lstm_policy", "recurrent_ppo"]
