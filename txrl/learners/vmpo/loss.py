"""V-MPO (Song et al. 2019, ICLR 2020): value loss + E-step + M-step, returning ``(loss, stats)``.

Legend: N samples in the full batch D (all steps of all envs of one update, flattened),
B samples in the (mini)batch being differentiated (B = N without minibatching),
K = ceil(N_valid / 2) samples in the top half D~, A discrete actions, D action dimensions.

Equations, numbered as in the paper (sg[.] is a stop-gradient):

* (1) ``L(phi, theta, eta, alpha) = L_V(phi) + L_V-MPO(theta, eta, alpha)``
* (2) ``L_V-MPO = L_pi + L_eta + L_alpha``
* (3) ``L_pi = -sum_{D~} psi log pi_theta(a|s)``,
  ``psi = exp(A/eta) / sum_{D~} exp(A/eta)`` (E-step weights, M-step weighted max likelihood)
* (4) ``L_eta = eta eps_eta + eta log[(1/|D~|) sum_{D~} exp(A/eta)]`` (temperature dual)
* (5) ``L_alpha = (1/|D|) sum_D [alpha (eps_alpha - sg[KL]) + sg[alpha] KL]``,
  ``KL = KL(pi_old(.|s) || pi_theta(.|s))``, over the full batch D, not D~
* (6) ``L_V = (1/2|D|) sum_D (V_phi(s_t) - G_t^(n))^2``
* (13)-(15): the trust region ``E_s[KL] < eps_alpha`` and the stop-gradient split of its
  Lagrangian that gives (5). For diagonal Gaussians the KL is decoupled into a mean part and a
  covariance part with their own alpha and eps (Appendix C, after Abdolmaleki et al. 2018).

Top half over the whole batch. D~ is the top 50% of advantages *of the batch D* (Sec. 4.2.1),
and it must be the same set in (3) and (4). When an update is split into minibatches, the
selection and psi must still be computed over all N samples: pass the full batch's advantages
to [`vmpo_loss`][txrl.learners.vmpo.loss.vmpo_loss] through [`FullBatch`][txrl.learners.vmpo.loss.FullBatch] (or compute [`top_half_weights`][txrl.learners.vmpo.loss.top_half_weights] on the full
batch yourself and slice psi). Choosing the top half inside each minibatch is a different,
wrong, estimator.

The multipliers eta and alpha are [`VMPOMultipliers`][txrl.learners.vmpo.multipliers.VMPOMultipliers];
the hyperparameters, with where each comes from,
[`VMPOLossSettings`][txrl.learners.vmpo.settings.VMPOLossSettings]; PopArt, which changes what ``values`` and ``returns`` hold, [`popart`][txrl.learners.vmpo.popart].
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from txrl.learners.vmpo.multipliers import VMPOMultipliers
from txrl.learners.vmpo.settings import VMPOLossSettings

# ---------------------------------------------------------------------------------------------
# E-step: top half, psi, temperature loss
# ---------------------------------------------------------------------------------------------


def top_half_mask(
    advantages: torch.Tensor,
    valid: torch.Tensor | None = None,
    *,
    fraction: float = 0.5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Selects D~, the top ``fraction`` of ``advantages`` over every element passed in.

    ``advantages`` (N,) or any shape, all elements ranked together: pass the whole batch D, not
    a minibatch. ``valid`` (same shape, bool) excludes steps from the selection (padding,
    episode starts the agent could not act on). K = ceil(fraction * N_valid) steps are kept;
    ties at the threshold are broken by ``torch.topk``.

    Returns ``(mask, threshold)``: ``mask`` bool, True on D~; ``threshold`` the smallest selected
    advantage (a 0-dim tensor).
    """
    flat = advantages.detach().reshape(-1)  # (N,)
    if valid is None:
        valid_flat = torch.ones_like(flat, dtype=torch.bool)
    else:
        valid_flat = valid.reshape(-1).bool()
        if valid_flat.shape != flat.shape:
            raise ValueError(
                f"valid must have the shape of advantages {tuple(advantages.shape)}, "
                f"got {tuple(valid.shape)}"
            )
    n_valid = int(valid_flat.sum())
    if n_valid == 0:
        raise ValueError("no valid step in the batch: its top half is empty")
    k = max(1, math.ceil(fraction * n_valid))
    # invalid steps rank below every valid one, so topk never picks them
    ranked = flat.masked_fill(~valid_flat, -math.inf)
    top_values, top_index = ranked.topk(k)  # (K,), sorted descending
    mask = torch.zeros_like(valid_flat).index_fill_(0, top_index, True)
    return mask.reshape(advantages.shape), top_values[-1]


