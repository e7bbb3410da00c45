"""The gate modules of :mod:`txrl.nn.gates`, each with the bias it is given (the declared
defaults and their join with these modules: tests/backbones/test_trxl.py)."""

import pytest
import torch

from txrl.nn.gates import GATE_CLASSES, make_gate

from ..numeric import F32_REL, close

IDENTITY_GATES = ["output", "highway", "sigtanh", "gru"]
#: a bias each gate takes: a number for those with a bias term, none for the others
BIAS = {name: 1.0 if name in IDENTITY_GATES else None for name in GATE_CLASSES}


@pytest.mark.parametrize("name", IDENTITY_GATES)
def test_large_bias_makes_gate_the_identity_on_the_skip_stream(name: str) -> None:
    torch.manual_seed(0)
    x, y = torch.randn(64, 16), torch.randn(64, 16)
    near_identity = make_gate(name, 16, bias=20.0)(x, y)
    assert (near_identity - x).abs().max().item() < 1e-3
    unbiased = make_gate(name, 16, bias=0.0)(x, y)
    assert (unbiased - x).abs().max().item() > 0.1


def test_the_bias_given_is_where_each_equation_puts_b_g() -> None:
    gru = make_gate("gru", 8, bias=2.0)
    assert torch.allclose(gru.u_rz.bias[8:], torch.full((8,), -2.0))  # z: ... - b_g
    out = make_gate("output", 8, bias=1.0)
    assert torch.allclose(out.w_g.bias, torch.full((8,), -1.0))  # sigma(W_g x - b_g)
    highway = make_gate("highway", 8, bias=1.5)
    assert torch.allclose(highway.w_g.bias, torch.full((8,), 1.5))  # sigma(W_g x + b_g)
    for name in IDENTITY_GATES:
        assert make_gate(name, 8, bias=0.75).b_g() == pytest.approx(0.75)


@pytest.mark.parametrize("name", IDENTITY_GATES)
def test_a_gate_with_a_bias_term_needs_its_bias(name: str) -> None:
    with pytest.raises(ValueError, match=f"gate '{name}' needs its bias b_g"):
        make_gate(name, 4)


def test_residual_and_input_gates() -> None:
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    assert torch.equal(make_gate("residual", 4)(x, y), x + y)
    gate = make_gate("input", 4, bias=0.0)
    with torch.no_grad():
        gate.w_g.weight.zero_()
    assert close(gate(x, y), 0.5 * x + y, F32_REL)


@pytest.mark.parametrize("name", list(GATE_CLASSES))
def test_gate_reports_its_mean_activation(name: str) -> None:
    stats: list[torch.Tensor] = []
    make_gate(name, 4, BIAS[name])(torch.randn(3, 4), torch.randn(3, 4), stats)
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
    assert plain.w_g.bias is None and plain.b_g() is None
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    with torch.no_grad():
        plain.w_g.weight.zero_()
    assert close(plain(x, y), 0.5 * x + y, F32_REL)
    biased = make_gate("input", 4, bias=1.0)
    assert biased.w_g.bias is not None and biased.w_g.bias.requires_grad
    assert torch.equal(biased.w_g.bias.detach(), torch.ones(4))
    assert biased.b_g() == pytest.approx(1.0)


def test_each_gate_module_is_found_by_its_name() -> None:
    assert all(cls.declaration.name == name for name, cls in GATE_CLASSES.items())
    assert all(type(make_gate(name, 4, BIAS[name])) is cls for name, cls in GATE_CLASSES.items())


def test_residual_refuses_a_bias() -> None:
    with pytest.raises(ValueError, match="no bias"):
        make_gate("residual", 4, bias=1.0)
