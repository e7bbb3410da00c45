"""The recurrent baselines ``lstm`` and ``gru``: ``nn.LSTM`` and ``nn.GRU`` behind the backbone
protocol, their state env-first and zeroed at each episode start."""

from __future__ import annotations

import pytest
import torch

from txrl.backbones import make_backbone
from txrl.backbones.rnn import RNNConfig
from txrl.backbones.rnn.model import GRUState, LSTMState

from ..numeric import F32_REL, close


def test_hidden_size_is_a_synonym_of_d_model() -> None:
    assert RNNConfig(input_dim=3, hidden_size=16).d_model == 16
    with pytest.raises(ValueError, match=r"hidden_size \(16\) and d_model \(32\) disagree"):
        RNNConfig(input_dim=3, d_model=32, hidden_size=16)


@pytest.mark.parametrize(("name", "state_type"), [("lstm", LSTMState), ("gru", GRUState)])
def test_the_state_is_env_first(name: str, state_type: type) -> None:
    backbone = make_backbone(name, input_dim=3, d_model=8, n_layers=2)
    state = backbone.initial_state(5)
    assert isinstance(state, state_type)
    assert all(field.shape == (5, 2, 8) for field in state)


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_an_episode_start_clears_the_state(name: str) -> None:
    """From an episode start on, the outputs are those of a fresh state on the same steps."""
    torch.manual_seed(0)
    backbone = make_backbone(name, input_dim=3, d_model=8, n_layers=2).eval()
    x = torch.randn(6, 2, 3)
    starts = torch.zeros(6, 2, dtype=torch.bool)
    starts[3, 0] = True
    with torch.no_grad():
        y, _ = backbone(x, backbone.initial_state(2), starts)
        fresh, _ = backbone(x[3:, :1], backbone.initial_state(1), starts[3:, :1])
    assert close(y[3:, :1], fresh, F32_REL)
