"""LSTM and GRU baselines behind the backbone protocol.

The state is the recurrent state itself, env on axis 0: (B, L, H). The trace is the state
in force before each step, which is small, so the protocol's default ``state_at`` applies.
"""

from __future__ import annotations

from itertools import pairwise
from typing import NamedTuple

import torch
from torch import nn

from txrl.backbones.rnn import RNNConfig
from txrl.nn.protocol import Backbone, BackboneOutput
from txrl.nn.state import detach_state


class LSTMState(NamedTuple):
    h: torch.Tensor  # (B, L, H)
    c: torch.Tensor  # (B, L, H)


class GRUState(NamedTuple):
    h: torch.Tensor  # (B, L, H)


class RecurrentBackbone(Backbone):
    """``nn.LSTM`` or ``nn.GRU`` with the state zeroed at episode starts."""

    graph_capturable = True

    def __init__(self, config: RNNConfig, cell: str) -> None:
        super().__init__()
        self.config = config
        self.cell = cell
        self.input_dim = config.input_dim
        self.output_dim = config.d_model
        rnn_cls = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn_cls(config.input_dim, config.d_model, num_layers=config.n_layers)
        self.state_type: type[LSTMState] | type[GRUState] = (
            LSTMState if cell == "lstm" else GRUState
        )

    def initial_state(self, batch_size: int, device: torch.device | str | None = None) -> tuple:
        placement = self.state_placement(device)
        zeros = [torch.zeros(batch_size, self.config.n_layers, self.config.d_model, **placement)]
        return self.state_type(*(zeros * len(self.state_type._fields)))

    def _call(self, x: torch.Tensor, state: tuple) -> tuple[torch.Tensor, tuple]:
        # nn.LSTM/GRU want (L, B, H); the protocol keeps envs on axis 0
        hx = tuple(field.transpose(0, 1).contiguous() for field in state)
        y, new = self.rnn(x, hx if self.cell == "lstm" else hx[0])
        new = new if self.cell == "lstm" else (new,)
        return y, self.state_type(*(field.transpose(0, 1) for field in new))

    def run(
        self,
        x: torch.Tensor,
        state: tuple,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
        next_state: bool = True,
    ) -> BackboneOutput:
        self.check_inputs(x, state, episode_starts)
        keep = (~episode_starts).to(x.dtype)  # (T, B)
        if not trace:
            # One fused call per stretch between the steps at which some env starts an episode:
            # inside a stretch no state is reset, so the fused recurrence computes what steps
            # one at a time would. Envs whose episodes start together (fixed-length episodes
            # begun at once, as POPGym's) cut a long segment into a few stretches.
            # (an acting step reads no flag back from the device: it stays capturable)
            cuts = (
                episode_starts[1:].any(dim=1).nonzero().flatten().add(1).tolist()
                if x.shape[0] > 1
                else []
            )
            bounds = [0, *cuts, x.shape[0]]
            outputs = []
            for a, b in pairwise(bounds):
                state = self.state_type(*(field * keep[a, :, None, None] for field in state))
                y, state = self._call(x[a:b], state)
                outputs.append(y)
            y = outputs[0] if len(outputs) == 1 else torch.cat(outputs)
            return BackboneOutput(y, detach_state(state) if next_state else None, None, {}, {})
        outputs, before = [], []
        for t in range(x.shape[0]):
            before.append(state)
            state = self.state_type(*(field * keep[t, :, None, None] for field in state))
            y_t, state = self._call(x[t : t + 1], state)
            outputs.append(y_t)
        step_trace = None
        if trace:
            step_trace = self.state_type(
                *(torch.stack(f).detach() for f in zip(*before, strict=True))
            )
        final = detach_state(state) if next_state else None
        return BackboneOutput(torch.cat(outputs), final, step_trace, {}, {})


# the implementations that the records of txrl.backbones.rnn name


def build_lstm(config: RNNConfig) -> RecurrentBackbone:
    return RecurrentBackbone(config, "lstm")


def build_gru(config: RNNConfig) -> RecurrentBackbone:
    return RecurrentBackbone(config, "gru")
