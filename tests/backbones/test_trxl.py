"""The Transformer-XL family (``gtrxl``, ``trxl_i``, ``trxl``). Its gates are declared once,
torch-free (:mod:`txrl.gate_declarations`, read by its settings as
:data:`txrl.backbones.trxl.GATES`), and computed by the modules of :mod:`txrl.nn.gates`, each
holding its declaration and taking its bias as an argument; every declared default b_g must
be what a built gate holds."""

from __future__ import annotations

import pytest

from txrl.backbones import make_backbone
from txrl.backbones.trxl import DEFAULT_GATE, GATE_NAMES, GATES
from txrl.backbones.trxl.model import TransformerXL
from txrl.inspect.layers import GATE_MEANINGS
from txrl.nn.blocks import GatedBlock, PostNormBlock
from txrl.nn.gates import GATE_CLASSES, Gate, GRUGate, ResidualGate

SMALL = {"input_dim": 3, "d_model": 8, "n_heads": 2, "n_layers": 2, "memory_length": 2}


def block_gates(backbone: TransformerXL) -> list[Gate]:
    gates = []
    for block in backbone.blocks:
        assert isinstance(block, GatedBlock)
        gates += [block.gate_attention, block.gate_mlp]
    return gates


def test_each_declared_gate_has_one_module_which_holds_its_declaration() -> None:
    assert tuple(GATES) == GATE_NAMES and DEFAULT_GATE in GATES
    assert list(GATE_CLASSES) == sorted(GATE_CLASSES, key=GATE_NAMES.index)
    assert [cls.declaration for cls in GATE_CLASSES.values()] == [GATES[n] for n in GATE_CLASSES]
    assert set(GATE_CLASSES) == set(GATE_NAMES)
    # inspect's meanings of each module are its declaration's
    for name, cls in GATE_CLASSES.items():
        assert GATE_MEANINGS[cls][0] == GATES[name].title


@pytest.mark.parametrize("name", GATE_NAMES)
def test_each_gate_is_built_with_its_declared_default_bias(name: str) -> None:
    gates = block_gates(make_backbone("gtrxl", **SMALL, gate=name))
    assert len(gates) == 2 * SMALL["n_layers"]
    default = GATES[name].default_bias
    for gate in gates:
        assert type(gate) is GATE_CLASSES[name]
        assert gate.b_g() == (None if default is None else pytest.approx(default))


def test_a_bias_of_the_config_replaces_the_default() -> None:
    for name in ("output", "highway", "sigtanh", "gru", "input"):
        for gate in block_gates(make_backbone("gtrxl", **SMALL, gate=name, gate_bias=3.5)):
            assert gate.b_g() == pytest.approx(3.5)


def test_gtrxl_defaults_to_the_gru_gate_with_the_papers_bias() -> None:
    gates = block_gates(make_backbone("gtrxl", **SMALL))
    assert all(isinstance(g, GRUGate) and g.b_g() == pytest.approx(2.0) for g in gates)


def test_trxl_i_has_residual_connections_and_trxl_post_norm_blocks() -> None:
    assert all(isinstance(g, ResidualGate) for g in block_gates(make_backbone("trxl_i", **SMALL)))
    trxl = make_backbone("trxl", **SMALL)
    assert all(isinstance(block, PostNormBlock) for block in trxl.blocks)


def test_a_gate_the_family_does_not_declare_is_a_settings_error() -> None:
    with pytest.raises(ValueError, match="unknown gate 'lstm'; valid gates: input, output"):
        make_backbone("gtrxl", **SMALL, gate="lstm")
    with pytest.raises(ValueError, match="gate 'residual' has no bias"):
        make_backbone("gtrxl", **SMALL, gate="residual", gate_bias=1.0)
