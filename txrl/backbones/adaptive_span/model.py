"""Adaptive attention span over a Transformer-XL segment memory.

Sukhbaatar, Grave, Bojanowski and Joulin 2019, "Adaptive Attention Span in Transformers"
(arXiv 1905.07799): the soft masking function m_z and its L1 penalty on the spans (section 2,
"Adaptive Attention Span").

Legend: B envs, T steps, M memory slots, K = M + T keys, H heads, D width.

Each head of each layer learns a span z in [0, S] (S = ``memory_length``) and weighs the key
at distance x = i - j by the soft mask::

    m_z(x) = clamp((R + z - x) / R, 0, 1)

(R = ``span_ramp``, the softness), applied to the softmax and re-normalised::

    a_ij = m_z(i - j) exp(s_ij) / sum_r m_z(i - r) exp(s_ir)

computed as ``softmax(s_ij + log m_z(i - j))`` (log 0 = -inf: a key at distance >= z + R gets
exactly zero weight; the query itself has m_z(0) = 1, so the first step of an episode is
finite). z = S * sigmoid(theta) keeps the span in [0, S] with a gradient everywhere. The
L1 penalty on the spans is returned as ``aux_losses["span_l1"]``: the mean of z over heads
and layers, in steps (the learner multiplies it by its coefficient).

Memory slots beyond every head's z + R are dropped before the attention (their weight is
zero anyway), so short spans save computation as in the paper. The scores are Transformer-XL's
relative attention (Dai et al. 2019, arXiv 1901.02860, section 3.3; the paper builds on
Transformer-XL with relative positions), in the identity-map-reordered (TrXL-I) block over the
segment memory of Transformer-XL's recurrence (section 3.2).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from txrl.backbones.adaptive_span import AdaptiveSpanConfig
from txrl.nn.blocks import attention_blocks
from txrl.nn.pluggable_attention import (
    MaskedRelativeAttention,
    SegmentMemoryTransformer,
    key_distances,
)


class AdaptiveSpanAttention(MaskedRelativeAttention):
    """Relative multi-head attention with one learned soft span per head."""

    def __init__(self, config: AdaptiveSpanConfig) -> None:
        super().__init__(config.d_model, config.n_heads, config.dropout)
        self.max_span = float(config.memory_length)  # S
        self.ramp = float(config.span_ramp)  # R
        init = math.log(config.span_init / (1.0 - config.span_init))
        self.span_logit = nn.Parameter(torch.full((config.n_heads,), init))  # theta

    def spans(self) -> torch.Tensor:
        """z = S * sigmoid(theta) in [0, S], per head -> (H,)."""
        return self.max_span * torch.sigmoid(self.span_logit)

    def soft_mask(self, distance: torch.Tensor) -> torch.Tensor:
        """m_z(x) = clamp((R + z - x) / R, 0, 1) per head: ``distance`` (...) -> (H, ...)."""
        z = self.spans().view(-1, *([1] * distance.dim()))  # (H, 1, ..)
        return ((self.ramp + z - distance) / self.ramp).clamp(0.0, 1.0)

    def forward(
        self,
        z: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        allowed: torch.Tensor,
        stats: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Queries z (B, T, D), keys/values (B, K, D), ``allowed`` (B, T, K) -> (B, T, D)."""
        t, k = z.shape[1], keys.shape[1]
        m = k - t
        # memory slot j (distance >= M - j from every query) is out of every head's reach
        # when M - j >= z_max + R: keep only the last `keep` slots
        reach = math.ceil(self.spans().max().item() + self.ramp)
        keep = min(m, reach)
        keys, values = keys[:, m - keep :], values[:, m - keep :]  # (B, K', D), K' = keep + T
        allowed = allowed[..., m - keep :]  # (B, T, K')
        distance = key_distances(t, keep + t, z.device).clamp(min=0)  # (T, K')
        # m_z(i - j), per head -> (H, T, K')
        mask = self.soft_mask(distance.to(z.dtype))
        usable = allowed[:, None] & (mask > 0)[None]  # (B, H, T, K')
        # log m_z: a_ij = softmax_j(s_ij + log m_z(i - j)) is the re-normalised masked softmax
        bias = torch.where(usable, mask.clamp_min(1e-30).log()[None], float("-inf"))
        out = self.attend(z, keys, values, bias, stats)
        if stats is not None:
            stats["keys_kept"] = torch.tensor(float(keep), device=z.device)
            stats["span_mean"] = self.spans().mean().detach()
        return out


class AdaptiveSpanTransformer(SegmentMemoryTransformer):
    """TrXL-I blocks with adaptive-span relative attention over the segment memory."""

    graph_capturable = False  # each step crops the memory to the learned span (a host read)

    def __init__(self, config: AdaptiveSpanConfig) -> None:
        super().__init__(config, [AdaptiveSpanAttention(config) for _ in range(config.n_layers)])

    def spans(self) -> torch.Tensor:
        """Every head's span z -> (L, H)."""
        return torch.stack([block.attention.spans() for block in attention_blocks(self.blocks)])

    def aux_losses(self) -> dict[str, torch.Tensor]:
        # L1 penalty on the spans: mean of z over layers and heads, in steps
        return {"span_l1": self.spans().mean()}

    def extra_stats(self) -> dict[str, torch.Tensor]:
        spans = self.spans().detach()
        return {"span_mean": spans.mean(), "span_max": spans.max()}


def build_adaptive_span(config: AdaptiveSpanConfig) -> AdaptiveSpanTransformer:
    return AdaptiveSpanTransformer(config)
