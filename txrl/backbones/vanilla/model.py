"""The vanilla Transformer over a sliding window of inputs: backbones ``transformer`` and
``transformer_learned_pe``.

Legend: B envs, T steps, M memory slots, W = M + 1 window positions, K = M + T keys,
L layers, D model width, H heads, E head width, N = B * T windows.

Vanilla Transformer (Vaswani et al. 2017, "Attention Is All You Need", arXiv 1706.03762), as
the baseline that Transformer-XL's recurrence improves on (Dai et al. 2019, arXiv 1901.02860,
section 3.1): "at the next step, the segment is shifted to the right by only one position,
and the new segment has to be processed all from scratch". Each step re-processes, through every layer,
its window of the last M embedded inputs and itself (a causal encoder over W positions) and
keeps the output at the window's last position. Nothing but the inputs is carried over, so
the receptive field is M steps whatever the depth (TrXL's is L * M).

* ``transformer``: absolute sinusoid encoding (Vaswani et al. 2017, section 3.5)::

      p_{i, 2j} = sin(i / 10000^(2j/d)),   p_{i, 2j+1} = cos(i / 10000^(2j/d))

  with i the index of the position in the window (0 the oldest slot, M the current step), so
  positions are coherent when the window slides: a step at window index i has index i - 1 at
  the next step.
* ``transformer_learned_pe``: a learned embedding ``P[i]`` per window index, initialised
  N(0, 0.02^2) (learned position embeddings: Gehring et al. 2017, "Convolutional Sequence
  to Sequence Learning", arXiv 1705.03122, section 3.1; Vaswani et al. 2017, section 3.5).

State: the last M embedded inputs (stop-gradient) and their validity; trace: each step's
embedded input, so `VanillaTransformer.state_at` rebuilds the window with
`txrl.nn.window.window_at`. Cost per step: O(L (W D^2 + W^2 D)), W times TrXL's.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from txrl.backbones.transformer_settings import WindowConfig
from txrl.nn.attention import merge_heads, sinusoid_table, split_heads
from txrl.nn.blocks import PreNormBlock, attention_blocks
from txrl.nn.pluggable_attention import ProjectedAttention, gather_windows
from txrl.nn.protocol import Backbone, BackboneOutput
from txrl.nn.window import next_valid, slide, window_at, window_mask


class MultiHeadAttention(ProjectedAttention):
    """Scaled dot-product multi-head attention without positional terms (Vaswani et al. 2017,
    eq. (1) and section 3.2.2)."""

    def forward(
        self, h: torch.Tensor, context: torch.Tensor, allowed: torch.Tensor
    ) -> torch.Tensor:
        """Queries from ``h`` (N, Q, D) over ``context`` (N, C, D); ``allowed`` (N, Q, C) bool."""
        q = split_heads(self.query(h), self.n_heads)  # (N, H, Q, E)
        k, v = (split_heads(x, self.n_heads) for x in self.project_memory(context))  # (N, H, C, E)
        # softmax(Q K^T / sqrt(E)) V over the allowed keys
        attended = F.scaled_dot_product_attention(
            q, k, v, attn_mask=allowed[:, None], dropout_p=self.dropout if self.training else 0.0
        )  # (N, H, Q, E)
        return self.out(merge_heads(attended))  # (N, Q, D)


# ------------------------------------------------------------------ vanilla Transformer


class VanillaState(NamedTuple):
    """Per-env memory of the vanilla Transformer, env on axis 0."""

    inputs: torch.Tensor  # (B, M, D) embedded inputs of the last M steps, stop-gradient
    valid: torch.Tensor  # (B, M) bool, True where the slot holds a step of the current episode


class VanillaTrace(NamedTuple):
    inputs: torch.Tensor  # (T, B, D) each step's embedded input


class VanillaTransformer(Backbone):
    """Causal Transformer encoder re-run over each step's window of inputs (module docstring)."""

    graph_capturable = True
    sinusoid: torch.Tensor  # (W, D) buffer, with the sinusoid position encoding

    def __init__(self, config: WindowConfig, position: str) -> None:
        super().__init__()
        self.config = config
        self.position = position
        self.input_dim = config.input_dim
        self.output_dim = config.d_model
        self.memory_length = config.memory_length
        window = config.memory_length + 1
        self.embed = nn.Linear(config.input_dim, config.d_model)
        if position == "sinusoid":
            # the sinusoid P (Vaswani et al. sec. 3.5), indexed by the position in the window
            table = sinusoid_table(torch.arange(window), config.d_model)  # (W, D)
            self.register_buffer("sinusoid", table, persistent=False)
            self.learned: nn.Embedding | None = None
        else:
            self.learned = nn.Embedding(window, config.d_model)  # P, learned
            nn.init.normal_(self.learned.weight, std=0.02)
        self.blocks = nn.ModuleList(
            PreNormBlock(config, MultiHeadAttention(config.d_model, config.n_heads, config.dropout))
            for _ in range(config.n_layers)
        )

    def position_encoding(self) -> torch.Tensor:
        """P (W, D): row i encodes window index i (0 the oldest slot, M the current step)."""
        if self.learned is not None:
            return self.learned.weight
        return self.sinusoid

    def initial_state(
        self, batch_size: int, device: torch.device | str | None = None
    ) -> VanillaState:
        placement = self.state_placement(device)
        m, d = self.memory_length, self.config.d_model
        return VanillaState(
            inputs=torch.zeros((batch_size, m, d), **placement),
            valid=torch.zeros((batch_size, m), dtype=torch.bool, device=placement["device"]),
        )

    def encode_windows(self, windows: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """The causal encoder over windows of embedded inputs (N, W, D) with validity (N, W).

        Returns the last layer's output at the last position (N, D). Slot p attends to the
        valid slots q <= p (and always to itself, so empty slots stay finite); the valid
        slots of a window are a suffix, so empty slots never reach a valid one.
        """
        w = windows.shape[1]
        causal = torch.ones(w, w, dtype=torch.bool, device=windows.device).tril()  # (W, W)
        eye = torch.eye(w, dtype=torch.bool, device=windows.device)
        allowed = causal[None] & (valid[:, None, :] | eye[None])  # (N, W, W)
        # X + P: the encoding is added to the embedded input (Vaswani et al. sec. 3.5)
        h = windows + self.position_encoding()[None]  # (N, W, D)
        last = len(self.blocks) - 1
        for layer, block in enumerate(attention_blocks(self.blocks)):
            z = block.attention_input(h)  # (N, W, D)
            if layer == last:  # only the last position's output is used
                h = block(h[:, -1:], block.attention(z[:, -1:], z, allowed[:, -1:]))  # (N, 1, D)
            else:
                h = block(h, block.attention(z, z, allowed))  # (N, W, D)
        return h[:, -1]

    def run(
        self,
        x: torch.Tensor,
        state: VanillaState,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
        next_state: bool = True,
    ) -> BackboneOutput:
        self.check_inputs(x, state, episode_starts)
        t, b = x.shape[:2]
        m = self.memory_length
        e = self.embed(x).transpose(0, 1)  # (T, B, I) -> (B, T, D)
        allowed = window_mask(state.valid, episode_starts, m)  # (B, T, K)
        stream = torch.cat((state.inputs, e), dim=1)  # (B, K, D)
        windows, valid = gather_windows(stream, allowed, m)  # (B, T, W, D), (B, T, W)
        # every step re-processes its whole window: N = B * T independent sequences
        out = self.encode_windows(
            windows.reshape(b * t, m + 1, -1),  # (B, T, W, D) -> (N, W, D)
            valid.reshape(b * t, m + 1),  # (B, T, W) -> (N, W)
        ).view(b, t, -1)  # (N, D) -> (B, T, D)
        new_state = (
            VanillaState(
                inputs=slide(state.inputs, e.detach(), dim=1),  # (B, M, D)
                valid=next_valid(state.valid, episode_starts),
            )
            if next_state
            else None
        )
        out_stats: dict[str, torch.Tensor] = {}
        if stats:
            out_stats["window_in_use"] = valid.float().mean().detach()
        step_trace = VanillaTrace(inputs=e.detach().transpose(0, 1)) if trace else None
        return BackboneOutput(out.transpose(0, 1), new_state, step_trace, {}, out_stats)

    def state_at(
        self,
        initial: VanillaState,
        trace: VanillaTrace,
        episode_starts: torch.Tensor,
        t: torch.Tensor,
    ) -> VanillaState:
        inputs, valid = window_at(initial.inputs, trace.inputs, initial.valid, episode_starts, t)
        return VanillaState(inputs, valid)


# the implementations that the records of txrl.backbones.vanilla name


def build_transformer(config: WindowConfig) -> VanillaTransformer:
    if config.d_model % 2:
        raise ValueError(
            f"backbone 'transformer' needs an even d_model for the sinusoid encoding, got "
            f"{config.d_model}; use 'transformer_learned_pe' for an odd width"
        )
    return VanillaTransformer(config, "sinusoid")


def build_transformer_learned_pe(config: WindowConfig) -> VanillaTransformer:
    return VanillaTransformer(config, "learned")
