"""Past prediction: an auxiliary loss that makes the memory keep what it saw.

From the backbone's output at step t, one linear head per offset k (the policy's
``predict_past``, steps back) predicts the features extractor's output at step t - k, over
the pairs of a training sequence that lie in one episode. The targets carry no gradient and
are standardised per feature over the batch, the error is squared. In the spirit of the
observation-reconstruction loss (`txrl.sb3.reconstruction`) that Pleines et al. (2023,
Memory Gym) found Transformer-XL agents to need; here the targets are past steps, so the
loss rewards retrieving them, not only encoding the present (k = 0 reconstructs the current
step's features).

Legend: T steps, B envs, D memory width, F features, K offsets.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

#: Name of the loss in ``aux_losses``, ``aux_loss_coef`` and the log (``train/aux/<name>``).
PAST_PREDICTION_LOSS = "past_prediction"


def past_offsets(offsets: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    """``predict_past`` as a sorted tuple of distinct ints >= 0 (a clear error otherwise)."""
    values = tuple(offsets)
    if any(isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0 for k in values):
        raise ValueError(f"predict_past must be a list of ints >= 0 (steps back), got {offsets!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"predict_past lists an offset twice: {offsets!r}")
    return tuple(sorted(int(k) for k in values))


def past_heads(memory_dim: int, offsets: tuple[int, ...], features_dim: int) -> nn.Linear:
    """The heads of every offset as one product: (..., D) -> (..., K * F)."""
    return nn.Linear(memory_dim, len(offsets) * features_dim)


def past_prediction_loss(
    heads: Callable[[torch.Tensor], torch.Tensor],
    offsets: tuple[int, ...],
    output: torch.Tensor,
    features: torch.Tensor,
    episode_starts: torch.Tensor,
) -> torch.Tensor:
    """Mean over offsets k and same-episode pairs (t - k, t) of the squared error between
    head_k(output_t) and the features at t - k, standardised per feature over the batch
    (so 1 is what predicting the batch mean scores, 0 a perfect prediction, and what
    varies from step to step, such as which object is in view, is what counts).
    ``heads`` maps (T, B, D) to (T, B, K * F), ``output`` (T, B, D), ``features`` (T, B, F),
    ``episode_starts`` (T, B); the targets carry no gradient."""
    t, b, f = features.shape
    predictions = heads(output).float().view(t, b, len(offsets), f)
    flat = features.detach().float().reshape(t * b, f)
    mean, std = flat.mean(0), flat.std(0, unbiased=False)
    targets = (features.detach().float() - mean) / (std + 1e-6)  # (T, B, F)
    episode = torch.cumsum(episode_starts.long(), dim=0)  # (T, B): episode index per env
    total = predictions.new_zeros(())
    pairs = predictions.new_zeros(())
    for i, k in enumerate(offsets):
        if k >= t:
            continue
        same = episode[k:] == episode[: t - k]  # (T - k, B): t - k and t in one episode
        error = (predictions[k:, :, i] - targets[: t - k]).pow(2).mean(-1)  # (T - k, B)
        total = total + (error * same).sum()
        pairs = pairs + same.sum()
    # no pair (every offset at least T, or episodes shorter than every offset): 0, with a graph
    return total / pairs.clamp(min=1.0) + 0.0 * predictions.sum()
