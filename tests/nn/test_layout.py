"""Column-major copies of the acting step's weights (``txrl.nn.layout``): the same values in
another layout, the products they cover, reused while the weights stay unchanged and
derived again after every kind of change, swapped in for a step and back."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from torch import nn

from txrl.nn.layout import (
    ProductWeights,
    Swapped,
    column_major,
    laid_out,
    product_weight_paths,
)

from .conftest import small_backbone


def test_column_major_keeps_shape_and_values_in_the_other_layout() -> None:
    weight = torch.randn(5, 3, requires_grad=True)
    copied = column_major(weight)
    assert copied.shape == weight.shape and torch.equal(copied, weight)
    assert copied.stride() == (1, 5), "column-major: W^T is contiguous"
    assert copied.t().is_contiguous() and not copied.requires_grad
    assert copied.untyped_storage().data_ptr() != weight.untyped_storage().data_ptr()


def test_the_paths_are_the_step_products_not_the_fused_attention_linears() -> None:
    backbone = small_backbone("gtrxl")
    names = {".".join(path) for path in product_weight_paths(backbone)}
    assert "embed.weight" in names
    assert "blocks.0.attention.out.weight" in names
    assert "blocks.1.gate_mlp.u_rz.weight" in names and "blocks.1.mlp.0.weight" in names
    # the ring step multiplies by the attention's fused weight instead (ring_weights)
    assert not any(n.endswith(("query.weight", "key_value.weight", "position_key.weight")) for n in names)  # fmt: skip
    every_linear = [m for m in backbone.modules() if isinstance(m, nn.Linear)]
    assert len(names) == len(every_linear) - 3 * len(backbone.blocks)  # type: ignore[arg-type]
    # include: only the subtrees named
    assert {".".join(p) for p in product_weight_paths(backbone, include=("embed",))} == {
        "embed.weight"
    }


def test_copies_are_reused_until_the_weights_change_whichever_way() -> None:
    backbone = small_backbone("gtrxl")
    held = ProductWeights()
    with torch.no_grad():
        first = held(backbone).by_name
        assert held(backbone).by_name is first, "unchanged weights: the same copies"
        assert all(torch.equal(w, backbone.get_parameter(n)) for n, w in first.items())
    # a fused optimizer's step (writes without bumping versions)
    optimizer = torch.optim.Adam(backbone.parameters(), lr=0.1, fused=True)
    for p in backbone.parameters():
        p.grad = torch.ones_like(p)
    optimizer.step()
    with torch.no_grad():
        second = held(backbone).by_name
    assert second is not first
    assert torch.equal(second["embed.weight"], backbone.embed.weight)
    # a load
    other = small_backbone("gtrxl")
    backbone.load_state_dict(other.state_dict())
    with torch.no_grad():
        assert torch.equal(held(backbone).by_name["embed.weight"], other.embed.weight)
    # another dtype (new tensors)
    backbone.double()
    with torch.no_grad():
        assert held(backbone).by_name["embed.weight"].dtype == torch.float64


def test_a_changed_module_tree_is_walked_afresh() -> None:
    backbone = small_backbone("gtrxl")
    held = ProductWeights()
    with torch.no_grad():
        held(backbone)
        # a replaced linear: its own weight, not the old one's copy
        backbone.embed = nn.Linear(backbone.embed.in_features, backbone.embed.out_features)
        assert torch.equal(held(backbone).by_name["embed.weight"], backbone.embed.weight)
        # a linear gone (here, its parent's child replaced by a module without it)
        backbone.blocks[0].mlp[0] = nn.Identity()  # type: ignore[index]
        names = held(backbone).by_name.keys()
    assert "blocks.0.mlp.0.weight" not in names and "blocks.1.mlp.0.weight" in names


def test_a_replaced_inner_module_is_seen_by_the_steps_check() -> None:
    # the check looks each module on the weights' paths up once (a shared block once for all
    # its linears): a whole block replaced is seen, as a changed weight is
    backbone = small_backbone("gtrxl")
    held = ProductWeights()
    with torch.no_grad():
        first = held(backbone)
        nodes, leaves = held._plan  # type: ignore[misc]
        assert len(leaves) == len(first.by_name)
        assert [name for _, name in nodes].count("blocks") == 1, "a shared module, looked up once"
        backbone.blocks[1] = copy.deepcopy(backbone.blocks[1])  # type: ignore[index]
        second = held(backbone)
    assert second is not first
    assert second.by_name["blocks.1.mlp.0.weight"] is not first.by_name["blocks.1.mlp.0.weight"]
    assert torch.equal(second.by_name["blocks.1.mlp.0.weight"], backbone.blocks[1].mlp[0].weight)  # type: ignore[index]


def test_laid_out_swaps_the_weights_in_for_the_step_and_back() -> None:
    backbone = small_backbone("gtrxl")
    weight = backbone.embed.weight
    x = torch.randn(4, backbone.input_dim)
    with torch.no_grad():
        copies = ProductWeights()(backbone).by_name
        with laid_out(backbone, copies):
            assert backbone.embed.weight is copies["embed.weight"]
            inside = backbone.embed(x)
        with laid_out(backbone, None):
            assert backbone.embed.weight is weight
    assert backbone.embed.weight is weight and isinstance(weight, nn.Parameter)
    assert torch.allclose(inside, backbone.embed(x), rtol=1e-6, atol=1e-6)


def test_swapped_puts_the_copies_in_for_an_eager_step_and_back_even_on_error() -> None:
    backbone = small_backbone("gtrxl")
    originals = dict(backbone.named_parameters())
    with torch.no_grad():
        laid = ProductWeights()(backbone)
        with Swapped(laid.slots):
            assert backbone.embed.weight is laid.by_name["embed.weight"]
            assert backbone.blocks[1].gate_mlp.u_rz.weight.stride() == (1, 32)  # type: ignore[index]
        assert dict(backbone.named_parameters()) == originals
        with pytest.raises(RuntimeError, match="inside"), Swapped(laid.slots):
            raise RuntimeError("inside")
    assert all(p is originals[n] for n, p in backbone.named_parameters())
    # a slot that cannot be written: the ones written before it are put back
    broken = (*laid.slots[:2], (nn.Module(), "weight", torch.zeros(1)))
    with pytest.raises(KeyError), Swapped(broken):
        pass
    assert all(p is originals[n] for n, p in backbone.named_parameters())


def test_an_eager_acting_step_on_the_copies_equals_one_on_the_parameters() -> None:
    # the eager ring step swaps the copies in on a CPU: the same outputs, the same memory
    backbone = small_backbone("gtrxl")
    gen = torch.Generator().manual_seed(0)
    x, starts = torch.randn(6, 3, 5, generator=gen), torch.zeros(6, 3, dtype=torch.bool)
    with torch.inference_mode():
        state = backbone.initial_state(3)
        outputs = []
        for t in range(6):
            out = backbone.step(x[t : t + 1], state, starts[t : t + 1])
            outputs.append(out.output)
        reference = backbone(x, backbone.initial_state(3), starts)[0]
    assert "_product_weights" in backbone.__dict__, "the step took the copies"
    assert torch.allclose(torch.cat(outputs), reference, rtol=1e-5, atol=1e-6)
    assert all(isinstance(p, nn.Parameter) for p in backbone.parameters())


@pytest.mark.parametrize("duplicate", [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))])
def test_a_copy_derives_its_own_and_on_parameters_changed_forgets(duplicate) -> None:
    backbone = small_backbone("gtrxl")
    with torch.no_grad():
        backbone._step_weights()
    assert "_product_weights" in backbone.__dict__
    assert "_product_weights" not in duplicate(backbone).__dict__
    (held,) = backbone.__dict__["_product_weights"].values()
    backbone.on_parameters_changed()  # e.g. after a write through p.data
    assert not held._store and held._paths is None
