"""Transformer-XL's segment-level memory and the layer loop, shared by every backbone that
caches layer inputs (TrXL, TrXL-I, GTrXL and the window variants).

Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context",
sec. 3.2 (segment-level recurrence): layer l attends over
``[SG(m^{l-1}) ; h^{l-1}]``, its stop-gradient inputs of the last M steps and the current ones.
Legend: B envs, T steps, L layers (or depth steps), M memory slots, D width.

The layer loop (`LayerMemoryBackbone.layers`) has two callers:
`run`, T steps over the memory with its slots oldest first, and
an acting step (`ring_step`), one query row per env over the
memory kept as a ring, which passes in what differs (each slot's distance and the window
mask: [`RingPlan`][txrl.nn.attention.RingPlan]), so acting computes what training computes by
construction. Both then make the one memory write (`LayerMemoryBackbone.write`): the
steps' layer inputs, keys and values go over the oldest slots of the ring, and position,
episode time and valid slots move on; the acting step writes in place, the sequence pass
returns a new state, read out oldest first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from txrl.nn.attention import DerivedWeights, RingPlan
from txrl.nn.blocks import attention_blocks
from txrl.nn.protocol import Backbone, BackboneOutput
from txrl.nn.state import clone_state
from txrl.nn.window import episode_time, time_after, valid_after, window_at, window_mask

#: per-layer tensors as ``torch.stack`` takes them
TensorList = list[torch.Tensor] | tuple[torch.Tensor, ...]
#: a policy's heads applied to an acting step's output (B, D)
Head = Callable[[torch.Tensor], tuple[torch.Tensor, ...]]
#: where a backbone keeps its compiled acting step (``compile_step``), left out of its copies
COMPILED_STEP = "_compiled_step_fn"
# a C++ wrapper around the compiled kernels: no Python between them (on a CPU the wrapper's
# per-call cost is what the compiled step saves)
_COMPILE_OPTIONS: dict[str, str | int | bool | Callable[..., Any]] = {"cpp_wrapper": True}


class MemoryState(NamedTuple):
    """Per-env memory of a layer-memory backbone, env on axis 0 of every field.

    The M slots form a ring buffer: an acting step (`LayerMemoryBackbone.step`)
    overwrites the oldest slot, ``position``, in place instead of shifting the whole memory,
    so a step copies nothing of size M. Slot j of env b then holds the step
    ``(position[b] - j - 1) mod M + 1`` steps back. `run` and
    `state_at` return the slots oldest first (position 0).
    """

    hidden: torch.Tensor  # (B, L, M, D) cached layer inputs of the last M steps, stop-gradient
    keys: torch.Tensor  # (B, L, M, D) their keys (a cache, derived from hidden)
    values: torch.Tensor  # (B, L, M, D) their values (a cache, derived from hidden)
    position: torch.Tensor  # (B,) long, the slot the next step is written to (the oldest)
    step: torch.Tensor  # (B,) long, episode time of the next step (steps of the episode so far)
    valid: torch.Tensor  # (B, M) bool, True where the slot holds a step of the current episode


class LayerPass(NamedTuple):
    """What the layer loop (`LayerMemoryBackbone.layers`) returns."""

    output: torch.Tensor  # (B, T, D) the last layer's output
    inputs: list[torch.Tensor]  # L x (B, T, D) each layer's inputs, what the memory caches
    keys: list[torch.Tensor]  # L x (B, T, D) their keys
    values: list[torch.Tensor]  # L x (B, T, D) their values
    stats: dict[str, torch.Tensor]  # per-layer diagnostics, when asked


class MemoryTrace(NamedTuple):
    """What a rollout stores per step to rebuild the memory later: L*D floats, not L*M*D."""

    hidden: torch.Tensor  # (T, B, L, D) layer inputs of each step


def by_layer(
    inputs: TensorList, keys: TensorList, values: TensorList
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each layer's inputs, keys and values with the layer on axis 1: L x (B, T, D) ->
    (B, L, T, D) each (L x (B, D) -> (B, L, D) for one step's rows)."""
    return torch.stack(inputs, dim=1), torch.stack(keys, dim=1), torch.stack(values, dim=1)


