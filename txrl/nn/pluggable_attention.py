"""Transformer-XL's segment memory with a pluggable attention, and the parts such attentions
share: what the window families (``shaw``, ``adaptive_span``, ``sparse_*``, ``linformer``)
and some others build on, each holding its paper's own part in its ``model`` module.

Legend: B envs, T steps, L layers (or depth steps), M memory slots, W = M + 1 window
positions, K = M + T keys, H heads, E head width, D model width = H * E.

The transformer stack itself is shared with TrXL and lives in its own modules: blocks
([`txrl.nn.blocks`][txrl.nn.blocks]), relative attention ([`txrl.nn.attention`][txrl.nn.attention]) and the memory with its
layer loop (`txrl.nn.memory.LayerMemoryBackbone`). What is here:

* [`ProjectedAttention`][txrl.nn.pluggable_attention.ProjectedAttention] (W^Q, [W^K; W^V], W^O) for attentions that are not
  Transformer-XL's, and [`MaskedRelativeAttention`][txrl.nn.pluggable_attention.MaskedRelativeAttention] for those that are, under a mask.
* Windows (on top of `txrl.nn.window`): `key_distances`, `gather_windows`,
  `window_validity`.
* [`SegmentMemoryTransformer`][txrl.nn.pluggable_attention.SegmentMemoryTransformer]: Transformer-XL's memory under TrXL-I blocks with a
  pluggable attention: layer l attends over ``[SG(m^{l-1}) ; h^{l-1}]``, its cached inputs
  of the last M steps and the current ones, under the sliding-window mask of
  `txrl.nn.window.window_mask`.

The settings are read through [`SegmentSettings`][txrl.nn.pluggable_attention.SegmentSettings], the fields these parts use, so that
this module knows no backbone family.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch import nn

from txrl.nn import attention as relative_module
from txrl.nn.attention import (
    AttentionRecorder,
    RecordedAttention,
    RelativeMultiHeadAttention,
    attention_entropy,
    relative_attention,
)
from txrl.nn.blocks import BlockSettings, PreNormBlock
from txrl.nn.memory import LayerMemoryBackbone

__all__ = [
    "ConcatenatedMemoryAttention",
    "MaskedRelativeAttention",
    "ProjectedAttention",
    "SegmentMemoryTransformer",
    "SegmentSettings",
    "gather_windows",
    "key_distances",
    "window_validity",
]


class SegmentSettings(BlockSettings, Protocol):
    """What [`SegmentMemoryTransformer`][txrl.nn.pluggable_attention.SegmentMemoryTransformer] reads of its backbone's settings (with those of
    its blocks, [`txrl.nn.blocks.BlockSettings`][txrl.nn.blocks.BlockSettings])."""

    @property
    def input_dim(self) -> int:
        """Width of the backbone's input."""
        ...

    @property
    def n_layers(self) -> int:
        """L, the number of blocks."""
        ...

    @property
    def memory_length(self) -> int:
        """M, the steps each layer keeps in memory."""
        ...


# ------------------------------------------------------------------------------ attention


def active_recorder() -> AttentionRecorder | None:
    """The [`txrl.nn.attention.AttentionRecorder`][txrl.nn.attention.AttentionRecorder] in effect (None outside its ``with``
    block), for the attentions that are not Transformer-XL's to hand it their weights."""
    return relative_module._active_recorder


class ConcatenatedMemoryAttention(nn.Module):
    """Base of the pluggable attentions whose ``forward(z, keys, values, plan, stats)`` takes
    the memory's keys and values followed by the new steps', (B, K, D)."""

    def over_memory(
        self,
        z: torch.Tensor,
        memory: tuple[torch.Tensor, torch.Tensor],
        new: tuple[torch.Tensor, torch.Tensor],
        plan: Any,
        stats: dict[str, torch.Tensor] | None,
    ) -> torch.Tensor:
        """The layer loop's call (`txrl.nn.memory.LayerMemoryBackbone`): concatenate,
        then ``forward``."""
        keys = torch.cat((memory[0], new[0]), dim=1)  # (B, K, D)
        values = torch.cat((memory[1], new[1]), dim=1)  # (B, K, D)
        return self(z, keys, values, plan, stats)


