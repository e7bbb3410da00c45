"""The acting step of a layer-memory backbone over its ring buffer, eager or compiled.

:meth:`txrl.nn.memory.LayerMemoryBackbone.run` is the layer loop of Transformer-XL's
eq. (6) over T steps, with the memory's slots oldest first. An acting step (T = 1, gradients
off) computes the same thing without moving the memory: :class:`~txrl.nn.memory.MemoryState`
keeps its M slots as a ring, the step attends over the slots as they lie, each slot's
relative distance read from the write position, and writes its layer inputs, keys and values
over the oldest slot in place (O(L D) bytes, nothing of size M copied). The float64 tests of
``tests/nn/test_protocol.py`` hold it equal to ``run``.

On a CPU the step's products take column-major copies of the weights: the linears through
the backbone's column-major replica (:mod:`txrl.nn.acting.replica`), each attention's fused
query, key and value weight through :func:`fused_ring_weights`. With the backbone's
``compile_step`` setting, on a CPU, the layer loop, the ring write and the policy's heads
run as one ``torch.compile`` call (:func:`compiled_ring_step`), which takes the replica, the
state's tensors and the derived weights as its arguments. On a GPU, rollouts capture the
eager step as a CUDA graph instead (:mod:`txrl.sb3.graphs`), on the parameters themselves.
Legend: B envs, L layers, M memory slots, D width, I input width.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

import torch
import torch.nn.functional as F
from torch import nn

from txrl.nn.acting.replica import (
    COMPILED_STEP,
    acting_cache,
    column_major,
    column_major_replica,
)
from txrl.nn.attention import RelativeMultiHeadAttention, RingPlan
from txrl.nn.blocks import attention_blocks
from txrl.nn.cache import derived
from txrl.nn.protocol import BackboneOutput

# a C++ wrapper around the compiled kernels: no Python between them (on a CPU the wrapper's
# per-call cost is what the compiled step saves)
_COMPILE_OPTIONS: dict[str, str | int | bool | Callable[..., Any]] = {"cpp_wrapper": True}

# index tensors the eager step reuses, by what they depend on: a few small ops fewer a step
_INDICES: dict[tuple[Any, ...], torch.Tensor] = {}


def _indices(key: tuple[Any, ...], build: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``build()``, an index tensor that depends on ``key`` alone (sizes and the device),
    made once and reused; made anew each time inside ``torch.compile``, which folds it."""
    if torch.compiler.is_compiling():
        return build()
    found = _INDICES.get(key)
    if found is None:
        with torch.inference_mode(False):  # a plain tensor, usable in and out of inference mode
            found = _INDICES.setdefault(key, build())
    return found


#: a policy's heads applied to the step's output (B, D)
Head = Callable[[torch.Tensor], tuple[torch.Tensor, ...]]
#: one layer's fused attention weights: weight (4D, D), bias (4D), positional keys (H, E, K)
RingWeights = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


class RingBackbone(Protocol):
    """What the ring step uses of a backbone (:class:`txrl.nn.memory.LayerMemoryBackbone`)."""

    @property
    def embed(self) -> nn.Module: ...

    @property
    def blocks(self) -> nn.ModuleList: ...

    @property
    def memory_length(self) -> int: ...

    @property
    def trace_type(self) -> Any: ...

    @property
    def compiles_step(self) -> bool: ...

    def aux_losses(self) -> dict[str, torch.Tensor]: ...


def ring_step(
    backbone: RingBackbone,
    x: torch.Tensor,
    state: Any,
    episode_starts: torch.Tensor,
    head: Head | None,
    *,
    trace: bool,
) -> tuple[tuple[torch.Tensor, ...], BackboneOutput]:
    """One acting step of ``backbone`` for x (1, B, I) from ``state`` (a
    :class:`~txrl.nn.memory.MemoryState`, written in place and returned), and ``head``
    (None: nothing) of its output (B, D). Returns what ``head`` returned and the backbone's
    output. The caller checked that the step may take this path: one step, gradients off, a
    memory, no dropout."""
    start = episode_starts[0]  # (B,)
    on_cpu = x.device.type == "cpu"
    # on a GPU the parameters themselves: a rollout's CUDA graph reads their addresses
    module = cast("nn.Module", backbone)
    modules = column_major_replica(module) if on_cpu else module
    weights = fused_ring_weights(backbone, backbone.memory_length + 1)
    if state.hidden.is_inference() and not torch.is_inference_mode_enabled():
        # torch forbids writing inference tensors outside inference mode
        state = type(state)(*(field.clone() for field in state))
    if backbone.compiles_step and on_cpu:
        h, hidden, heads = _compiled_call(backbone, modules, x[0], state, start, weights, head)
    else:
        h, hidden, keys, values = ring_layers(
            modules, x[0], state.keys, state.values, state.position, state.valid, start, weights
        )
        fields = (state.hidden, state.keys, state.values, state.position, state.step, state.valid)
        write_ring(backbone.memory_length, *fields, hidden, keys, values, start)
        heads = () if head is None else head(h)
    step_trace = backbone.trace_type(hidden=hidden[None]) if trace else None  # (1, B, L, D)
    return heads, BackboneOutput(h[None], state, step_trace, backbone.aux_losses(), {})


