"""V-MPO's settings (Song et al. 2019), on a txrl memory policy.

The defaults of :class:`txrl.VMPO`'s constructor are these fields' defaults; the YAML section
``vmpo:`` sets them. The loss's own hyperparameters are declared, with their provenance,
in :class:`txrl.rl.vmpo_settings.VMPOLossSettings` (inherited here, and extended by the
loss's :class:`txrl.rl.vmpo_loss.VMPOConfig`, which the learner builds from them).
"""

from __future__ import annotations

from dataclasses import dataclass

from txrl.learners.common import Learner, MemoryLearnerSettings, memory_policy
from txrl.rl.vmpo_settings import VMPOLossSettings
from txrl.schema import (
    PositiveFloat,
    PositiveInt,
    PositiveRate,
    UnitFloat,
)


@dataclass(frozen=True)
class VMPOSettings(VMPOLossSettings, MemoryLearnerSettings):
    """Settings of :class:`txrl.VMPO` (the ``vmpo:`` section of a config): the loss's
    (:class:`~txrl.rl.vmpo_settings.VMPOLossSettings`: bounds, initial multipliers, value
    loss weight, PopArt), the memory learners' common settings
    (:class:`~txrl.learners.MemoryLearnerSettings`), and:"""

    learning_rate: PositiveRate = 1e-3
    """Adam step size (``lin_<number>``: from that number linearly to 0 over the budget);
    the Lagrange multipliers are trained by the same optimizer. The paper fixes 1e-4
    (Sec. 4) for its large-batch, many-learner-step regime; at this library's rollout sizes
    1e-4 with one pass moved the policy by a KL of ~0 per update and learned nothing on the
    passive T-maze, 1e-3 with 4 passes learns it (results/vmpo_defaults)."""
    n_steps: PositiveInt = 128
    """Steps per env per rollout."""
    batch_size: PositiveInt = 256
    """Transitions per minibatch (whole segments)."""
    n_epochs: PositiveInt = 4
    """Passes over each rollout (the paper's learner sees each batch once; see
    ``learning_rate`` for why the default makes more passes)."""
    segment_length: PositiveInt = 32
    """Steps per training segment; must divide ``n_steps`` and ``batch_size``."""
    gamma: UnitFloat = 0.99
    """Discount factor."""
    gae_lambda: UnitFloat = 1.0
    """lambda of the advantage targets; 1 gives the paper's n-step returns."""
    target_update_period: PositiveInt | None = None
    """Gradient steps between target-network refreshes (T_target, Sec. 4); ``null``: act
    with the policy of the rollout's start."""
    max_grad_norm: PositiveFloat = 40.0
    """Global gradient-norm clip."""


LEARNER = Learner(
    name="vmpo",
    settings=VMPOSettings,
    policy=memory_policy,
    zoo_name="vmpo",
)
