"""V-MPO's hyperparameters a user sets (Song et al. 2019), declared once, without torch.

:class:`VMPOLossSettings` is read two ways: the learner's settings
(:class:`txrl.learners.vmpo.VMPOSettings`, the ``vmpo:`` section of a config) inherit its
fields, so a config is checked against these types and documented by these docstrings; and
the loss's configuration (:class:`txrl.rl.vmpo_loss.VMPOConfig`) extends it with the
constants the paper fixes.

Provenance: the bounds eps_* and the initial multipliers are the values commonly quoted
from the paper's Appendix F tables, which we could not re-read while writing this file
(initial eta 1, alpha 5, alpha_mu = alpha_Sigma = 1, eps_alpha sampled log-uniformly in
[0.001, 0.01] for DMLab/Atari, eps_eta 0.1 for pixel tasks and 0.01 for Gym tasks); each
field says so ("Unverified").
"""

from __future__ import annotations

from dataclasses import dataclass

from txrl.schema import NonNegativeFloat, PositiveFloat


@dataclass(frozen=True)
class VMPOLossSettings:
    """The settable hyperparameters of V-MPO's loss, its multipliers and its value head."""

    epsilon_eta: PositiveFloat = 0.1
    """eps_eta, the bound on KL(psi || uniform over D~) that the temperature dual (Eq. 4)
    enforces (Eq. 19, Appendix A). Appendix F, DMLab/Atari tables (pixel inputs); the Gym
    tasks use 0.01. Unverified (see the module docstring)."""
    epsilon_alpha: PositiveFloat = 0.01
    """eps_alpha, the trust region E_s[KL(pi_old || pi_theta)] < eps_alpha of the M-step for
    discrete actions (Eq. 13). Appendix F samples it log-uniformly in [0.001, 0.01]; the
    upper end. Unverified."""
    epsilon_alpha_mu: PositiveFloat = 0.01
    """eps_alpha_mu, KL bound of a Gaussian policy's mean, the mean part of the decoupled
    KL (Appendix C). Appendix F, continuous-control tables. Unverified."""
    epsilon_alpha_sigma: PositiveFloat = 5e-5
    """eps_alpha_Sigma, KL bound of a Gaussian policy's covariance (Appendix C); small, so
    the standard deviation shrinks slowly. Appendix F, continuous-control tables. Unverified."""
    init_eta: PositiveFloat = 1.0
    """Initial temperature eta. Appendix F, all tables. Unverified."""
    init_alpha: PositiveFloat = 5.0
    """Initial multiplier alpha (discrete actions). Appendix F, DMLab/Atari tables. Unverified."""
    init_alpha_mu: PositiveFloat = 1.0
    """Initial alpha_mu (Gaussian mean). Appendix F, continuous-control tables. Unverified."""
    init_alpha_sigma: PositiveFloat = 1.0
    """Initial alpha_Sigma (Gaussian covariance). Appendix F, continuous-control tables.
    Unverified."""
    value_loss_coef: NonNegativeFloat = 1.0
    """Weight of the value loss L_V in the total loss; Eq. (1) adds it with weight 1 (L_V
    already holds 1/2)."""
    popart: bool = True
    """Normalise value targets with PopArt (Sec. 4.1: used "even when training on a single
    task"). The loss does not apply it; see :mod:`txrl.rl.vmpo_loss` for where it plugs in."""


__all__ = ["VMPOLossSettings"]