def fused_ring_weights(backbone: RingBackbone, n_keys: int) -> list[RingWeights]:
    """Each layer's :meth:`~txrl.nn.attention.RelativeMultiHeadAttention.ring_weights` for
    ``n_keys`` keys, the fused weight (4D, D) stored column-major, derived once and reused
    while the attentions' weights are unchanged (one lookup per step for all layers,
    :func:`txrl.nn.cache.derived`, kept in the backbone's
    :class:`~txrl.nn.acting.replica.ActingCache`)."""
    attentions: list[RelativeMultiHeadAttention] = [
        block.attention for block in attention_blocks(backbone.blocks)
    ]
    sources = tuple(w for attention in attentions for w in attention.ring_parameters())

    def build() -> list[RingWeights]:
        fused = (attention.ring_weights(n_keys) for attention in attentions)
        return [(column_major(weight), bias, keys) for weight, bias, keys in fused]

    store = acting_cache(cast("nn.Module", backbone)).derived
    return derived(store, ("ring_weights", n_keys), sources, build)


def _compiled_call(
    backbone: RingBackbone,
    modules: Any,
    x: torch.Tensor,
    state: Any,
    start: torch.Tensor,
    weights: list[RingWeights],
    head: Head | None,
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """:func:`ring_step_in_place` through the backbone's compiled function.

    The compiled step is specialised on whether its inputs are inference tensors: x and
    ``start`` are made so here when they are not (a learner makes its bootstrap step's
    flags outside inference mode), so that rollouts, value estimates and ``predict``
    share one compiled step; the state, written in place, is taken as it is (a rollout's
    and ``predict``'s are plain tensors, a bootstrap's copy inference tensors)."""
    small = (x, start)
    if not all(t.is_inference() for t in small):
        with torch.inference_mode():
            x, start = (t if t.is_inference() else t.clone() for t in small)
    try:
        return compiled_ring_step(backbone)(modules, x, *state, start, weights, head)
    except torch._dynamo.exc.BackendCompilerFailed as error:
        raise RuntimeError(
            f"compile_step: torch.compile could not compile the acting step ({error}). "
            "Install what it needs (a C++ compiler on a CPU), or set compile_step to "
            "false (policy_kwargs backbone_kwargs, or policy.backbone_kwargs in a config)"
        ) from error


def compiled_ring_step(backbone: RingBackbone) -> Callable[..., Any]:
    """:func:`ring_step_in_place` compiled with ``torch.compile``, made at the first call and
    kept by ``backbone``.

    One graph, no Python per op: on a CPU the step's ~250 small ops cost more than its
    products, and the compiled step runs them as a few fused kernels. The first step
    compiles (tens of seconds on a CPU); a second batch size compiles once more, for any
    batch size (torch's dynamic shapes), and so does a state whose tensors are of the other
    kind (inference tensors or not) or another ``head``. The weights are arguments (the
    replica's tensors, the derived weights), so new weights of the same shapes reuse the
    compiled step. A copy of the backbone (``copy.deepcopy``, pickling) makes its own."""
    attributes = backbone.__dict__
    compiled = attributes.get(COMPILED_STEP)
    if compiled is None:
        compiled = torch.compile(ring_step_in_place, options=_COMPILE_OPTIONS)
        attributes[COMPILED_STEP] = compiled
    return compiled


def ring_step_in_place(
    modules: Any,
    x: torch.Tensor,
    hidden: torch.Tensor,
    memory_keys: torch.Tensor,
    memory_values: torch.Tensor,
    position: torch.Tensor,
    step: torch.Tensor,
    valid: torch.Tensor,
    start: torch.Tensor,
    weights: list[RingWeights],
    head: Head | None,
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """A whole ring step on the state's fields (those of :class:`~txrl.nn.memory.MemoryState`,
    in its order) through ``modules`` (the backbone or its replica): :func:`ring_layers`, the
    ring write (:func:`write_ring`) and ``head`` of the output. Returns the output (B, D), the
    step's layer inputs (B, L, D) and what ``head`` returned (empty without one)."""
    h, new_hidden, keys, values = ring_layers(
        modules, x, memory_keys, memory_values, position, valid, start, weights
    )
    fields = (hidden, memory_keys, memory_values, position, step, valid)
    write_ring(modules.memory_length, *fields, new_hidden, keys, values, start)
    return h, new_hidden, (() if head is None else head(h))


def ring_layers(
    modules: Any,
    x: torch.Tensor,
    memory_keys: torch.Tensor,
    memory_values: torch.Tensor,
    position: torch.Tensor,
    valid: torch.Tensor,
    start: torch.Tensor,
    weights: list[RingWeights],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The layers of one ring step of ``modules`` (the backbone or its replica), reading the
    state and writing nothing: inputs x (B, I), the cached keys and values (B, L, M, D), the
    write ``position`` (B,), ``valid`` (B, M), the steps that start an episode ``start``
    (B,) and each layer's fused attention ``weights`` (:func:`fused_ring_weights`). Blocks
    are position-wise, so they take the (B, D) rows as they are. Returns the output (B, D)
    and the step's layer inputs, keys and values (B, L, D) for the ring."""
    h = modules.embed(x)  # (B, I) -> (B, D)
    plan = ring_plan(modules.memory_length, position, valid, start, h.dtype)
    inputs, keys, values = [], [], []
    for layer, block in enumerate(attention_blocks(modules.blocks)):
        inputs.append(h)
        attended, key, value = attention_ring_step(
            block.attention,
            block.attention_input(h),
            memory_keys[:, layer],
            memory_values[:, layer],
            plan,
            weights[layer],
        )
        keys.append(key)
        values.append(value)
        h = block(h, attended)
    # L x (B, D) -> (B, L, D) each
    return h, torch.stack(inputs, dim=1), torch.stack(keys, dim=1), torch.stack(values, dim=1)


def attention_ring_step(
    attention: RelativeMultiHeadAttention,
    z: torch.Tensor,
    memory_keys: torch.Tensor,
    memory_values: torch.Tensor,
    plan: RingPlan,
    weights: RingWeights,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One layer's attention over a memory kept as a ring (slots in any order).

    ``z`` (B, D) the step's attention input; ``memory_keys``/``memory_values`` (B, M, D) the
    cached ones in ring order; ``plan`` the step's key order and mask, the same for every
    layer (:func:`ring_plan`); ``weights`` what
    :meth:`~txrl.nn.attention.RelativeMultiHeadAttention.ring_weights` returns for M + 1
    keys. One product gives the step's query terms, key and value; the rest is the
    attention's :meth:`~txrl.nn.attention.RelativeMultiHeadAttention.attend_one`. Returns
    the output (B, D) and the step's key and value (B, D) for the memory."""
    weight, bias, position_keys = weights
    fused = F.linear(z, weight, bias)  # (B, 4D)
    qu, qv, key, value = fused.split(attention.d_model, dim=-1)  # (B, D) each
    memory = (memory_keys, memory_values)
    return attention.attend_one(qu, qv, key, value, memory, plan, position_keys), key, value


def ring_plan(
    memory_length: int,
    position: torch.Tensor,
    valid: torch.Tensor,
    start: torch.Tensor,
    dtype: torch.dtype,
) -> RingPlan:
    """Key order and mask of one acting step, shared by the layers: slot j is
    ``(position - j - 1) mod M + 1`` steps back, so its place in the distances M .. 0
    is ``(j - position) mod M``; the step itself is last, at distance 0, always allowed.
    Slots of an earlier episode (or any, when this step starts one) are masked."""
    m = memory_length
    device = start.device
    slots = _indices(("slots", m, device), lambda: torch.arange(m, device=device))
    slot_index = (slots - position[:, None]).remainder_(m)  # (B, M)
    key_index = F.pad(slot_index, (0, 1), value=m)[:, None]  # (B, 1, M+1)
    keep = valid & ~start[:, None]  # (B, M)
    mask = torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill_(
        ~keep, float("-inf")
    )
    return RingPlan(key_index, F.pad(mask, (0, 1))[:, None])  # (B, 1, M+1) each


def write_ring(
    memory_length: int,
    hidden: torch.Tensor,
    memory_keys: torch.Tensor,
    memory_values: torch.Tensor,
    position: torch.Tensor,
    step: torch.Tensor,
    valid: torch.Tensor,
    new_hidden: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    start: torch.Tensor,
) -> None:
    """Write one step's layer inputs, keys and values (B, L, D) over the oldest slot of a
    state's fields (those of :class:`~txrl.nn.memory.MemoryState`, in its order), in place,
    and move its position, step and valid slots on."""
    b, depth, m, d = hidden.shape
    device = start.device

    def first_rows() -> torch.Tensor:  # (B, L): row (b, l, 0) of a (B * L * M, D) field
        return (
            torch.arange(b, device=device)[:, None] * (depth * m)
            + torch.arange(depth, device=device) * m
        )

    # row (b, l, position[b]) of each (B * L * M, D) field, b-major like (B, L) rows
    offsets = _indices(("ring_rows", b, depth, m, device), first_rows)  # (B, L)
    rows = (offsets + position[:, None]).flatten()  # (B * L,)
    for field, new in ((hidden, new_hidden), (memory_keys, keys), (memory_values, values)):
        if field.is_contiguous():
            field.view(b * depth * m, d).index_copy_(0, rows, new.detach().reshape(b * depth, d))
        else:  # e.g. a state made by a sequence pass (views of a longer window)
            envs = torch.arange(b, device=start.device)[:, None]  # (B, 1)
            layers = torch.arange(depth, device=start.device)[None, :]  # (1, L)
            field[envs, layers, position[:, None]] = new.detach()  # (B, L, D) rows
    valid.logical_and_(~start[:, None])  # a new episode forgets the old one
    valid.scatter_(1, position[:, None], True)
    step.masked_fill_(start, 0).add_(1)
    position.add_(1).remainder_(memory_length)
