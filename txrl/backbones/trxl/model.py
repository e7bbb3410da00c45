"""Transformer-XL memory backbones for RL: TrXL, TrXL-I and GTrXL.

Legend: T steps, B envs, L layers, M memory slots, K = M + T keys, D model width.

* Segment-level recurrence (Dai et al. 2019, arXiv 1901.02860, section 3.2):
  layer l attends over ``[SG(m^{l-1}) ; h^{l-1}]``, its cached, stop-gradient inputs of the
  last M steps followed by the current ones. Acting one step at a time, the memory slides by
  one step; every step attends to exactly the M steps before it and to itself, in sequence
  mode too (a sliding-window mask), so both modes compute the same thing.
* Relative attention, eq. (9): [`txrl.nn.attention.RelativeMultiHeadAttention`][txrl.nn.attention.RelativeMultiHeadAttention].
* ``trxl``: the post-LayerNorm block of eq. (9), ``o = LN(h + MHA(h~))``, ``h' = LN(o + FF(o))``.
* ``gtrxl``: eq. (10) of Parisotto et al. 2019, LayerNorm on the input stream only, ReLU on
  each sub-layer output, and a gate ([`txrl.nn.gates`][txrl.nn.gates]) in place of each residual.
* ``trxl_i``: the identity-map reordering alone, i.e. eq. (10) with the ``residual`` gate.

The blocks come from [`txrl.nn.blocks`][txrl.nn.blocks], the settings (and their checks) from
`txrl.backbones.trxl` and the memory with its layer loop from
`txrl.nn.memory.LayerMemoryBackbone`, all shared with the window variants; this module
chooses the block and how a layer attends. It also joins each gate's torch-free declaration
([`txrl.backbones.trxl.GATES`][txrl.backbones.trxl.GATES]: its default b_g) with its module ([`txrl.nn.gates`][txrl.nn.gates],
which takes b_g as an argument).

Episodes: slots from an earlier episode and empty slots are masked (``valid``); the token
itself is always attended to, so the first step of an episode is finite.

Cost per step when acting (T = 1): O(L (D^2 + M D)). The state caches each layer's content
keys and values of the memory, so only the new token is projected, and the positional keys
``W_kR R`` are cached while gradients are off.
"""

from __future__ import annotations

from torch import nn

from txrl.backbones.trxl import DEFAULT_GATE, GATES, GTrXLConfig, TrXLConfig
from txrl.nn.attention import RelativeMultiHeadAttention
from txrl.nn.blocks import GatedBlock, PostNormBlock
from txrl.nn.memory import LayerMemoryBackbone, MemoryState, MemoryTrace

TrXLState = MemoryState  # the memory of the TrXL family (the name predates the shared type)
TrXLTrace = MemoryTrace


class TransformerXL(LayerMemoryBackbone):
    """The TrXL family behind the backbone protocol (see the module docstring)."""

    ring_steps = True  # acting steps attend over the ring buffer as it lies

    def __init__(self, config: TrXLConfig, order: str) -> None:
        super().__init__(config, config.n_layers)
        self.order = order
        blocks: list[nn.Module] = []
        for _ in range(config.n_layers):
            attention = RelativeMultiHeadAttention(config.d_model, config.n_heads, config.dropout)
            if order == "trxl":
                blocks.append(PostNormBlock(config, attention))
            else:
                gate, bias = gate_of(config)
                blocks.append(GatedBlock(config, attention, gate, bias))
        self.blocks = nn.ModuleList(blocks)


def gate_of(config: TrXLConfig) -> tuple[str, float | None]:
    """The gate of a TrXL-I/GTrXL block and its b_g: ``gtrxl``'s ``gate`` (None:
    `DEFAULT_GATE`) with ``gate_bias`` or, when that is None, the
    gate's declared default (None for a gate without a bias term); ``trxl_i``: the residual
    connection, no bias."""
    if not isinstance(config, GTrXLConfig):
        return "residual", None
    gate = config.gate or DEFAULT_GATE
    bias = config.gate_bias if config.gate_bias is not None else GATES[gate].default_bias
    return gate, bias


# the implementations that the records of txrl.backbones.trxl name


def build_gtrxl(config: GTrXLConfig) -> TransformerXL:
    return TransformerXL(config, "gtrxl")


def build_trxl_i(config: TrXLConfig) -> TransformerXL:
    return TransformerXL(config, "trxl_i")


def build_trxl(config: TrXLConfig) -> TransformerXL:
    return TransformerXL(config, "trxl")
