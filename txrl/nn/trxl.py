"""Transformer-XL memory backbones for RL: TrXL, TrXL-I and GTrXL.

Legend: T steps, B envs, L layers, M memory slots, K = M + T keys, D model width.

* Segment-level recurrence (Dai et al. 2019, eq. 6 of ``references/000_4baccbf6ade0250f.txt``):
  layer l attends over ``[SG(m^{l-1}) ; h^{l-1}]``, its cached, stop-gradient inputs of the
  last M steps followed by the current ones. Acting one step at a time, the memory slides by
  one step; every step attends to exactly the M steps before it and to itself, in sequence
  mode too (a sliding-window mask), so both modes compute the same thing.
* Relative attention, eq. (9): :class:`txrl.nn.attention.RelativeMultiHeadAttention`.
* ``trxl``: the post-LayerNorm block of eq. (9), ``o = LN(h + MHA(h~))``, ``h' = LN(o + FF(o))``.
* ``gtrxl``: eq. (10) of Parisotto et al. 2019, LayerNorm on the input stream only, ReLU on
  each sub-layer output, and a gate (:mod:`txrl.nn.gates`) in place of each residual.
* ``trxl_i``: the identity-map reordering alone, i.e. eq. (10) with the ``residual`` gate.

Episodes: slots from an earlier episode and empty slots are masked (``valid``); the token
itself is always attended to, so the first step of an episode is finite.

Cost per step when acting (T = 1): O(L (D^2 + M D)). The state caches each layer's content
keys and values of the memory, so only the new token is projected, and the positional keys
``W_kR R`` are cached while gradients are off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from txrl.nn.attention import RelativeMultiHeadAttention
from txrl.nn.gates import GATE_NAMES, make_gate
from txrl.nn.memory import LayerMemoryBackbone, memory_in_use
from txrl.nn.protocol import BackboneOutput, register_backbone
from txrl.nn.window import window_mask


class TrXLState(NamedTuple):
    """Per-env memory of a TrXL-family backbone, env on axis 0 of every field."""

    hidden: torch.Tensor  # (B, L, M, D) cached layer inputs of the last M steps, stop-gradient
    keys: torch.Tensor  # (B, L, M, D) W_kE of those inputs (a cache, derived from hidden)
    values: torch.Tensor  # (B, L, M, D) W_v of those inputs (a cache, derived from hidden)
    valid: torch.Tensor  # (B, M) bool, True where the slot holds a step of the current episode


class TrXLTrace(NamedTuple):
    """What a rollout stores per step to rebuild the memory later: L*D floats, not L*M*D."""

    hidden: torch.Tensor  # (T, B, L, D) layer inputs of each step


@dataclasses.dataclass(frozen=True)
class TrXLConfig:
    """Settings of the TrXL family.

    ``gate``/``gate_bias`` apply to ``gtrxl`` (default gate ``gru`` with b_g = 2); ``trxl_i``
    always uses the ``residual`` gate and ``trxl`` has no gates.
    """

    input_dim: int
    d_model: int = 128
    n_layers: int = 3
    n_heads: int = 4
    memory_length: int = 64
    gate: str | None = None
    gate_bias: float | None = None
    d_ff: int | None = None  # width of the position-wise MLP; None means 4 * d_model
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("input_dim", "d_model", "n_layers", "n_heads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.memory_length, int) or self.memory_length < 0:
            raise ValueError(f"memory_length must be an int >= 0, got {self.memory_length!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if self.d_model % 2:
            raise ValueError(f"d_model must be even for the sinusoid encoding, got {self.d_model}")
        if self.gate is not None and self.gate not in GATE_NAMES:
            raise ValueError(f"unknown gate {self.gate!r}; valid gates: {', '.join(GATE_NAMES)}")
        if self.d_ff is not None and self.d_ff <= 0:
            raise ValueError(f"d_ff must be a positive int, got {self.d_ff!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")

    @property
    def ff_width(self) -> int:
        return self.d_ff if self.d_ff is not None else 4 * self.d_model


def _mlp(config: TrXLConfig) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(config.d_model, config.ff_width),
        nn.ReLU(),
        nn.Dropout(config.dropout),
        nn.Linear(config.ff_width, config.d_model),
    )


class PostNormBlock(nn.Module):
    """TrXL block of eq. (9): residuals, then LayerNorm."""

    def __init__(self, config: TrXLConfig) -> None:
        super().__init__()
        self.attention = RelativeMultiHeadAttention(config.d_model, config.n_heads, config.dropout)
        self.norm_attention = nn.LayerNorm(config.d_model)
        self.mlp = _mlp(config)
        self.norm_mlp = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def attention_input(self, h: torch.Tensor) -> torch.Tensor:
        return h

    def forward(
        self,
        h: torch.Tensor,
        z: torch.Tensor,
        memory: tuple[torch.Tensor, torch.Tensor],
        new: tuple[torch.Tensor, torch.Tensor],
        allowed: torch.Tensor,
        stats: dict[str, torch.Tensor] | None,
    ) -> torch.Tensor:
        """``h`` (B, T, D) block input, ``z`` the attention input (``h`` itself here).

        ``memory``: cached keys and values (B, M, D); ``new``: those of the T steps (B, T, D).
        """
        attended, attn_stats = self.attention(
            z, *memory, *new, allowed, with_stats=stats is not None
        )
        o = self.norm_attention(h + self.dropout(attended))
        out = self.norm_mlp(o + self.dropout(self.mlp(o)))
        if stats is not None:
            stats["attention_entropy"] = attn_stats.entropy
        return out


class GatedBlock(nn.Module):
    """GTrXL block of eq. (10); with the ``residual`` gate it is the TrXL-I block."""

    def __init__(self, config: TrXLConfig, gate: str) -> None:
        super().__init__()
        self.norm_attention = nn.LayerNorm(config.d_model)
        self.attention = RelativeMultiHeadAttention(config.d_model, config.n_heads, config.dropout)
        self.gate_attention = make_gate(gate, config.d_model, config.gate_bias)  # g_MHA
        self.norm_mlp = nn.LayerNorm(config.d_model)
        self.mlp = _mlp(config)  # f
        self.gate_mlp = make_gate(gate, config.d_model, config.gate_bias)  # g_MLP
        self.dropout = nn.Dropout(config.dropout)

    def attention_input(self, h: torch.Tensor) -> torch.Tensor:
        # LayerNorm([StopGrad(M), E]) of eq. (10): memory and new steps are normalised alike
        return self.norm_attention(h)

    def forward(
        self,
        h: torch.Tensor,
        z: torch.Tensor,
        memory: tuple[torch.Tensor, torch.Tensor],
        new: tuple[torch.Tensor, torch.Tensor],
        allowed: torch.Tensor,
        stats: dict[str, torch.Tensor] | None,
    ) -> torch.Tensor:
        """``h`` (B, T, D) block input E^(l-1), ``z`` its normalised copy; keys and values of
        ``memory`` (B, M, D) and of the ``new`` steps (B, T, D)."""
        gate_means: list[torch.Tensor] | None = [] if stats is not None else None
        # Y-bar = RelativeMultiHeadAttention(LayerNorm([SG(M), E]))
        y_bar, attn_stats = self.attention(z, *memory, *new, allowed, with_stats=stats is not None)
        # Y = g_MHA(E, ReLU(Y-bar))
        y = self.gate_attention(h, F.relu(self.dropout(y_bar)), gate_means)
        # E-bar = f(LayerNorm(Y))
        e_bar = self.mlp(self.norm_mlp(y))
        # E = g_MLP(Y, ReLU(E-bar))
        out = self.gate_mlp(y, F.relu(self.dropout(e_bar)), gate_means)
        if stats is not None:
            assert gate_means is not None and attn_stats is not None
            stats["attention_entropy"] = attn_stats.entropy
            stats["gate_attention"] = gate_means[0]
            stats["gate_mlp"] = gate_means[1]
        return out


class TransformerXL(LayerMemoryBackbone):
    """The TrXL family behind the backbone protocol (see the module docstring).

    The memory plumbing (initial state, sliding update, trace, ``state_at``, ``refresh_state``)
    is Transformer-XL's, shared with the variants in :class:`txrl.nn.memory.LayerMemoryBackbone`.
    """

    state_type = TrXLState
    trace_type = TrXLTrace

    def __init__(self, config: TrXLConfig, order: str) -> None:
        super().__init__(config, config.n_layers)
        self.order = order
        blocks: list[nn.Module]
        if order == "trxl":
            blocks = [PostNormBlock(config) for _ in range(config.n_layers)]
        else:
            gate = "residual" if order == "trxl_i" else (config.gate or "gru")
            blocks = [GatedBlock(config, gate) for _ in range(config.n_layers)]
        self.blocks = nn.ModuleList(blocks)

    def run(
        self,
        x: torch.Tensor,
        state: TrXLState,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
    ) -> BackboneOutput:
        self.check_inputs(x, state, episode_starts)
        h = self.embed(x).transpose(0, 1)  # (T, B, I) -> (B, T, D)
        allowed = window_mask(state.valid, episode_starts, self.memory_length)  # (B, T, K)

        step_stats: dict[str, torch.Tensor] | None = {} if stats else None
        out_stats: dict[str, torch.Tensor] = {}
        layer_inputs, step_keys, step_values = [], [], []
        for layer, block in enumerate(self.blocks):
            layer_inputs.append(h)
            z = block.attention_input(h)  # (B, T, D)
            k_new, v_new = block.attention.project_memory(z)  # (B, T, D) each
            step_keys.append(k_new)
            step_values.append(v_new)
            memory = (state.keys[:, layer], state.values[:, layer])  # (B, M, D) each
            h = block(h, z, memory, (k_new, v_new), allowed, step_stats)
            if step_stats is not None:
                out_stats.update({f"layer{layer}/{name}": v for name, v in step_stats.items()})

        new_state = self.next_state(state, layer_inputs, step_keys, step_values, episode_starts)
        if stats:
            out_stats["memory_in_use"] = memory_in_use(state.valid)
        step_trace = self.trace_of(layer_inputs) if trace else None
        return BackboneOutput(h.transpose(0, 1), new_state, step_trace, {}, out_stats)


def _factory(order: str) -> Callable[[TrXLConfig], TransformerXL]:
    def build(config: TrXLConfig) -> TransformerXL:
        if order == "trxl" and config.gate is not None:
            raise ValueError(
                "backbone 'trxl' has no gates (post-LayerNorm residuals); use 'gtrxl' to choose a gate"
            )
        if order == "trxl_i" and config.gate not in (None, "residual"):
            raise ValueError(
                f"backbone 'trxl_i' uses the plain residual; for gate {config.gate!r} use backbone 'gtrxl'"
            )
        return TransformerXL(config, order)

    return build


for _order in ("gtrxl", "trxl_i", "trxl"):
    register_backbone(_order, TrXLConfig)(_factory(_order))
