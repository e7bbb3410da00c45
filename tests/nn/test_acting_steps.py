"""The acting step of a layer-memory backbone with linears whose weight is computed at each
call (weight norm, spectral norm, pruning), eager and compiled: it acts, computes what the
sequence pass computes, and leaves the model's parameters where they are, during the step
too."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations, prune

from ..numeric import F64_REL, close
from .conftest import SMALL, small_backbone


def reparametrized(name: str, **settings) -> nn.Module:
    """Backbone ``name`` whose embedding, feed-forward linears, attention output and (in
    GTrXL) a gate's linear have their weights computed at each call."""
    torch.manual_seed(0)
    backbone = small_backbone(name, **settings)
    first, second = backbone.blocks  # type: ignore[misc]
    parametrizations.weight_norm(backbone.embed)
    prune.l1_unstructured(first.mlp[0], "weight", amount=0.3)
    parametrizations.spectral_norm(second.gate_mlp.u_rz if name == "gtrxl" else second.mlp[3])
    parametrizations.weight_norm(second.attention.out)
    return backbone.eval()


def step_by_step(backbone: nn.Module, x: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """The outputs (T, B, D) of T acting steps (the ring step: one step, no gradients)."""
    outputs = []
    with torch.inference_mode():
        state = backbone.initial_state(x.shape[1])
        for t in range(x.shape[0]):
            out = backbone.step(x[t : t + 1], state, starts[t : t + 1])
            outputs.append(out.output)
            state = out.state
    return torch.cat(outputs)


def inputs(t: int = 9, b: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(t, b, SMALL["input_dim"], generator=generator)
    starts = torch.zeros(t, b, dtype=torch.bool)
    starts[0] = True
    starts[t // 2, 1] = True  # a reset in the middle of the sequence
    return x, starts


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize("name", ["gtrxl", "trxl"])
def test_acting_with_computed_weights_equals_the_sequence(name: str) -> None:
    backbone = reparametrized(name)
    x, starts = inputs()
    with torch.no_grad():
        expected, _ = backbone(x, backbone.initial_state(3), starts)
    assert close(step_by_step(backbone, x, starts), expected, F64_REL)
    # the parametrizations are still the model's, and they still train
    assert all(isinstance(p, nn.Parameter) for p in backbone.parameters())
    assert not isinstance(backbone.embed.weight, nn.Parameter), "computed from g and v"


@pytest.mark.usefixtures("float64")
def test_a_linear_reparametrized_between_steps_is_taken_as_it_is() -> None:
    torch.manual_seed(0)
    backbone = small_backbone("gtrxl").eval()
    x, starts = inputs()
    step_by_step(backbone, x, starts)  # whatever the steps derive from the weights, derived
    parametrizations.weight_norm(backbone.blocks[0].mlp[3])  # type: ignore[index]
    with torch.no_grad():
        expected, _ = backbone(x, backbone.initial_state(3), starts)
    assert close(step_by_step(backbone, x, starts), expected, F64_REL)


def test_the_model_keeps_its_parameters_during_a_step() -> None:
    # what a forward hook (or another thread) sees in the middle of an acting step
    backbone = small_backbone("gtrxl").eval()
    linear = backbone.blocks[0].mlp[0]  # type: ignore[index]
    parameter = linear.weight
    seen: list[tuple[object, object]] = []

    def look(module: nn.Module, args: object, output: object) -> None:
        seen.append((linear._parameters["weight"], linear.weight))

    handle = backbone.blocks[0].register_forward_hook(look)  # type: ignore[index]
    x, starts = inputs(t=3)
    step_by_step(backbone, x, starts)
    handle.remove()
    assert len(seen) == 3
    assert all(a is parameter and b is parameter for a, b in seen)


@pytest.mark.slow  # torch.compile
def test_the_compiled_step_with_computed_weights_equals_the_sequence() -> None:
    backbone = reparametrized("gtrxl", compile_step=True)
    x, starts = inputs()
    with torch.no_grad():
        expected, _ = backbone(x, backbone.initial_state(3), starts)
    assert close(step_by_step(backbone, x, starts), expected, 1e-5)  # a float32 graph
    assert "_compiled_step_fn" in backbone.__dict__, "the step ran compiled"
    assert all(isinstance(p, nn.Parameter) for p in backbone.parameters())


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize("name", ["gtrxl", "trxl"])
def test_a_state_left_by_a_sequence_pass_can_be_stepped_on(name: str) -> None:
    """The state a sequence pass returns (views of its window) takes acting steps, and they
    compute what a sequence pass over all the steps computes."""
    torch.manual_seed(0)
    backbone = small_backbone(name).eval()
    x, starts = inputs(t=9)
    with torch.inference_mode():
        whole = backbone.run(x, backbone.initial_state(x.shape[1]), starts).output
        head = backbone.run(x[:5], backbone.initial_state(x.shape[1]), starts[:5])
        state, tail = head.state, []
        for t in range(5, 9):
            out = backbone.step(x[t : t + 1], state, starts[t : t + 1])
            tail.append(out.output)
            state = out.state
    assert close(torch.cat(tail), whole[5:], F64_REL)
