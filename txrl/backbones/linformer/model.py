"""Linformer low-rank attention over each step's window of a Transformer-XL segment memory.

Wang, Li, Khabsa, Fang and Ma 2020, "Linformer: Self-Attention with Linear Complexity"
(arXiv 2006.04768), section 4 ("Model"): keys and values projected along the sequence by E and F,
and the sharing of those projections.

Legend: B envs, T steps, M memory slots, W = M + 1 window positions, K = M + T keys,
H heads, E head width, D width, k = ``proj_dim`` projected positions.

The attention matrix after the softmax is low-rank, so the n x d keys and values are
projected along the sequence to k x d before attending. Learned E, F (k x W) map the W keys
and values of a window to k rows::

    head = softmax(Q (E K)^T / sqrt(head width)) (F V)

Projecting along the sequence mixes positions, which would let a query read the future, so
each query step i gets its own window: the W = M + 1 positions ending at i (its memory of
the last M steps and itself). Window positions outside the query's episode (or empty) are
zeroed before the projection, so they contribute nothing. A query reads exactly k projected
keys and values: O(k W D) for its projection and O(k D) for the attention. In sequence mode
the T projections are one banded product over the K keys (`banded`, O(T k K D), no
copy of the T windows). Unlike full-length Linformer, this per-query form costs more than a
dense attention over the window (the projection alone is k times its O(W D)): it is the
low-rank model, not a speed-up, at RL window sizes.

E and F are shared by the heads of a layer ("headwise sharing"); as they weigh each window
slot separately, they also carry the (relative) position, so no other positional encoding
is used. The memory is Transformer-XL's (Dai et al. 2019, arXiv 1901.02860, section 3.2):
cached stop-gradient layer inputs of the last M steps, in the identity-map-reordered
(TrXL-I) block.

Inspection: inside an [`txrl.nn.attention.AttentionRecorder`][txrl.nn.attention.AttentionRecorder] each layer hands out
its softmax weights over the k projected slots, (B, H, T, k). There is no map over steps:
each projected key ``(E K)_r`` mixes every in-episode position of the window with learned,
signed coefficients, so a weight on slot r is not a weight on any one step.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from txrl.backbones.linformer import LinformerConfig
from txrl.nn.attention import RecordedAttention, attention_entropy
from txrl.nn.pluggable_attention import (
    ProjectedAttention,
    SegmentMemoryTransformer,
    active_recorder,
    window_validity,
)


def banded(per_window: torch.Tensor) -> torch.Tensor:
    """Place each step's window coefficients at its key positions.

    ``per_window`` (B, T, R, W) -> (B, T, R, K) with K = W - 1 + T and
    ``out[b, i, r, i + w] = per_window[b, i, r, w]`` (zero elsewhere): padding each row to
    K + 1 and re-reading the flattened rows with stride K shifts row i right by i.
    """
    b, t, r, w = per_window.shape
    k = w - 1 + t
    rows = per_window.permute(0, 2, 1, 3)  # (B, R, T, W)
    rows = F.pad(rows, (0, t))  # (B, R, T, K+1)
    rows = rows.flatten(2)[..., : t * k].view(b, r, t, k)  # (B, R, T, K)
    return rows.permute(0, 2, 1, 3)  # (B, T, R, K)


class LinformerAttention(ProjectedAttention):
    """Multi-head attention over k learned projections of each query's window."""

    def __init__(self, config: LinformerConfig) -> None:
        super().__init__(config.d_model, config.n_heads, config.dropout)  # W^Q, [W^K; W^V], W^O
        self.memory_length = config.memory_length
        window = config.memory_length + 1
        # E and F (k x W): column w weighs window slot w (W-1: the query's own step)
        self.proj_key = nn.Parameter(torch.randn(config.proj_dim, window) / math.sqrt(window))
        self.proj_value = nn.Parameter(torch.randn(config.proj_dim, window) / math.sqrt(window))

    def forward(
        self,
        z: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        window_valid: torch.Tensor,
        stats: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Queries z (B, T, D), keys/values (B, K, D) (memory then the T steps),
        ``window_valid`` (B, T, W) which slots of each step's window are in its episode."""
        b, t, _ = z.shape
        hd, e, r = self.n_heads, self.head_dim, self.proj_key.shape[0]
        valid = window_valid[:, :, None, :]  # (B, T, 1, W)
        # E and F with the columns of the query's out-of-episode slots zeroed
        proj_key = torch.where(valid, self.proj_key, 0.0)  # (B, T, k, W)
        proj_value = torch.where(valid, self.proj_value, 0.0)  # (B, T, k, W)
        # E K and F V of every query's window, as banded products over the K keys
        # (B, T, k, K) -> (B, T*k, K) @ (B, K, D) -> (B, T*k, D)
        projected_keys = banded(proj_key).flatten(1, 2) @ keys
        projected_values = banded(proj_value).flatten(1, 2) @ values
        q = self.query(z).view(b, t, hd, e)  # (B, T, H, E)
        pk = projected_keys.view(b, t, r, hd, e)  # (B, T*k, D) -> (B, T, k, H, E)
        pv = projected_values.view(b, t, r, hd, e)  # (B, T*k, D) -> (B, T, k, H, E)
        # softmax(Q (E K)^T / sqrt(E)) over the k projected keys
        scores = torch.einsum("bthe,btrhe->bthr", q, pk) / math.sqrt(e)  # (B, T, H, k)
        weights = scores.softmax(dim=-1)
        recorder = active_recorder()
        if recorder is not None:
            # over the k projected slots, all of them attendable: the projections hold the
            # query's in-episode window positions only
            every = torch.ones(b, t, r, dtype=torch.bool, device=z.device)
            recorder.calls.append(RecordedAttention(self, weights.detach().transpose(1, 2), every))
        if stats is not None:
            stats["attention_entropy"] = attention_entropy(weights)
        weights = F.dropout(weights, self.dropout, self.training)
        # (...) (F V)
        attended = torch.einsum("bthr,btrhe->bthe", weights, pv)  # (B, T, H, E)
        return self.out(attended.reshape(b, t, self.d_model))  # (B, T, D)


class LinformerTransformer(SegmentMemoryTransformer):
    """TrXL-I blocks with Linformer attention over each step's window of the segment memory."""

    def __init__(self, config: LinformerConfig) -> None:
        super().__init__(config, [LinformerAttention(config) for _ in range(config.n_layers)])

    def attention_plans(self, allowed: torch.Tensor, query_time: torch.Tensor) -> list[Any]:
        """Each step's window validity (B, T, W), the same for every layer."""
        del query_time
        return [window_validity(allowed, self.memory_length)] * len(self.blocks)


def build_linformer(config: LinformerConfig) -> LinformerTransformer:
    return LinformerTransformer(config)
