"""V-MPO's Lagrange multipliers (Song et al. 2019): the temperature eta and the trust-region
multipliers alpha (discrete actions) or alpha_mu, alpha_Sigma (Gaussian policies).

The multipliers must stay positive. The paper projects them onto ``[1e-8, inf)`` after each
update (eta_min = alpha_min = 1e-8, Sec. 4.2.2); here they are stored unconstrained and used
through ``softplus(x) + 1e-8``, which needs no projection step and keeps the same floor.
They are trained by their own terms of the loss (Eqs. 4 and 5, [`txrl.learners.vmpo.loss`][txrl.learners.vmpo.loss])
with the policy's optimizer.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from txrl.learners.vmpo.settings import VMPOLossSettings


def _inverse_softplus(value: float) -> float:
    """x with softplus(x) = value > 0, i.e. log(exp(value) - 1), computed without overflow."""
    return value + math.log(-math.expm1(-value))


class VMPOMultipliers(nn.Module):
    """eta (temperature) and alpha (discrete) or alpha_mu, alpha_Sigma (Gaussian).

    Each is stored as an unconstrained parameter ``x`` and used as ``softplus(x) + floor``, so it
    is positive whatever the optimiser does; ``x`` is initialised so that the constrained value
    equals the given initial value. The gradient of a loss w.r.t. ``x`` has the sign of its
    gradient w.r.t. the constrained value (``softplus' = sigmoid > 0``).
    """

    def __init__(
        self,
        continuous: bool,
        *,
        init_eta: float = 1.0,
        init_alpha: float = 5.0,
        init_alpha_mu: float = 1.0,
        init_alpha_sigma: float = 1.0,
        floor: float = 1e-8,
    ) -> None:
        super().__init__()
        if not math.isfinite(floor) or floor < 0:
            raise ValueError(f"floor must be a finite number >= 0, got {floor!r}")
        inits = {"init_eta": init_eta}
        if continuous:
            inits |= {"init_alpha_mu": init_alpha_mu, "init_alpha_sigma": init_alpha_sigma}
        else:
            inits |= {"init_alpha": init_alpha}
        for name, value in inits.items():
            if not math.isfinite(value) or value <= floor:
                raise ValueError(
                    f"{name} must be a finite number > floor ({floor!r}), got {value!r}"
                )
        self.continuous = continuous
        self.floor = floor

        def unconstrained(value: float) -> nn.Parameter:
            return nn.Parameter(torch.tensor(_inverse_softplus(value - floor)))

        self.eta_unconstrained = unconstrained(init_eta)
        if continuous:
            self.alpha_mu_unconstrained = unconstrained(init_alpha_mu)
            self.alpha_sigma_unconstrained = unconstrained(init_alpha_sigma)
        else:
            self.alpha_unconstrained = unconstrained(init_alpha)

    @classmethod
    def from_config(cls, config: VMPOLossSettings, *, continuous: bool) -> VMPOMultipliers:
        return cls(
            continuous,
            init_eta=config.init_eta,
            init_alpha=config.init_alpha,
            init_alpha_mu=config.init_alpha_mu,
            init_alpha_sigma=config.init_alpha_sigma,
            floor=config.multiplier_floor,
        )

    def _constrained(self, unconstrained: torch.Tensor) -> torch.Tensor:
        # lambda = softplus(x) + lambda_min > 0
        return F.softplus(unconstrained) + self.floor

    @property
    def eta(self) -> torch.Tensor:
        """eta > 0, scalar, differentiable w.r.t. ``eta_unconstrained``."""
        return self._constrained(self.eta_unconstrained)

    @property
    def alpha(self) -> torch.Tensor:
        """alpha > 0 of the categorical trust region (discrete actions only)."""
        if self.continuous:
            raise ValueError("alpha exists for discrete actions; use alpha_mu and alpha_sigma")
        return self._constrained(self.alpha_unconstrained)

    @property
    def alpha_mu(self) -> torch.Tensor:
        """alpha_mu > 0 of the Gaussian mean trust region (continuous actions only)."""
        if not self.continuous:
            raise ValueError("alpha_mu exists for Gaussian policies; use alpha")
        return self._constrained(self.alpha_mu_unconstrained)

    @property
    def alpha_sigma(self) -> torch.Tensor:
        """alpha_Sigma > 0 of the Gaussian covariance trust region (continuous actions only)."""
        if not self.continuous:
            raise ValueError("alpha_sigma exists for Gaussian policies; use alpha")
        return self._constrained(self.alpha_sigma_unconstrained)


__all__ = ["VMPOMultipliers"]
