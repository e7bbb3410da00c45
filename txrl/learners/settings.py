"""The settings several learners share, as base dataclasses of their settings.

Each learner's own settings (``txrl/learners/<name>/settings.py``) inherit these, so a field
shared by several learners is declared, typed and documented once. Torch-free, as every
settings module: a config is read and checked without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from txrl.schema import CheckFinite, NonNegativeFloat, PositiveInt


@dataclass(frozen=True)
class SB3LearnerSettings:
    """The settings every learner on Stable-Baselines3's ``OnPolicyAlgorithm`` has."""

    stats_window_size: PositiveInt = 100
    """Episodes averaged in the ``rollout/`` statistics."""


@dataclass(frozen=True)
class MemoryLearnerSettings(SB3LearnerSettings):
    """The settings both of txrl's memory learners (MemoryPPO, VMPO) have beyond their loss's:
    those of [`txrl.sb3.algorithm.MemoryOnPolicyAlgorithm`][txrl.sb3.algorithm.MemoryOnPolicyAlgorithm]."""

    aux_loss_coef: dict[str, NonNegativeFloat] | None = None
    """Coefficient per auxiliary loss: those a backbone reports (``span_l1`` of adaptive_span,
    ``ponder_cost`` of universal, ``attention_reconstruction`` of compressive) and the policy's
    own (``past_prediction`` of ``policy.predict_past``, ``observation_reconstruction`` of
    ``policy.reconstruct_observation``); a loss not listed, or ``null``, gets coefficient 1."""
    check_finite: CheckFinite = "raise"
    """On a NaN/inf observation or reward: ``raise`` (names env and step), ``warn``, or ``off``.
    A non-finite loss always stops training before the optimizer step."""
    cuda_graph: bool = True
    """On a CUDA GPU with a discrete action space, act in rollouts by replaying a CUDA graph
    of the acting step (captured at each rollout's start) instead of launching its kernels
    one by one: the same computation, without the launch cost of a few hundred small kernels
    per step (``bench/results/gpu_throughput.txt`` times both). No effect on a CPU;
    ``false``: eager steps."""


__all__ = ["CheckFinite", "MemoryLearnerSettings", "SB3LearnerSettings"]
