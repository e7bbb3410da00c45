"""Reformer: LSH attention in reversible residual layers, backbone ``reformer``.

Kitaev, Kaiser and Levskaya 2020, "Reformer: The Efficient Transformer" (arXiv 2001.04451):
LSH attention (section 2, "Locality-sensitive hashing attention") and reversible layers
(section 3, "Reversible Transformer").

Legend: T steps, B envs, L layers, M memory slots, K = M + T keys, H heads, E head width,
D model width, n buckets (``n_buckets``).

LSH attention, per head:

* shared-QK: one projection ``q = W_qk LN(x)``; keys are the normalised queries,
  ``k_j = q_j / |q_j|``;
* hashing with a fixed random rotation R (E x n/2), a seeded buffer (one per layer and
  head, saved with the module, the same draw in step and sequence modes)::

      h(x) = argmax([x R ; -x R])

  (``h(q) = h(k)`` since k is q scaled by a positive number);
* a query attends only to keys of its own bucket, ``S_i = {j : h(q_i) = h(k_j)}``, within
  its memory window (the last M steps of its own episode, as in TrXL; masking rather than
  sorting and chunking, which is cheaper at these window sizes) and never to itself,
  unless no other key is allowed (then only to itself, so the first step of an episode is
  finite). Scores are ``q_i^T k_j / sqrt(E)`` plus a learned per-head bias per relative
  distance ``i - j`` in 0..M (the paper's axial absolute embeddings do not fit a sliding
  window).

Reversible residual layers (Gomez et al. 2017): the embedded input is duplicated into two
streams of width D, ``X1 = X2 = embed(x)``, and each layer computes::

    Y1 = X1 + Attention(LN(X2))        Y2 = X2 + FeedForward(LN(Y1))

whose inverse (`ReversibleBlock.inverse`) is ``X2 = Y2 - FeedForward(LN(Y1))``,
``X1 = Y1 - Attention(LN(X2))``. The output is the mean of the two streams. Recomputing
activations in the backward pass from this inverse (the memory saving) is not done here:
backward stores activations as usual.

Memory: layer l caches (stop-gradient) the input X2 of its attention for the last M steps,
and its keys and values; the trace is that input per step and layer, L * D numbers per step
and env, and `Reformer.state_at` rebuilds the window from it as for TrXL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import nn

from txrl.backbones.reformer import ReformerConfig
from txrl.nn.attention import merge_heads, split_heads
from txrl.nn.blocks import feed_forward
from txrl.nn.memory import (
    LayerMemoryBackbone,
    MemoryState,
    MemoryTrace,
    by_layer,
    memory_in_use,
)
from txrl.nn.pluggable_attention import key_distances
from txrl.nn.protocol import BackboneOutput
from txrl.nn.window import window_mask

ReformerState = MemoryState  # Transformer-XL's memory, shared with the TrXL family
ReformerTrace = MemoryTrace


class LSHOutput(NamedTuple):
    output: torch.Tensor  # (B, T, D)
    keys: torch.Tensor  # (B, K, D) all keys, memory then current
    values: torch.Tensor  # (B, K, D)
    weights: torch.Tensor | None  # (B, H, T, K) attention weights, when asked for
    allowed: torch.Tensor | None  # (B, H, T, K) which pairs may attend, when asked for


class LSHAttention(nn.Module):
    """Shared-QK multi-head attention restricted to hash buckets (see the module docstring)."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        memory_length: int,
        rotations: torch.Tensor,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.memory_length = memory_length
        self.query_key = nn.Linear(d_model, d_model, bias=False)  # W_qk
        self.value = nn.Linear(d_model, d_model, bias=False)  # W_v
        self.out = nn.Linear(d_model, d_model)
        # learned score bias per head and relative distance 0..M
        self.distance_bias = nn.Parameter(torch.zeros(n_heads, memory_length + 1))
        self.register_buffer("rotations", rotations)  # R: (H, E, n/2), fixed
        self.dropout = dropout

    def project_memory(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys ``q / |q|`` (per head) and values of normalised inputs z (..., N, D) -> 2 x (..., N, D)."""
        q = self.query_key(z)
        heads = q.view(*q.shape[:-1], self.n_heads, self.head_dim)  # (..., N, H, E)
        keys = F.normalize(heads, dim=-1).flatten(-2)  # k = q / |q|, (..., N, D)
        return keys, self.value(z)

    def buckets(self, keys: torch.Tensor) -> torch.Tensor:
        """h(k) = argmax([kR; -kR]) per head; ``keys`` (B, K, D) -> (B, H, K) long."""
        b, k, _ = keys.shape
        heads = keys.view(b, k, self.n_heads, self.head_dim)  # (B, K, H, E)
        rotated = torch.einsum("bkhe,hen->bhkn", heads, self.rotations.to(keys.dtype))
        return torch.cat((rotated, -rotated), dim=-1).argmax(dim=-1)  # (B, H, K)

    def forward(
        self,
        z: torch.Tensor,
        memory_keys: torch.Tensor,
        memory_values: torch.Tensor,
        window: torch.Tensor,
        *,
        with_weights: bool = False,
    ) -> LSHOutput:
        """Queries from ``z`` (B, T, D) (the normalised X2) over [memory ; current].

        ``memory_keys``/``memory_values`` (B, M, D); ``window`` (B, T, K) the memory-window
        mask of `txrl.nn.window.window_mask`.
        """
        t, m = z.shape[1], memory_keys.shape[1]
        hd = self.n_heads
        k_new, v_new = self.project_memory(z)  # (B, T, D) each
        keys = torch.cat((memory_keys, k_new), dim=1)  # (B, K, D)
        values = torch.cat((memory_values, v_new), dim=1)  # (B, K, D)
        q = split_heads(self.query_key(z), hd)  # (B, H, T, E)
        key, value = split_heads(keys, hd), split_heads(values, hd)  # (B, H, K, E)

        bucket = self.buckets(keys)  # (B, H, K)
        bucket_query = bucket[..., m:]  # (B, H, T): a query hashes like its own key
        # S_i = {j : h(q_i) = h(k_j)} within the window
        same_bucket = bucket_query[..., :, None] == bucket[..., None, :]  # (B, H, T, K)
        distance = key_distances(t, m + t, z.device)  # (T, K) i - j
        is_self = distance == 0
        others = window[:, None] & same_bucket & ~is_self  # (B, H, T, K)
        alone = ~others.any(dim=-1, keepdim=True)  # (B, H, T, 1)
        allowed = others | (is_self & alone)  # itself only when nothing else is allowed

        # q_i^T k_j / sqrt(E) + b_{h, i-j}
        bias = self.distance_bias[:, distance.clamp(0, self.memory_length)]  # (H, T, K)
        bias = bias[None].masked_fill(~allowed, float("-inf"))  # (B, H, T, K)
        scale = 1.0 / math.sqrt(self.head_dim)
        weights = None
        if with_weights:
            scores = (q @ key.transpose(-1, -2)) * scale + bias
            weights = scores.softmax(dim=-1)  # (B, H, T, K)
            attended = F.dropout(weights, self.dropout, self.training) @ value
        else:
            attended = F.scaled_dot_product_attention(
                q,
                key,
                value,
                attn_mask=bias,
                dropout_p=self.dropout if self.training else 0.0,
                scale=scale,
            )  # (B, H, T, E)
        return LSHOutput(
            self.out(merge_heads(attended)),
            keys,
            values,
            weights,
            allowed if with_weights else None,
        )


class LayerMemory(NamedTuple):
    """What the attention of one layer needs besides X2: its memory and the window mask."""

    keys: torch.Tensor  # (B, M, D)
    values: torch.Tensor  # (B, M, D)
    window: torch.Tensor  # (B, T, K) bool


class ReversibleBlock(nn.Module):
    """Y1 = X1 + Attention(LN(X2)), Y2 = X2 + FeedForward(LN(Y1)), with its inverse."""

    def __init__(self, config: ReformerConfig, rotations: torch.Tensor) -> None:
        super().__init__()
        self.norm_attention = nn.LayerNorm(config.d_model)
        self.attention = LSHAttention(
            config.d_model, config.n_heads, config.memory_length, rotations, config.dropout
        )
        self.norm_ff = nn.LayerNorm(config.d_model)
        self.ff = feed_forward(config)

    def attention_input(self, x2: torch.Tensor) -> torch.Tensor:
        return self.norm_attention(x2)

    def f(self, x2: torch.Tensor, memory: LayerMemory, with_weights: bool = False) -> LSHOutput:
        """F(X2) = Attention(LN(X2)) over the layer's memory and the current steps."""
        return self.attention(
            self.attention_input(x2),
            memory.keys,
            memory.values,
            memory.window,
            with_weights=with_weights,
        )

    def g(self, y1: torch.Tensor) -> torch.Tensor:
        """G(Y1) = FeedForward(LN(Y1))."""
        return self.ff(self.norm_ff(y1))

    def forward(
        self, x1: torch.Tensor, x2: torch.Tensor, memory: LayerMemory
    ) -> tuple[torch.Tensor, torch.Tensor, LSHOutput]:
        """(X1, X2) (B, T, D) each -> (Y1, Y2) and the attention's keys/values."""
        attended = self.f(x2, memory)
        # Y1 = X1 + Attention(X2)
        y1 = x1 + attended.output
        # Y2 = X2 + FeedForward(Y1)
        y2 = x2 + self.g(y1)
        return y1, y2, attended

    def inverse(
        self, y1: torch.Tensor, y2: torch.Tensor, memory: LayerMemory
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Recover (X1, X2) from (Y1, Y2) (exact up to rounding when dropout is off)."""
        # X2 = Y2 - FeedForward(Y1)
        x2 = y2 - self.g(y1)
        # X1 = Y1 - Attention(X2)
        x1 = y1 - self.f(x2, memory).output
        return x1, x2


class Reformer(LayerMemoryBackbone):
    """Reversible LSH-attention transformer behind the backbone protocol (see the module docstring)."""

    state_type = ReformerState
    trace_type = ReformerTrace

    def __init__(self, config: ReformerConfig) -> None:
        super().__init__(config, config.n_layers)
        blocks = []
        for layer in range(config.n_layers):
            generator = torch.Generator().manual_seed(config.seed * 1000003 + layer)
            rotations = torch.randn(
                config.n_heads, config.head_dim, config.n_buckets // 2, generator=generator
            )  # R per head: (H, E, n/2)
            blocks.append(ReversibleBlock(config, rotations))
        self.blocks = nn.ModuleList(blocks)

    def run(
        self,
        x: torch.Tensor,
        state: ReformerState,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
        next_state: bool = True,
    ) -> BackboneOutput:
        self.check_inputs(x, state, episode_starts)
        state = self.ordered(state)
        m = self.memory_length
        h = self.embed(x).transpose(0, 1)  # (T, B, I) -> (B, T, D)
        x1, x2 = h, h  # duplicated streams
        window = window_mask(state.valid, episode_starts, m)  # (B, T, K)
        layer_inputs, new_keys, new_values = [], [], []
        blocks = cast("Sequence[ReversibleBlock]", self.blocks)
        for layer, block in enumerate(blocks):
            layer_inputs.append(x2)
            memory = LayerMemory(state.keys[:, layer], state.values[:, layer], window)
            x1, x2, attended = block(x1, x2, memory)
            new_keys.append(attended.keys[:, m:])  # (B, T, D) those of the T steps
            new_values.append(attended.values[:, m:])
        output = 0.5 * (x1 + x2)  # (B, T, D)

        new_state = (
            self.write(state, *by_layer(layer_inputs, new_keys, new_values), episode_starts)
            if next_state
            else None
        )
        out_stats: dict[str, torch.Tensor] = {}
        if stats:
            with torch.no_grad():
                first = blocks[0].f(
                    layer_inputs[0], LayerMemory(state.keys[:, 0], state.values[:, 0], window), True
                )
                assert first.allowed is not None
                attended_keys = first.allowed.sum(-1).float()  # (B, H, T)
                out_stats["layer0/keys_attended"] = attended_keys.mean()
                out_stats["layer0/self_only_fraction"] = (
                    first.allowed[..., m:].diagonal(dim1=-2, dim2=-1).float().mean()
                )
            out_stats["memory_in_use"] = memory_in_use(state.valid)
        step_trace = self.trace_of(layer_inputs) if trace else None
        return BackboneOutput(output.transpose(0, 1), new_state, step_trace, {}, out_stats)


def build_reformer(config: ReformerConfig) -> Reformer:
    return Reformer(config)
