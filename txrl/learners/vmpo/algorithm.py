"""V-MPO (Song et al. 2019) with a memory policy, on txrl's shared on-policy machinery.

The rollout, the memory streams and the segment minibatches are those of MemoryPPO
([`txrl.sb3.algorithm.MemoryOnPolicyAlgorithm`][txrl.sb3.algorithm.MemoryOnPolicyAlgorithm]); this module adds V-MPO's loss
([`txrl.learners.vmpo.loss.vmpo_loss`][txrl.learners.vmpo.loss.vmpo_loss]: value regression, E-step over the top half of the
*whole* batch's advantages, M-step weighted maximum likelihood with a KL trust region),
its Lagrange multipliers (`txrl.learners.vmpo.multipliers`), PopArt
([`txrl.learners.vmpo.popart`][txrl.learners.vmpo.popart]), and the target network.

Target network (Sec. 4 of the paper): the policy that acts and against which the KL is
taken, pi_old. By default it is the policy as it was when the rollout was collected
(``target_update_period=None``): the distribution of every acting step is stored with the
rollout, so the KL needs no second forward pass. With ``target_update_period=T`` a frozen
copy acts and is refreshed from the trained network every T gradient steps, as in the paper.

Targets: GAE from SB3's buffer; ``gae_lambda=1`` (the default) gives the n-step returns of
the paper, bootstrapped at the end of each rollout and cut at episode ends (an episode
start never bootstraps across the boundary).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, NamedTuple

import torch
from gymnasium import spaces
from stable_baselines3.common.distributions import CategoricalDistribution, DiagGaussianDistribution

from txrl.learners.vmpo.loss import (
    CategoricalParams,
    DiagGaussianParams,
    FullBatch,
    VMPOBatch,
    vmpo_loss,
)
from txrl.learners.vmpo.multipliers import VMPOMultipliers
from txrl.learners.vmpo.popart import PopArtValueHead
from txrl.learners.vmpo.settings import VMPOLossSettings, VMPOSettings, loss_settings
from txrl.sb3.algorithm import MemoryOnPolicyAlgorithm
from txrl.sb3.buffer import MemoryRolloutBuffer, SegmentBatch
from txrl.sb3.policies import MemoryActorCriticPolicy


class VMPOUpdate(NamedTuple):
    """What V-MPO's loss needs of the whole rollout, computed once per ``train()``."""

    advantages: torch.Tensor
    """(N*B,) the rollout's advantages, step-major (row ``step * n_envs + env``), in units
    of PopArt's sigma when the value head is PopArt's: the E-step's top half is chosen
    among them (Sec. 4.2.1), not within a minibatch."""


