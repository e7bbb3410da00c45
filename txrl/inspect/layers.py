"""Where a backbone's layers are and how to read what they hand out: the attention layers
of every attention backbone that hands out its weights, the blocks of layer-memory
backbones and their gates, each acting step's attention mapped from key slots to absolute
episode steps (and to compressed or projected slots), and for backbones without attention
weights the norms of their memory state.

Legend: L attention layers, H heads, K keys of a one-step call, M memory slots, N steps of
the episode, Mc compressed slots, c compression rate, k projected slots, F features per head.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from txrl.backbones.adaptive_span.model import AdaptiveSpanTransformer
from txrl.backbones.compressive.model import CompressiveTransformer
from txrl.backbones.linear.model import EPS, KernelAttention, LinearTransformer
from txrl.backbones.linformer.model import LinformerTransformer
from txrl.backbones.sparse.model import SparseTransformer
from txrl.backbones.trxl import GATES
from txrl.backbones.trxl.model import TransformerXL
from txrl.nn import gates as gate_classes
from txrl.nn.attention import RecordedAttention
from txrl.nn.pair import PairedBackbone
from txrl.nn.pluggable_attention import active_recorder

#: Backbones whose layers hand out one attention call per acting step over a window of the
#: episode's own steps (the last K - 1 steps and the step itself).
WINDOW_BACKBONES = (TransformerXL, AdaptiveSpanTransformer, SparseTransformer, LinearTransformer)


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


def compressed_slots(allowed: np.ndarray, step: int, layout: KeyLayout, n_steps: int) -> np.ndarray:
    """Which compressed slot holds each episode step when step ``step`` acts: (n_steps,) the
    slot's index (oldest first, as in the state) or -1 (not in a compressed slot).

    ``allowed`` (Mc,) the compressed slots the step could attend to. From the episode's
    start, after step t the input of step t enters the FIFO of M and the oldest entry leaves
    for the pending buffer; every c-th leaver completes a compression of the last c. So step
    ``s`` sees e = max(0, s - M) evicted steps, e // c compressions, the newest min(e // c,
    Mc) of them kept, and the slot of recency rank r holds steps ``[c (e//c - 1 - r), c (e//c
    - r))``. An allowed slot this count does not explain means the compressed memory was
    not cleared at the episode's start, which is an error, not something to draw.
    """
    m, mc, c = layout.memory_length, layout.compressed_length, layout.compression_rate
    made = max(0, step - m) // c
    held = min(made, mc)
    if int(allowed.sum()) != held or not allowed[mc - held :].all():
        raise RuntimeError(
            f"step {step} may attend to {int(allowed.sum())} compressed slots where its "
            f"episode made {made} compressions (of which {held} kept): the compressed memory "
            "was not cleared at the episode start"
        )
    steps = np.arange(n_steps)
    rank = made - 1 - steps // c  # (n_steps,) recency rank of the slot holding each step
    inside = (steps < c * made) & (rank < held)
    return np.where(inside, mc - 1 - rank, -1)


@dataclasses.dataclass
class EpisodeMaps:
    """One episode's recorded attention, per layer, head and acting step (see
    [`txrl.inspect.episode.EpisodeRecord`][txrl.inspect.episode.EpisodeRecord] for each field)."""

    attention: np.ndarray | None = None  # (L, H, N, N) over the steps of the window
    attendable: np.ndarray | None = None  # (N, N) bool
    compressed: np.ndarray | None = None  # (L, H, N, Mc) over the compressed slots
    compressed_slot: np.ndarray | None = None  # (N, N) slot holding step j at step s, or -1
    projected: np.ndarray | None = None  # (L, H, N, k) over the projected slots


def episode_maps(
    layout: KeyLayout, steps: Sequence[tuple[np.ndarray, np.ndarray]], n_layers: int
) -> EpisodeMaps:
    """Each acting step's weights (L, H, K) and allowed keys (K,) -> the episode's maps."""
    n = len(steps)
    if not steps:
        return EpisodeMaps()
    n_heads = steps[0][0].shape[1]
    if layout.kind == "projected":
        return EpisodeMaps(projected=np.stack([w for w, _ in steps], axis=2))  # (L, H, N, k)
    maps = EpisodeMaps(
        attention=np.zeros((n_layers, n_heads, n, n), np.float32),
        attendable=np.zeros((n, n), dtype=bool),
    )
    window = 0  # the window's first key
    if layout.kind == "compressive":
        mc = layout.compressed_length
        window = mc + 1  # after the compressed slots and the slot made within the call
        maps.compressed = np.stack([w[..., :mc] for w, _ in steps], axis=2)  # (L, H, N, Mc)
        maps.compressed_slot = np.full((n, n), -1, dtype=np.int32)
    assert maps.attention is not None and maps.attendable is not None
    for step, (weights, allowed) in enumerate(steps):
        for layer in range(n_layers):
            row, ok = absolute_row(weights[layer, :, window:], allowed[window:], step, n)
            maps.attention[layer, :, step] = row
            maps.attendable[step] = ok
        if maps.compressed_slot is not None:
            if allowed[window - 1]:
                raise RuntimeError(f"step {step}: a one-step call made a compression it sees")
            slots = compressed_slots(allowed[: window - 1], step, layout, n)
            maps.compressed_slot[step] = slots
    return maps


@dataclasses.dataclass(frozen=True)
class KeyLayout:
    """How the K keys of one acting step's recorded attention (T = 1) read.

    ``window``: the step's window over its own episode, oldest first, the step itself last
    (key k lies K - 1 - k steps back): the TrXL family, ``adaptive_span`` (the slots beyond
    every head's span dropped) and ``sparse_*``.
    ``kernel``: keys as ``window``, every step of the episode so far, with linear
    attention's equivalent weights (`KernelWeights`): ``linear`` and ``performer``.
    ``compressive``: the Mc compressed slots (oldest first), one slot for compressions made
    within the call (never attendable in a one-step call), then the window of M + 1 steps.
    ``projected``: Linformer's k projected slots; each mixes every in-episode position of
    the step's window with learned, signed coefficients, so no slot is a step.
    """

    kind: str
    memory_length: int = 0
    compressed_length: int = 0
    compression_rate: int = 1


def attention_layers(backbone: torch.nn.Module) -> dict[int, str] | None:
    """``id(attention module) -> layer name`` for the backbones whose attention ``txrl
    inspect`` records (`key_layout` says how their keys read); None for the others.

    Recorded: the TrXL family (gtrxl, trxl_i, trxl), ``compressive``, ``adaptive_span``,
    ``sparse_strided``, ``sparse_fixed``, ``linformer``, and ``linear`` and ``performer``
    through their equivalent weights (`KernelWeights`). Not recorded: the recurrent
    backbones (no attention) and the other transformers, whose keys are hashed buckets or
    depth steps that absolute step indices would misdescribe. A critic with a memory of its
    own ([`txrl.nn.PairedBackbone`][txrl.nn.PairedBackbone]) has its layers named ``actor/layer<i>`` and
    ``critic/layer<i>``.
    """
    if isinstance(backbone, PairedBackbone):
        parts = {
            "actor": attention_layers(backbone.actor),
            "critic": attention_layers(backbone.critic),
        }
        named = {k: f"{part}/{v}" for part, ids in parts.items() for k, v in (ids or {}).items()}
        return named or None
    if not isinstance(backbone, (*WINDOW_BACKBONES, CompressiveTransformer, LinformerTransformer)):
        return None
    return {id(block.attention): f"layer{index}" for index, block in enumerate(backbone.blocks)}


def key_layout(backbone: torch.nn.Module) -> KeyLayout:
    """How the keys of ``backbone``'s recorded attention read (`KeyLayout`); the
    actor's under a [`txrl.nn.PairedBackbone`][txrl.nn.PairedBackbone] (its critic is built alike)."""
    if isinstance(backbone, PairedBackbone):
        return key_layout(backbone.actor)
    if isinstance(backbone, CompressiveTransformer):
        c = backbone.config
        return KeyLayout("compressive", c.memory_length, c.compressed_length, c.compression_rate)
    if isinstance(backbone, LinformerTransformer):
        return KeyLayout("projected")
    if isinstance(backbone, LinearTransformer):
        return KeyLayout("kernel")
    return KeyLayout("window")


class KernelWeights:
    """The equivalent attention weights of linear attention (``linear``, ``performer``),
    handed to the active [`txrl.nn.attention.AttentionRecorder`][txrl.nn.attention.AttentionRecorder] one step at a time.

    Linear attention never forms its weights: it computes, per head (Katharopoulos et al.
    2020, section 3.2; `txrl.backbones.linear.model`)::

        h_i = phi(q_i)^T S_i / (phi(q_i)^T z_i + eps),  S_i = sum_j phi(k_j) v_j^T,  z_i = sum_j phi(k_j)

    over the steps j <= i of the episode, which is exactly the weighted sum
    ``h_i = sum_j a_ij v_j`` with::

        a_ij = phi(q_i)^T phi(k_j) / (phi(q_i)^T z_i + eps)

    non-negative (phi > 0) and summing to ``phi(q_i)^T z_i / (phi(q_i)^T z_i + eps)``: 1 up
    to eps (1e-6), not exactly 1. The model's state keeps only the sums, so a forward hook
    on each layer's `txrl.backbones.linear.model.KernelAttention` keeps phi(k_j) of
    every step of the current episode (the layer's own ``project`` of the call's input) and
    hands each step's row over them as a [`txrl.nn.attention.RecordedAttention`][txrl.nn.attention.RecordedAttention]
    (keys: the episode's steps so far, oldest first, the step itself last). The hook checks
    that the kept phi(k_j) sum to the state's z_i, so no weight goes to a step the state
    does not hold. One step per call.
    """

    def __init__(self, backbone: torch.nn.Module) -> None:
        self.keys: dict[int, torch.Tensor] = {}  # id(layer) -> (B, H, J, F) phi(k_j) kept
        self.kept: dict[int, torch.Tensor] = {}  # id(layer) -> (B, J) bool, in the episode
        self.layers = [m for m in backbone.modules() if isinstance(m, KernelAttention)]

    def register(self) -> list[Any]:
        """Hook every linear-attention layer; returns the hooks' handles (``remove()`` each
        when done); none for a backbone without linear attention."""
        return [layer.register_forward_hook(self._hook) for layer in self.layers]

    def _hook(self, module: torch.nn.Module, args: tuple, output: tuple) -> None:
        recorder = active_recorder()
        if recorder is None:
            return
        assert isinstance(module, KernelAttention)
        z, _, _, episode = args  # (B, 1, D) normalised inputs, (B, 1) episode index
        k_sum = output[2]  # (B, H, F) z_i, the state after the step
        if z.shape[1] != 1:
            raise RuntimeError(
                f"linear attention's weights are recorded one step at a time, got {z.shape[1]}"
            )
        fq, fk, _ = module.project(z)  # (B, H, 1, F) each
        b = z.shape[0]
        now = torch.ones(b, 1, dtype=torch.bool, device=z.device)
        previous = self.kept.get(id(module))
        keys, kept = fk, now
        if previous is not None:
            keys = torch.cat((self.keys[id(module)], fk), dim=2)  # (B, H, J, F)
            kept = torch.cat((previous & (episode == 0), now), dim=1)  # (B, J)
            first = int(kept.any(0).long().argmax())  # no env holds the steps before
            keys, kept = keys[:, :, first:], kept[:, first:]
        self.keys[id(module)], self.kept[id(module)] = keys, kept
        held = (keys * kept[:, None, :, None]).sum(2)  # (B, H, F) sum of the kept phi(k_j)
        if not torch.allclose(held, k_sum, rtol=1e-4, atol=1e-5):
            raise RuntimeError(
                "linear attention's state does not hold the phi(k_j) of the steps recorded "
                "since the episode's start: record every step from an episode start"
            )
        # a_ij = phi(q_i)^T phi(k_j) / (phi(q_i)^T z_i + eps)
        normaliser = (fq[:, :, 0] * k_sum).sum(-1) + EPS  # (B, H)
        similarity = (fq @ keys.transpose(-1, -2)).masked_fill(~kept[:, None, None], 0.0)
        weights = similarity / normaliser[:, :, None, None]  # (B, H, 1, J)
        recorder.calls.append(RecordedAttention(module, weights, kept[:, None]))


def memory_layers(backbone: torch.nn.Module) -> dict[str, torch.nn.Module]:
    """``layer name -> block`` for backbones built of a ``blocks`` list (the TrXL family and
    the other layer-memory backbones): ``layer<i>``, or ``actor/layer<i>`` and
    ``critic/layer<i>`` under a [`txrl.nn.PairedBackbone`][txrl.nn.PairedBackbone], the names the backbone's
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
