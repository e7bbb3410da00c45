"""V-MPO's settings (Song et al. 2019), declared once, without torch.

Two dataclasses, the second extending the first, named as every learner's are
(``<Learner>Settings``, and ``<Loss>LossSettings`` for the part its loss reads, as
[`PPOLossSettings`][txrl.learners.ppo.settings.PPOLossSettings]):

* [`VMPOLossSettings`][txrl.learners.vmpo.settings.VMPOLossSettings]: the settings of the loss, its multipliers and its value head,
  what the loss ([`loss`][txrl.learners.vmpo.loss]), the multipliers
  (`multipliers`) and PopArt ([`popart`][txrl.learners.vmpo.popart])
  read: the hyperparameters a user sets (fields) and the constants the paper fixes (class
  constants); [`loss_settings`][txrl.learners.vmpo.settings.loss_settings] checks them;
* [`VMPOSettings`][txrl.learners.vmpo.settings.VMPOSettings]: the learner's settings (the ``vmpo:`` section of a config, the
  keyword arguments of [`txrl.VMPO`][txrl.VMPO]'s constructor): the loss's, the memory learners'
  common ones and the learner's own (learning rate, rollout, target network).

A config is checked against these types and documented by these docstrings.

Provenance: the bounds eps_* and the initial multipliers are the values commonly quoted
from the paper's Appendix F tables, which we could not re-read while writing this file
(initial eta 1, alpha 5, alpha_mu = alpha_Sigma = 1, eps_alpha sampled log-uniformly in
[0.001, 0.01] for DMLab/Atari, eps_eta 0.1 for pixel tasks and 0.01 for Gym tasks); each
field says so ("Unverified"). eta_min, the top-half fraction and the PopArt bounds and
step size, the constants of [`VMPOLossSettings`][txrl.learners.vmpo.settings.VMPOLossSettings], are stated in the main text (Secs.
4.1, 4.2.1, 4.2.2).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from txrl.learners.settings import MemoryLearnerSettings
from txrl.schema import (
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    PositiveRate,
    UnitFloat,
    from_mapping,
)


@dataclass(frozen=True)
class VMPOLossSettings:
    """The settings of V-MPO's loss, its multipliers and its value head: the hyperparameters
    a user sets, and the constants the paper's main text fixes (class constants, after the
    fields)."""

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
    task"). The loss does not apply it; see [`txrl.learners.vmpo.popart`][txrl.learners.vmpo.popart] for where it
    plugs in."""

    multiplier_floor: ClassVar[float] = 1e-8
    """eta_min = alpha_min, the smallest value of every multiplier. Sec. 4.2.2 (after Eq. 15)."""
    top_k_fraction: ClassVar[float] = 0.5
    """Fraction of the batch's advantages kept for the E-step, the top 50%. Sec. 4.2.1."""
    popart_step_size: ClassVar[float] = 1e-4
    """Step size of PopArt's running statistics. Sec. 4.1."""
    popart_scale_lower: ClassVar[float] = 1e-2
    """Lower bound on PopArt's scale sigma, guards against sparse rewards. Sec. 4.1."""
    popart_scale_upper: ClassVar[float] = 1e6
    """Upper bound on PopArt's scale sigma. Sec. 4.1."""


@dataclass(frozen=True)
class VMPOSettings(VMPOLossSettings, MemoryLearnerSettings):
    """Settings of [`txrl.VMPO`][txrl.VMPO] (the ``vmpo:`` section of a config): the loss's
    ([`VMPOLossSettings`][txrl.learners.vmpo.settings.VMPOLossSettings]: bounds, initial multipliers, value loss weight, PopArt), the
    memory learners' common settings
    ([`MemoryLearnerSettings`][txrl.learners.settings.MemoryLearnerSettings]), and:"""

    learning_rate: PositiveRate = 1e-3
    """Adam step size (``lin_<number>``: from that number linearly to 0 over the budget);
    the Lagrange multipliers are trained by the same optimizer. The paper fixes 1e-4
    (Sec. 4) for its large-batch, many-learner-step regime; with this library's smaller
    rollouts, a step that small and one pass barely move the policy per update, hence the
    larger step and several passes (``n_epochs``); the study behind this default:
    ``results/vmpo_defaults/results.md``."""
    n_steps: PositiveInt = 128
    """Steps per env per rollout."""
    batch_size: PositiveInt = 256
    """Transitions per minibatch (whole segments)."""
    n_epochs: PositiveInt = 4
    """Passes over each rollout (the paper's learner sees each batch once; see
    ``learning_rate`` for why the default makes more passes)."""
    segment_length: PositiveInt = 32
    """Steps per training segment, recomputed with gradient from the memory stored detached
    at its first step: how far back a gradient reaches (for ``lstm``, ``gru`` and ``ffm``
    the backpropagation-through-time length; POPGym's protocol uses 1024). Must divide
    ``n_steps`` and ``batch_size``."""
    gamma: UnitFloat = 0.99
    """Discount factor."""
    gae_lambda: UnitFloat = 1.0
    """lambda of the advantage targets; 1 gives the paper's n-step returns."""
    target_update_period: PositiveInt | None = None
    """Gradient steps between target-network refreshes (T_target, Sec. 4); ``null``: act
    with the policy of the rollout's start."""
    max_grad_norm: PositiveFloat = 40.0
    """Global gradient-norm clip."""


def loss_settings(settings: VMPOLossSettings, where: str = "VMPOLossSettings") -> VMPOLossSettings:
    """The loss's settings of ``settings`` (the learner's [`VMPOSettings`][txrl.learners.vmpo.settings.VMPOSettings], say), each
    checked against the type it is declared with, and the initial multipliers against
    [`VMPOLossSettings.multiplier_floor`][txrl.learners.vmpo.settings.VMPOLossSettings.multiplier_floor]: a ValueError naming ``where.<field>``, its
    value and what is valid. A config is checked so when it is read; this checks what code
    passes ([`txrl.VMPO`][txrl.VMPO]'s constructor)."""
    values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(VMPOLossSettings)}
    for name, value in values.items():
        if isinstance(value, str):  # a config's "1e-3" is read as a number; code passes one
            raise ValueError(f"{where}.{name} must be a number, got {value!r}")
    loss = from_mapping(VMPOLossSettings, values, where)
    floor = VMPOLossSettings.multiplier_floor
    for name in ("init_eta", "init_alpha", "init_alpha_mu", "init_alpha_sigma"):
        if not getattr(loss, name) > floor:
            raise ValueError(
                f"{where}.{name} must be a finite number > multiplier_floor ({floor!r}), "
                f"got {getattr(loss, name)!r}"
            )
    return loss


#: The name under which V-MPO models saved before these settings took it pickled them (their
#: ``vmpo_config``, a class of its own then): kept so that those files load.
VMPOConfig = VMPOLossSettings


__all__ = ["VMPOLossSettings", "VMPOSettings", "loss_settings"]
