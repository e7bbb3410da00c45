"""MemoryPPO: PPO (Schulman et al. 2017) whose policy carries per-env transformer memory.

The rollout, the memory streams and the segment minibatches come from
:class:`txrl.sb3.algorithm.MemoryOnPolicyAlgorithm`; this module adds only PPO's loss
(:func:`txrl.learners.ppo.loss.ppo_loss`), its clip-range and entropy-bonus schedules and its KL
early stop.

The path of a loss setting, ``ent_coef`` for one, from a config to the loss:

1. the YAML's ``ppo: ent_coef: lin_0.01`` is read into
   :class:`txrl.learners.ppo.settings.MemoryPPOSettings` (``ent_coef``, checked against its
   type);
2. :func:`txrl.run.algorithms.settings_kwargs` passes it to ``MemoryPPO(ent_coef=...)`` (a
   ``lin_<x>`` becoming SB3's linear schedule), kept as SB3's ``self.ent_coef``;
3. each ``train()`` reads the schedules once, at the current progress, into a
   :class:`PPOUpdate` (:meth:`MemoryPPO._update_settings`);
4. each minibatch's :meth:`MemoryPPO._loss` passes ``update.ent_coef`` to
   :func:`txrl.learners.ppo.loss.ppo_loss`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from stable_baselines3.common.type_aliases import GymEnv, Schedule
from stable_baselines3.common.utils import FloatSchedule

from txrl.learners.ppo.loss import ppo_loss
from txrl.learners.ppo.settings import MemoryPPOSettings
from txrl.sb3.algorithm import MemoryOnPolicyAlgorithm
from txrl.sb3.buffer import SegmentBatch
from txrl.sb3.policies import MemoryActorCriticPolicy
from txrl.sb3.schedule import setting_argument
from txrl.schema import CheckFinite

_DEFAULTS = MemoryPPOSettings()  # the constructor's defaults, declared (and documented) there
# the defaults of settings that may be ``lin_<x>`` schedules, as the constructor takes them
_LEARNING_RATE = setting_argument(_DEFAULTS.learning_rate)
_CLIP_RANGE = setting_argument(_DEFAULTS.clip_range)
_ENT_COEF = setting_argument(_DEFAULTS.ent_coef)


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

    >>> model = MemoryPPO("MlpGTrXLPolicy", "txrl/TMazePassive-v0", policy_kwargs=dict(memory_length=32))
    >>> model.learn(10_000)

    Parameters are SB3 PPO's, plus ``segment_length`` (steps per training sequence) and
    ``aux_loss_coef`` (see :class:`MemoryOnPolicyAlgorithm`); each is documented, with its
    default, in :class:`txrl.learners.ppo.settings.MemoryPPOSettings`. One difference from
    SB3: with ``clip_range_vf`` set, the value loss is max(unclipped, clipped) squared error
    (OpenAI baselines' form, see :func:`txrl.learners.ppo.loss.ppo_loss`). Policies:
    ``Mlp|Cnn|MultiInput`` + ``GTrXL|TrXLI|TrXL|Lstm|Gru|Memory`` + ``Policy``
    (:mod:`txrl.policy_names`); the ``*MemoryPolicy`` ones take
    ``policy_kwargs=dict(backbone=<name>)`` for any registered backbone.
    """

    def __init__(
        self,
        policy: str | type[MemoryActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = _LEARNING_RATE,
        n_steps: int = _DEFAULTS.n_steps,
        batch_size: int = _DEFAULTS.batch_size,
        n_epochs: int = _DEFAULTS.n_epochs,
        segment_length: int = _DEFAULTS.segment_length,
        gamma: float = _DEFAULTS.gamma,
        gae_lambda: float = _DEFAULTS.gae_lambda,
        clip_range: float | Schedule = _CLIP_RANGE,
        clip_range_vf: float | Schedule | None = _DEFAULTS.clip_range_vf,
        normalize_advantage: bool = _DEFAULTS.normalize_advantage,
        ent_coef: float | Schedule = _ENT_COEF,
        vf_coef: float = _DEFAULTS.vf_coef,
        max_grad_norm: float = _DEFAULTS.max_grad_norm,
        target_kl: float | None = _DEFAULTS.target_kl,
        aux_loss_coef: dict[str, float] | None = _DEFAULTS.aux_loss_coef,
        check_finite: CheckFinite = _DEFAULTS.check_finite,
        cuda_graph: bool = _DEFAULTS.cuda_graph,
        stats_window_size: int = _DEFAULTS.stats_window_size,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: torch.device | str = "auto",
        _init_setup_model: bool = True,
    ) -> None:
        self.clip_range = clip_range
        self.clip_range_vf = clip_range_vf
        self.normalize_advantage = normalize_advantage
        self.target_kl = target_kl
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            batch_size=batch_size,
            n_epochs=n_epochs,
            segment_length=segment_length,
            gamma=gamma,
            gae_lambda=gae_lambda,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            aux_loss_coef=aux_loss_coef,
            check_finite=check_finite,
            cuda_graph=cuda_graph,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=_init_setup_model,
        )

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
