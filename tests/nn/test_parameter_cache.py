"""What the attention derives from the weights for acting steps (its scaled query weights
and positional keys) follows the weights through the events that drop it: a training pass
(which any optimizer step follows), ``train()`` / ``eval()``, a load, a copy, and
``on_parameters_changed()`` after weights written with gradients off.

Each test acts step by step (``Backbone.step`` with gradients off, through the kept weights)
and compares with the sequence pass with gradients on (which derives everything afresh)."""

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


def stale_error(backbone: Backbone) -> float:
    """Relative difference of acting from the sequence pass of a copy, which derives its own
    (the backbone's own pass with gradients on would drop what it kept)."""
    x, starts = inputs(1)
    with torch.no_grad():
        expected = copy.deepcopy(backbone)(x, backbone.initial_state(x.shape[1]), starts)[0]
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
    # no learner, no call to tell the backbone: the training pass before each step drops it
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
        first = attention.derived_weights(5)
        again = attention.derived_weights(5)
    assert all(a is b for a, b in zip(first, again, strict=True))


WRITES_WITH_GRADIENTS_OFF: dict[str, Callable[[torch.nn.Parameter], None]] = {
    "p.copy_ under no_grad": lambda p: p.copy_(p + 0.1 * torch.randn_like(p)),
    "p.data.copy_": lambda p: p.data.copy_(p.detach() + 0.1 * torch.randn_like(p)),
    "p.data = t": lambda p: setattr(p, "data", p.detach() + 0.1 * torch.randn_like(p)),
}


@pytest.mark.parametrize("write", list(WRITES_WITH_GRADIENTS_OFF))
def test_writes_with_gradients_off_are_seen_once_told(write: str) -> None:
    # no event happens: such a write is followed by on_parameters_changed (or clear_parameter_cache)
    torch.manual_seed(0)
    backbone = fresh()
    acting(backbone, *inputs(1))
    with torch.no_grad():
        for p in backbone.parameters():
            WRITES_WITH_GRADIENTS_OFF[write](p)
    assert stale_error(backbone) > 1e-4, "the write must show for this test to bite"
    backbone.on_parameters_changed()
    assert acting_error(backbone) <= ACTING_REL


@pytest.mark.parametrize("event", ["train", "eval", "a training pass"])
def test_train_eval_and_a_training_pass_drop_what_was_derived(event: str) -> None:
    torch.manual_seed(0)
    backbone = fresh()
    acting(backbone, *inputs(1))
    with torch.no_grad():
        for p in backbone.parameters():
            p.add_(0.1 * torch.randn_like(p))
    assert stale_error(backbone) > 1e-4, "the write must show for this test to bite"
    if event == "a training pass":
        x, starts = inputs(2)
        backbone(x, backbone.initial_state(x.shape[1]), starts)  # gradients on
    else:
        getattr(backbone, event)()
        backbone.eval()
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
