"""The backbone protocol: the one interface every memory model implements.

A backbone maps a (T, B, input_dim) sequence to (T, B, output_dim) features while carrying
a per-env memory *state* from call to call::

    state = backbone.initial_state(batch_size)
    y, state = backbone(x, state, episode_starts)  # x (T, B, I), episode_starts (T, B) bool

``episode_starts[t, b]`` is True when a new episode begins at step t of env b: the memory
is cleared before that step is processed. Running T steps one call at a time and running
them as one sequence give the same outputs; learners rely on this.

The state is a NamedTuple of tensors with the **env on axis 0** of every field, so learners
slice, store and reset it with the helpers of `txrl.nn.state` without knowing what is
inside. Learners that train on segments of a rollout also use:

* [`Backbone.run`][txrl.nn.protocol.Backbone.run] with ``trace=True``: besides the output and the new state it returns
  a *trace*, a NamedTuple of tensors with (T, B) leading, small per step (for the TrXL
  family the layer inputs of each step, not an M-long memory copy);
* [`Backbone.state_at`][txrl.nn.protocol.Backbone.state_at]: rebuilds the state that was in force before step t of a
  rollout from the state at its start and its trace, so a training segment that starts at
  t sees exactly the memory its acting steps saw;
* [`Backbone.step`][txrl.nn.protocol.Backbone.step]: one acting step that may advance the state in place (the
  rollout's and ``predict``'s path);
* [`Backbone.refresh_state`][txrl.nn.protocol.Backbone.refresh_state]: recomputes caches derived from the parameters (TrXL's
  memory keys and values) after an update;
* [`Backbone.on_parameters_changed`][txrl.nn.protocol.Backbone.on_parameters_changed]: drops what modules derived from the parameters
  for acting steps (TrXL's positional keys). A training pass, ``train()`` / ``eval()``, a
  load and a copy drop or leave it by themselves; weights written otherwise with gradients
  off (``p.data``, ``p.copy_`` under ``torch.no_grad``) need this call;
* ``BackboneOutput.aux_losses``: named auxiliary losses (e.g. an adaptive span's L1
  penalty) that a learner adds with its own coefficients; ``stats`` holds diagnostics.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn


class BackboneOutput(NamedTuple):
    """Everything [`Backbone.run`][txrl.nn.protocol.Backbone.run] returns."""

    output: torch.Tensor  # (T, B, output_dim)
    # NamedTuple of tensors, env on axis 0, detached from the graph; None when run was called
    # with next_state=False
    state: Any
    trace: Any | None  # NamedTuple of tensors with (T, B) leading, or None when not asked for
    aux_losses: dict[str, torch.Tensor]  # scalar auxiliary losses (empty for most backbones)
    stats: dict[str, torch.Tensor]  # scalar diagnostics, only when asked for


class Backbone(nn.Module, abc.ABC):
    """Base class of all memory models. Subclasses implement `initial_state` and `run`.

    The default `state_at` assumes the trace is the sequence of states in force
    before each step (true for recurrent nets, whose state is small); backbones whose
    memory is a window of past steps override it.
    """

    input_dim: int
    output_dim: int
    #: Whether an acting step (:meth:`step` without gradients, one time step) never reads
    #: the device from the host (no ``.item()``, no shape that depends on values), so that
    #: a learner may capture it as a CUDA graph (``txrl.sb3.graphs``). Off unless a backbone
    #: says so; the test suite captures every backbone that does, on a GPU.
    graph_capturable: bool = False

    @abc.abstractmethod
    def initial_state(self, batch_size: int, device: torch.device | str | None = None) -> Any:
        """The empty memory of ``batch_size`` envs."""

    @abc.abstractmethod
    def run(
        self,
        x: torch.Tensor,
        state: Any,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
        next_state: bool = True,
    ) -> BackboneOutput:
        """Process ``x`` (T, B, I) from ``state``; see the module docstring.

        ``trace``: also return the trace (`state_at`); ``stats``: fill
        ``BackboneOutput.stats``; ``next_state`` False: ``BackboneOutput.state`` is None (a
        training pass that never reads it), so a backbone may skip building the memory after
        the T steps (for the TrXL family three L x (M+T) x D concatenations per call). The
        output, trace and auxiliary losses are the same either way.
        """

    def step(
        self, x: torch.Tensor, state: Any, episode_starts: torch.Tensor, *, trace: bool = False
    ) -> BackboneOutput:
        """One acting step (``x`` (1, B, I)) whose caller hands ``state`` over.

        Same outputs as `run`; when gradients are off a backbone may advance ``state``
        in place and return it (TrXL writes the step into its ring buffer), so ``state`` must
        not be used again (copy it first with `txrl.nn.state.clone_state` to keep it).
        The default calls `run`.
        """
        return self.run(x, state, episode_starts, trace=trace)

    def forward(
        self, x: torch.Tensor, state: Any, episode_starts: torch.Tensor
    ) -> tuple[torch.Tensor, Any]:
        out = self.run(x, state, episode_starts)
        return out.output, out.state

    def state_at(
        self, initial: Any, trace: Any, episode_starts: torch.Tensor, t: torch.Tensor
    ) -> Any:
        """State in force before step ``t[b]`` of env b, before any reset at that step.

        ``initial``: state at step 0 (env on axis 0, B envs); ``trace``: from `run` over
        the T steps, (T, B, ...); ``episode_starts`` (T, B); ``t`` (B,) long in [0, T).
        """
        del initial, episode_starts
        batch = torch.arange(t.shape[0], device=t.device)
        return type(trace)(*(field[t, batch] for field in trace))

    @property
    def trace_is_state(self) -> bool:
        """Whether a step's trace is the whole state before it: `state_at` as defined here,
        which reads step ``t`` of the trace and nothing else. A store that asks for the
        state at some steps only (a rollout buffer's segment starts) can then keep the
        trace of those steps alone."""
        return type(self).state_at is Backbone.state_at

    def refresh_state(self, state: Any) -> Any:
        """Recompute whatever the state caches from the parameters (after a parameter update).

        Learners call it before each rollout, so acting and training use the current weights
        on the carried memory. The default has no such cache and returns ``state``.
        """
        return state

    def without_caches(self, state: Any) -> Any:
        """``state`` without what `refresh_state` recomputes from the parameters, for a
        store that refreshes every state it hands out (a rollout buffer's kept segment
        states): TrXL drops its memory keys and values. The default returns ``state``."""
        return state

    def on_parameters_changed(self) -> None:
        """Drop every cache derived from the parameters, in this module and its submodules.

        A submodule with such a cache defines ``clear_parameter_cache()``. A training pass
        (any call with gradients on), ``train()`` / ``eval()`` and a loaded state dict drop
        the caches by themselves (e.g.
        [`txrl.nn.attention.RelativeMultiHeadAttention.derived_weights`][txrl.nn.attention.RelativeMultiHeadAttention.derived_weights]); calling this
        is needed after weights are written otherwise with gradients off, and harmless
        always.
        """
        for module in self.modules():
            clear = getattr(module, "clear_parameter_cache", None)
            if clear is not None:
                clear()

    def state_placement(self, device: torch.device | str | None = None) -> dict[str, Any]:
        """``device`` (the parameters' when None) and the parameters' dtype, as keyword
        arguments for the float fields of `initial_state`, so that an empty memory
        follows ``.double()`` and ``.to(device)`` as the weights do."""
        weight = next(self.parameters())
        return {"device": weight.device if device is None else device, "dtype": weight.dtype}

    def check_inputs(self, x: torch.Tensor, state: Any, episode_starts: torch.Tensor) -> None:
        """Raise a ValueError naming the problem when the inputs do not fit the protocol."""
        if x.dim() != 3 or x.shape[-1] != self.input_dim:
            raise ValueError(
                f"x must have shape (T, B, input_dim={self.input_dim}), got {tuple(x.shape)}"
            )
        if episode_starts.shape != x.shape[:2]:
            raise ValueError(
                f"episode_starts must have shape (T, B) = {tuple(x.shape[:2])}, got {tuple(episode_starts.shape)}"
            )
        if episode_starts.dtype != torch.bool:
            raise ValueError(f"episode_starts must be a bool tensor, got {episode_starts.dtype}")
        first = state[0]
        if first.shape[0] != x.shape[1]:
            raise ValueError(
                f"state holds {first.shape[0]} envs on axis 0 but x has batch size {x.shape[1]}"
            )


BackboneFactory = Callable[..., Backbone]

__all__ = ["Backbone", "BackboneFactory", "BackboneOutput"]
