"""RecurrentPPO's settings: sb3-contrib's PPO with an LSTM policy, as a txrl learner.

``algo: recurrent_ppo`` trains [`txrl.learners.recurrent_ppo.algorithm.RecurrentPPO`][txrl.learners.recurrent_ppo.algorithm.RecurrentPPO]
(sb3-contrib's algorithm, unchanged) with its own ``*LstmPolicy``. These fields are its
constructor's arguments with its own defaults (the tests check them against sb3-contrib's
signature); the YAML section ``recurrent_ppo:`` sets them. The policy comes from the
``policy:`` section: ``backbone: lstm``, with ``hidden_size`` (or ``d_model``) as
``lstm_hidden_size``, ``n_layers`` as ``n_lstm_layers``, ``net_arch``, and ``critic_memory``
(``shared``: ``shared_lstm=True``; ``separate``: a critic LSTM of its own); left ``null``,
sb3-contrib's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from txrl.learners.ppo.settings import PPOLossSettings
from txrl.learners.settings import SB3LearnerSettings
from txrl.schema import Interval, NonNegativeFloat, PositiveInt, PositiveRate


@dataclass(frozen=True)
class RecurrentPPOSettings(PPOLossSettings, SB3LearnerSettings):
    """Settings of sb3-contrib's RecurrentPPO (the ``recurrent_ppo:`` section of a config).

    PPO's objective as [`PPOLossSettings`][txrl.learners.ppo.settings.PPOLossSettings] (sb3-contrib's
    defaults are SB3's), ``stats_window_size``
    ([`SB3LearnerSettings`][txrl.learners.settings.SB3LearnerSettings]), and:
    """

    learning_rate: PositiveRate = 3e-4
    """Adam step size; ``lin_<number>``: from that number linearly to 0 over the budget."""
    ent_coef: NonNegativeFloat = 0.0
    """Entropy bonus coefficient (0, as SB3's PPO); a number: sb3-contrib takes no schedule."""
    n_steps: PositiveInt = 128
    """Steps per env per rollout, and the longest backpropagation through time: sb3-contrib
    trains on sequences cut at episode starts and at the rollout's and each minibatch's
    edges, each from the LSTM state stored at its first step, so a gradient reaches back at
    most ``min(n_steps, batch_size)`` steps (POPGym's protocol uses 1024)."""
    batch_size: Annotated[int, Interval(2)] = 128
    """Transitions per minibatch (whole sequences are cut at episode starts)."""
    n_epochs: PositiveInt = 10
    """Passes over each rollout."""
    use_sde: bool = False
    """Generalised state-dependent exploration (Box actions only)."""
    sde_sample_freq: Annotated[int, Interval(-1)] = -1
    """Steps between noise resamples with ``use_sde``; -1: once per rollout."""


def lstm_policy(policy: Any, encoder_prefix: str) -> tuple[str, dict[str, Any]]:
    """sb3-contrib's ``<Mlp|Cnn|MultiInput>LstmPolicy`` and the kwargs the config gives."""
    kwargs: dict[str, Any] = {}
    size = policy.hidden_size if policy.hidden_size is not None else policy.d_model
    if size is not None:
        kwargs["lstm_hidden_size"] = size
    if policy.n_layers is not None:
        kwargs["n_lstm_layers"] = policy.n_layers
    if policy.net_arch is not None:
        kwargs["net_arch"] = policy.policy_kwargs()["net_arch"]
    if policy.encoder_kwargs:
        kwargs["features_extractor_kwargs"] = dict(policy.encoder_kwargs)
    if policy.critic_memory is not None:
        shared = policy.critic_memory == "shared"
        kwargs.update(shared_lstm=shared, enable_critic_lstm=not shared)
    return encoder_prefix + "LstmPolicy", kwargs


__all__ = ["RecurrentPPOSettings", "lstm_policy"]
