"""Rollout storage for memory policies: SB3's rollout buffer plus per-env memory streams.

Legend: N steps per env in the rollout (``buffer_size``), B envs, S steps per segment,
G segments in a minibatch.

Besides what SB3's ``RolloutBuffer`` keeps (and its GAE, reused as is), the buffer keeps

* ``initial_memory``: each env's backbone state when the rollout began (the memory carried
  in from the previous rollout), env on axis 0;
* ``trace``: what the backbone reported per step while acting (for the TrXL family the
  L * D layer inputs of the step), (N, B, ...).

Training sequences are *segments*: S consecutive steps of one env. A segment starting at
step t is recomputed, with gradient, from ``backbone.state_at(initial_memory, trace, ..., t)``,
the memory it had while acting (Transformer-XL's segment recurrence, eq. 6 of reference 000),
so the training pass sees exactly what acting saw. Bytes per transition grow with the
trace (L * D for TrXL), not with the memory length.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple

import numpy as np
import torch
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer

from txrl.nn.protocol import Backbone
from txrl.nn.state import index_state, state_nbytes


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

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        self.initial_memory = None
        self.trace = None
        self._trace_steps = []
        self.extras: dict[str, torch.Tensor] = {}
        self._extra_steps: dict[str, list[torch.Tensor]] = {}

    def set_initial_memory(self, memory: Any) -> None:
        """The backbone state of every env at the rollout's first step."""
        self.initial_memory = memory

    def add_trace(self, step_trace: Any) -> None:
        """The backbone's trace of one acting step, (1, B, ...)."""
        self._trace_steps.append(step_trace)
        if len(self._trace_steps) == self.buffer_size:
            self.trace = type(step_trace)(
                *(torch.cat(f) for f in zip(*self._trace_steps, strict=True))
            )
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
        per_env = self.buffer_size // segment_length
        envs = np.repeat(np.arange(self.n_envs), per_env)  # (B * N/S,)
        starts = np.tile(np.arange(per_env) * segment_length, self.n_envs)
        order = np.arange(len(envs))
        if shuffle:
            order = (generator or np.random.default_rng()).permutation(len(envs))
        starts_t = torch.as_tensor(self.episode_starts, device=self.device).bool()  # (N, B)
        for first in range(0, len(order), segments_per_batch):
            chosen = order[first : first + segments_per_batch]
            yield self._segment_batch(
                backbone, envs[chosen], starts[chosen], segment_length, starts_t
            )

    def all_segments(self, backbone: Backbone, segment_length: int) -> SegmentBatch:
        """The whole rollout as one batch of segments, in order."""
        return next(
            self.segments(backbone, segment_length, self.n_envs * self.buffer_size, shuffle=False)
        )

    def _segment_batch(
        self,
        backbone: Backbone,
        env_index: np.ndarray,
        start: np.ndarray,
        segment_length: int,
        episode_starts: torch.Tensor,
    ) -> SegmentBatch:
        time_index = start[None, :] + np.arange(segment_length)[:, None]  # (S, G)
        env_grid = np.repeat(env_index[None, :], segment_length, axis=0)  # (S, G)

        def take(array: np.ndarray) -> torch.Tensor:
            # (N, B, ...) -> (S, G, ...)
            return torch.as_tensor(array[time_index, env_grid], device=self.device)

        obs = self.observations
        observations = {k: take(v) for k, v in obs.items()} if isinstance(obs, dict) else take(obs)
        env_t = torch.as_tensor(env_index, device=self.device)
        start_t = torch.as_tensor(start, device=self.device)
        # the memory each segment had while acting, from this env's stream
        trace = type(self.trace)(*(field[:, env_t] for field in self.trace))  # (N, G, ...)
        memory = backbone.state_at(
            index_state(self.initial_memory, env_t), trace, episode_starts[:, env_t], start_t
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


class MemoryRolloutBuffer(_MemoryStreams, RolloutBuffer):
    """SB3 ``RolloutBuffer`` with per-env memory streams (Box, Discrete, MultiDiscrete observations)."""


class MemoryDictRolloutBuffer(_MemoryStreams, DictRolloutBuffer):
    """SB3 ``DictRolloutBuffer`` with per-env memory streams (Dict observations)."""