def top_half_weights(
    advantages: torch.Tensor,
    *,
    eta: torch.Tensor | float,
    valid: torch.Tensor | None = None,
    fraction: float = 0.5,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """E-step weights psi of Eq. (3) over the whole batch passed in.

    The caller must pass the advantages of the full batch D (or slice the returned psi for a
    minibatch): the top half is a property of D. eta is detached inside psi: psi is a fixed
    target of the M-step and eta is fit by its own loss (4).

    Returns ``(psi, mask, threshold)``: ``psi`` has the shape of ``advantages``, sums to 1 over
    D~ and is 0 elsewhere; ``mask`` and ``threshold`` are those of `top_half_mask`.
    """
    mask, threshold = top_half_mask(advantages, valid, fraction=fraction)
    eta = torch.as_tensor(eta, dtype=advantages.dtype, device=advantages.device).detach()
    logits = (advantages.detach() / eta).masked_fill(~mask, -math.inf)
    # psi = exp(A/sg[eta]) / sum_{D~} exp(A/sg[eta]), Eq. (3); exp(-inf) = 0 outside D~
    psi = torch.softmax(logits.reshape(-1), dim=0).reshape(advantages.shape)
    return psi, mask, threshold


def temperature_loss(
    advantages_selected: torch.Tensor,
    *,
    eta: torch.Tensor,
    epsilon_eta: float,
) -> torch.Tensor:
    """L_eta of Eq. (4) over the K advantages of D~ (any shape, detached here).

    Its derivative is ``dL/deta = eps_eta + log mean exp(A/eta) - E_psi[A]/eta
    = eps_eta - KL(psi || uniform over D~)``: eta falls while psi is closer to uniform than
    eps_eta allows and rises once it is farther (the dual of Eq. 19, Appendix A).
    """
    a = advantages_selected.detach().reshape(-1)  # (K,)
    if a.numel() == 0:
        raise ValueError("temperature_loss needs at least one selected advantage")
    # L_eta = eta eps_eta + eta log[(1/K) sum exp(A/eta)], Eq. (4); logsumexp is stable for small eta
    return eta * epsilon_eta + eta * (torch.logsumexp(a / eta, dim=0) - math.log(a.numel()))


# ---------------------------------------------------------------------------------------------
# M-step: weighted maximum likelihood and the KL trust region
# ---------------------------------------------------------------------------------------------


def policy_loss(log_prob: torch.Tensor, psi: torch.Tensor) -> torch.Tensor:
    """L_pi of Eqs. (3)/(12): ``-sum psi log pi_theta(a|s)``; shapes equal, psi detached.

    Steps with psi = 0 (outside D~, padding) contribute nothing, even if their log-probability
    is not finite. Summed, not averaged: psi already sums to 1 over D~. On a minibatch slice of
    the full-batch psi this is that minibatch's share of the full-batch loss ([`vmpo_loss`][txrl.learners.vmpo.loss.vmpo_loss]
    rescales it by N/B).
    """
    psi = psi.detach()
    # L_pi = -sum_{D~} psi log pi_theta(a|s), Eq. (3)
    return -(psi * torch.where(psi > 0, log_prob, torch.zeros_like(log_prob))).sum()


def categorical_kl(old_logits: torch.Tensor, new_logits: torch.Tensor) -> torch.Tensor:
    """KL(pi_old(.|s) || pi_theta(.|s)) per state from logits (B, A) -> (B,); old detached."""
    old_log_p = F.log_softmax(old_logits.detach(), dim=-1)  # (B, A)
    new_log_p = F.log_softmax(new_logits, dim=-1)  # (B, A)
    old_p = old_log_p.exp()
    # KL = sum_a pi_old(a) (log pi_old(a) - log pi_theta(a)); actions with pi_old(a) = 0 add 0
    terms = torch.where(old_p > 0, old_p * (old_log_p - new_log_p), torch.zeros_like(old_p))
    return terms.sum(dim=-1)


def gaussian_decoupled_kl(
    old_mean: torch.Tensor,
    old_log_std: torch.Tensor,
    new_mean: torch.Tensor,
    new_log_std: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoupled KL of diagonal Gaussians (Appendix C), inputs (B, D) -> ``(kl_mu, kl_sigma)`` (B,).

    ``kl_mu = KL(N(mu_old, s_old) || N(mu_theta, s_old))`` moves only the new mean and
    ``kl_sigma = KL(N(mu_old, s_old) || N(mu_old, s_theta))`` only the new std, so each part of
    the policy has its own trust region. The old parameters are detached.
    """
    old_mean = old_mean.detach()
    old_log_std = old_log_std.detach()
    old_var = torch.exp(2 * old_log_std)  # (B, D)
    # KL_mu = 1/2 sum_d (mu_theta - mu_old)^2 / s_old^2
    kl_mu = 0.5 * ((new_mean - old_mean).square() / old_var).sum(dim=-1)
    # log(s_theta^2 / s_old^2)
    log_var_ratio = 2 * (new_log_std - old_log_std)  # (B, D)
    # KL_Sigma = 1/2 sum_d [s_old^2 / s_theta^2 - 1 + log(s_theta^2 / s_old^2)]
    kl_sigma = 0.5 * (torch.exp(-log_var_ratio) - 1 + log_var_ratio).sum(dim=-1)
    return kl_mu, kl_sigma


def kl_constraint_loss(
    kl: torch.Tensor,
    *,
    alpha: torch.Tensor,
    epsilon_alpha: float,
    valid: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """L_alpha of Eq. (5) for per-state KLs ``kl`` (B,), averaged over the valid states.

    Returns ``(loss, mean_kl)``. ``dL/dalpha = eps_alpha - mean KL``, so gradient descent raises
    alpha while the trust region is violated and lowers it while it is slack; the policy gets
    ``sg[alpha] dKL/dtheta``.
    """
    mean_kl = _masked_mean(kl, valid)
    # L_alpha = alpha (eps_alpha - sg[KL]) + sg[alpha] KL, Eq. (5)
    loss = alpha * (epsilon_alpha - mean_kl.detach()) + alpha.detach() * mean_kl
    return loss, mean_kl


def _masked_mean(x: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    if valid is None:
        return x.mean()
    valid = valid.reshape(x.shape).to(x.dtype)
    return (x * valid).sum() / valid.sum().clamp(min=1)


# ---------------------------------------------------------------------------------------------
# The combined loss
# ---------------------------------------------------------------------------------------------


class CategoricalParams(NamedTuple):
    """Parameters of a categorical policy."""

    logits: torch.Tensor  # (B, A)


class DiagGaussianParams(NamedTuple):
    """Parameters of a diagonal Gaussian policy."""

    mean: torch.Tensor  # (B, D)
    log_std: torch.Tensor  # (B, D)


PolicyParams = CategoricalParams | DiagGaussianParams


class VMPOBatch(NamedTuple):
    """What [`vmpo_loss`][txrl.learners.vmpo.loss.vmpo_loss] differentiates: one (mini)batch of B samples.

    ``old_policy`` is the acting target network pi_theta_old (its params are detached inside),
    ``new_policy`` the online network pi_theta evaluated on the same states.
    """

    log_prob: torch.Tensor  # (B,) log pi_theta(a|s) of the taken actions, online network
    advantages: torch.Tensor  # (B,) A^target = G^(n) - V(s), detached
    values: torch.Tensor  # (B,) V_phi(s), online network (normalised when using PopArt)
    returns: torch.Tensor  # (B,) G^(n) targets of L_V (normalised when using PopArt)
    old_policy: PolicyParams  # (B, .) target-network distribution parameters
    new_policy: PolicyParams  # (B, .) online distribution parameters
    valid: torch.Tensor | None = None  # (B,) bool; False steps count in no term (padding)


class FullBatch(NamedTuple):
    """The full batch D, for an E-step over D when [`vmpo_loss`][txrl.learners.vmpo.loss.vmpo_loss] sees a minibatch of it."""

    advantages: torch.Tensor  # (N,) advantages of every sample of the update
    # (B,) long, positions of the minibatch's rows in the full batch
    index: torch.Tensor  # type: ignore[assignment]  # a field that shadows tuple.index, by design of the public name
    valid: torch.Tensor | None = None  # (N,) bool, steps excluded from D~


def vmpo_loss(
    batch: VMPOBatch,
    multipliers: VMPOMultipliers,
    config: VMPOLossSettings,
    *,
    full_batch: FullBatch | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Total V-MPO loss ``value_loss_coef * L_V + L_pi + L_eta + L_alpha`` (Eqs. 1, 2).

    Without ``full_batch`` the E-step (top half, psi, L_eta) runs over ``batch`` itself, which
    must then be the whole update batch. With minibatches, pass ``full_batch``: the top half and
    psi are computed over all N samples (with the current eta) and psi is sliced to this
    minibatch's rows; L_pi is that slice's sum scaled by N/B (its expectation over uniformly
    drawn minibatches is the full-batch L_pi), and L_eta is the same full-batch loss at every
    minibatch step.

    Stats hold detached scalars under SB3-style ``train/...`` keys.
    """
    if multipliers.continuous != isinstance(batch.new_policy, DiagGaussianParams):
        raise ValueError(
            "multipliers and batch disagree on the action space: "
            f"multipliers.continuous={multipliers.continuous}, "
            f"new_policy is {type(batch.new_policy).__name__}"
        )
    if type(batch.old_policy) is not type(batch.new_policy):
        raise ValueError(
            f"old_policy ({type(batch.old_policy).__name__}) and new_policy "
            f"({type(batch.new_policy).__name__}) must be the same distribution family"
        )

    # E-step over the full batch D
    eta = multipliers.eta
    if full_batch is None:
        e_advantages, e_valid, index = batch.advantages, batch.valid, None
    else:
        e_advantages, e_valid, index = full_batch.advantages, full_batch.valid, full_batch.index
    psi_full, mask_full, threshold = top_half_weights(
        e_advantages, eta=eta, valid=e_valid, fraction=config.top_k_fraction
    )
    psi = psi_full if index is None else psi_full.reshape(-1)[index].reshape(batch.log_prob.shape)
    # L_eta over D~, Eq. (4)
    loss_eta = temperature_loss(
        e_advantages.detach()[mask_full], eta=eta, epsilon_eta=config.epsilon_eta
    )

    # M-step: weighted maximum likelihood, Eq. (3)
    loss_pi = policy_loss(batch.log_prob, psi)
    if index is not None:
        # N/B times the minibatch's share: an unbiased estimate of the full-batch L_pi, on the
        # same scale as the minibatch means of L_V and L_alpha
        loss_pi = loss_pi * (e_advantages.numel() / index.numel())

    # M-step: trust region over the full (mini)batch, Eq. (5)
    stats: dict[str, torch.Tensor] = {}
    old_policy, new_policy = batch.old_policy, batch.new_policy
    if isinstance(old_policy, DiagGaussianParams) and isinstance(new_policy, DiagGaussianParams):
        kl_mu, kl_sigma = gaussian_decoupled_kl(
            old_policy.mean, old_policy.log_std, new_policy.mean, new_policy.log_std
        )
        alpha_mu, alpha_sigma = multipliers.alpha_mu, multipliers.alpha_sigma
        loss_alpha_mu, mean_kl_mu = kl_constraint_loss(
            kl_mu, alpha=alpha_mu, epsilon_alpha=config.epsilon_alpha_mu, valid=batch.valid
        )
        loss_alpha_sigma, mean_kl_sigma = kl_constraint_loss(
            kl_sigma,
            alpha=alpha_sigma,
            epsilon_alpha=config.epsilon_alpha_sigma,
            valid=batch.valid,
        )
        loss_alpha = loss_alpha_mu + loss_alpha_sigma
        stats |= {
            "train/alpha_mu": alpha_mu.detach(),
            "train/alpha_sigma": alpha_sigma.detach(),
            "train/kl_mu": mean_kl_mu.detach(),
            "train/kl_sigma": mean_kl_sigma.detach(),
        }
    elif isinstance(old_policy, CategoricalParams) and isinstance(new_policy, CategoricalParams):
        kl = categorical_kl(old_policy.logits, new_policy.logits)
        alpha = multipliers.alpha
        loss_alpha, mean_kl = kl_constraint_loss(
            kl, alpha=alpha, epsilon_alpha=config.epsilon_alpha, valid=batch.valid
        )
        stats |= {"train/alpha": alpha.detach(), "train/kl": mean_kl.detach()}
    else:
        raise ValueError(
            "old_policy and new_policy must be of one kind (both CategoricalParams or both "
            f"DiagGaussianParams), got {type(old_policy).__name__} and {type(new_policy).__name__}"
        )

    # L_V = 1/2 mean (V_phi(s) - G^(n))^2, Eq. (6)
    loss_v = 0.5 * _masked_mean((batch.values - batch.returns.detach()).square(), batch.valid)

    # L = L_V + L_pi + L_eta + L_alpha, Eqs. (1), (2)
    loss = config.value_loss_coef * loss_v + loss_pi + loss_eta + loss_alpha

    with torch.no_grad():
        psi_flat = psi_full.reshape(-1)
        # effective sample size of psi, 1 / sum psi^2, between 1 and K
        ess = 1.0 / psi_flat.square().sum()
        n_selected = mask_full.sum().to(ess.dtype)
    stats |= {
        "train/loss": loss.detach(),
        "train/policy_loss": loss_pi.detach(),
        "train/value_loss": loss_v.detach(),
        "train/temperature_loss": loss_eta.detach(),
        "train/kl_loss": loss_alpha.detach(),
        "train/eta": eta.detach(),
        "train/top_half_threshold": threshold.detach(),
        "train/psi_ess": ess,
        "train/psi_ess_fraction": ess / n_selected,
    }
    return loss, stats


__all__ = [
    "CategoricalParams",
    "DiagGaussianParams",
    "FullBatch",
    "PolicyParams",
    "VMPOBatch",
    "categorical_kl",
    "gaussian_decoupled_kl",
    "kl_constraint_loss",
    "policy_loss",
    "temperature_loss",
    "top_half_mask",
    "top_half_weights",
    "vmpo_loss",
]
