"""Defining properties of ``adaptive_span``: the soft mask m_z, its re-normalisation, the
zero weight beyond z + R and the L1 penalty on the spans."""

from __future__ import annotations

import math

import pytest
import torch

from txrl.backbones.adaptive_span.model import AdaptiveSpanAttention, AdaptiveSpanTransformer
from txrl.nn.attention import relative_attention

from ..nn.conftest import small_backbone
from ..numeric import F64_REL, close


def build(**overrides: float) -> AdaptiveSpanTransformer:
    torch.manual_seed(0)
    backbone = small_backbone("adaptive_span", **overrides)
    assert isinstance(backbone, AdaptiveSpanTransformer)
    backbone.eval()
    return backbone


def set_spans(attention: AdaptiveSpanAttention, spans: list[float]) -> None:
    fraction = torch.tensor(spans) / attention.max_span
    with torch.no_grad():
        attention.span_logit.copy_(torch.log(fraction / (1 - fraction)))


def test_soft_mask_is_the_clamped_ramp(float64: None) -> None:
    backbone = build(memory_length=8, span_ramp=2.0)
    attention = backbone.blocks[0].attention
    set_spans(attention, [3.0, 5.5])
    x = torch.arange(0, 10, 0.5)
    mask = attention.soft_mask(x)  # (H, X)
    for h, z in enumerate([3.0, 5.5]):
        expect = ((2.0 + z - x) / 2.0).clamp(0, 1)
        assert close(mask[h], expect, F64_REL)
    assert close(attention.spans(), torch.tensor([3.0, 5.5]), F64_REL)


def test_weights_are_the_renormalised_masked_softmax(float64: None) -> None:
    """a_ij = m_z(i-j) exp(s_ij) / sum_r m_z(i-r) exp(s_ir) (all keys in the window)."""
    backbone = build(memory_length=6, span_ramp=1.5)
    attention = backbone.blocks[0].attention
    set_spans(attention, [1.0, 5.0])  # reach ceil(5 + 1.5) = 7 > M: no slot is dropped
    b, t, m, d = 2, 3, 6, backbone.config.d_model
    z = torch.randn(b, t, d)
    keys, values = attention.project_memory(torch.randn(b, m + t, d))
    allowed = (torch.arange(t)[:, None] + m >= torch.arange(m + t)[None, :])[None].expand(b, t, -1)
    stats: dict[str, torch.Tensor] = {}
    out = attention(z, keys, values, allowed, stats)
    # plain weights exp(s_ij) / sum, then the mask and the re-normalisation by hand
    plain_bias = torch.zeros(b, 1, t, m + t).masked_fill(~allowed[:, None], float("-inf"))
    _, plain = relative_attention(
        attention.relative, z, keys, values, plain_bias, with_weights=True
    )
    distance = (torch.arange(t)[:, None] + m - torch.arange(m + t)[None, :]).clamp(min=0)
    masked = plain * attention.soft_mask(distance.double())[None]
    expect = masked / masked.sum(-1, keepdim=True)
    bias = torch.where(
        masked > 0, attention.soft_mask(distance.double()).clamp_min(1e-30).log(), float("-inf")
    )
    got_out, got = relative_attention(attention.relative, z, keys, values, bias, with_weights=True)
    assert close(got, expect, F64_REL)
    assert close(got_out, out, F64_REL)
    # head 0 (z = 1, R = 1.5): distance 3 and beyond get exactly zero weight
    assert torch.all(got[:, 0][..., distance >= 3] == 0)


def test_keys_beyond_span_plus_ramp_do_not_reach_the_output() -> None:
    backbone = build(n_layers=1, memory_length=8, span_ramp=1.0)
    set_spans(backbone.blocks[0].attention, [1.9, 0.9])  # every head: zero from distance 2.9
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(12, 1, 5, generator=gen)
    starts = torch.zeros(12, 1, dtype=torch.bool)
    starts[0] = True
    last = 11
    with torch.no_grad():
        y, _ = backbone(x, backbone.initial_state(1), starts)
        for distance, reaches in [(3, False), (5, False), (8, False), (2, True), (1, True)]:
            changed = x.clone()
            changed[last - distance] += 3.0
            y_changed, _ = backbone(changed, backbone.initial_state(1), starts)
            same = (y_changed[last] - y[last]).abs().max().item() <= 1e-6
            assert same != reaches, distance


def test_span_l1_is_an_aux_loss_with_gradient(float64: None) -> None:
    backbone = build()
    backbone.train()
    out = backbone.run(
        torch.randn(3, 2, 5), backbone.initial_state(2), torch.ones(3, 2, dtype=torch.bool)
    )
    loss = out.aux_losses["span_l1"]
    spans = backbone.spans()
    assert spans.shape == (2, 2)
    assert torch.all((spans >= 0) & (spans <= backbone.memory_length))
    assert close(loss, spans.mean(), F64_REL)
    loss.backward()
    for block in backbone.blocks:
        grad = block.attention.span_logit.grad
        assert grad is not None and torch.all(grad > 0)  # the penalty shrinks every span


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"span_ramp": 0.0}, "span_ramp must be a number > 0"), ({"span_init": 1.0}, "span_init")],
)
def test_bad_settings_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        small_backbone("adaptive_span", **kwargs)


def test_short_spans_drop_memory_slots() -> None:
    backbone = build(memory_length=16, span_ramp=2.0)
    for block in backbone.blocks:
        set_spans(block.attention, [1.0, 2.0])
    out = backbone.run(
        torch.randn(1, 1, 5),
        backbone.initial_state(1),
        torch.ones(1, 1, dtype=torch.bool),
        stats=True,
    )
    reach = math.ceil(backbone.blocks[0].attention.spans().max().item() + 2.0)  # 4 or 5 (rounding)
    assert reach <= 5
    assert out.stats["layer0/keys_kept"].item() == reach
