"""The transformer blocks of the TrXL family and the variants, each written once.

Legend: B envs, T steps, D model width. A block takes its input ``h`` (B, T, D) and the
output of its attention sub-layer, computed by the caller from `attention_input`
(``h`` or ``LayerNorm(h)``), so a block does not depend on how its attention is computed
(over a ring of cached keys, a window, a compressed memory...). The blocks are those of
Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context"
(arXiv 1901.02860), and Parisotto et al. 2019, "Stabilizing Transformers for Reinforcement
Learning" (arXiv 1910.06764):

* [`PostNormBlock`][txrl.nn.blocks.PostNormBlock]: the Transformer-XL layer (Dai et al.,
  the N-layer procedure closing section 3.3), ``o = LN(h + MHA(h))``, ``h' = LN(o + FF(o))``.
* [`GatedBlock`][txrl.nn.blocks.GatedBlock]: the GTrXL block (Parisotto et al., section 3.2):
  LayerNorm on the input stream only, ReLU on each sub-layer output and a gate
  ([`txrl.nn.gates`][txrl.nn.gates]) in place of each residual; with the ``residual`` gate it
  is the TrXL-I block (identity map reordering, section 3.1).
* [`PreNormBlock`][txrl.nn.blocks.PreNormBlock]: TrXL-I's block around any attention module
  (the GTrXL block with the residual gate) or, without its ReLUs, the plain pre-LayerNorm
  block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast

import torch
import torch.nn.functional as F
from torch import nn

from txrl.nn.gates import make_gate


class BlockSettings(Protocol):
    """What a block reads of its backbone's settings (the transformer families' settings
    have these, ``txrl.backbones.transformer_settings.CommonSettings``)."""

    @property
    def d_model(self) -> int:
        """D, the model width."""
        ...

    @property
    def ff_width(self) -> int:
        """Width of the position-wise MLP."""
        ...

    @property
    def dropout(self) -> float:
        """Dropout on each sub-layer's output (and inside the MLP)."""
        ...


def dropout_layer(p: float) -> nn.Module:
    """Dropout of rate ``p``, or the identity for ``p`` = 0 (the default): the same output
    without a dropout call at each step."""
    return nn.Dropout(p) if p > 0 else nn.Identity()


def feed_forward(config: BlockSettings) -> nn.Sequential:
    """The position-wise MLP D -> ff_width -> D with a ReLU (and dropout) in between."""
    d, width = config.d_model, config.ff_width
    return nn.Sequential(
        nn.Linear(d, width), nn.ReLU(), dropout_layer(config.dropout), nn.Linear(width, d)
    )


class AttentionBlock(Protocol):
    """What a layer loop uses of a block: every block of this module has it."""

    #: the block's attention sub-layer, of the kind its backbone built (relative, kernel,
    #: LSH...); each loop calls the methods of its own kind
    attention: Any

    def attention_input(self, h: torch.Tensor) -> torch.Tensor: ...

    def __call__(
        self, h: torch.Tensor, attended: torch.Tensor, stats: dict[str, torch.Tensor] | None = None
    ) -> torch.Tensor: ...


def attention_blocks(blocks: nn.ModuleList) -> Sequence[AttentionBlock]:
    """``blocks`` as the blocks they are: an ``nn.ModuleList`` holds plain ``nn.Module`` s for a
    type checker. No copy, for the acting step's sake."""
    return cast("Sequence[AttentionBlock]", blocks)


