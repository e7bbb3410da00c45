"""The acting wing's column-major replica (``txrl.nn.acting.replica``): the same values in
another layout, everything but the step's linears shared with the model, the model never
written, rebuilt after every kind of change; and the parameter sample ``predict`` compares
(``txrl.nn.acting.sample``)."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations, parametrize, prune

from txrl.nn.acting.replica import (
    ColumnMajorReplica,
    acting_cache,
    column_major,
    column_major_replica,
)
from txrl.nn.acting.sample import ParameterSample, parameters_rewritten

from .conftest import small_backbone


def test_column_major_keeps_shape_and_values_in_the_other_layout() -> None:
    weight = torch.randn(5, 3, requires_grad=True)
    copied = column_major(weight)
    assert copied.shape == weight.shape and torch.equal(copied, weight)
    assert copied.stride() == (1, 5), "column-major: W^T is contiguous"
    assert copied.t().is_contiguous() and not copied.requires_grad
    assert copied.untyped_storage().data_ptr() != weight.untyped_storage().data_ptr()


def replicated_linears(model: nn.Module, replica: nn.Module) -> dict[str, nn.Module]:
    """The linears of ``model`` that ``replica`` holds a copy of, by name."""
    originals = dict(model.named_modules())
    return {
        name: module
        for name, module in replica.named_modules()
        if isinstance(module, nn.Linear) and module is not originals[name]
    }


def test_the_replica_copies_the_step_linears_and_shares_everything_else() -> None:
    backbone = small_backbone("gtrxl")
    parameters = dict(backbone.named_parameters())
    with torch.no_grad():
        replica = column_major_replica(backbone)
    copied = replicated_linears(backbone, replica)
    assert "embed" in copied and "blocks.0.attention.out" in copied
    assert "blocks.1.gate_mlp.u_rz" in copied and "blocks.1.mlp.0" in copied
    # the ring step multiplies by the attention's fused weights instead: not copied
    assert not any(n.endswith(("query", "key_value", "position_key")) for n in copied)
    every_linear = [m for m in backbone.modules() if isinstance(m, nn.Linear)]
    assert len(copied) == len(every_linear) - 3 * len(backbone.blocks)  # type: ignore[arg-type]
    for name, linear in copied.items():
        original = backbone.get_submodule(name)
        assert linear.weight.stride() == (1, original.weight.shape[0]), "column-major"
        assert torch.equal(linear.weight, original.weight)
        assert linear.bias is original.bias, "the bias is the model's, read as it is"
    # everything else is the model's own object
    assert replica.blocks[0].norm_attention is backbone.blocks[0].norm_attention  # type: ignore[index]
    assert replica.blocks[0].attention.query is backbone.blocks[0].attention.query  # type: ignore[index]
    # and the model is as it was: its parameters, where they were
    assert dict(backbone.named_parameters()) == parameters
    assert all(type(p) is nn.Parameter for p in backbone.parameters())


def test_include_limits_the_replica_to_the_children_named() -> None:
    backbone = small_backbone("gtrxl")
    with torch.no_grad():
        replica = column_major_replica(backbone, include=("embed",))
    assert set(replicated_linears(backbone, replica)) == {"embed"}
    assert replica.blocks is backbone.blocks


def test_with_gradients_on_the_model_itself() -> None:
    backbone = small_backbone("gtrxl")
    assert column_major_replica(backbone) is backbone, "a copy would carry no gradient"


def test_the_replica_is_reused_until_the_model_changes_whichever_way() -> None:
    backbone = small_backbone("gtrxl")
    held = ColumnMajorReplica()
    with torch.no_grad():
        first = held.of(backbone)
        assert held.of(backbone) is first, "unchanged: the same replica"
    # a fused optimizer's step (writes without bumping versions)
    optimizer = torch.optim.Adam(backbone.parameters(), lr=0.1, fused=True)
    for p in backbone.parameters():
        p.grad = torch.ones_like(p)
    optimizer.step()
    with torch.no_grad():
        second = held.of(backbone)
    assert second is not first and torch.equal(second.embed.weight, backbone.embed.weight)
    # a load
    other = small_backbone("gtrxl")
    backbone.load_state_dict(other.state_dict())
    with torch.no_grad():
        assert torch.equal(held.of(backbone).embed.weight, other.embed.weight)
    # another dtype (new tensors)
    backbone.double()
    with torch.no_grad():
        assert held.of(backbone).embed.weight.dtype == torch.float64
    # the training flag of a module above a replicated linear
    with torch.no_grad():
        before = held.of(backbone)
        backbone.train(not backbone.training)
        assert held.of(backbone) is not before
        assert held.of(backbone).training == backbone.training


def test_a_replaced_module_is_seen() -> None:
    backbone = small_backbone("gtrxl")
    held = ColumnMajorReplica()
    with torch.no_grad():
        held.of(backbone)
        # a replaced linear: its own weight, not the old one's copy
        backbone.embed = nn.Linear(backbone.embed.in_features, backbone.embed.out_features)
        assert torch.equal(held.of(backbone).embed.weight, backbone.embed.weight)
        # a replaced module with no linear of its own (shared, not copied, by the replica)
        norm = backbone.blocks[1].norm_mlp = nn.LayerNorm(backbone.config.d_model)  # type: ignore[index]
        assert held.of(backbone).blocks[1].norm_mlp is norm  # type: ignore[index]
        # a linear gone
        backbone.blocks[0].mlp[0] = nn.Identity()  # type: ignore[index]
        copied = replicated_linears(backbone, held.of(backbone))
    assert "blocks.0.mlp.0" not in copied and "blocks.1.mlp.0" in copied


@pytest.mark.parametrize(
    "change",
    [
        lambda linear: parametrizations.weight_norm(linear),
        lambda linear: parametrizations.spectral_norm(linear),
        lambda linear: prune.l1_unstructured(linear, "weight", amount=0.3),
    ],
    ids=["weight_norm", "spectral_norm", "prune"],
)
def test_a_linear_whose_weight_is_computed_runs_as_itself(change) -> None:
    # before the first replica and after it: no copy of a weight that the module computes
    # from other tensors at each call
    for built_first in (False, True):
        backbone = small_backbone("gtrxl")
        held = ColumnMajorReplica()
        with torch.no_grad():
            if built_first:
                held.of(backbone)
            change(backbone.blocks[0].mlp[0])  # type: ignore[index]
            replica = held.of(backbone)
        assert replica.blocks[0].mlp[0] is backbone.blocks[0].mlp[0]  # type: ignore[index]
        assert "blocks.1.mlp.0" in replicated_linears(backbone, replica)


class Doubled(nn.Module):
    """A parametrization: the tensor it is given, times two."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * x


