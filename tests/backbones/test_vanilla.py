"""Defining properties of ``transformer`` and ``transformer_learned_pe``: the whole window is
re-processed each step, with absolute positions counted within the window."""

from __future__ import annotations

import pytest
import torch

from txrl.backbones.vanilla.model import VanillaTransformer

from ..nn.conftest import small_backbone
from ..numeric import F32_REL, F64_REL, close

NAMES = ["transformer", "transformer_learned_pe"]


def build(name: str, **overrides: int) -> VanillaTransformer:
    torch.manual_seed(0)
    backbone = small_backbone(name, **overrides)
    assert isinstance(backbone, VanillaTransformer)
    backbone.eval()
    if backbone.learned is not None:  # make the learned positions matter
        torch.nn.init.normal_(backbone.learned.weight)
    return backbone


def one_episode(t: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(t, 1, 5, generator=gen)
    starts = torch.zeros(t, 1, dtype=torch.bool)
    starts[0] = True
    return x, starts


@pytest.mark.parametrize("name", NAMES)
def test_each_step_is_a_fresh_encoder_over_its_window(name: str, float64: None) -> None:
    """Output at step t = the last output of a run from scratch over x[t-M .. t] alone."""
    backbone = build(name)
    m = backbone.memory_length
    x, starts = one_episode(12)
    with torch.no_grad():
        y, _ = backbone(x, backbone.initial_state(1), starts)
        for t in range(12):
            window = x[max(0, t - m) : t + 1]
            fresh_starts = torch.zeros(window.shape[0], 1, dtype=torch.bool)
            fresh_starts[0] = True
            y_fresh, _ = backbone(window, backbone.initial_state(1), fresh_starts)
            assert close(y[t], y_fresh[-1], F64_REL)
        # nothing beyond the window reaches the output, whatever the depth
        far = x.clone()
        far[11 - m - 1] += 5.0
        y_far, _ = backbone(far, backbone.initial_state(1), starts)
    assert torch.equal(y[11], y_far[11])


@pytest.mark.parametrize("name", NAMES)
def test_positions_are_absolute_window_indices(name: str, float64: None) -> None:
    """With one layer, the last output sees its window as a set plus the absolute position
    encoding: permuting the memory contents changes the output only through P."""
    backbone = build(name, n_layers=1, memory_length=4)
    x, starts = one_episode(8, seed=1)
    permuted = x.clone()
    permuted[[4, 6]] = x[[6, 4]]  # swap two memory entries of the last step's window
    with torch.no_grad():
        y, _ = backbone(x, backbone.initial_state(1), starts)
        y_perm, _ = backbone(permuted, backbone.initial_state(1), starts)
        assert not torch.allclose(y[-1], y_perm[-1], atol=1e-4)
        if backbone.learned is not None:
            backbone.learned.weight.zero_()
        else:
            backbone.sinusoid.zero_()
        y, _ = backbone(x, backbone.initial_state(1), starts)
        y_perm, _ = backbone(permuted, backbone.initial_state(1), starts)
    assert close(y[-1], y_perm[-1], F64_REL)


def test_learned_position_rows_follow_the_window_index() -> None:
    """The current step sits at index M; early in an episode the older indices are unused."""
    backbone = build("transformer_learned_pe")
    m = backbone.memory_length
    x, starts = one_episode(8, seed=2)
    with torch.no_grad():
        y, _ = backbone(x, backbone.initial_state(1), starts)
        backbone.learned.weight[0] += 3.0 * torch.randn(backbone.config.d_model)  # oldest slot
        y_changed, _ = backbone(x, backbone.initial_state(1), starts)
    # steps 0 .. M-1 have an empty slot 0; from step M on, slot 0 holds step t - M
    assert torch.equal(y[:m], y_changed[:m])
    assert not torch.allclose(y[m:], y_changed[m:], atol=1e-4)


def test_sinusoid_is_eq_1() -> None:
    backbone = build("transformer", memory_length=6)
    table = backbone.position_encoding()
    d = backbone.config.d_model
    # the float64 reference of PE(i, 2j) = sin(i / 10000^(2j/d)), PE(i, 2j+1) = cos(...)
    angle = torch.arange(7, dtype=torch.float64)[:, None] / 10000 ** (
        torch.arange(0, d, 2, dtype=torch.float64)[None, :] / d
    )  # (7, d/2)
    expected = torch.stack((angle.sin(), angle.cos()), dim=-1).reshape(7, d)
    assert close(table, expected, F32_REL)


def test_odd_width_needs_learned_positions() -> None:
    with pytest.raises(ValueError, match="transformer_learned_pe"):
        small_backbone("transformer", d_model=15, n_heads=3)
    assert small_backbone("transformer_learned_pe", d_model=15, n_heads=3).output_dim == 15
