"""Where a backbone's layers are and how to read what they hand out: the attention layers
of the TrXL family, the blocks of layer-memory backbones and their gates, each acting step's
attention mapped from key slots to absolute episode steps, and for backbones without
attention weights the norms of their memory state.

Legend: L attention layers, H heads, K keys of a one-step call, M memory slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from txrl.backbones.trxl import GATES
from txrl.backbones.trxl.model import TransformerXL
from txrl.nn import gates as gate_classes
from txrl.nn.pair import PairedBackbone


def absolute_row(
    weights: np.ndarray, allowed: np.ndarray, step: int, n_steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Map one acting step's attention from key slots to absolute episode steps.

    ``weights`` (H, K) over the K = M + 1 keys of a one-step call (M memory slots, oldest
    first, then the step itself), ``allowed`` (K,) bool, ``step`` the step's index in its
    episode. Key k lies ``K - 1 - k`` steps back. Returns the row (H, n_steps) and which
    steps were attendable (n_steps,). An attendable key before the episode's start means
    the memory leaked across episodes, which is an error, not something to draw.
    """
    n_keys = weights.shape[-1]
    absolute = step - (n_keys - 1 - np.arange(n_keys))  # (K,) episode step of each key
    if np.any(allowed & (absolute < 0)):
        raise RuntimeError(
            f"step {step} may attend to keys before its episode's start: the memory was not "
            "cleared at the episode start"
        )
    row = np.zeros((weights.shape[0], n_steps), dtype=np.float32)
    attendable = np.zeros(n_steps, dtype=bool)
    keep = allowed & (absolute >= 0)
    row[:, absolute[keep]] = weights[:, keep]
    attendable[absolute[keep]] = True
    return row, attendable


def attention_layers(backbone: torch.nn.Module) -> dict[int, str] | None:
    """``id(attention module) -> layer name`` for the TrXL family (gtrxl, trxl_i, trxl), whose
    layers call Transformer-XL's relative attention once per step over a window of the
    episode's own steps; None for other backbones.

    The others either have no attention weights (lstm, gru, linear, performer) or attend
    over keys that are not a plain step window (compressed memories, hashed buckets,
    adaptive depth), which absolute step indices would misdescribe. A critic with a memory
    of its own (:class:`txrl.nn.PairedBackbone`) has its layers named ``actor/layer<i>``
    and ``critic/layer<i>``.
    """
    if isinstance(backbone, PairedBackbone):
        parts = {
            "actor": attention_layers(backbone.actor),
            "critic": attention_layers(backbone.critic),
        }
        named = {k: f"{part}/{v}" for part, ids in parts.items() for k, v in (ids or {}).items()}
        return named or None
    if not isinstance(backbone, TransformerXL):
        return None
    return {id(block.attention): f"layer{index}" for index, block in enumerate(backbone.blocks)}


def memory_layers(backbone: torch.nn.Module) -> dict[str, torch.nn.Module]:
    """``layer name -> block`` for backbones built of a ``blocks`` list (the TrXL family and
    the other layer-memory backbones): ``layer<i>``, or ``actor/layer<i>`` and
    ``critic/layer<i>`` under a :class:`txrl.nn.PairedBackbone`, the names the backbone's
    diagnostics use. Empty for backbones without blocks (the recurrent ones)."""
    found: dict[str, torch.nn.Module] = {}
    for name, module in backbone.named_modules():
        parts = name.split(".")
        if len(parts) >= 2 and parts[-2] == "blocks" and parts[-1].isdigit():
            prefix = "".join(f"{part}/" for part in parts[:-2])
            found[f"{prefix}layer{parts[-1]}"] = module
    return found


#: Gate class -> (gate and equation, what 1 and 0 mean), for the sub-layers' mean activation
#: that :mod:`txrl.nn.gates` reports, read from the declaration of the gate of the class's
#: name (:data:`txrl.backbones.trxl.GATES`).
GATE_MEANINGS: dict[type, tuple[str, str]] = {
    cls: (
        GATES[name].title,
        f"1 = {GATES[name].one_means}, 0 = {GATES[name].zero_means}",
    )
    for name, cls in gate_classes.GATE_CLASSES.items()
}

#: Sub-layer gate attribute -> the sub-layer whose output it lets through.
GATE_SUBLAYERS = {"gate_attention": "after attention (g_MHA)", "gate_mlp": "after MLP (g_MLP)"}


def gate_kinds(backbone: torch.nn.Module) -> dict[str, str]:
    """``trace name -> gate class name`` (``layer0/gate_attention`` -> ``GRUGate``)."""
    kinds: dict[str, str] = {}
    for layer, block in memory_layers(backbone).items():
        for attribute in GATE_SUBLAYERS:
            gate = getattr(block, attribute, None)
            if isinstance(gate, gate_classes.Gate):
                kinds[f"{layer}/{attribute}"] = type(gate).__name__
    return kinds


def state_norms(state: tuple) -> dict[str, float]:
    """The norm of each float field of a one-env memory state (an LSTM's h and c, a linear
    attention's running sums, a window's cached inputs)."""
    return {
        f"state/{name}_norm": float(field[0].float().norm())  # env on axis 0
        for name, field in zip(state._fields, state, strict=True)  # type: ignore[attr-defined]  # a NamedTuple, which plain tuple does not declare _fields of
        if field.is_floating_point()
    }


def layer_weights(
    calls: Sequence[Any], layer_of: dict[int, str], layers: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """One acting step's recorded calls -> weights (L, H, K) of env 0 and allowed (K,)."""
    by_layer = {layer_of[id(call.module)]: call for call in calls if id(call.module) in layer_of}
    if sorted(by_layer) != sorted(layers) or len(calls) != len(layers):
        raise RuntimeError(
            f"expected one attention call per layer ({', '.join(layers)}), got {len(calls)}"
        )
    weights = np.stack([by_layer[name].weights[0, :, 0].cpu().numpy() for name in layers])
    allowed = by_layer[layers[0]].allowed[0, 0].cpu().numpy()
    return weights, allowed
