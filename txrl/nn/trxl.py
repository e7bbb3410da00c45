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

The blocks come from :mod:`txrl.nn.blocks`, the settings checks from :mod:`txrl.nn.settings`
and the memory with its layer loop from :class:`txrl.nn.memory.LayerMemoryBackbone`, all
shared with the window variants; this module chooses the block and how a layer attends.

Episodes: slots from an earlier episode and empty slots are masked (``valid``); the token
itself is always attended to, so the first step of an episode is finite.

Cost per step when acting (T = 1): O(L (D^2 + M D)). The state caches each layer's content
keys and values of the memory, so only the new token is projected, and the positional keys
``W_kR R`` are cached while gradients are off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

from torch import nn

from txrl.nn.attention import RelativeMultiHeadAttention
from txrl.nn.blocks import GatedBlock, PostNormBlock
from txrl.nn.gates import GATE_NAMES
from txrl.nn.memory import LayerMemoryBackbone, MemoryState, MemoryTrace
from txrl.nn.protocol import register_backbone
from txrl.nn.settings import WindowConfig

TrXLState = MemoryState  # the memory of the TrXL family (the name predates the shared type)
TrXLTrace = MemoryTrace


@dataclasses.dataclass(frozen=True)
class TrXLConfig(WindowConfig):
    """Settings of ``trxl`` and ``trxl_i``: the common transformer settings, no gates
    (``trxl_i`` always uses the ``residual`` gate, ``trxl`` has none), so a config's ``gate``
    is a setting these backbones do not have and ``policy.inapplicable: drop`` clears it.

    ``compile_step`` (default False): on a CPU, run the acting step's layer loop (rollouts,
    ``predict``, ``evaluate_policy``) compiled with ``torch.compile``: one graph instead of
    ~250 small ops, which at the bench setup took the acting step from 6.1 to 3.8 ms in
    one run (``bench/throughput.py``). It compiles at the first step (tens of seconds;
    torch keeps the result in its cache for later runs) and a few times more (a second
    batch size, a copied memory), and needs a C++ compiler. It pays where acting's per-op
    cost matters (the quick start's size: ``learn()`` +24 %), not where the training pass
    dominates (the MiniGrid S9 recipe: no change). The training pass is unchanged; on a
    GPU, rollouts capture the step as a CUDA graph instead (the learners' ``cuda_graph``),
    so the setting applies to CPU steps only.
    """

    compile_step: bool = False

    needs_even_width: ClassVar[bool] = True  # the sinusoid encoding of eq. (1)
    unknown_hint: ClassVar[str] = (
        "the gates are settings of backbone 'gtrxl' (trxl_i is gtrxl with the residual gate)"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.compile_step, bool):
            raise ValueError(f"compile_step must be true or false, got {self.compile_step!r}")


@dataclasses.dataclass(frozen=True)
class GTrXLConfig(TrXLConfig):
    """Settings of ``gtrxl``: those of :class:`TrXLConfig` and the gate, ``gate`` (default
    ``gru``) with its bias ``gate_bias`` (None: the gate's own default, b_g = 2 for ``gru``)."""

    gate: str | None = None
    gate_bias: float | None = None

    unknown_hint: ClassVar[str] = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gate is not None and self.gate not in GATE_NAMES:
            raise ValueError(f"unknown gate {self.gate!r}; valid gates: {', '.join(GATE_NAMES)}")


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
                if isinstance(config, GTrXLConfig):
                    gate, bias = config.gate or "gru", config.gate_bias
                else:
                    gate, bias = "residual", None
                blocks.append(GatedBlock(config, attention, gate, bias))
        self.blocks = nn.ModuleList(blocks)


def _factory(order: str) -> Callable[[TrXLConfig], TransformerXL]:
    def build(config: TrXLConfig) -> TransformerXL:
        return TransformerXL(config, order)

    return build


for _order, _config in (("gtrxl", GTrXLConfig), ("trxl_i", TrXLConfig), ("trxl", TrXLConfig)):
    register_backbone(_order, _config)(_factory(_order))
