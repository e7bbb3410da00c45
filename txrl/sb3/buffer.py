"""Rollout storage for memory policies: SB3's rollout buffer plus per-env memory streams.

Legend: N steps per env in the rollout (``buffer_size``), B envs, S steps per segment,
G segments in a minibatch.

Besides what SB3's ``RolloutBuffer`` keeps (and its GAE, reused as is), the buffer keeps

* ``initial_memory``: each env's backbone state when the rollout began (the memory carried
  in from the previous rollout), env on axis 0; without what ``backbone.refresh_state``
  recomputes where the trace is the state (``backbone.without_caches``: the Compressive
  Transformer's keys and values), which no segment then reads from it;
* ``trace``: what the backbone reported per step while acting (for the TrXL family the
  L * D layer inputs of the step), (N, B, ...). Where the trace of a step is the whole
  state before it (``backbone.trace_is_state``: the Compressive Transformer, the RNNs), only
  the steps a segment can start at are kept (`keep_trace_every`), (N / S, B, ...): the
  others would be stored and never read.

Training sequences are *segments*: S consecutive steps of one env. A segment starting at
step t is recomputed, with gradient, from ``backbone.state_at(initial_memory, trace, ..., t)``,
the memory it had while acting (Transformer-XL's segment recurrence, Dai et al. 2019, section 3.2),
so the training pass sees exactly what acting saw. Bytes per transition grow with the
trace (L * D for TrXL), not with the memory length.

The memory of every segment start changes only with the rollout, and what in it derives from
the weights is what ``backbone.refresh_state`` recomputes. So the buffer rebuilds the states
of all segment starts once per rollout, without gradient (one ``state_at`` per env, the
env's trace read in place), and a minibatch takes its segments' rows of them and refreshes
those with the current weights, with gradient: the same state and the same gradients as
``state_at`` with gradients on, without copying each env's whole trace and rebuilding its
stream per minibatch and per epoch. The kept states hold nothing that ``refresh_state``
recomputes (``backbone.without_caches``: for TrXL the layer inputs, not their keys and
values). Where those states would take more than `SEGMENT_STATES_MAX_BYTES` (a long
memory, many segments) each minibatch rebuilds its segments' states instead, as
``state_at`` from the trace.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple

import numpy as np
import torch
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer

from txrl.nn.protocol import Backbone
from txrl.nn.state import index_state, state_nbytes

#: The most bytes the states of all segment starts of a rollout may take to be kept for
#: the rollout's minibatches (see the module docstring); above it, each minibatch rebuilds
#: its own. At M = 64 slots of a 3-layer, width-128 TrXL, 32 segments take 9.4 MB.
SEGMENT_STATES_MAX_BYTES = 256 * 2**20


class SegmentBatch(NamedTuple):
    """A minibatch of G segments of S steps each."""

    observations: torch.Tensor | dict[str, torch.Tensor]  # (S, G, *obs_shape)
    actions: torch.Tensor  # (S, G, action_dim)
    old_values: torch.Tensor  # (S, G)
    old_log_prob: torch.Tensor  # (S, G)
    advantages: torch.Tensor  # (S, G)
    returns: torch.Tensor  # (S, G)
    episode_starts: torch.Tensor  # (S, G) bool
    memory: Any  # backbone state before each segment's first step, G on axis 0
    extras: dict[str, torch.Tensor]  # per-step extras a learner stored, (S, G, ...)
    env_index: torch.Tensor  # (G,) env of each segment
    start: torch.Tensor  # (G,) rollout step at which each segment begins


class _MemoryStreams:
    """Mixin adding memory streams and segment sampling to SB3's rollout buffers."""

    buffer_size: int
    n_envs: int
    device: torch.device
    initial_memory: Any
    trace: Any
    _trace_steps: list[Any]
    # the rollout, in SB3's buffer that this mixes into: (N, B, ...) arrays
    observations: Any  # an array, or a dict of arrays for a dict observation space
    actions: np.ndarray
    values: np.ndarray
    log_probs: np.ndarray
    advantages: np.ndarray
    returns: np.ndarray
    episode_starts: np.ndarray

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]  # SB3's buffer, after this mixin in the MRO, has it
        self.initial_memory = None
        self.trace = None
        self._trace_steps = []
        self._trace_seen = 0
        self.trace_stride = 1
        self.extras: dict[str, torch.Tensor] = {}
        self._extra_steps: dict[str, list[torch.Tensor]] = {}
        # (backbone, segment_length, states of every segment start or None when too large)
        self._segment_states: tuple[Backbone, int, Any] | None = None

    def set_initial_memory(self, memory: Any) -> None:
        """The backbone state of every env at the rollout's first step."""
        self.initial_memory = memory

    def keep_trace_every(self, stride: int) -> None:
        """Keep the trace of steps 0, ``stride``, 2 ``stride``, ... of this rollout only, for a
        backbone whose trace is its state (``backbone.trace_is_state``) trained on segments
        whose length is a multiple of ``stride``; call before the rollout's first
        `add_trace`."""
        if stride < 1 or self.buffer_size % stride:
            raise ValueError(
                f"keep_trace_every: stride must divide the rollout's {self.buffer_size} steps, "
                f"got {stride}"
            )
        if self._trace_seen:
            raise RuntimeError("keep_trace_every: the rollout has already stored a trace")
        self.trace_stride = stride

    def wants_trace(self) -> bool:
        """Whether `add_trace` keeps the next step's trace (`keep_trace_every`): a rollout
        need not ask its backbone for the others (for a trace that is the whole state, a
        copy of the memory per step)."""
        return self._trace_seen % self.trace_stride == 0

    def add_trace(self, step_trace: Any | None) -> None:
        """The backbone's trace of one acting step, (1, B, ...); None for a step whose trace
        is not kept (`wants_trace` False)."""
        if self.wants_trace():
            if step_trace is None:
                raise ValueError(
                    f"add_trace: the trace of step {self._trace_seen} is kept, got None"
                )
            self._trace_steps.append(step_trace)
        self._trace_seen += 1
        if self._trace_seen == self.buffer_size:
            kept = self._trace_steps
            self.trace = type(kept[0])(*(torch.cat(f) for f in zip(*kept, strict=True)))
            self._trace_steps = []

    def add_extra(self, name: str, value: torch.Tensor) -> None:
        """A learner's own per-step data for all envs, (B, ...); stacked to (N, B, ...) when full."""
        steps = self._extra_steps.setdefault(name, [])
        steps.append(value.detach())
        if len(steps) == self.buffer_size:
            self.extras[name] = torch.stack(steps)
            del self._extra_steps[name]

    def trace_nbytes_per_transition(self) -> float:
        """Bytes the memory streams take per stored transition (trace plus carried-in memory)."""
        total = state_nbytes(self.trace) + state_nbytes(self.initial_memory)
        return total / (self.buffer_size * self.n_envs)

    def segments(
        self,
        backbone: Backbone,
        segment_length: int,
        segments_per_batch: int,
        *,
        shuffle: bool = True,
        generator: np.random.Generator | None = None,
    ) -> Generator[SegmentBatch, None, None]:
        """Yield minibatches of segments covering the whole rollout once.

        The memory of each segment is rebuilt with ``backbone.state_at`` at the time the
        batch is drawn, so a caller with gradients on gets gradients through it.
        """
        if self.trace is None or self.initial_memory is None:
            raise RuntimeError("the rollout is not complete: no trace or initial memory was stored")
        if segment_length % self.trace_stride:
            raise ValueError(
                f"segments of {segment_length} steps start where the buffer kept no trace: it "
                f"kept every {self.trace_stride}th step's (keep_trace_every); use a multiple"
            )
        per_env = self.buffer_size // segment_length
        envs = np.repeat(np.arange(self.n_envs), per_env)  # (B * N/S,)
        starts = np.tile(np.arange(per_env) * segment_length, self.n_envs)
        order = np.arange(len(envs))
        if shuffle:
            order = (generator or np.random.default_rng()).permutation(len(envs))
        starts_t = torch.as_tensor(self.episode_starts, device=self.device).bool()  # (N, B)
        states = self._states_of_segments(backbone, segment_length, starts_t)
        for first in range(0, len(order), segments_per_batch):
            chosen = order[first : first + segments_per_batch]
            if states is None:
                memory = None
            else:
                # rows of segment (env, start) are env-major, as ``envs`` and ``starts``.
                # The layer inputs do not depend on the weights: kept for every minibatch and
                # epoch. Their keys and values do, and the optimizer steps between minibatches,
                # so each minibatch projects its rows anew (with gradient, as Transformer-XL
                # trains them): no projection survives from one minibatch to the next.
                memory = backbone.refresh_state(
                    index_state(states, torch.as_tensor(chosen, device=self.device))
                )
            yield self._segment_batch(
                backbone, envs[chosen], starts[chosen], segment_length, starts_t, memory
            )

    def all_segments(self, backbone: Backbone, segment_length: int) -> SegmentBatch:
        """The whole rollout as one batch of segments, in order."""
        return next(
            self.segments(backbone, segment_length, self.n_envs * self.buffer_size, shuffle=False)
        )

    def _states_of_segments(
        self, backbone: Backbone, segment_length: int, episode_starts: torch.Tensor
    ) -> Any:
        """The state before every segment start, (B * N/S) rows env-major, without gradient
        (its parameter-derived part is refreshed per minibatch); built at the rollout's first
        call for this backbone and segment length, then kept. None above
        `SEGMENT_STATES_MAX_BYTES`."""
        kept = self._segment_states
        if kept is not None and kept[0] is backbone and kept[1] == segment_length:
            return kept[2]
        per_env = self.buffer_size // segment_length
        start_t = torch.arange(per_env, device=self.device) * segment_length  # (N/S,)
        parts = []
        with torch.no_grad():
            for env in range(self.n_envs):
                # env's memory, trace and starts as per_env copies of one env: views, no copy
                one = slice(env, env + 1)
                initial = index_state(self.initial_memory, one)
                state = backbone.state_at(
                    type(initial)(*(_repeat(f, per_env, 0) for f in initial)),
                    type(self.trace)(*(_repeat(f[:, one], per_env, 1) for f in self.trace)),
                    self._kept(episode_starts)[:, one].expand(-1, per_env),
                    start_t // self.trace_stride,
                )
                # every minibatch refreshes its rows: the parameter-derived caches (TrXL's
                # keys and values) would be replaced before any use
                parts.append(backbone.without_caches(state))
                if state_nbytes(parts[0]) * self.n_envs > SEGMENT_STATES_MAX_BYTES:
                    parts = []
                    break
        states = (
            type(parts[0])(*(torch.cat(f) for f in zip(*parts, strict=True))) if parts else None
        )
        self._segment_states = (backbone, segment_length, states)
        return states

    def _segment_batch(
        self,
        backbone: Backbone,
        env_index: np.ndarray,
        start: np.ndarray,
        segment_length: int,
        episode_starts: torch.Tensor,
        memory: Any = None,
    ) -> SegmentBatch:
        """The minibatch of segments (``env_index``, ``start``), with ``memory`` their states
        when given (else rebuilt here from the trace with ``state_at``)."""
        time_index = start[None, :] + np.arange(segment_length)[:, None]  # (S, G)
        env_grid = np.repeat(env_index[None, :], segment_length, axis=0)  # (S, G)

        def take(array: np.ndarray) -> torch.Tensor:
            # (N, B, ...) -> (S, G, ...)
            return torch.as_tensor(array[time_index, env_grid], device=self.device)

        obs = self.observations
        observations = {k: take(v) for k, v in obs.items()} if isinstance(obs, dict) else take(obs)
        env_t = torch.as_tensor(env_index, device=self.device)
        start_t = torch.as_tensor(start, device=self.device)
        if memory is None:
            # the memory each segment had while acting, from its env's stream
            trace = type(self.trace)(*(field[:, env_t] for field in self.trace))  # (N, G, ...)
            memory = backbone.state_at(
                index_state(self.initial_memory, env_t),
                trace,
                self._kept(episode_starts)[:, env_t],
                start_t // self.trace_stride,
            )
        return SegmentBatch(
            observations=observations,
            actions=take(self.actions),
            old_values=take(self.values),
            old_log_prob=take(self.log_probs),
            advantages=take(self.advantages),
            returns=take(self.returns),
            episode_starts=take(self.episode_starts).bool(),
            memory=memory,
            extras={
                name: value[torch.as_tensor(time_index), torch.as_tensor(env_grid)]  # (S, G, ...)
                for name, value in self.extras.items()
            },
            env_index=env_t,
            start=start_t,
        )

    def _kept(self, steps: torch.Tensor) -> torch.Tensor:
        """(N, ...) per-step rows -> the rows of the steps whose trace is kept."""
        return steps[:: self.trace_stride]


def _repeat(tensor: torch.Tensor, times: int, dim: int) -> torch.Tensor:
    """``tensor`` with its size-1 axis ``dim`` repeated ``times`` times, as a view."""
    sizes = [-1] * tensor.dim()
    sizes[dim] = times
    return tensor.expand(*sizes)


class MemoryRolloutBuffer(_MemoryStreams, RolloutBuffer):
    """SB3 ``RolloutBuffer`` with per-env memory streams (Box, Discrete, MultiDiscrete observations)."""


class MemoryDictRolloutBuffer(_MemoryStreams, DictRolloutBuffer):
    """SB3 ``DictRolloutBuffer`` with per-env memory streams (Dict observations)."""