class ProjectedAttention(ConcatenatedMemoryAttention):
    """Base of multi-head attentions with projections W^Q, [W^K; W^V] and W^O (D = H * E)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.query = nn.Linear(d_model, d_model, bias=False)  # W^Q
        self.key_value = nn.Linear(d_model, 2 * d_model, bias=False)  # [W^K; W^V]
        self.out = nn.Linear(d_model, d_model)  # W^O
        self.dropout = dropout

    def project_memory(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys z W^K and values z W^V of layer inputs (B, N, D) -> 2 x (B, N, D)."""
        keys, values = self.key_value(z).chunk(2, dim=-1)
        return keys, values


class MaskedRelativeAttention(ConcatenatedMemoryAttention):
    """Base of the pluggable attentions that are [`relative_attention`][txrl.nn.pluggable_attention.relative_attention] under a mask of
    their own; [`attend`][txrl.nn.pluggable_attention.MaskedRelativeAttention.attend] runs it and records the attention entropy in ``stats``."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.relative = RelativeMultiHeadAttention(d_model, n_heads, dropout)

    def project_memory(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.relative.project_memory(z)

    def attend(
        self,
        z: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor,
        stats: dict[str, torch.Tensor] | None,
    ) -> torch.Tensor:
        recorder = active_recorder()
        with_weights = stats is not None or recorder is not None
        out, weights = relative_attention(
            self.relative, z, keys, values, mask, with_weights=with_weights
        )
        if recorder is not None:
            assert weights is not None
            allowed = mask if mask.dtype == torch.bool else mask > float("-inf")
            allowed = allowed if allowed.dim() == 3 else allowed.any(1)  # any head: (B, T, K)
            recorder.calls.append(RecordedAttention(self, weights.detach(), allowed))
        if stats is not None:
            assert weights is not None
            stats["attention_entropy"] = attention_entropy(weights)
        return out


# ------------------------------------------------------------------------------ windows


def key_distances(t: int, k: int, device: torch.device) -> torch.Tensor:
    """d = i - j for query i (key position K - T + i) and key j -> (T, K) long (< 0: future)."""
    query_pos = torch.arange(t, device=device)[:, None] + (k - t)
    return query_pos - torch.arange(k, device=device)[None, :]


def gather_windows(
    stream: torch.Tensor, allowed: torch.Tensor, m: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each step's own window of W = M + 1 positions (the M before it and itself, oldest first).

    ``stream`` (B, M+T, ...) memory entries followed by the T steps' entries, ``allowed``
    (B, T, M+T) from `txrl.nn.window.window_mask`. Returns the windows (B, T, W, ...)
    (a strided view, no copy) and their validity (B, T, W); position W-1 is the step itself.
    """
    # (B, K, ...) -> (B, T, ..., W) -> (B, T, W, ...)
    windows = stream.unfold(1, m + 1, 1).movedim(-1, 2)
    return windows, window_validity(allowed, m)


def window_validity(allowed: torch.Tensor, m: int) -> torch.Tensor:
    """``allowed`` (B, T, M+T) read per window: (B, T, W), slot w of step i is key i + w."""
    b, t = allowed.shape[:2]
    index = torch.arange(t, device=allowed.device)[:, None] + torch.arange(
        m + 1, device=allowed.device
    )  # (T, W): key position of window slot w of step i
    return allowed.gather(2, index[None].expand(b, t, m + 1))  # (B, T, W)


# ------------------------------------------------------------------------------ memory


class SegmentMemoryTransformer(LayerMemoryBackbone):
    """Transformer-XL segment recurrence (Dai et al. 2019, sec. 3.2) with a pluggable attention.

    Each attention module is a `ConcatenatedMemoryAttention` implementing
    ``project_memory(z) -> (keys, values)`` on layer inputs (B, N, D) and ``forward(z, keys,
    values, plan, stats) -> (B, T, D)``, with z (B, T, D) the normalised current inputs,
    keys/values (B, K, D) memory then current, ``plan`` what `attention_plans` made
    for its layer, and ``stats`` a dict to fill or None.
    Subclasses give the attentions and may override `attention_plans`,
    `aux_losses` and `extra_stats`; the layer loop is the shared one.
    """

    def __init__(self, config: SegmentSettings, attentions: Sequence[nn.Module]) -> None:
        super().__init__(config, config.n_layers)
        self.blocks = nn.ModuleList(PreNormBlock(config, attention) for attention in attentions)
