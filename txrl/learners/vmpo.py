"""V-MPO's settings (Song et al. 2019), on a txrl memory policy.

The defaults of :class:`txrl.VMPO`'s constructor are these fields' defaults; the YAML section
``vmpo:`` sets them. :class:`txrl.rl.vmpo_loss.VMPOConfig`, the loss's own hyperparameters,
is built from them by the learner.

Provenance: the learning rate, eta_min and the PopArt settings are stated in the paper's
main text (Secs. 4, 4.1, 4.2.2). The bounds eps_* and the initial multipliers are the values
commonly quoted from its Appendix F tables, which we could not re-read; each field says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from txrl.config.schema import (
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    PositiveRate,
    UnitFloat,
)
from txrl.learners import CheckFinite, Learner, memory_policy


@dataclass(frozen=True)
class VMPOSettings:
    """Settings of :class:`txrl.VMPO` (the ``vmpo:`` section of a config)."""

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
    epsilon_eta: PositiveFloat = 0.1
    """eps_eta, bound of the E-step's temperature dual (Eq. 4). Appendix F, DMLab/Atari
    tables; the Gym tasks use 0.01. Unverified (see the module docstring)."""
    epsilon_alpha: PositiveFloat = 0.01
    """eps_alpha, KL trust region of the M-step for discrete actions (Eq. 13). Appendix F
    samples it log-uniformly in [0.001, 0.01]; the upper end. Unverified."""
    epsilon_alpha_mu: PositiveFloat = 0.01
    """eps_alpha_mu, KL bound of a Gaussian policy's mean (Appendix C). Unverified."""
    epsilon_alpha_sigma: PositiveFloat = 5e-5
    """eps_alpha_Sigma, KL bound of a Gaussian policy's covariance (Appendix C); small, so
    the standard deviation shrinks slowly. Unverified."""
    init_eta: PositiveFloat = 1.0
    """Initial temperature eta. Appendix F. Unverified."""
    init_alpha: PositiveFloat = 5.0
    """Initial multiplier alpha (discrete actions). Appendix F. Unverified."""
    init_alpha_mu: PositiveFloat = 1.0
    """Initial alpha_mu (Gaussian mean). Appendix F. Unverified."""
    init_alpha_sigma: PositiveFloat = 1.0
    """Initial alpha_Sigma (Gaussian covariance). Appendix F. Unverified."""
    target_update_period: PositiveInt | None = None
    """Gradient steps between target-network refreshes (T_target, Sec. 4); ``null``: act
    with the policy of the rollout's start."""
    value_loss_coef: NonNegativeFloat = 1.0
    """Weight of the value loss L_V; Eq. (1) adds it with weight 1."""
    popart: bool = True
    """Normalise value targets with PopArt (Sec. 4.1, on "even when training on a single
    task")."""
    max_grad_norm: PositiveFloat = 40.0
    """Global gradient-norm clip."""
    aux_loss_coef: dict[str, NonNegativeFloat] | None = None
    """Coefficient per auxiliary loss a backbone reports (``span_l1``, ``ponder_cost``,
    ``attention_reconstruction``); a loss not listed, or ``null``, gets coefficient 1."""
    stats_window_size: PositiveInt = 100
    """Episodes averaged in the ``rollout/`` statistics."""
    check_finite: CheckFinite = "raise"
    """On a NaN/inf observation or reward: ``raise`` (names env and step), ``warn``, or ``off``.
    A non-finite loss always stops training before the optimizer step."""
    cuda_graph: bool = True
    """On a CUDA GPU with a discrete action space, act in rollouts by replaying a CUDA graph
    of the acting step (captured at each rollout's start) instead of launching its kernels
    one by one: the same computation, about 5x cheaper per step at 64 envs on an H100
    (``bench/gpu_throughput.py``). No effect on a CPU; ``false``: eager steps."""


LEARNER = Learner(
    name="vmpo",
    settings=VMPOSettings,
    algorithm="txrl.sb3.vmpo:VMPO",
    policy=memory_policy,
    zoo_name="vmpo",
)
