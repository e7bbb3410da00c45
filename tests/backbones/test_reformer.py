"""Defining properties of the Reformer backbone: bucketed attention and reversible layers."""

from __future__ import annotations

import pytest
import torch

from txrl.backbones.reformer.model import LayerMemory, Reformer
from txrl.nn.window import window_mask

from ..nn.conftest import small_backbone
from ..numeric import F32_REL, F64_REL, close


def layer_memory(backbone: Reformer, b: int, t: int, m: int, seed: int) -> LayerMemory:
    """Memory keys/values of block 0 from random past inputs, all slots valid, no reset."""
    gen = torch.Generator().manual_seed(seed)
    block = backbone.blocks[0]
    past = torch.randn(b, m, backbone.config.d_model, generator=gen)
    keys, values = block.attention.project_memory(block.attention_input(past))
    valid = torch.ones(b, m, dtype=torch.bool)
    window = window_mask(valid, torch.zeros(t, b, dtype=torch.bool), m)  # (B, T, M+T)
    return LayerMemory(keys, values, window)


def test_a_query_never_attends_outside_its_bucket() -> None:
    torch.manual_seed(0)
    m, t, b = 8, 6, 3
    backbone = small_backbone("reformer", memory_length=m, n_buckets=4)
    assert isinstance(backbone, Reformer)
    memory = layer_memory(backbone, b, t, m, seed=1)
    x2 = torch.randn(b, t, backbone.config.d_model)
    with torch.no_grad():
        out = backbone.blocks[0].f(x2, memory, with_weights=True)
    assert out.weights is not None
    attention = backbone.blocks[0].attention
    bucket = attention.buckets(out.keys)  # (B, H, K) h(k) = argmax([kR; -kR])
    assert ((bucket >= 0) & (bucket < 4)).all()
    same_bucket = bucket[..., m:, None] == bucket[..., None, :]  # (B, H, T, K)
    weights = out.weights
    assert (weights[~same_bucket] == 0).all()  # never outside its bucket
    assert (weights[~memory.window[:, None].expand_as(weights)] == 0).all()  # nor its window
    assert close(weights.sum(-1), torch.ones(b, attention.n_heads, t), F32_REL)
    # itself only when no other key of its bucket is in its window
    self_weight = weights[..., m:].diagonal(dim1=-2, dim2=-1)  # (B, H, T)
    others = (same_bucket & memory.window[:, None]).sum(-1) - 1  # keys besides itself
    assert (self_weight[others > 0] == 0).all()
    assert (self_weight[others == 0] == 1).all()
    # the test is not vacuous: some queries mix several keys, some are alone
    assert (others > 1).any() and (others == 0).any()


def test_hash_is_shared_by_a_query_and_its_normalised_key() -> None:
    torch.manual_seed(0)
    backbone = small_backbone("reformer")
    attention = backbone.blocks[1].attention
    q = attention.query_key(torch.randn(2, 7, 16))
    keys, _ = attention.project_memory(torch.randn(2, 7, 16))
    # argmax([xR; -xR]) does not change when x is scaled by a positive number
    assert torch.equal(attention.buckets(keys), attention.buckets(3.7 * keys))
    assert attention.buckets(q).shape == (2, 2, 7)
    again = small_backbone("reformer")
    assert torch.equal(again.blocks[1].attention.rotations, attention.rotations)  # seeded


def test_reversible_block_inputs_are_reconstructed_from_outputs(float64: None) -> None:
    torch.manual_seed(0)
    m, t, b = 5, 4, 2
    backbone = small_backbone("reformer", memory_length=m)
    memory = layer_memory(backbone, b, t, m, seed=2)
    x1, x2 = torch.randn(b, t, 16), torch.randn(b, t, 16)
    with torch.no_grad():
        y1, y2, _ = backbone.blocks[0](x1, x2, memory)
        r1, r2 = backbone.blocks[0].inverse(y1, y2, memory)
    assert not torch.allclose(y1, x1) and not torch.allclose(y2, x2)
    assert close(r1, x1, F64_REL)
    assert close(r2, x2, F64_REL)


def test_whole_stack_inverts_back_to_the_embedding(float64: None) -> None:
    torch.manual_seed(1)
    backbone = small_backbone("reformer", n_layers=3)
    t, b = 6, 2
    x = torch.randn(t, b, 5)
    starts = torch.zeros(t, b, dtype=torch.bool)
    starts[0] = True
    state = backbone.initial_state(b)
    window = window_mask(state.valid, starts, backbone.memory_length)
    with torch.no_grad():
        h = backbone.embed(x).transpose(0, 1)
        x1, x2 = h, h
        memories = []
        for layer, block in enumerate(backbone.blocks):
            memories.append(LayerMemory(state.keys[:, layer], state.values[:, layer], window))
            x1, x2, _ = block(x1, x2, memories[-1])
        y, _ = backbone(x, state, starts)
        assert close(y.transpose(0, 1), 0.5 * (x1 + x2), F64_REL)
        for block, memory in zip(reversed(backbone.blocks), reversed(memories), strict=True):
            x1, x2 = block.inverse(x1, x2, memory)
    assert close(x1, h, F64_REL)
    assert close(x2, h, F64_REL)


def test_distance_bias_and_shared_projection_are_trained() -> None:
    torch.manual_seed(0)
    backbone = small_backbone("reformer")
    x = torch.randn(9, 2, 5)
    starts = torch.zeros(9, 2, dtype=torch.bool)
    starts[0] = True
    out = backbone.run(x, backbone.initial_state(2), starts, stats=True)
    out.output.square().mean().backward()
    attention = backbone.blocks[0].attention
    assert attention.distance_bias.grad is not None
    assert attention.distance_bias.grad.abs().sum() > 0
    assert attention.query_key.weight.grad is not None
    assert 1.0 <= out.stats["layer0/keys_attended"].item() <= backbone.memory_length


def test_bad_settings_are_named() -> None:
    with pytest.raises(ValueError, match="n_buckets must be an even int"):
        small_backbone("reformer", n_buckets=3)
