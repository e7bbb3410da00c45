"""The acting step's cache of tensors derived from the weights follows every change of the
weights without being told: a backbone trained by its user's own optimizer, weights
replaced or loaded, a copy refreshed from another model (a target network).

Each test acts step by step (``Backbone.step`` with gradients off, through the cache) and
compares with the sequence pass with gradients on (which builds everything afresh)."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable

import pytest
import torch

from txrl.nn.attention import RelativeMultiHeadAttention
from txrl.nn.protocol import Backbone

from ..numeric import relative_error
from .conftest import SMALL, small_backbone

# float32: the ring step and the sequence pass sum in different orders, a few ulps apart
ACTING_REL = 1e-6


def inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(9, 3, SMALL["input_dim"], generator=gen)
    starts = torch.zeros(9, 3, dtype=torch.bool)
    starts[0] = True
    return x, starts


def acting(backbone: Backbone, x: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """Outputs of acting step by step, gradients off (the cached path)."""
    with torch.no_grad():
        state, outputs = backbone.initial_state(x.shape[1]), []
        for t in range(x.shape[0]):
            out = backbone.step(x[t : t + 1], state, starts[t : t + 1])
            outputs.append(out.output)
            state = out.state
    return torch.cat(outputs)


def acting_error(backbone: Backbone, seed: int = 1) -> float:
    """Relative difference of acting from the sequence pass with gradients on (no cache)."""
    x, starts = inputs(seed)
    expected = backbone(x, backbone.initial_state(x.shape[1]), starts)[0].detach()
    return relative_error(acting(backbone, x, starts), expected)


def fresh() -> Backbone:
    backbone = small_backbone("gtrxl")
    backbone.eval()
    with torch.no_grad():
        for block in backbone.blocks:  # type: ignore[union-attr]  # gtrxl has blocks
            # non-zero u and v, so every cached product carries weight
            block.attention.content_bias.normal_()
            block.attention.position_bias.normal_()
    return backbone


def train(backbone: Backbone, optimizer: torch.optim.Optimizer, steps: int = 5) -> None:
    x, starts = inputs(2)
    for _ in range(steps):
        optimizer.zero_grad()
        backbone(x, backbone.initial_state(x.shape[1]), starts)[0].square().mean().backward()
        optimizer.step()


OPTIMIZERS: dict[str, Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]] = {
    "fused Adam": lambda p: torch.optim.Adam(p, lr=0.02, fused=True),
    "fused AdamW": lambda p: torch.optim.AdamW(p, lr=0.02, weight_decay=0.5, fused=True),
    "fused SGD": lambda p: torch.optim.SGD(p, lr=0.5, momentum=0.9, fused=True),
    "foreach Adam": lambda p: torch.optim.Adam(p, lr=0.02, foreach=True),
    "for-loop Adam": lambda p: torch.optim.Adam(p, lr=0.02, foreach=False),
}


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_acting_follows_the_users_own_optimizer(optimizer: str) -> None:
    # no learner, no call to tell the backbone: torch's optimizer-step hook does
    torch.manual_seed(0)
    backbone = fresh()
    x, starts = inputs(1)
    before = acting(backbone, x, starts)  # fills the cache
    train(backbone, OPTIMIZERS[optimizer](list(backbone.parameters())))
    after = acting(backbone, x, starts)
    assert relative_error(after, before) > 1e-4, "the update must show for this test to bite"
    assert acting_error(backbone) <= ACTING_REL


def test_a_cache_hit_returns_what_was_built() -> None:
    # the cache still saves the rebuild while nothing changes
    attention = RelativeMultiHeadAttention(8, 2)
    with torch.no_grad():
        first = attention.ring_weights(5)
        again = attention.ring_weights(5)
    assert all(a is b for a, b in zip(first, again, strict=True))


def test_writes_through_the_parameter_are_seen() -> None:
    torch.manual_seed(0)
    backbone = fresh()
    acting(backbone, *inputs(1))
    with torch.no_grad():
        for p in backbone.parameters():
            p.copy_(p + 0.1 * torch.randn_like(p))  # bumps the version counter
    assert acting_error(backbone) <= ACTING_REL


def test_new_tensors_behind_the_parameters_are_seen() -> None:
    torch.manual_seed(0)
    backbone = fresh()
    acting(backbone, *inputs(1))
    for p in backbone.parameters():
        p.data = p.detach() + 0.1 * torch.randn_like(p)  # p.data = t: a new storage
    assert acting_error(backbone) <= ACTING_REL


def test_writes_through_data_are_seen_once_the_cache_is_cleared() -> None:
    # ``.data`` has a version counter of its own, invisible to the cache (module docstring):
    # such a write is followed by clear_parameter_cache / on_parameters_changed
    torch.manual_seed(0)
    backbone = fresh()
    acting(backbone, *inputs(1))
    for p in backbone.parameters():
        p.data.copy_(p.detach() + 0.1 * torch.randn_like(p))
    assert acting_error(backbone) > 1e-4, "the write must show for this test to bite"
    backbone.on_parameters_changed()
    assert acting_error(backbone) <= ACTING_REL


def test_loading_weights_with_assign_is_seen() -> None:
    torch.manual_seed(0)
    backbone, other = fresh(), fresh()
    acting(backbone, *inputs(1))
    backbone.load_state_dict(other.state_dict(), assign=True)
    assert acting_error(backbone) <= ACTING_REL
    x, starts = inputs(1)
    assert relative_error(acting(backbone, x, starts), acting(other, x, starts)) <= ACTING_REL


def test_a_deep_copy_refreshed_from_its_original_acts_with_the_new_weights() -> None:
    # a target network: a copy made once, loaded from the trained model now and then
    torch.manual_seed(0)
    online = fresh()
    x, starts = inputs(1)
    stale = acting(online, x, starts)  # cached for weights at version 1 (their init wrote once)
    # the copy's counters restart at 0, and loading a state dict bumps them to 1 again: a
    # cache copied along and keyed on versions alone would serve the old weights
    target = copy.deepcopy(online)
    train(online, torch.optim.Adam(online.parameters(), lr=0.02), steps=3)
    target.load_state_dict(online.state_dict())
    refreshed = acting(target, x, starts)
    assert relative_error(refreshed, stale) > 1e-4, "the refresh must show for this test to bite"
    assert relative_error(refreshed, acting(online, x, starts)) <= ACTING_REL
    assert acting_error(target) <= ACTING_REL


def test_a_pickled_backbone_acts_with_its_own_weights() -> None:
    torch.manual_seed(0)
    backbone = fresh()
    acting(backbone, *inputs(1))
    copied = pickle.loads(pickle.dumps(backbone))
    for module in copied.modules():
        if isinstance(module, RelativeMultiHeadAttention):
            assert not module._cache, "a copy starts with an empty cache"
    assert acting_error(copied) <= ACTING_REL
    optimizer = torch.optim.Adam(copied.parameters(), lr=0.02, fused=True)
    train(copied, optimizer)
    assert acting_error(copied) <= ACTING_REL
