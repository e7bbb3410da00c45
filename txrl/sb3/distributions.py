"""The action distribution of a discrete acting step, drawn without building SB3's
distribution: what [`txrl.sb3.policies.MemoryActorCriticPolicy`][txrl.sb3.policies.MemoryActorCriticPolicy] and the CUDA graph of
a rollout step (`txrl.sb3.graphs`) draw their actions from."""

from __future__ import annotations

import torch
from stable_baselines3.common.distributions import CategoricalDistribution
from torch.distributions import Categorical
from torch.distributions import Distribution as TorchDistribution


def draw_discrete(logits: torch.Tensor, deterministic: bool) -> torch.Tensor:
    """Actions (X,) from logits (X, n): the argmax, or the draw of ``Categorical.sample``
    (``multinomial`` over the softmax), without building a distribution."""
    if deterministic:
        return logits.argmax(dim=-1)
    return torch.multinomial(logits.softmax(dim=-1), 1, True)[:, 0]


class ActingCategorical(CategoricalDistribution):
    """SB3's categorical distribution of an acting step, over log-probabilities the step
    has already normalised; its torch ``Categorical`` is built on first use.

    A rollout step only needs an action and its log-probability, which
    [`txrl.sb3.policies.MemoryActorCriticPolicy.act`][txrl.sb3.policies.MemoryActorCriticPolicy.act] reads from the log-softmax directly; building and
    validating a ``Categorical`` for every step costs more than the rest of the action head.
    Anything that asks for ``distribution`` (V-MPO's record of pi_old, a user's entropy) gets
    the same ``Categorical(logits=log_probs)``, built then.
    """

    def __init__(self, log_probs: torch.Tensor) -> None:
        self._log_probs = log_probs  # (X, n), normalised
        self._categorical: Categorical | None = None
        super().__init__(log_probs.shape[-1])

    @property
    def distribution(self) -> Categorical:
        if self._categorical is None:
            self._categorical = Categorical(logits=self._log_probs)
        return self._categorical

    @distribution.setter
    def distribution(self, value: TorchDistribution | list[TorchDistribution] | None) -> None:
        # the base class's attribute type; proba_distribution sets a new Categorical
        if value is not None and not isinstance(value, Categorical):
            raise TypeError(f"ActingCategorical holds a Categorical, got {type(value).__name__}")
        if value is not None:
            self._log_probs = value.logits
        self._categorical = value


def draw_discrete_action(
    log_probs: torch.Tensor, deterministic: bool = False
) -> tuple[torch.Tensor, torch.Tensor, ActingCategorical]:
    """A discrete acting step's actions (B,), their log-probabilities (B,) and distribution,
    from normalised log-probabilities (B, n): the draw of ``Categorical.sample`` and its
    log-probability read from one log-softmax, without building the distribution."""
    actions = draw_discrete(log_probs, deterministic)
    log_prob = log_probs.gather(-1, actions[:, None])[:, 0]
    return actions, log_prob, ActingCategorical(log_probs)
