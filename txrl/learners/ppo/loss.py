"""The PPO objective (Schulman et al. 2017, eqs. 7 and 9), as a function returning ``(loss, stats)``.

Legend: X transitions in the minibatch (segments flattened).
"""

from __future__ import annotations

import torch


def ppo_loss(
    *,
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    entropy: torch.Tensor | None,
    clip_range: float,
    clip_range_vf: float | None,
    ent_coef: float,
    vf_coef: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped surrogate + value regression - entropy bonus; all inputs (X,).

    ``advantages`` are used as given (normalise them before if wanted).

    Value loss: the squared error (G - V)^2, averaged. With ``clip_range_vf`` set it is the
    pessimistic max((G - V)^2, (G - V_clip)^2), V_clip = V_old + clip(V - V_old, -eps_vf, eps_vf),
    the form of OpenAI baselines' PPO2 (and CleanRL): like the policy's clipped surrogate, it
    takes the worse of the two, so a prediction moved past the clip range away from the
    target keeps the gradient of the unclipped error and is pulled back, while a move past
    the range towards the target gets no gradient. Regressing only V_clip instead would give
    zero gradient to every prediction outside the range, whichever way it moved.
    """
    # r_t(theta) = pi(a|s) / pi_old(a|s)
    log_ratio = log_prob - old_log_prob
    ratio = log_ratio.exp()
    # L^CLIP = E[min(r A, clip(r, 1 - eps, 1 + eps) A)], eq. (7)
    surrogate = torch.min(
        ratio * advantages, ratio.clamp(1 - clip_range, 1 + clip_range) * advantages
    )
    policy_loss = -surrogate.mean()
    # (G - V)^2, or with value clipping max((G - V)^2, (G - V_clip)^2)
    squared_error = (returns - values).square()
    if clip_range_vf is not None:
        # V_clip = V_old + clip(V - V_old, -eps_vf, eps_vf)
        clipped = old_values + (values - old_values).clamp(-clip_range_vf, clip_range_vf)
        squared_error = torch.max(squared_error, (returns - clipped).square())
    value_loss = squared_error.mean()
    # entropy bonus S[pi], eq. (9); -mean(log pi) when the distribution has no closed form
    entropy_loss = -entropy.mean() if entropy is not None else log_prob.mean()
    loss = policy_loss + ent_coef * entropy_loss + vf_coef * value_loss
    with torch.no_grad():
        # the low-variance KL estimator E[(r - 1) - log r] (Schulman's blog), as SB3 logs it
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clip_fraction = ((ratio - 1).abs() > clip_range).float().mean()
    stats = {
        "train/policy_gradient_loss": policy_loss.detach(),
        "train/value_loss": value_loss.detach(),
        "train/entropy_loss": entropy_loss.detach(),
        "train/approx_kl": approx_kl,
        "train/clip_fraction": clip_fraction,
    }
    return loss, stats
