"""MemoryPPO's settings: PPO (Schulman et al. 2017) on a txrl memory policy.

[`txrl.MemoryPPO`][txrl.MemoryPPO]'s constructor takes these fields as its keyword arguments, with
their defaults (it is derived from them); the YAML section ``ppo:`` sets them. The learner's
record is `txrl.learners.ppo.LEARNER`.
"""

from __future__ import annotations

from dataclasses import dataclass

from txrl.learners.settings import MemoryLearnerSettings
from txrl.schema import (
    LinearDecay,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    PositiveRate,
    UnitFloat,
)


@dataclass(frozen=True)
class PPOLossSettings:
    """The settings of PPO's objective, shared by every PPO learner, with SB3's defaults
    (the entropy bonus ``ent_coef`` is each learner's own: MemoryPPO's takes a schedule,
    sb3-contrib's RecurrentPPO a number)."""

    gamma: UnitFloat = 0.99
    """Discount factor."""
    gae_lambda: UnitFloat = 0.95
    """GAE(lambda) of Schulman et al. (2016)."""
    clip_range: PositiveRate = 0.2
    """PPO clip epsilon of the probability ratio; ``lin_<number>``: decays linearly to 0."""
    clip_range_vf: PositiveFloat | None = None
    """Clip of the value prediction around its rollout value; ``null``: no clipping."""
    normalize_advantage: bool = True
    """Normalise the advantages of each minibatch to zero mean and unit variance."""
    vf_coef: NonNegativeFloat = 0.5
    """Value-loss coefficient."""
    max_grad_norm: PositiveFloat = 0.5
    """Global gradient-norm clip."""
    target_kl: PositiveFloat | None = None
    """Stop an update's epochs once the approximate KL exceeds 1.5 x this; ``null``: never."""


@dataclass(frozen=True)
class MemoryPPOSettings(PPOLossSettings, MemoryLearnerSettings):
    """Settings of [`txrl.MemoryPPO`][txrl.MemoryPPO] (the ``ppo:`` section of a config): PPO's
    objective, the memory learners' common settings
    ([`MemoryLearnerSettings`][txrl.learners.settings.MemoryLearnerSettings]), and:"""

    learning_rate: PositiveRate = 3e-4
    """Adam step size; ``lin_<number>`` (rl-baselines3-zoo's notation): from that number at
    the start linearly to 0 at the end of the budget."""
    ent_coef: NonNegativeFloat | LinearDecay = 0.0
    """Entropy bonus coefficient (0, as SB3's PPO; each config in ``configs/`` sets its own);
    ``lin_<number>``: from that number at the start linearly to 0 at the end of the budget
    (more exploration early, a settled policy late)."""
    n_steps: PositiveInt = 128
    """Steps per env per rollout; a rollout holds ``n_steps * n_envs`` transitions."""
    batch_size: PositiveInt = 256
    """Transitions per minibatch (whole segments of ``segment_length`` steps)."""
    n_epochs: PositiveInt = 4
    """Passes over each rollout. Where a decision comes once an episode and must read the
    memory, more passes can pay, each adding a training pass over the rollout to the cost
    of an env step (a study of it on MiniGrid-MemoryS9:
    ``results/minigrid_memory_s9/results.md``)."""
    segment_length: PositiveInt = 32
    """Steps per training segment, each recomputed with gradient from the memory its acting
    steps saw, stored detached at its first step: a gradient reaches back at most
    ``segment_length`` steps. For a recurrent backbone (``lstm``, ``gru``, ``ffm``) it is
    the backpropagation-through-time length: POPGym's protocol uses 1024, and ``n_steps`` =
    ``segment_length`` trains on whole episodes where they fit a rollout. Must divide
    ``n_steps`` and ``batch_size``; its cost per env step: ``bench/results/bptt_cost_cpu.txt``."""


__all__ = ["MemoryPPOSettings", "PPOLossSettings"]
