"""Defining properties of the Universal Transformer with ACT (``universal``)."""

from __future__ import annotations

import pytest
import torch

from txrl.backbones.universal.model import UniversalTransformer

from ..nn.conftest import small_backbone
from ..numeric import F32_REL, close


def inputs(t: int, b: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(t, b, 5, generator=gen) * 2.0
    starts = torch.rand(t, b, generator=gen) < 0.2
    starts[0] = True
    return x, starts


@pytest.mark.parametrize("halting_bias", [-1.0, 0.0, 1.0])
def test_halting_probabilities_sum_to_one_and_ponder_cost_is_bounded(halting_bias: float) -> None:
    torch.manual_seed(0)
    max_steps = 5
    backbone = small_backbone("universal", max_steps=max_steps, halting_bias=halting_bias)
    assert isinstance(backbone, UniversalTransformer)
    x, starts = inputs(12, 3, seed=1)
    with torch.no_grad():
        result = backbone.compute(x, backbone.initial_state(3), starts)
    # sum_{n<N} h^n + R = 1 for every position
    assert close(result.weights.sum(-1), torch.ones(3, 12), F32_REL)
    assert (result.weights >= 0).all()
    # N in [1, max_steps], R in (0, 1], rho = N + R in [1, max_steps + 1]
    assert ((result.steps >= 1) & (result.steps <= max_steps)).all()
    assert ((result.remainder > 0) & (result.remainder <= 1)).all()
    assert torch.equal(result.ponder, result.steps + result.remainder)
    assert ((result.ponder >= 1) & (result.ponder <= max_steps + 1)).all()
    # p^n is zero after the halting step and is the remainder at it
    depth = torch.arange(1, max_steps + 1)
    after = depth[None, None, :] > result.steps[..., None]
    assert (result.weights[after] == 0).all()
    last = result.weights.gather(-1, (result.steps.long() - 1)[..., None]).squeeze(-1)
    assert close(last, result.remainder, F32_REL)


def test_halting_extremes_reach_the_bounds() -> None:
    torch.manual_seed(0)
    x, starts = inputs(6, 2, seed=2)
    eager = small_backbone("universal", max_steps=4, halting_bias=20.0)
    with torch.no_grad():
        quick = eager.compute(x, eager.initial_state(2), starts)
    assert (quick.steps == 1).all() and close(quick.ponder, torch.full((2, 6), 2.0), F32_REL)
    slow_backbone = small_backbone("universal", max_steps=4, halting_bias=-20.0)
    with torch.no_grad():
        slow = slow_backbone.compute(x, slow_backbone.initial_state(2), starts)
    assert (slow.steps == 4).all()
    assert (slow.ponder <= 5.0).all() and (slow.ponder > 4.99).all()


def test_ponder_cost_is_an_aux_loss_with_gradient_into_the_halting_unit() -> None:
    torch.manual_seed(0)
    backbone = small_backbone("universal")
    x, starts = inputs(7, 2, seed=3)
    out = backbone.run(x, backbone.initial_state(2), starts, stats=True)
    ponder = out.aux_losses["ponder_cost"]
    assert ponder.dim() == 0 and 1.0 <= ponder.item() <= backbone.config.max_steps + 1
    ponder.backward()
    assert backbone.layer.halting.weight.grad is not None
    assert backbone.layer.halting.weight.grad.abs().sum() > 0
    assert 1.0 <= out.stats["depth_steps"].item() <= backbone.config.max_steps


def test_depth_steps_share_one_layer() -> None:
    shallow = small_backbone("universal", max_steps=2)
    deep = small_backbone("universal", max_steps=8)
    count = sum(p.numel() for p in shallow.parameters())
    assert count == sum(p.numel() for p in deep.parameters())
    # the memory caches the input of every depth step: (B, N, M, D)
    assert deep.initial_state(3).hidden.shape == (3, 8, 4, 16)


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match="act_epsilon must be in"):
        small_backbone("universal", act_epsilon=1.5)
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        small_backbone("universal", max_steps=0)
