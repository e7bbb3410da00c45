"""Defining properties of the linear-attention backbones ``linear`` and ``performer``."""

from __future__ import annotations

import math

import pytest
import torch

from txrl.backbones.linear.model import (
    EPS,
    KernelAttention,
    LinearTransformer,
    draw_random_features,
    favor_features,
)

from ..nn.conftest import small_backbone
from ..numeric import F64_REL, close


def quadratic_form(attention: KernelAttention, z: torch.Tensor) -> torch.Tensor:
    """(phi(Q) phi(K)^T (.) causal mask) V / normaliser, computed directly; z (B, T, D)."""
    b, t, d = z.shape
    fq, fk, v = attention.project(z)  # (B, H, T, F), (B, H, T, F), (B, H, T, E)
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    sim = (fq @ fk.transpose(-1, -2)) * causal  # (B, H, T, T)
    attended = (sim @ v) / (sim.sum(-1, keepdim=True) + EPS)
    return attention.out(attended.transpose(1, 2).reshape(b, t, d))


@pytest.mark.parametrize("name", ["linear", "performer"])
def test_recurrent_form_equals_causal_quadratic_form(name: str, float64: None) -> None:
    torch.manual_seed(0)
    backbone = small_backbone(name)
    assert isinstance(backbone, LinearTransformer)
    attention = backbone.blocks[0].attention
    b, t = 3, 11
    z = torch.randn(b, t, backbone.config.d_model)
    kv = torch.zeros(b, attention.n_heads, attention.n_features, attention.head_dim)
    k_sum = torch.zeros(b, attention.n_heads, attention.n_features)
    no_reset = torch.zeros(b, 1, dtype=torch.long)
    with torch.no_grad():
        expected = quadratic_form(attention, z)
        steps = []
        for i in range(t):  # S_i = S_{i-1} + phi(k_i) v_i^T, z_i = z_{i-1} + phi(k_i)
            y, kv, k_sum, _ = attention(z[:, i : i + 1], kv, k_sum, no_reset)
            steps.append(y)
        chunked, _, _, _ = attention(
            z, torch.zeros_like(kv), torch.zeros_like(k_sum), no_reset.expand(b, t)
        )
    assert close(torch.cat(steps, dim=1), expected, F64_REL)
    assert close(chunked, expected, F64_REL)


@pytest.mark.parametrize("name", ["linear", "performer"])
def test_small_chunks_equal_steps_and_trace_is_state_before_each_step(
    name: str, float64: None
) -> None:
    torch.manual_seed(1)
    backbone = small_backbone(name, chunk_size=3).eval()
    t, b = 10, 2
    x = torch.randn(t, b, 5)
    starts = torch.zeros(t, b, dtype=torch.bool)
    starts[0] = True
    starts[4, 0] = starts[7, 1] = True
    with torch.no_grad():
        whole = backbone.run(x, backbone.initial_state(b), starts, trace=True)
        state = backbone.initial_state(b)
        for i in range(t):
            for got, expect in zip(whole.trace, state, strict=True):
                assert close(got[i], expect, F64_REL)
            y, state = backbone(x[i : i + 1], state, starts[i : i + 1])
            assert close(y[0], whole.output[i], F64_REL)
    # the state is O(1) in the episode length: L * H * F * E numbers for S
    assert state.kv.shape == (b, 2, 2, backbone.n_features, 8)


def test_positive_random_features_approximate_the_softmax_kernel() -> None:
    gen = torch.Generator().manual_seed(0)
    dim, m = 8, 16384
    omega = draw_random_features(m, dim, gen, orthogonal=True)
    x = torch.randn(6, dim, generator=gen) * 0.25
    y = torch.randn(6, dim, generator=gen) * 0.25
    estimate = (favor_features(x, omega) * favor_features(y, omega)).sum(-1)
    exact = (x * y).sum(-1).exp()  # the softmax kernel exp(x^T y)
    assert ((estimate - exact).abs() / exact).max().item() < 0.05
    assert (favor_features(x, omega) > 0).all()  # positive features: the normaliser is positive
    # i.i.d. rows estimate the same kernel
    iid = draw_random_features(m, dim, gen, orthogonal=False)
    estimate_iid = (favor_features(x, iid) * favor_features(y, iid)).sum(-1)
    assert ((estimate_iid - exact).abs() / exact).max().item() < 0.05


def test_performer_features_use_the_scaled_softmax_kernel_and_a_fixed_draw() -> None:
    torch.manual_seed(2)
    backbone = small_backbone("performer", n_features=8192)
    attention = backbone.blocks[0].attention
    e = attention.head_dim
    q, k = torch.randn(2, 5, e) * 0.4, torch.randn(2, 5, e) * 0.4
    estimate = (attention.features(q) * attention.features(k)).sum(-1)
    exact = ((q * k).sum(-1) / math.sqrt(e)).exp()  # exp(q^T k / sqrt(E))
    assert ((estimate - exact).abs() / exact).max().item() < 0.05
    again = small_backbone("performer", n_features=8192)
    assert torch.equal(again.blocks[0].attention.omega, attention.omega)  # seeded buffer
    assert "blocks.0.attention.omega" in backbone.state_dict()


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match="n_features must be a positive int"):
        small_backbone("performer", n_features=0)
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        small_backbone("linear", chunk_size=0)
