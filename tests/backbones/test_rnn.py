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


@pytest.mark.parametrize("name", ["lstm", "gru"])
@pytest.mark.parametrize("together", [True, False], ids=["starts_together", "starts_apart"])
def test_a_sequence_runs_as_fused_stretches_between_episode_starts(
    name: str, together: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training sequence runs as one fused call per stretch between the steps where some
    env starts an episode; outputs, final state and gradients are those of stepping one step
    at a time (the trace path), in float64. Envs whose episodes start together cut 40 steps
    into 3 calls."""
    torch.manual_seed(0)
    backbone = make_backbone(name, input_dim=3, d_model=8, n_layers=2).double()
    x = torch.randn(40, 3, 3, dtype=torch.float64, requires_grad=True)
    starts = torch.zeros(40, 3, dtype=torch.bool)
    if together:
        starts[[0, 13, 29]] = True
    else:
        starts[0, 0], starts[13, 1], starts[29, 2], starts[30, 0] = True, True, True, True
    state = tuple(torch.randn_like(f) for f in backbone.initial_state(3))
    state = backbone.state_type(*state)

    calls = []
    call = backbone._call
    monkeypatch.setattr(backbone, "_call", lambda x, s: calls.append(x.shape[0]) or call(x, s))
    fused = backbone.run(x, state, starts)
    assert calls == ([13, 16, 11] if together else [13, 16, 1, 10])
    calls.clear()
    stepped = backbone.run(x, state, starts, trace=True)
    assert calls == [1] * 40
    torch.testing.assert_close(fused.output, stepped.output, rtol=0, atol=1e-12)
    for a, b in zip(fused.state, stepped.state, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    weights = torch.randn_like(fused.output)
    grads = [
        torch.autograd.grad((out.output * weights).sum(), [x, *backbone.parameters()])
        for out in (fused, stepped)
    ]
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
