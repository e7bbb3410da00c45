"""Defining properties of ``sparse_strided`` and ``sparse_fixed``: each head's attention mask
is the factorised pattern of Child et al. 2019, and keys outside it get zero weight."""

from __future__ import annotations

import pytest
import torch

from txrl.backbones.sparse.model import SparseTransformer
from txrl.nn.window import episode_time, window_mask

from ..nn.conftest import small_backbone


def build(name: str, **overrides: object) -> SparseTransformer:
    torch.manual_seed(0)
    backbone = small_backbone(name, **overrides)
    assert isinstance(backbone, SparseTransformer)
    backbone.eval()
    return backbone


def naive_pattern(pattern: str, which: int, tau_i: int, tau_j: int, stride: int, c: int) -> bool:
    """A^(which)_i of the paper for the query at episode time tau_i and a key at tau_j."""
    i, j = tau_i, tau_j
    if pattern == "strided":
        if which == 1:
            return max(0, i - stride) <= j <= i
        return (i - j) % stride == 0
    if which == 1:
        return j // stride == i // stride
    return j % stride in range(stride - c, stride) or j == i


@pytest.mark.parametrize("pattern", ["strided", "fixed"])
@pytest.mark.parametrize("combine", ["heads", "union", "layers"])
def test_masks_are_the_patterns(pattern: str, combine: str) -> None:
    m, t, stride, c = 7, 9, 3, 2
    backbone = build(
        f"sparse_{pattern}", memory_length=m, stride=stride, summary=c, combine=combine
    )
    gen = torch.Generator().manual_seed(1)
    valid = torch.ones(2, m, dtype=torch.bool)
    valid[1, :3] = False  # env 1's episode began 4 steps before the sequence
    step = torch.tensor([11, 4])
    starts = torch.rand(t, 2, generator=gen) < 0.2
    starts[5, 0] = True
    allowed = window_mask(valid, starts, m)
    tau = episode_time(step, starts)
    plans = backbone.attention_plans(allowed, tau)
    for b in range(2):
        for i in range(t):
            for j in range(m + t):
                d = m + i - j
                in_window = bool(allowed[b, i, j])
                tau_i, tau_j = int(tau[b, i]), int(tau[b, i]) - d
                first = in_window and naive_pattern(pattern, 1, tau_i, tau_j, stride, c)
                second = in_window and naive_pattern(pattern, 2, tau_i, tau_j, stride, c)
                for layer, plan in enumerate(plans):
                    for h in range(2):
                        if combine == "union":
                            expect = first or second
                        elif combine == "layers":
                            expect = first if layer % 2 == 0 else second
                        else:
                            expect = first if h % 2 == 0 else second
                        got = bool(plan[b, h if plan.shape[1] > 1 else 0, i, j])
                        assert got == expect, (b, i, j, layer, h)


def test_episode_time_is_carried_in_the_state() -> None:
    backbone = build("sparse_fixed")
    starts = torch.zeros(7, 2, dtype=torch.bool)
    starts[0] = True
    starts[4, 1] = True
    out = backbone.run(torch.randn(7, 2, 5), backbone.initial_state(2), starts)
    assert out.state.step.tolist() == [7, 3]


def perturbation_reaches(
    backbone: SparseTransformer, x: torch.Tensor, query: int, key: int
) -> bool:
    starts = torch.zeros(x.shape[0], 1, dtype=torch.bool)
    starts[0] = True
    changed = x.clone()
    changed[key] += 3.0
    with torch.no_grad():
        y, _ = backbone(x, backbone.initial_state(1), starts)
        y_changed, _ = backbone(changed, backbone.initial_state(1), starts)
    return (y[query] - y_changed[query]).abs().max().item() > 1e-6


def test_strided_keys_outside_the_pattern_get_zero_weight() -> None:
    backbone = build("sparse_strided", n_layers=1, memory_length=8, stride=3)
    x = torch.randn(12, 1, 5, generator=torch.Generator().manual_seed(2))
    # query 11: head 0 sees distances 0..3, head 1 distances 0, 3, 6
    for distance in (1, 2, 3, 6):
        assert perturbation_reaches(backbone, x, 11, 11 - distance), distance
    for distance in (4, 5, 7, 8, 9):
        assert not perturbation_reaches(backbone, x, 11, 11 - distance), distance


def test_fixed_keys_outside_the_pattern_get_zero_weight() -> None:
    backbone = build("sparse_fixed", n_layers=1, memory_length=8, stride=4, summary=1)
    x = torch.randn(12, 1, 5, generator=torch.Generator().manual_seed(3))
    # query at episode time 11: head 0 sees its block 8..11, head 1 the summaries 3 and 7
    for key in (3, 7, 8, 9, 10):
        assert perturbation_reaches(backbone, x, 11, key), key
    for key in (2, 4, 5, 6):
        assert not perturbation_reaches(backbone, x, 11, key), key


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"stride": 0}, "stride must be an int >= 1"),
        ({"stride": 2, "summary": 3}, "summary"),
        ({"combine": "both"}, "valid: heads, union, layers"),
    ],
)
def test_bad_settings_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        small_backbone("sparse_strided", **kwargs)