class PostNormBlock(nn.Module):
    """Transformer-XL block (Dai et al. 2019, sec. 3.3): residuals, then LayerNorm. Attends to
    its input itself."""

    def __init__(self, config: BlockSettings, attention: nn.Module) -> None:
        super().__init__()
        self.attention = attention
        self.norm_attention = nn.LayerNorm(config.d_model)
        self.mlp = feed_forward(config)
        self.norm_mlp = nn.LayerNorm(config.d_model)
        self.dropout = dropout_layer(config.dropout)

    def attention_input(self, h: torch.Tensor) -> torch.Tensor:
        return h

    def forward(
        self, h: torch.Tensor, attended: torch.Tensor, stats: dict[str, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """``h`` (B, T, D) block input, ``attended`` (B, T, D) the attention output on ``h``."""
        o = self.norm_attention(h + self.dropout(attended))
        return self.norm_mlp(o + self.dropout(self.mlp(o)))


class GatedBlock(nn.Module):
    """GTrXL block (Parisotto et al. 2019, sec. 3.2); with the ``residual`` gate it is the
    TrXL-I block (sec. 3.1).

    ``gate`` names the gate of each sub-layer (`txrl.nn.gates.GATE_CLASSES`) and
    ``gate_bias`` is its b_g ([`txrl.nn.gates.make_gate`][txrl.nn.gates.make_gate]: None only for a gate without
    a bias term); the Transformer-XL family's model gives the declared default when the
    config gives none.
    """

    def __init__(
        self, config: BlockSettings, attention: nn.Module, gate: str, gate_bias: float | None
    ) -> None:
        super().__init__()
        self.norm_attention = nn.LayerNorm(config.d_model)
        self.attention = attention
        self.gate_attention = make_gate(gate, config.d_model, gate_bias)  # g_MHA
        self.norm_mlp = nn.LayerNorm(config.d_model)
        self.mlp = feed_forward(config)  # f
        self.gate_mlp = make_gate(gate, config.d_model, gate_bias)  # g_MLP
        self.dropout = dropout_layer(config.dropout)

    def attention_input(self, h: torch.Tensor) -> torch.Tensor:
        # LayerNorm([StopGrad(M), E]) of the GTrXL block: memory and new steps are normalised alike
        return self.norm_attention(h)

    def forward(
        self, h: torch.Tensor, y_bar: torch.Tensor, stats: dict[str, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """``h`` (B, T, D) block input E^(l-1); ``y_bar`` (B, T, D) the attention output
        Y-bar = RelativeMultiHeadAttention(LayerNorm([SG(M), E])). Fills ``stats`` with the
        mean activation of each gate when given."""
        gate_means: list[torch.Tensor] | None = [] if stats is not None else None
        # Y = g_MHA(E, ReLU(Y-bar))
        y = self.gate_attention(h, F.relu(self.dropout(y_bar)), gate_means)
        # E-bar = f(LayerNorm(Y))
        e_bar = self.mlp(self.norm_mlp(y))
        # E = g_MLP(Y, ReLU(E-bar))
        out = self.gate_mlp(y, F.relu(self.dropout(e_bar)), gate_means)
        if stats is not None:
            assert gate_means is not None
            stats["gate_attention"] = gate_means[0]
            stats["gate_mlp"] = gate_means[1]
        return out


class PreNormBlock(nn.Module):
    """Pre-LayerNorm block around any attention module.

    With ``output_relu`` (default), the identity-map-reordered block of TrXL-I (Parisotto et
    al. 2019, sec. 3.1; the GTrXL block with the residual gate)::

        Y = E + ReLU(MHA(LayerNorm(E)))
        E' = Y + ReLU(MLP(LayerNorm(Y)))

    without, the plain pre-LayerNorm block ``Y = E + MHA(LN(E))``, ``E' = Y + MLP(LN(Y))``.
    """

    def __init__(
        self, config: BlockSettings, attention: nn.Module, *, output_relu: bool = True
    ) -> None:
        super().__init__()
        self.norm_attention = nn.LayerNorm(config.d_model)
        self.attention = attention
        self.norm_mlp = nn.LayerNorm(config.d_model)
        self.mlp = feed_forward(config)
        self.dropout = dropout_layer(config.dropout)
        self.activation = nn.ReLU() if output_relu else nn.Identity()

    def attention_input(self, h: torch.Tensor) -> torch.Tensor:
        return self.norm_attention(h)

    def forward(
        self, h: torch.Tensor, attended: torch.Tensor, stats: dict[str, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """``h`` (..., D) block input, ``attended`` (..., D) the attention output on LayerNorm(h)."""
        # Y = E + ReLU(MHA(LayerNorm(E)))
        y = h + self.activation(self.dropout(attended))
        # E' = Y + ReLU(MLP(LayerNorm(Y)))
        return y + self.activation(self.dropout(self.mlp(self.norm_mlp(y))))
