"""Relation-aware self-attention over a Transformer-XL segment memory.

Shaw, Uszkoreit and Vaswani 2018, "Self-Attention with Relative Position Representations"
(arXiv 1803.02155), section 3 ("Proposed Architecture"): relation-aware self-attention, with
the relative position representations clipped at a maximum distance.

Legend: B envs, T steps, M memory slots, K = M + T keys, H heads, E head width, D width,
C = clip + 1 relative embeddings.

Positions enter only as learned embeddings of the clipped distance between query i and key
j, added to the keys and to the values::

    a^K_ij = w^K_{clip(i - j, k)},  a^V_ij = w^V_{clip(i - j, k)},  clip(x, k) = min(x, k)

(the paper's ``clip(j - i, k) = max(-k, min(k, j - i))``; keys are never in the future here,
so only the k + 1 distances 0..k exist). ``k`` is the ``clip`` setting: every distance of k
or more shares one embedding. The tables are per layer and shared across heads (section
"Efficient Implementation"). The score of eq. (2) is computed in the split form of eq. (5):
``q_i k_j^T`` for all pairs plus ``q_i w^K_c`` for the C distances only, gathered per pair,
and the value term of eq. (4) sums the attention weights per distance bucket before
multiplying by w^V, so no (T, K, E) tensor of per-pair embeddings is built.

The memory is Transformer-XL's (eq. 6): each layer attends over its cached stop-gradient
inputs of the last M steps and the current ones
([`SegmentMemoryTransformer`][txrl.nn.pluggable_attention.SegmentMemoryTransformer]), in the identity-map-reordered
(TrXL-I) block.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from txrl.backbones.shaw import ShawConfig
from txrl.nn.attention import attention_entropy, merge_heads, split_heads
from txrl.nn.pluggable_attention import ProjectedAttention, SegmentMemoryTransformer, key_distances


class RelationAwareAttention(ProjectedAttention):
    """Multi-head attention with Shaw relative key and value embeddings, eqs. (2)-(5)."""

    def __init__(self, d_model: int, n_heads: int, clip: int, dropout: float = 0.0) -> None:
        super().__init__(d_model, n_heads, dropout)  # W^Q, [W^K; W^V], W^O
        self.clip = clip
        # w^K_0..w^K_k and w^V_0..w^V_k, shared across heads
        e = self.head_dim
        self.relative_key = nn.Parameter(torch.randn(clip + 1, e) / e**0.5)
        self.relative_value = nn.Parameter(torch.randn(clip + 1, e) / e**0.5)

    def forward(
        self,
        z: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        allowed: torch.Tensor,
        stats: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Queries z (B, T, D), keys/values (B, K, D) (the last T are the queries' own),
        ``allowed`` (B, T, K) bool -> (B, T, D)."""
        b, t, _ = z.shape
        k = keys.shape[1]
        hd = self.n_heads
        q = split_heads(self.query(z), hd)  # (B, H, T, E)
        key, value = split_heads(keys, hd), split_heads(values, hd)  # (B, H, K, E)
        # clip(i - j, k); future keys (always masked) get index 0
        index = key_distances(t, k, z.device).clamp(0, self.clip)  # (T, K)
        index = index[None, None].expand(b, hd, t, k)  # (B, H, T, K)
        # x_i W^Q (x_j W^K)^T, the first term of eq. (5)
        content = q @ key.transpose(-1, -2)  # (B, H, T, K)
        # x_i W^Q (a^K_ij)^T, the second term of eq. (5), via the C distinct a^K
        relative = (q @ self.relative_key.T).gather(-1, index)  # (B, H, T, C) -> (B, H, T, K)
        # e_ij, eq. (2)
        scores = (content + relative) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~allowed[:, None], float("-inf"))
        # alpha_ij, eq. (3)
        alpha = scores.softmax(dim=-1)  # (B, H, T, K)
        if stats is not None:
            stats["attention_entropy"] = attention_entropy(alpha)
        alpha = F.dropout(alpha, self.dropout, self.training)
        # sum_j alpha_ij a^V_ij = sum_c (sum_{j: clip(i-j) = c} alpha_ij) w^V_c
        bucket = torch.zeros(b, hd, t, self.clip + 1, dtype=alpha.dtype, device=alpha.device)
        bucket = bucket.scatter_add(-1, index, alpha)  # (B, H, T, C)
        # z_i = sum_j alpha_ij (x_j W^V + a^V_ij), eq. (4)
        attended = alpha @ value + bucket @ self.relative_value  # (B, H, T, E)
        return self.out(merge_heads(attended))  # (B, T, D)


class ShawTransformer(SegmentMemoryTransformer):
    """TrXL-I blocks with relation-aware attention over the segment memory."""

    def __init__(self, config: ShawConfig) -> None:
        super().__init__(
            config,
            [
                RelationAwareAttention(config.d_model, config.n_heads, config.clip, config.dropout)
                for _ in range(config.n_layers)
            ],
        )


def build_shaw(config: ShawConfig) -> ShawTransformer:
    return ShawTransformer(config)