def memory_in_use(valid: torch.Tensor) -> torch.Tensor:
    """Fraction of memory slots (B, M) in use; zero without memory."""
    return valid.float().mean() if valid.shape[1] else torch.zeros((), device=valid.device)


class LayerMemoryBackbone(Backbone):
    """Backbone with Transformer-XL's memory (Dai et al. 2019, sec. 3.2), per layer or depth step.

    State: [`MemoryState`][txrl.nn.memory.MemoryState]; trace: [`MemoryTrace`][txrl.nn.memory.MemoryTrace]. The layers are ``blocks``, each
    with ``attention_input(h)`` and ``forward(h, attended, stats)`` ([`txrl.nn.blocks`][txrl.nn.blocks])
    and an ``attention`` with ``project_memory(z) -> (keys, values)`` and
    ``over_memory(z, memory, new, plan, stats) -> (B, T, D)``: attend from the normalised
    inputs z (B, T, D) over the cached keys and values ``memory`` (B, M, D) and those of the
    T steps ``new`` (B, T, D), filling ``stats`` when given. `run` is the layer loop of
    eq. (6); a subclass may add per-layer plans (`attention_plans`), auxiliary losses
    and diagnostics. Backbones with a loop of their own (``reformer``, ``universal``) use the
    memory plumbing only.
    """

    state_type: ClassVar[Any] = MemoryState
    trace_type: ClassVar[Any] = MemoryTrace
    # Whether an acting step attends over the ring as it lies (:meth:`ring_step`, for
    # blocks whose attention is relative attention); otherwise every call first puts the
    # slots oldest first.
    ring_steps: ClassVar[bool] = False
    graph_capturable = True
    blocks: nn.ModuleList

    def __init__(self, config: Any, depth: int) -> None:
        """``config``: common settings with ``memory_length``; ``depth``: L."""
        super().__init__()
        self.config = config
        self.input_dim = config.input_dim
        self.output_dim = config.d_model
        self.memory_length = config.memory_length
        self.depth = depth  # L, the layers (or depth steps) with a memory
        self.embed = nn.Linear(self.input_dim, config.d_model)

    # ------------------------------------------------------------------ the layer loop

    def attention_plans(self, allowed: torch.Tensor, query_time: torch.Tensor) -> list[Any]:
        """Per layer, what its attention needs besides z, keys and values.

        ``allowed`` (B, T, K) the sliding-window mask, ``query_time`` (B, T) each step's index
        in its episode. Default: the window mask for every layer.
        """
        del query_time
        return [allowed] * len(self.blocks)

    def aux_losses(self) -> dict[str, torch.Tensor]:
        return {}

    def extra_stats(self) -> dict[str, torch.Tensor]:
        return {}

    def layers(
        self,
        h: torch.Tensor,
        memory_keys: torch.Tensor,
        memory_values: torch.Tensor,
        plans: list[Any],
        stats: bool,
    ) -> LayerPass:
        """The layer loop of eq. (6): each layer attends from its inputs h over the cached
        keys and values of its memory (B, L, M, D) and those of h, under its plan: T steps
        h (B, T, D) under `attention_plans` (a sequence), or one step's rows h (B, D)
        under `ring_plan` (an acting step over the ring). Blocks are position-wise,
        so they take either. Reads the memory, writes nothing."""
        out_stats: dict[str, torch.Tensor] = {}
        layer_inputs, new_keys, new_values = [], [], []
        for layer, block in enumerate(attention_blocks(self.blocks)):
            layer_inputs.append(h)
            # h~ = [SG(m^{l-1}) ; h^{l-1}]: cached keys/values of the memory, new ones of h
            z = block.attention_input(h)  # (B, T, D)
            k_new, v_new = block.attention.project_memory(z)  # (B, T, D) each
            new_keys.append(k_new)
            new_values.append(v_new)
            memory = (memory_keys[:, layer], memory_values[:, layer])  # (B, M, D) each
            layer_stats: dict[str, torch.Tensor] | None = {} if stats else None
            attended = block.attention.over_memory(
                z, memory, (k_new, v_new), plans[layer], layer_stats
            )
            h = block(h, attended, layer_stats)
            if layer_stats is not None:
                out_stats.update({f"layer{layer}/{k}": v for k, v in layer_stats.items()})
        return LayerPass(h, layer_inputs, new_keys, new_values, out_stats)

    def run(
        self,
        x: torch.Tensor,
        state: MemoryState,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
        next_state: bool = True,
    ) -> BackboneOutput:
        self.check_inputs(x, state, episode_starts)
        state = self.ordered(state)
        h = self.embed(x).transpose(0, 1)  # (T, B, I) -> (B, T, D)
        allowed = window_mask(state.valid, episode_starts, self.memory_length)  # (B, T, K)
        query_time = episode_time(state.step, episode_starts)  # (B, T)
        plans = self.attention_plans(allowed, query_time)
        out = self.layers(h, state.keys, state.values, plans, stats)
        new_state = (
            self.write(state, *by_layer(out.inputs, out.keys, out.values), episode_starts)
            if next_state
            else None
        )
        out_stats = out.stats
        if stats:
            out_stats["memory_in_use"] = memory_in_use(state.valid)
            out_stats.update(self.extra_stats())
        step_trace = self.trace_of(out.inputs) if trace else None
        return BackboneOutput(
            out.output.transpose(0, 1), new_state, step_trace, self.aux_losses(), out_stats
        )

    # ------------------------------------------------------------------ acting on the ring

    def step(
        self,
        x: torch.Tensor,
        state: MemoryState,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
    ) -> BackboneOutput:
        """One acting step; without gradients it writes the step into ``state``'s ring in
        place (O(L D) bytes written, nothing of size M copied: `ring_step`) and
        returns that state. `run` never changes its input and returns the slots
        oldest first."""
        return self.step_with_head(x, state, episode_starts, None, trace=trace)[1]

    def step_with_head(
        self,
        x: torch.Tensor,
        state: MemoryState,
        episode_starts: torch.Tensor,
        head: Head | None,
        *,
        trace: bool = False,
    ) -> tuple[tuple[torch.Tensor, ...], BackboneOutput]:
        """`step`, and ``head`` (None: nothing) applied to its output (B, D): a
        policy's heads, which a compiled step (``compile_step``) runs in its graph, so an
        acting step is one compiled call; otherwise ``head(output)`` after the step. One
        step with gradients off, a memory and no dropout is `ring_step` (compiled with
        ``compile_step`` on a CPU); anything else is `run`."""
        self.check_inputs(x, state, episode_starts)
        dropout_on = self.training and self.config.dropout > 0.0
        if (
            not self.ring_steps
            or x.shape[0] != 1
            or self.memory_length == 0
            or dropout_on
            or torch.is_grad_enabled()
        ):
            out = self.run(x, state, episode_starts, trace=trace)
            return (() if head is None else head(out.output[0])), out
        if state.hidden.is_inference() and not torch.is_inference_mode_enabled():
            # torch forbids writing inference tensors outside inference mode
            state = clone_state(state)
        start = episode_starts[0]  # (B,)
        if self.compiles_step and x.device.type == "cpu":
            weights = self.ring_weights()
            h, inputs, heads = compiled_call(self, x[0], state, start, weights, head)
        else:
            h, inputs, heads = self.ring_step(x[0], *state, start, self.ring_weights(), head)
        step_trace = self.trace_type(hidden=inputs[None]) if trace else None  # (1, B, L, D)
        return heads, BackboneOutput(h[None], state, step_trace, self.aux_losses(), {})

    def ring_step(
        self,
        x: torch.Tensor,
        hidden: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        position: torch.Tensor,
        step: torch.Tensor,
        valid: torch.Tensor,
        start: torch.Tensor,
        weights: list[DerivedWeights],
        head: Head | None,
        per_slot: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
        """One acting step over the ring, on the fields of a [`MemoryState`][txrl.nn.memory.MemoryState] (in its
        order), which it advances in place: the layer loop (`layers`) with one query
        row per env and the step's `ring_plan` (each layer's with its attention's
        ``weights``, `ring_weights`, and the products over the memory ``per_slot``
        when compiled, [`RingPlan`][txrl.nn.attention.RingPlan]), then the memory write
        (`write`, in place) and ``head`` of the output. x (B, I), ``start`` (B,) bool.
        Returns the output (B, D), the step's layer inputs (B, L, D) and what ``head``
        returned (empty without one)."""
        h = self.embed(x)  # (B, I) -> (B, D)
        plan = self.ring_plan(position, valid, start[None])._replace(per_slot=per_slot)
        plans = [plan._replace(weights=w) for w in weights]
        out = self.layers(h, keys, values, plans, stats=False)
        inputs, new_keys, new_values = by_layer(out.inputs, out.keys, out.values)  # (B, L, D)
        state = MemoryState(hidden, keys, values, position, step, valid)
        one_step = inputs.unsqueeze(2), new_keys.unsqueeze(2), new_values.unsqueeze(2)
        self.write(state, *one_step, start.unsqueeze(0), in_place=True)  # (B, L, 1, D) each
        return out.output, inputs, (() if head is None else head(out.output))

    def ring_plan(
        self, position: torch.Tensor, valid: torch.Tensor, episode_starts: torch.Tensor
    ) -> RingPlan:
        """Key order and mask of one step over the ring, shared by the layers: the window
        mask of a sequence (`window_mask`, which for one step does
        not depend on the slots' order), and each slot's distance read from the write
        ``position`` (B,): slot j is ``(position - j - 1) mod M + 1`` steps back, so its
        place in the distances M .. 0 is ``(j - position) mod M``; the step itself is last,
        at distance 0. ``valid`` (B, M), ``episode_starts`` (1, B)."""
        m = self.memory_length
        allowed = window_mask(valid, episode_starts, m)  # (B, 1, M+1)
        slots = torch.arange(m, device=position.device)
        slot_index = (slots - position[:, None]).remainder(m)  # (B, M)
        key_index = F.pad(slot_index, (0, 1), value=m)[:, None]  # (B, 1, M+1)
        mask = torch.zeros(allowed.shape, dtype=self.embed.weight.dtype, device=allowed.device)
        return RingPlan(key_index, mask.masked_fill_(~allowed, float("-inf")), None)

    def ring_weights(self) -> list[DerivedWeights]:
        """Each layer's attention's derived weights for the M + 1 keys of a ring step
        ([`derived_weights`][txrl.nn.attention.RelativeMultiHeadAttention.derived_weights])."""
        n_keys = self.memory_length + 1
        return [block.attention.derived_weights(n_keys) for block in attention_blocks(self.blocks)]

    @property
    def compiles_step(self) -> bool:
        """Whether acting steps run the layer loop compiled (the ``compile_step`` setting)."""
        return bool(getattr(self.config, "compile_step", False))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())
        state.pop(COMPILED_STEP, None)  # this instance's compiled step: a copy compiles its own
        return state

    def ordered(self, state: MemoryState) -> MemoryState:
        """``state`` with its slots oldest first (position 0); itself when already so."""
        m = self.memory_length
        # only a ring step moves the position; checked without reading the device otherwise
        if m == 0 or not self.ring_steps or not bool(state.position.any()):
            return state
        order = (state.position[:, None] + torch.arange(m, device=state.position.device)) % m
        index = order[:, None, :, None].expand_as(state.hidden)  # (B, L, M, D)
        return state._replace(
            hidden=state.hidden.gather(2, index),
            keys=state.keys.gather(2, index),
            values=state.values.gather(2, index),
            position=torch.zeros_like(state.position),
            valid=state.valid.gather(1, order),
        )

    # ------------------------------------------------------------------ memory plumbing

    def project_hidden(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of the cached layer inputs (B, L, M, D) -> 2 x (B, L, M, D)."""
        keys, values = zip(
            *(
                block.attention.project_memory(block.attention_input(hidden[:, layer]))
                for layer, block in enumerate(attention_blocks(self.blocks))
            ),
            strict=True,
        )
        return torch.stack(keys, dim=1), torch.stack(values, dim=1)

    def initial_state(
        self, batch_size: int, device: torch.device | str | None = None
    ) -> MemoryState:
        """hidden, keys, values (B, L, M, D) zeros of the weights' dtype, position and step (B,)
        zero, valid (B, M) False."""
        placement = self.state_placement(device)
        device = placement["device"]
        shape = (batch_size, self.depth, self.memory_length, self.config.d_model)
        valid = torch.zeros((batch_size, self.memory_length), dtype=torch.bool, device=device)
        memory = (torch.zeros(shape, **placement) for _ in range(3))
        counters = (torch.zeros((batch_size,), dtype=torch.long, device=device) for _ in range(2))
        return self.state_type(*memory, *counters, valid)

    def state_at(
        self,
        initial: MemoryState,
        trace: MemoryTrace,
        episode_starts: torch.Tensor,
        t: torch.Tensor,
    ) -> MemoryState:
        """The memory before step ``t[b]``, rebuilt from the trace, and its episode time (one
        past that of step t-1, the carried-in one at t = 0).

        Keys and values are re-projected from the stop-gradient layer inputs, so when called
        with gradients on, the projection weights get the gradient through memory as in
        Transformer-XL's training.
        """
        initial = self.ordered(initial)
        # (B, L, M, D) <-> window entries (B, M, L, D)
        hidden, valid = window_at(
            initial.hidden.transpose(1, 2), trace.hidden, initial.valid, episode_starts, t
        )
        hidden = hidden.transpose(1, 2)  # (B, M, L, D) -> (B, L, M, D)
        times = episode_time(initial.step, episode_starts)  # (B, T)
        before = torch.cat((initial.step[:, None], times + 1), dim=1)  # (B, T+1)
        step = before.gather(1, t[:, None])[:, 0]
        position = torch.zeros_like(step)
        return self.state_type(hidden, *self.project_hidden(hidden), position, step, valid)

    def refresh_state(self, state: MemoryState) -> MemoryState:
        """Re-project the cached keys and values of the memory with the current weights."""
        keys, values = self.project_hidden(state.hidden)
        return state._replace(keys=keys, values=values)

    def without_caches(self, state: MemoryState) -> MemoryState:
        """``state`` with no memory keys and values: (B, L, 0, D) each, which
        `refresh_state` projects again from the layer inputs (two thirds of the bytes
        of the memory)."""
        empty = state.hidden[:, :, :0]  # (B, L, 0, D), no storage of its own
        return state._replace(keys=empty, values=empty)

    def write(
        self,
        state: MemoryState,
        inputs: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        episode_starts: torch.Tensor,
        *,
        in_place: bool = False,
    ) -> MemoryState:
        """The memory write of sec. 3.2: T steps' layer inputs, their keys and values
        (B, L, T, D) each, stop-gradient, enter the window of the last M steps, and its
        position, episode time (`time_after`) and valid slots (`valid_after`) move on.
        ``episode_starts`` (T, B).

        The M slots are a ring with its oldest slot at ``position``: step t goes to slot
        ``(position + t) mod M`` (the last M steps when T >= M), and the position moves on by
        T. ``in_place`` (an acting step): written into ``state``'s own tensors, which it
        returns, the slots staying where they lie (O(T L D) bytes written, nothing of size M
        copied). Otherwise (a sequence pass): ``state`` is left as it is, and the result
        holds the same window read out oldest first (position 0), the layout
        `run` and `state_at` return."""
        b, depth, m, d = state.hidden.shape
        t = episode_starts.shape[0]
        n = min(t, m)  # the steps that stay in the window
        position = state.position
        device = position.device
        # stop-gradient (an acting step's entries have none to stop)
        new = tuple(f.detach() if f.requires_grad else f for f in (inputs, keys, values))
        kept, steps_valid = valid_after(state.valid, episode_starts)  # (B, M), (B, T)
        step = time_after(state.step, episode_starts)  # (B,)
        if not in_place:
            # slot i of the result: entry T + i of the stream [slots oldest first; T steps],
            # read from [slots as they lie; T steps]
            stream_index = t + torch.arange(m, device=device)  # (M,)
            older = (position[:, None] + stream_index).remainder(max(m, 1))  # (B, M)
            source = torch.where(stream_index < m, older, stream_index)  # (B, M)
            # row (b, l, source) of a (B * L * (M + T), D) stream, for each slot of the result
            lanes = torch.arange(b * depth, device=device).view(b, depth, 1)  # b * L + l
            rows = (lanes * (m + t) + source.unsqueeze(1)).flatten()  # (B * L * M,)
            hidden, keys, values = (
                torch.cat((field, entries), dim=2)
                .view(-1, d)
                .index_select(0, rows)
                .view(field.shape)
                for field, entries in zip(state[:3], new, strict=True)
            )
            valid = torch.cat((kept, steps_valid), dim=1).gather(1, source)
            return state._replace(
                hidden=hidden,
                keys=keys,
                values=values,
                position=torch.zeros_like(position),
                step=step,
                valid=valid,
            )
        if n == t == 1:  # one step (acting): the oldest slot, position < M
            slots = position.unsqueeze(1)  # (B, 1)
        else:
            slots = (position[:, None] + torch.arange(t - n, t, device=device)).remainder(max(m, 1))
        if n < t:  # the steps that stay
            new, steps_valid = tuple(f[:, :, t - n :] for f in new), steps_valid[:, t - n :]
        lanes = torch.arange(b * depth, device=device).view(b, depth, 1)  # b * L + l
        slot = slots.unsqueeze(1)  # (B, 1, n)
        # row (b, l, slot) of a (B * L * M, D) field, b-major like the (B, L, n) entries
        rows = (lanes * m + slot).flatten()  # (B * L * n,)
        for field, entries in zip(state[:3], new, strict=True):  # entries (B, L, n, D)
            if field.is_contiguous():
                field.view(-1, d).index_copy_(0, rows, entries.reshape(-1, d))
            else:  # e.g. the caches of a rebuilt state, views of a longer window
                field[lanes // depth, lanes % depth, slot] = entries
        state.valid.copy_(kept).scatter_(1, slots, steps_valid)
        state.step.copy_(step)
        position.add_(t).remainder_(max(m, 1))
        return state

    def trace_of(self, inputs: TensorList) -> MemoryTrace:
        """Each layer's inputs (B, T, D) -> the trace, (T, B, L, D)."""
        return self.trace_type(hidden=torch.stack(inputs, dim=2).transpose(0, 1).detach())


def compiled_call(
    backbone: LayerMemoryBackbone,
    x: torch.Tensor,
    state: MemoryState,
    start: torch.Tensor,
    weights: list[DerivedWeights],
    head: Head | None,
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """`LayerMemoryBackbone.ring_step` through ``torch.compile`` (``compile_step``),
    compiled at the first call and kept by ``backbone`` (a copy compiles its own).

    One graph, no Python per op: on a CPU the step's ~250 small ops cost more than its
    products, and the compiled step runs them as a few fused kernels. The first step
    compiles (tens of seconds on a CPU); a second batch size compiles once more, for any
    batch size (torch's dynamic shapes), and so does a state whose tensors are of the other
    kind (inference tensors or not) or another ``head``. The parameters and the derived
    ``weights`` are the graph's inputs, so new weights of the same shapes reuse it. x and
    ``start`` are made inference tensors when they are not (a learner makes its bootstrap
    step's flags outside inference mode), so that rollouts, value estimates and ``predict``
    share one compiled step; the state, written in place, is taken as it is."""
    small = (x, start)
    if not all(t.is_inference() for t in small):
        with torch.inference_mode():
            x, start = (t if t.is_inference() else t.clone() for t in small)
    compiled = backbone.__dict__.get(COMPILED_STEP)
    if compiled is None:
        compiled = torch.compile(type(backbone).ring_step, options=_COMPILE_OPTIONS)
        backbone.__dict__[COMPILED_STEP] = compiled
    try:
        return compiled(backbone, x, *state, start, weights, head, True)  # products per slot
    except RuntimeError as error:
        raise RuntimeError(
            f"compile_step: torch.compile could not compile or run the acting step ({error}). "
            "Install what it needs (a C++ compiler on a CPU), or set compile_step to "
            "false (policy_kwargs backbone_kwargs, or policy.backbone_kwargs in a config)"
        ) from error
