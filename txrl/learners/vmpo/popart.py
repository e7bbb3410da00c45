"""PopArt (van Hasselt et al. 2016): value normalisation that preserves the head's outputs,
used by V-MPO "even when training on a single task" (Song et al. 2019, Sec. 4.1).

Where it plugs in: the value head outputs a normalised value v~; then the ``values`` and
``returns`` the loss ([`txrl.learners.vmpo.loss.vmpo_loss`][txrl.learners.vmpo.loss.vmpo_loss]) gets are ``v~`` and
``(G - mu) / sigma``, the bootstrap value in G is ``sigma v~ + mu``, and the advantages of
the E-step are ``(G - V) / sigma``. After each learner step, call [`PopArt.update`][txrl.learners.vmpo.popart.PopArt.update] with
the unnormalised targets G; it rescales the head so that its unnormalised outputs do not
change. [`txrl.learners.vmpo.algorithm.VMPO`][txrl.learners.vmpo.algorithm.VMPO] does all of this with ``popart=True``.
"""

from __future__ import annotations

import torch
from torch import nn


class PopArt(nn.Module):
    """Linear value head with adaptively rescaled targets that preserves its outputs.

    Legend: B samples, I input features, O outputs (tasks; 1 for a single task).

    ``forward`` returns the normalised value ``v~ = W x + b``; the value is ``sigma v~ + mu``.
    `update` moves the running moments ``mu, nu`` towards the new targets (Pop) and
    rescales ``W, b`` so that ``sigma v~ + mu`` is unchanged for every input (Art).
    """

    mu: torch.Tensor  # (O,) buffer, first moment of G
    nu: torch.Tensor  # (O,) buffer, second moment of G

    def __init__(
        self,
        in_features: int,
        out_features: int = 1,
        *,
        step_size: float = 1e-4,
        scale_lower: float = 1e-2,
        scale_upper: float = 1e6,
    ) -> None:
        super().__init__()
        if not 0 < step_size <= 1:
            raise ValueError(f"step_size must be in (0, 1], got {step_size!r}")
        if not 0 < scale_lower < scale_upper:
            raise ValueError(
                f"need 0 < scale_lower < scale_upper, got {scale_lower!r}, {scale_upper!r}"
            )
        self.linear = nn.Linear(in_features, out_features)
        self.step_size = step_size
        self.scale_lower = scale_lower
        self.scale_upper = scale_upper
        self.register_buffer("mu", torch.zeros(out_features))  # (O,) first moment of G
        self.register_buffer("nu", torch.ones(out_features))  # (O,) second moment of G

    @property
    def sigma(self) -> torch.Tensor:
        """Scale ``sqrt(nu - mu^2)`` clipped to ``[scale_lower, scale_upper]``, shape (O,)."""
        variance = (self.nu - self.mu.square()).clamp(min=self.scale_lower**2)
        return variance.sqrt().clamp(self.scale_lower, self.scale_upper)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised values ``v~`` (B, O) of inputs (B, I)."""
        return self.linear(x)

    def normalize(self, targets: torch.Tensor) -> torch.Tensor:
        """``(G - mu) / sigma`` for targets (B, O)."""
        return (targets - self.mu) / self.sigma

    def unnormalize(self, normalized: torch.Tensor) -> torch.Tensor:
        """``sigma v~ + mu`` for normalised values (B, O)."""
        return normalized * self.sigma + self.mu

    @torch.no_grad()
    def update(self, targets: torch.Tensor, steps: int = 1) -> None:
        """Update the moments with unnormalised targets (B, O) and preserve the outputs.

        ``steps``: how many learner steps these targets stand for. The step size ``beta`` is
        per learner step (van Hasselt et al. 2016 update at every step); a caller that updates
        once for k steps on the same targets passes ``steps=k`` and gets exactly the moments
        of k updates, ``beta_k = 1 - (1 - beta)^k``, so the statistics adapt at the same
        speed in learner steps whatever the cadence of the calls.
        """
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be a positive int, got {steps!r}")
        targets = targets.reshape(-1, self.mu.numel()).to(self.mu.dtype)  # (B, O)
        old_mu, old_sigma = self.mu.clone(), self.sigma
        beta = 1.0 - (1.0 - self.step_size) ** steps
        # mu <- (1 - beta) mu + beta E[G],  nu <- (1 - beta) nu + beta E[G^2]
        self.mu.lerp_(targets.mean(dim=0), beta)
        self.nu.lerp_(targets.square().mean(dim=0), beta)
        new_mu, new_sigma = self.mu, self.sigma
        # W <- W sigma_old / sigma_new, b <- (sigma_old b + mu_old - mu_new) / sigma_new
        self.linear.weight.mul_((old_sigma / new_sigma).unsqueeze(-1))
        self.linear.bias.mul_(old_sigma).add_(old_mu - new_mu).div_(new_sigma)


class PopArtValueHead(PopArt):
    """[`PopArt`][txrl.learners.vmpo.popart.PopArt] as a drop-in value head: ``forward`` returns the *unnormalised* value
    ``sigma v~ + mu``, so acting, GAE and logging see values in return units, and a loss uses
    `normalize` on both the prediction and the target (the gradient is that of ``v~``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.unnormalize(self.linear(x))


__all__ = ["PopArt", "PopArtValueHead"]
