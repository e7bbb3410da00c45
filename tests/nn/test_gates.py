import pytest
import torch

from txrl.nn.gates import GATE_NAMES, make_gate

from ..numeric import F32_REL, close

IDENTITY_GATES = ["output", "highway", "sigtanh", "gru"]


@pytest.mark.parametrize("name", IDENTITY_GATES)
def test_large_bias_makes_gate_the_identity_on_the_skip_stream(name: str) -> None:
    torch.manual_seed(0)
    x, y = torch.randn(64, 16), torch.randn(64, 16)
    near_identity = make_gate(name, 16, bias=20.0)(x, y)
    assert (near_identity - x).abs().max().item() < 1e-3
    unbiased = make_gate(name, 16, bias=0.0)(x, y)
    assert (unbiased - x).abs().max().item() > 0.1


def test_default_biases_follow_the_paper() -> None:
    gru = make_gate("gru", 8)
    assert torch.allclose(gru.u_rz.bias[8:], torch.full((8,), -2.0))
    out = make_gate("output", 8)
    assert torch.allclose(out.w_g.bias, torch.full((8,), -1.0))


def test_residual_and_input_gates() -> None:
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    assert torch.equal(make_gate("residual", 4)(x, y), x + y)
    gate = make_gate("input", 4, bias=0.0)
    with torch.no_grad():
        gate.w_g.weight.zero_()
    assert close(gate(x, y), 0.5 * x + y, F32_REL)


@pytest.mark.parametrize("name", GATE_NAMES)
def test_gate_reports_its_mean_activation(name: str) -> None:
    stats: list[torch.Tensor] = []
    make_gate(name, 4)(torch.randn(3, 4), torch.randn(3, 4), stats)
    assert len(stats) == 1 and 0.0 <= stats[0].item() <= 1.0


def test_unknown_gate_lists_valid_names() -> None:
    with pytest.raises(
        ValueError, match="valid gates: input, output, highway, sigtanh, gru, residual"
    ):
        make_gate("lstm", 4)


def test_input_gate_follows_eq_11_without_a_bias_unless_one_is_given() -> None:
    """Eq. (11) is sigma(W_g x) * x + y: no b_g. A bias given is an option outside the paper:
    a learnable bias initialised there."""
    plain = make_gate("input", 4)
    assert plain.w_g.bias is None
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    with torch.no_grad():
        plain.w_g.weight.zero_()
    assert close(plain(x, y), 0.5 * x + y, F32_REL)
    biased = make_gate("input", 4, bias=1.0)
    assert biased.w_g.bias is not None and biased.w_g.bias.requires_grad
    assert torch.equal(biased.w_g.bias.detach(), torch.ones(4))


def test_each_gate_is_declared_once_and_built_from_its_declaration() -> None:
    """One declaration per gate (name, equation, default b_g, meanings); the modules, their
    default biases, the config's gate names and inspect's meanings all read it."""
    from txrl.backbones.trxl import GATES
    from txrl.inspect.record import GATE_MEANINGS
    from txrl.nn.gates import GATE_CLASSES

    assert tuple(GATE_CLASSES) == tuple(GATES) == GATE_NAMES
    for name, cls in GATE_CLASSES.items():
        assert cls.declaration is GATES[name]  # type: ignore[attr-defined]
        assert GATE_MEANINGS[cls][0] == GATES[name].title  # type: ignore[index]
    assert torch.allclose(
        make_gate("highway", 4).w_g.bias, torch.full((4,), GATES["highway"].default_bias)
    )


def test_residual_refuses_a_bias() -> None:
    with pytest.raises(ValueError, match="no bias"):
        make_gate("residual", 4, bias=1.0)
