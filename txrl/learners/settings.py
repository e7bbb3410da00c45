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

    def problems(self, prefix: str = "") -> list[str]:
        """What is wrong across this learner's fields (each field itself being valid), one line
        per problem. The config reports them with the section's name as ``prefix``
        (``"ppo."``); the learner's constructor raises them with none."""
        return []


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

    def problems(self, prefix: str = "") -> list[str]:
        """A memory learner trains on whole segments of ``segment_length`` steps: ``n_steps``
        and ``batch_size`` must be multiples of it."""
        problems = super().problems(prefix)
        n_steps, batch_size, segment = (
            getattr(self, name) for name in ("n_steps", "batch_size", "segment_length")
        )
        if n_steps % segment:
            valid = [length for length in range(1, n_steps + 1) if n_steps % length == 0]
            problems.append(
                f"{prefix}n_steps ({n_steps}) must be a multiple of {prefix}segment_length "
                f"({segment}): training uses whole segments; valid segment lengths for "
                f"n_steps={n_steps}: {valid}"
            )
        if batch_size % segment:
            problems.append(
                f"{prefix}batch_size ({batch_size}) must be a multiple of {prefix}segment_length "
                f"({segment}): a minibatch is a set of whole segments"
            )
        return problems


__all__ = ["CheckFinite", "MemoryLearnerSettings", "SB3LearnerSettings"]
