"""Transformer-XL's segment-level memory, shared by every backbone that caches layer inputs.

Dai et al. 2019, eq. (6) of ``references/000_4baccbf6ade0250f.txt``: layer l attends over
``[SG(m^{l-1}) ; h^{l-1}]``, its stop-gradient inputs of the last M steps and the current ones.
Legend: B envs, T steps, L layers (or depth steps), M memory slots, D width.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch import nn

from txrl.nn.protocol import Backbone
from txrl.nn.window import next_valid, slide, window_at


def memory_in_use(valid: torch.Tensor) -> torch.Tensor:
    """Fraction of memory slots (B, M) in use; zero without memory."""
    return valid.float().mean() if valid.shape[1] else torch.zeros((), device=valid.device)


class LayerMemoryBackbone(Backbone):
    """Backbone with Transformer-XL's memory (eq. 6 of reference 000), per layer or depth step.

    State: a NamedTuple ``state_type`` whose first fields are ``hidden`` (B, L, M, D) the
    cached stop-gradient layer inputs of the last M steps, ``keys`` and ``values`` (B, L, M, D)
    their projections (a cache derived from hidden) and ``valid`` (B, M); trace:
    ``trace_type``, the layer inputs of each step ``hidden`` (T, B, L, D). The layers
    (``blocks``, each with ``attention_input`` and ``attention.project_memory``) are the
    subclass's, as is ``run``, which ends with :meth:`next_state` and :meth:`trace_of`.
    """

    state_type: ClassVar[Any]
    trace_type: ClassVar[Any]
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

    def project_hidden(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of the cached layer inputs (B, L, M, D) -> 2 x (B, L, M, D)."""
        keys, values = zip(
            *(
                block.attention.project_memory(block.attention_input(hidden[:, layer]))
                for layer, block in enumerate(self.blocks)
            ),
            strict=True,
        )
        return torch.stack(keys, dim=1), torch.stack(values, dim=1)

    def empty_memory(
        self, batch_size: int, device: torch.device | str | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """hidden, keys, values (B, L, M, D) zeros and valid (B, M) False."""
        device = device if device is not None else self.embed.weight.device
        shape = (batch_size, self.depth, self.memory_length, self.config.d_model)
        valid = torch.zeros((batch_size, self.memory_length), dtype=torch.bool, device=device)
        return (*(torch.zeros(shape, device=device) for _ in range(3)), valid)

    def memory_at(
        self, initial: Any, trace: Any, episode_starts: torch.Tensor, t: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """hidden, keys, values and valid before step ``t[b]``, rebuilt from the trace.

        Keys and values are re-projected from the stop-gradient layer inputs, so when called
        with gradients on, the projection weights get the gradient through memory as in
        Transformer-XL's training.
        """
        # (B, L, M, D) <-> window entries (B, M, L, D)
        hidden, valid = window_at(
            initial.hidden.transpose(1, 2), trace.hidden, initial.valid, episode_starts, t
        )
        hidden = hidden.transpose(1, 2)  # (B, M, L, D) -> (B, L, M, D)
        return hidden, *self.project_hidden(hidden), valid

    def initial_state(self, batch_size: int, device: torch.device | str | None = None) -> Any:
        return self.state_type(*self.empty_memory(batch_size, device))

    def state_at(
        self, initial: Any, trace: Any, episode_starts: torch.Tensor, t: torch.Tensor
    ) -> Any:
        """Rebuild the memory before step ``t[b]`` (see :meth:`memory_at`)."""
        return self.state_type(*self.memory_at(initial, trace, episode_starts, t))

    def refresh_state(self, state: Any) -> Any:
        """Re-project the cached keys and values of the memory with the current weights."""
        keys, values = self.project_hidden(state.hidden)
        return state._replace(keys=keys, values=values)

    def next_state(
        self,
        state: Any,
        inputs: Sequence[torch.Tensor],
        keys: Sequence[torch.Tensor],
        values: Sequence[torch.Tensor],
        episode_starts: torch.Tensor,
        **extra: torch.Tensor,
    ) -> Any:
        """The memory after the T steps, from each layer's inputs, keys and values (B, T, D)."""
        return self.state_type(
            hidden=slide(state.hidden, torch.stack(inputs, dim=1).detach(), dim=2),
            keys=slide(state.keys, torch.stack(keys, dim=1).detach(), dim=2),
            values=slide(state.values, torch.stack(values, dim=1).detach(), dim=2),
            valid=next_valid(state.valid, episode_starts),  # seen from the step after the last
            **extra,
        )

    def trace_of(self, inputs: Sequence[torch.Tensor]) -> Any:
        """Each layer's inputs (B, T, D) -> the trace, (T, B, L, D)."""
        return self.trace_type(hidden=torch.stack(inputs, dim=2).transpose(0, 1).detach())
