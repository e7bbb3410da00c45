"""MemoryPPO: PPO (Schulman et al. 2017) whose policy carries per-env transformer memory.

The rollout, the memory streams and the segment minibatches come from
[`txrl.sb3.algorithm.MemoryOnPolicyAlgorithm`][txrl.sb3.algorithm.MemoryOnPolicyAlgorithm]; this module adds only PPO's loss
([`txrl.learners.ppo.loss.ppo_loss`][txrl.learners.ppo.loss.ppo_loss]), its clip-range and entropy-bonus schedules and its KL
early stop.

The path of a loss setting, ``ent_coef`` for one, from a config to the loss:

1. the YAML's ``ppo: ent_coef: lin_0.01`` is read into
   [`txrl.learners.ppo.settings.MemoryPPOSettings`][txrl.learners.ppo.settings.MemoryPPOSettings] (``ent_coef``, checked against its
   type);
2. [`txrl.run.algorithms.settings_kwargs`][txrl.run.algorithms.settings_kwargs] passes it to ``MemoryPPO(ent_coef=...)``, a
   keyword argument because it is a field of the settings (the constructor is derived from
   them, [`txrl.sb3.algorithm.MemoryOnPolicyAlgorithm.settings_class`][txrl.sb3.algorithm.MemoryOnPolicyAlgorithm.settings_class]), kept as
   ``self.ent_coef`` (a ``lin_<x>`` as SB3's linear schedule);
3. each ``train()`` reads the schedules once, at the current progress, into a
   `PPOUpdate` (`MemoryPPO._update_settings`);
4. each minibatch's `MemoryPPO._loss` passes ``update.ent_coef`` to
   [`txrl.learners.ppo.loss.ppo_loss`][txrl.learners.ppo.loss.ppo_loss].
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from stable_baselines3.common.type_aliases import Schedule
from stable_baselines3.common.utils import FloatSchedule

from txrl.learners.ppo.loss import ppo_loss
from txrl.learners.ppo.settings import MemoryPPOSettings
from txrl.sb3.algorithm import MemoryOnPolicyAlgorithm
from txrl.sb3.buffer import SegmentBatch


def _setting_at_progress(value: float | Schedule, progress: float) -> float:
    """A setting at ``progress`` (SB3's progress remaining): a float, or a schedule of it
    (``lin_<x>`` in a config; ``_setup_model`` makes the clip ranges schedules)."""
    return float(value(progress) if callable(value) else value)


class PPOUpdate(NamedTuple):
    """PPO's loss settings for one ``train()``, the schedules read at its progress."""

    clip_range: float
    """epsilon of the probability ratio's clip."""
    clip_range_vf: float | None
    """Clip of the value prediction around its rollout value; None: no clipping."""
    ent_coef: float
    """Weight of the entropy bonus."""


class MemoryPPO(MemoryOnPolicyAlgorithm[PPOUpdate]):
    """PPO with a memory policy (GTrXL by default), usable like any SB3 algorithm.

    ```python
    import txrl.envs  # registers the txrl/ environments
    from txrl import MemoryPPO

    model = MemoryPPO(
        "MlpGTrXLPolicy", "txrl/TMazePassive-v0",
        n_steps=32, batch_size=32, segment_length=16,
        policy_kwargs=dict(d_model=16, n_heads=2, memory_length=32),
    )
    model.learn(64)  # a smoke-sized run; configs/quickstart.yaml trains 80k steps
    ```

    Parameters are SB3 PPO's, plus ``segment_length`` (steps per training sequence) and
    ``aux_loss_coef`` (see [`MemoryOnPolicyAlgorithm`][txrl.learners.ppo.algorithm.MemoryOnPolicyAlgorithm]): the fields of
    [`txrl.learners.ppo.settings.MemoryPPOSettings`][txrl.learners.ppo.settings.MemoryPPOSettings], each documented there with its
    default, and each kept as the attribute of its name. Adding one is its field there and
    its use here. One difference from
    SB3: with ``clip_range_vf`` set, the value loss is max(unclipped, clipped) squared error
    (OpenAI baselines' form, see [`txrl.learners.ppo.loss.ppo_loss`][txrl.learners.ppo.loss.ppo_loss]). Policies:
    ``Mlp|Cnn|MultiInput`` + ``GTrXL|TrXLI|TrXL|Lstm|Gru|Memory`` + ``Policy``
    ([`txrl.policy_names`][txrl.policy_names]); the ``*MemoryPolicy`` ones take
    ``policy_kwargs=dict(backbone=<name>)`` for any registered backbone.
    """

    settings_class = MemoryPPOSettings

    # PPO's own settings as the attributes this class reads (typed here for the type checker;
    # each is declared, with its default and documentation, in MemoryPPOSettings)
    clip_range: float | Schedule
    clip_range_vf: float | Schedule | None
    normalize_advantage: bool
    target_kl: float | None

    def _setup_model(self) -> None:
        super()._setup_model()
        self.clip_range = FloatSchedule(self.clip_range)
        if self.clip_range_vf is not None:
            if isinstance(self.clip_range_vf, float | int) and self.clip_range_vf <= 0:
                raise ValueError(
                    f"clip_range_vf must be positive or None, got {self.clip_range_vf}"
                )
            self.clip_range_vf = FloatSchedule(self.clip_range_vf)
        if isinstance(self.ent_coef, float | int) and self.ent_coef < 0:
            raise ValueError(f"ent_coef must be >= 0 or a schedule, got {self.ent_coef}")

    def _update_settings(self) -> PPOUpdate:
        progress = self._current_progress_remaining
        clip_range = _setting_at_progress(self.clip_range, progress)
        clip_range_vf = (
            None
            if self.clip_range_vf is None
            else _setting_at_progress(self.clip_range_vf, progress)
        )
        ent_coef = _setting_at_progress(self.ent_coef, progress)
        self.logger.record("train/clip_range", clip_range)
        if clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", clip_range_vf)
        if callable(self.ent_coef):
            self.logger.record("train/ent_coef", ent_coef)
        return PPOUpdate(clip_range=clip_range, clip_range_vf=clip_range_vf, ent_coef=ent_coef)

    def _loss(
        self,
        batch: SegmentBatch,
        values: torch.Tensor,
        log_prob: torch.Tensor,
        entropy: torch.Tensor | None,
        distribution: Any,
        update: PPOUpdate,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        advantages = batch.advantages.flatten()  # (S, G) -> (X,)
        if self.normalize_advantage and advantages.numel() > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        return ppo_loss(
            log_prob=log_prob,
            old_log_prob=batch.old_log_prob.flatten(),
            advantages=advantages,
            values=values,
            old_values=batch.old_values.flatten(),
            returns=batch.returns.flatten(),
            entropy=entropy,
            clip_range=update.clip_range,
            clip_range_vf=update.clip_range_vf,
            ent_coef=update.ent_coef,
            vf_coef=self.vf_coef,
        )

    def _stop_epoch(self, stats: dict[str, torch.Tensor]) -> bool:
        if self.target_kl is not None and float(stats["train/approx_kl"]) > 1.5 * self.target_kl:
            if self.verbose >= 1:
                print(
                    f"Early stopping at step {self._n_updates} due to reaching max kl: {float(stats['train/approx_kl']):.2f}"
                )
            return True
        return False


__all__ = ["MemoryPPO", "PPOUpdate"]
