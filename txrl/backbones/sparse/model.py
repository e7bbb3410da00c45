"""Sparse Transformer factorised attention patterns over a Transformer-XL segment memory.

Child, Gray, Radford and Sutskever 2019, "Generating Long Sequences with Sparse
Transformers" (arXiv 1904.10509): factorized self-attention (section 4.2), the strided and
fixed patterns (section 4.3) and the ways of combining them (section 5.1, "Factorized
attention heads").

Legend: B envs, T steps, M memory slots, K = M + T keys, H heads, D width; l the stride,
c the number of summary positions.

Each query i attends to a subset S_i of its window (the last M steps of its episode and
itself), the union or one of two factorised patterns:

* ``sparse_strided``, with d = i - j the distance::

      A^(1)_i = {j : d <= l}                (the previous l positions and itself)
      A^(2)_i = {j : d mod l = 0}           (every l-th position back)

* ``sparse_fixed``, with tau the index of a step within its episode (blocks start at the
  episode's first step; the state carries the episode time of the next step)::

      A^(1)_i = {j : floor(tau_j / l) = floor(tau_i / l)}   (the same block)
      A^(2)_i = {j : tau_j mod l in {l - c, ..., l - 1}}      (the blocks' last c "summary" steps)

Both depend only on distances and episode times, which step-by-step and sequence modes
compute alike, so the two modes agree. A query always attends to itself (in A^(1) of both
patterns; added to A^(2) of ``fixed``), so every head has at least one key.

``combine`` chooses how the patterns are used (the three options of section 5.1):
``"heads"`` (default, the multi-head option): head h uses A^(1 + h mod 2) (with one head,
the union); ``"union"``: every head attends to A^(1) u A^(2); ``"layers"``: layer n uses
A^(1 + n mod 2) for all heads (interleaved blocks). The scores are Transformer-XL's relative
attention (Dai et al. 2019, arXiv 1901.02860, section 3.3) in the identity-map-reordered
(TrXL-I, Parisotto et al. 2019, arXiv 1910.06764, section 3.1) block; the mask is applied as -inf, so the cost is still that of dense attention
over the window (the point here is the connectivity, not block-sparse kernels).
"""

from __future__ import annotations

from typing import Any

import torch

from txrl.backbones.sparse import SparseConfig
from txrl.nn.pluggable_attention import (
    MaskedRelativeAttention,
    SegmentMemoryTransformer,
    key_distances,
)


def strided_patterns(distance: torch.Tensor, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A^(1) and A^(2) of the strided pattern from distances (...) -> 2 x (...) bool."""
    # A^(1)_i = {t, .., i}, t = max(0, i - l)
    local = distance <= stride
    # A^(2)_i = {j : (i - j) mod l = 0}
    strided = torch.remainder(distance, stride) == 0
    return local, strided


def fixed_patterns(
    query_time: torch.Tensor, distance: torch.Tensor, stride: int, summary: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """A^(1) and A^(2) of the fixed pattern -> 2 x (B, T, K) bool.

    ``query_time`` (B, T) episode times tau_i, ``distance`` (T, K); tau_j = tau_i - d.
    A^(2) also holds the query itself.
    """
    key_time = query_time[:, :, None] - distance[None]  # (B, T, K)
    # A^(1)_i = {j : floor(tau_j / l) = floor(tau_i / l)}
    block = (
        torch.div(key_time, stride, rounding_mode="floor")
        == torch.div(query_time, stride, rounding_mode="floor")[:, :, None]
    )
    # A^(2)_i = {j : tau_j mod l in {l - c, ..., l - 1}}, plus i itself
    summaries = (torch.remainder(key_time, stride) >= stride - summary) | (distance == 0)[None]
    return block, summaries


class SparseAttention(MaskedRelativeAttention):
    """Relative multi-head attention restricted to a per-head connectivity mask."""

    def forward(
        self,
        z: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        connected: torch.Tensor,
        stats: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Queries z (B, T, D), keys/values (B, K, D), ``connected`` (B, H or 1, T, K) bool."""
        out = self.attend(z, keys, values, connected, stats)
        if stats is not None:
            stats["keys_attended"] = connected.float().sum(-1).mean()
        return out


class SparseTransformer(SegmentMemoryTransformer):
    """TrXL-I blocks with factorised sparse attention over the segment memory."""

    def __init__(self, config: SparseConfig, pattern: str) -> None:
        super().__init__(
            config,
            [
                SparseAttention(config.d_model, config.n_heads, config.dropout)
                for _ in range(config.n_layers)
            ],
        )
        self.pattern = pattern
        self.stride = config.stride_length
        self.summary = config.summary
        self.combine = config.combine

    def patterns(
        self, allowed: torch.Tensor, query_time: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A^(1) and A^(2) within the window: ``allowed`` (B, T, K) -> 2 x (B, T, K) bool."""
        t, k = allowed.shape[1:]
        distance = key_distances(t, k, allowed.device)  # (T, K)
        if self.pattern == "strided":
            first, second = strided_patterns(distance, self.stride)
        else:
            first, second = fixed_patterns(query_time, distance, self.stride, self.summary)
        return allowed & first, allowed & second

    def attention_plans(self, allowed: torch.Tensor, query_time: torch.Tensor) -> list[Any]:
        """The connectivity of each layer: (B, H, T, K) for ``heads``, else (B, 1, T, K)."""
        first, second = self.patterns(allowed, query_time)
        n_layers, n_heads = len(self.blocks), self.config.n_heads
        if self.combine == "union" or (self.combine == "heads" and n_heads == 1):
            return [(first | second)[:, None]] * n_layers
        if self.combine == "layers":
            pair = (first[:, None], second[:, None])
            return [pair[layer % 2] for layer in range(n_layers)]
        per_head = torch.stack((first, second), dim=1)  # (B, 2, T, K)
        which = torch.arange(n_heads, device=allowed.device) % 2  # pattern of head h
        return [per_head[:, which]] * n_layers  # (B, H, T, K)


# the implementations that the records of txrl.backbones.sparse name


def build_sparse_strided(config: SparseConfig) -> SparseTransformer:
    return SparseTransformer(config, "strided")


def build_sparse_fixed(config: SparseConfig) -> SparseTransformer:
    return SparseTransformer(config, "fixed")
