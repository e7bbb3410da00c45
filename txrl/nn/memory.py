"""Transformer-XL's segment-level memory and the layer loop, shared by every backbone that
caches layer inputs (TrXL, TrXL-I, GTrXL and the window variants).

Dai et al. 2019, eq. (6) of ``references/000_4baccbf6ade0250f.txt``: layer l attends over
``[SG(m^{l-1}) ; h^{l-1}]``, its stop-gradient inputs of the last M steps and the current ones.
Legend: B envs, T steps, L layers (or depth steps), M memory slots, D width.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import torch
from torch import nn

from txrl.nn.acting.replica import ACTING_ATTRIBUTES, forget_acting_cache
from txrl.nn.acting.ring import ring_step
from txrl.nn.blocks import attention_blocks
from txrl.nn.protocol import Backbone, BackboneOutput
from txrl.nn.window import episode_time, next_valid, slide, window_at, window_mask

#: per-layer tensors as ``torch.stack`` takes them
TensorList = list[torch.Tensor] | tuple[torch.Tensor, ...]


class MemoryState(NamedTuple):
    """Per-env memory of a layer-memory backbone, env on axis 0 of every field.

    The M slots form a ring buffer: an acting step (:meth:`LayerMemoryBackbone.step`)
    overwrites the oldest slot, ``position``, in place instead of shifting the whole memory,
    so a step copies nothing of size M. Slot j of env b then holds the step
    ``(position[b] - j - 1) mod M + 1`` steps back. :meth:`~LayerMemoryBackbone.run` and
    :meth:`~LayerMemoryBackbone.state_at` return the slots oldest first (position 0).
    """

    hidden: torch.Tensor  # (B, L, M, D) cached layer inputs of the last M steps, stop-gradient
    keys: torch.Tensor  # (B, L, M, D) their keys (a cache, derived from hidden)
    values: torch.Tensor  # (B, L, M, D) their values (a cache, derived from hidden)
    position: torch.Tensor  # (B,) long, the slot the next step is written to (the oldest)
    step: torch.Tensor  # (B,) long, episode time of the next step (steps of the episode so far)
    valid: torch.Tensor  # (B, M) bool, True where the slot holds a step of the current episode


class MemoryTrace(NamedTuple):
    """What a rollout stores per step to rebuild the memory later: L*D floats, not L*M*D."""

    hidden: torch.Tensor  # (T, B, L, D) layer inputs of each step


def memory_in_use(valid: torch.Tensor) -> torch.Tensor:
    """Fraction of memory slots (B, M) in use; zero without memory."""
    return valid.float().mean() if valid.shape[1] else torch.zeros((), device=valid.device)


class LayerMemoryBackbone(Backbone):
    """Backbone with Transformer-XL's memory (eq. 6 of reference 000), per layer or depth step.

    State: :class:`MemoryState`; trace: :class:`MemoryTrace`. The layers are ``blocks``, each
    with ``attention_input(h)`` and ``forward(h, attended, stats)`` (:mod:`txrl.nn.blocks`)
    and an ``attention`` with ``project_memory(z) -> (keys, values)`` and
    ``over_memory(z, memory, new, plan, stats) -> (B, T, D)``: attend from the normalised
    inputs z (B, T, D) over the cached keys and values ``memory`` (B, M, D) and those of the
    T steps ``new`` (B, T, D), filling ``stats`` when given. :meth:`run` is the layer loop of
    eq. (6); a subclass may add per-layer plans (:meth:`attention_plans`), auxiliary losses
    and diagnostics. Backbones with a loop of their own (``reformer``, ``universal``) use the
    memory plumbing only.
    """

    state_type: ClassVar[Any] = MemoryState
    trace_type: ClassVar[Any] = MemoryTrace
    # Whether a one-step call attends over the ring as it lies (the acting wing's ring step,
    # :mod:`txrl.nn.acting.ring`, for blocks whose attention is relative attention);
    # otherwise every call first puts the slots oldest first.
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

        out_stats: dict[str, torch.Tensor] = {}
        layer_inputs, new_keys, new_values = [], [], []
        for layer, block in enumerate(attention_blocks(self.blocks)):
            layer_inputs.append(h)
            # h~ = [SG(m^{l-1}) ; h^{l-1}]: cached keys/values of the memory, new ones of h
            z = block.attention_input(h)  # (B, T, D)
            k_new, v_new = block.attention.project_memory(z)  # (B, T, D) each
            new_keys.append(k_new)
            new_values.append(v_new)
            memory = (state.keys[:, layer], state.values[:, layer])  # (B, M, D) each
            layer_stats: dict[str, torch.Tensor] | None = {} if stats else None
            attended = block.attention.over_memory(
                z, memory, (k_new, v_new), plans[layer], layer_stats
            )
            h = block(h, attended, layer_stats)
            if layer_stats is not None:
                out_stats.update({f"layer{layer}/{k}": v for k, v in layer_stats.items()})

        new_state = (
            self.next_state(state, layer_inputs, new_keys, new_values, episode_starts)
            if next_state
            else None
        )
        if stats:
            out_stats["memory_in_use"] = memory_in_use(state.valid)
            out_stats.update(self.extra_stats())
        step_trace = self.trace_of(layer_inputs) if trace else None
        return BackboneOutput(
            h.transpose(0, 1), new_state, step_trace, self.aux_losses(), out_stats
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
        place (O(L D) bytes written, nothing of size M copied; :mod:`txrl.nn.acting.ring`)
        and returns that state. :meth:`run` never changes its input and returns the slots
        oldest first."""
        return self.step_with_head(x, state, episode_starts, None, trace=trace)[1]

    def step_with_head(
        self,
        x: torch.Tensor,
        state: MemoryState,
        episode_starts: torch.Tensor,
        head: Callable[[torch.Tensor], tuple[torch.Tensor, ...]] | None,
        *,
        trace: bool = False,
    ) -> tuple[tuple[torch.Tensor, ...], BackboneOutput]:
        """:meth:`step`, and ``head`` (None: nothing) applied to its output (B, D): a
        policy's heads, which a compiled step (``compile_step``) runs in its graph, so an
        acting step is one compiled call; otherwise ``head(output)`` after the step. One
        step with gradients off, a memory and no dropout takes the ring step
        (:func:`txrl.nn.acting.ring.ring_step`); anything else is :meth:`run`."""
        self.check_inputs(x, state, episode_starts)
        dropout_on = self.training and self.config.dropout > 0.0
        if (
            self.ring_steps
            and x.shape[0] == 1
            and self.memory_length > 0
            and not dropout_on
            and not torch.is_grad_enabled()
        ):
            return ring_step(self, x, state, episode_starts, head, trace=trace)
        out = self.run(x, state, episode_starts, trace=trace)
        return (() if head is None else head(out.output[0])), out

    @property
    def compiles_step(self) -> bool:
        """Whether acting steps run the layer loop compiled (the ``compile_step`` setting)."""
        return bool(getattr(self.config, "compile_step", False))

    def clear_parameter_cache(self) -> None:
        """Forget what the acting step derived from the weights (:meth:`on_parameters_changed`)."""
        forget_acting_cache(self)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())
        for name in ACTING_ATTRIBUTES:  # this instance's compiled step and derived weights
            state.pop(name, None)
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

    def next_state(
        self,
        state: MemoryState,
        inputs: TensorList,
        keys: TensorList,
        values: TensorList,
        episode_starts: torch.Tensor,
    ) -> MemoryState:
        """The memory after the T steps, from each layer's inputs, keys and values (B, T, D);
        ``state`` has its slots oldest first (:meth:`ordered`), and so has the result."""
        return self.state_type(
            hidden=slide(state.hidden, torch.stack(inputs, dim=1).detach(), dim=2),
            keys=slide(state.keys, torch.stack(keys, dim=1).detach(), dim=2),
            values=slide(state.values, torch.stack(values, dim=1).detach(), dim=2),
            position=torch.zeros_like(state.position),  # slots oldest first
            step=episode_time(state.step, episode_starts)[:, -1] + 1,
            valid=next_valid(state.valid, episode_starts),  # seen from the step after the last
        )

    def trace_of(self, inputs: TensorList) -> MemoryTrace:
        """Each layer's inputs (B, T, D) -> the trace, (T, B, L, D)."""
        return self.trace_type(hidden=torch.stack(inputs, dim=2).transpose(0, 1).detach())