def test_a_parametrized_bias_makes_the_linear_run_as_itself() -> None:
    # the weight stays a parameter of its own, but the module's class and bias change
    backbone = small_backbone("gtrxl")
    held = ColumnMajorReplica()
    with torch.no_grad():
        held.of(backbone)
        parametrize.register_parametrization(backbone.embed, "bias", Doubled())
        assert held.of(backbone).embed is backbone.embed


@pytest.mark.parametrize("duplicate", [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))])
def test_a_copy_derives_its_own_and_on_parameters_changed_forgets(duplicate) -> None:
    backbone = small_backbone("gtrxl")
    with torch.no_grad():
        column_major_replica(backbone)
    assert acting_cache(backbone).replicas
    assert "_acting_cache" not in duplicate(backbone).__dict__
    backbone.on_parameters_changed()  # e.g. after a write through p.data
    assert not acting_cache(backbone).replicas and not acting_cache(backbone).derived


def test_the_sample_sees_writes_through_data() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    sample = ParameterSample(model)
    assert sample.unchanged()
    weight = model[0].weight
    weight.data.mul_(0.999)  # an EMA-like rewrite of the whole tensor, no version bump
    assert not sample.unchanged()
    sample = ParameterSample(model)
    largest = weight.detach().abs().max().item()
    weight.data.clamp_(-0.9 * largest, 0.9 * largest)  # clamping: the largest moves first
    assert not sample.unchanged()
    # new storage behind a parameter, a new parameter
    sample = ParameterSample(model)
    weight.data = weight.detach().clone()
    assert not sample.unchanged()
    sample = ParameterSample(model)
    model[2].load_state_dict(nn.Linear(8, 2).state_dict(), assign=True)
    assert not sample.unchanged()


def test_the_sample_of_parameters_numpy_cannot_view_sees_writes_too() -> None:
    model = nn.Linear(4, 4).to(torch.bfloat16)  # read through a tensor view, not numpy
    sample = ParameterSample(model)
    assert sample.unchanged()
    model.weight.data.mul_(0.5)
    assert not sample.unchanged()


def test_parameters_rewritten_says_so_once_per_write() -> None:
    model = nn.Linear(3, 3)
    assert parameters_rewritten(model), "no sample yet: whatever was derived may be stale"
    assert not parameters_rewritten(model)
    model.weight.data.add_(1.0)
    assert parameters_rewritten(model)
    assert not parameters_rewritten(model), "the sample is taken anew"