class VMPO(MemoryOnPolicyAlgorithm[VMPOUpdate]):
    """V-MPO with a memory policy (GTrXL by default), usable like any SB3 algorithm.

    Policies and memory settings as for [`txrl.MemoryPPO`][txrl.MemoryPPO]. Action spaces: Discrete
    (categorical KL) and Box (diagonal Gaussian, decoupled mean and covariance KLs).

    ``epsilon_eta``, ``epsilon_alpha``, ``epsilon_alpha_mu``, ``epsilon_alpha_sigma``: the E-step
    and trust-region bounds; ``init_eta``, ``init_alpha``, ``init_alpha_mu``, ``init_alpha_sigma``:
    initial multipliers. Every parameter is documented, with its default and where it comes
    from, in [`VMPOSettings`][txrl.learners.vmpo.settings.VMPOSettings].

    * ``target_update_period``: gradient steps between target-network refreshes, or None
        to act with the policy of the rollout's start.
    * ``value_loss_coef``: weight of L_V (the paper adds it with weight 1).
    * ``popart``: normalise value targets with PopArt (Sec. 4.1; van Hasselt et al. 2016). The
        value head then outputs values in return units; the loss regresses the normalised
        prediction on the normalised target, the E-step uses advantages divided by sigma, and
        the statistics are updated (outputs preserved) with each rollout's returns, with the
        per-learner-step size ``beta`` compounded over the rollout's gradient steps
        ([`txrl.learners.vmpo.popart.PopArt.update`][txrl.learners.vmpo.popart.PopArt.update]), so they adapt at the paper's cadence: the
        moments close 90% of a gap in ln(10)/beta learner steps (23k at beta = 1e-4).
    """

    settings_class = VMPOSettings

    #: the settings of the loss, kept together as the one object the loss, the multipliers
    #: and PopArt read (under the name a saved model stores it)
    vmpo_config: VMPOLossSettings
    target_update_period: int | None

    def _take_settings(self, settings: VMPOSettings) -> None:
        period = settings.target_update_period
        if period is not None and (not isinstance(period, int) or period < 1):
            raise ValueError(f"target_update_period must be an int >= 1 or None, got {period!r}")
        self.vmpo_config = loss_settings(settings, type(self).__name__)
        loss = {field.name for field in dataclasses.fields(VMPOLossSettings)}
        for field in dataclasses.fields(settings):
            if field.name not in loss:
                setattr(self, field.name, getattr(settings, field.name))
        self._gradient_steps = 0

    def _check_action_space(self) -> None:
        # the KL of Eq. (5) is implemented for categorical and diagonal-Gaussian policies
        if not isinstance(self.action_space, spaces.Discrete | spaces.Box):
            raise ValueError(
                f"VMPO supports Discrete and Box action spaces, got {self.action_space}; "
                "MemoryPPO also trains MultiDiscrete and MultiBinary ones"
            )

    def _setup_model(self) -> None:
        super()._setup_model()
        config = self.vmpo_config
        if config.popart:
            # SB3 declares value_net an nn.Linear; the PopArt head takes its place (a linear
            # map of the critic's latent, plus the statistics that rescale it)
            self.policy.value_net = PopArtValueHead(  # type: ignore[assignment]  # not an nn.Linear subclass
                self.policy.value_net.in_features,
                step_size=config.popart_step_size,
                scale_lower=config.popart_scale_lower,
                scale_upper=config.popart_scale_upper,
            ).to(self.device)
            # the optimizer must hold the new head's parameters
            self.policy.optimizer = self.policy.optimizer_class(  # type: ignore[call-arg]  # typed as torch's base Optimizer, whose constructor has no lr; every concrete one (Adam by default) takes it
                self.policy.parameters(), lr=self.lr_schedule(1), **self.policy.optimizer_kwargs
            )
        continuous = isinstance(self.action_space, spaces.Box)
        self.multipliers = VMPOMultipliers.from_config(self.vmpo_config, continuous=continuous).to(
            self.device
        )
        # the multipliers are learned by the policy's optimizer, as one more parameter group
        self.policy.optimizer.add_param_group({"params": list(self.multipliers.parameters())})
        self.target_policy: MemoryActorCriticPolicy | None = None
        if self.target_update_period is not None:
            self.target_policy = copy.deepcopy(self.policy)
            self.target_policy.requires_grad_(False)

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts, variables = super()._get_torch_save_params()
        extra = ["multipliers"] + (
            ["target_policy"] if self.target_update_period is not None else []
        )
        return [*state_dicts, *extra], variables

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "multipliers", "target_policy"]

    # ------------------------------------------------------------------ acting

    def _acting_policy(self) -> MemoryActorCriticPolicy:
        return self.target_policy if self.target_policy is not None else self.policy

    def _record_step(self, rollout_buffer: MemoryRolloutBuffer, distribution: Any) -> None:
        # pi_old of every acting step, for the KL of Eq. (5)
        rollout_buffer.add_extra("old_policy", _distribution_params(distribution))

    # ------------------------------------------------------------------ learning

    def _update_settings(self) -> VMPOUpdate:
        # The E-step's top half is chosen over the whole batch D (Sec. 4.2.1), not per minibatch.
        buffer = self.rollout_buffer
        advantages = torch.as_tensor(buffer.advantages, device=self.device).flatten()  # (N*B,)
        head = self.policy.value_net
        if isinstance(head, PopArtValueHead):
            # Pop-Art: new target statistics, the head rescaled so its outputs do not change.
            # Once per rollout, with beta scaled to the learner steps the rollout trains for.
            head.update(
                torch.as_tensor(buffer.returns, device=self.device).reshape(-1, 1),
                steps=self._learner_steps_per_rollout(),
            )
            advantages = advantages / head.sigma
            self.logger.record("train/popart_mu", float(head.mu))
            self.logger.record("train/popart_sigma", float(head.sigma))
        return VMPOUpdate(advantages=advantages)

    def _learner_steps_per_rollout(self) -> int:
        """Gradient steps one rollout trains for: epochs x minibatches of whole segments."""
        segments = self.n_envs * (self.n_steps // self.segment_length)
        per_batch = max(1, self.batch_size // self.segment_length)
        return self.n_epochs * -(-segments // per_batch)

    def _loss(
        self,
        batch: SegmentBatch,
        values: torch.Tensor,
        log_prob: torch.Tensor,
        entropy: torch.Tensor | None,
        distribution: Any,
        update: VMPOUpdate,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        s, _ = batch.episode_starts.shape
        n_envs = self.rollout_buffer.n_envs
        # rows of the full (n_steps, n_envs) batch, in the minibatch's (S, G) order
        steps = batch.start[None, :] + torch.arange(s, device=self.device)[:, None]  # (S, G)
        index = (steps * n_envs + batch.env_index[None, :]).flatten()  # (X,)
        old = batch.extras["old_policy"].reshape(index.numel(), -1)  # (S, G, P) -> (X, P)
        new = _distribution_params(distribution)
        advantages, returns = batch.advantages.flatten(), batch.returns.flatten()  # (X,)
        head = self.policy.value_net
        if isinstance(head, PopArtValueHead):
            # L_V on normalised values and targets; E-step advantages in units of sigma
            values = head.normalize(values[:, None]).flatten()
            returns = head.normalize(returns[:, None]).flatten()
            advantages = advantages / head.sigma
        loss, stats = vmpo_loss(
            VMPOBatch(
                log_prob=log_prob,
                advantages=advantages,
                values=values,
                returns=returns,
                old_policy=_as_params(old, self.action_space),
                new_policy=_as_params(new, self.action_space),
            ),
            self.multipliers,
            self.vmpo_config,
            full_batch=FullBatch(advantages=update.advantages, index=index),
        )
        with torch.no_grad():
            # PPO's diagnostic, against the network that acted (pi_old): zero before a
            # rollout's first gradient step when the rollout's policy acts; with a target
            # network, the online network has moved since the target's last refresh
            log_ratio = log_prob - batch.old_log_prob.flatten()
            stats["train/approx_kl"] = ((log_ratio.exp() - 1) - log_ratio).mean()
        return loss, stats

    def _after_gradient_step(self) -> None:
        self._gradient_steps += 1
        period = self.target_update_period  # None exactly when there is no target policy
        if (
            self.target_policy is not None
            and period is not None
            and self._gradient_steps % period == 0
        ):
            self.target_policy.load_state_dict(self.policy.state_dict())


def _distribution_params(distribution: Any) -> torch.Tensor:
    """Parameters of SB3's categorical or diagonal-Gaussian distribution as one (X, P) tensor."""
    if isinstance(distribution, CategoricalDistribution):
        return distribution.distribution.logits  # (X, A)
    if isinstance(distribution, DiagGaussianDistribution):
        normal = distribution.distribution
        return torch.cat((normal.mean, normal.stddev.log()), dim=-1)  # (X, 2D)
    raise ValueError(
        f"VMPO supports categorical and diagonal Gaussian policies, got {type(distribution).__name__}"
    )


def _as_params(
    params: torch.Tensor, action_space: spaces.Space
) -> CategoricalParams | DiagGaussianParams:
    if isinstance(action_space, spaces.Box):
        mean, log_std = params.chunk(2, dim=-1)
        return DiagGaussianParams(mean=mean, log_std=log_std)
    return CategoricalParams(logits=params)


__all__ = ["VMPO", "VMPOUpdate"]
