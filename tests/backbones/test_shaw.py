"""Defining properties of ``shaw``: relation-aware attention with clipped relative key and
value embeddings (eqs. 2-5 of reference 000)."""

from __future__ import annotations

import math

import pytest
import torch

from txrl.backbones.shaw.model import RelationAwareAttention, ShawTransformer

from ..nn.conftest import small_backbone
from ..numeric import F64_REL, close


def naive_shaw(
    attn: RelationAwareAttention, z: torch.Tensor, memory: torch.Tensor, allowed: torch.Tensor
) -> torch.Tensor:
    """Eqs. (2)-(4) pair by pair: queries z (B, T, D), earlier inputs (B, M, D)."""
    b, t, d = z.shape
    m = memory.shape[1]
    hd, e = attn.n_heads, attn.head_dim
    context = torch.cat((memory, z), dim=1)
    keys, values = attn.project_memory(context)
    q = attn.query(z).view(b, t, hd, e)
    keys = keys.view(b, m + t, hd, e)
    values = values.view(b, m + t, hd, e)
    out = torch.zeros(b, t, hd, e)
    for bi in range(b):
        for h in range(hd):
            for i in range(t):
                js = [j for j in range(m + t) if allowed[bi, i, j]]
                scores = []
                for j in js:
                    a_k = attn.relative_key[min(m + i - j, attn.clip)]  # a^K_ij
                    scores.append(q[bi, i, h] @ (keys[bi, j, h] + a_k) / math.sqrt(e))  # eq. (2)
                alpha = torch.stack(scores).softmax(0)  # eq. (3)
                for a, j in zip(alpha, js, strict=True):
                    a_v = attn.relative_value[min(m + i - j, attn.clip)]  # a^V_ij
                    out[bi, i, h] += a * (values[bi, j, h] + a_v)  # eq. (4)
    return attn.out(out.reshape(b, t, d))


@pytest.mark.parametrize(("memory", "steps", "clip"), [(0, 3, 2), (5, 1, 2), (4, 3, 1), (3, 2, 9)])
def test_matches_naive_eqs_2_to_4(memory: int, steps: int, clip: int, float64: None) -> None:
    torch.manual_seed(memory + 10 * steps + clip)
    attn = RelationAwareAttention(d_model=8, n_heads=2, clip=clip)
    b = 2
    z = torch.randn(b, steps, 8)
    memory_z = torch.randn(b, memory, 8)
    k = memory + steps
    allowed = torch.rand(b, steps, k) < 0.7
    query_pos = torch.arange(steps)[:, None] + memory
    key_pos = torch.arange(k)[None, :]
    allowed &= (key_pos <= query_pos)[None]
    allowed |= (key_pos == query_pos)[None]
    keys, values = attn.project_memory(torch.cat((memory_z, z), dim=1))
    fast = attn(z, keys, values, allowed)
    slow = naive_shaw(attn, z, memory_z, allowed)
    assert close(fast, slow, F64_REL)


def test_distances_beyond_the_clip_share_one_embedding(float64: None) -> None:
    """One layer: swapping two memory entries at distances >= k leaves the output unchanged
    (same embedding, so the window is the same set); within the clip it does not."""
    torch.manual_seed(0)
    backbone = small_backbone("shaw", n_layers=1, memory_length=6, clip=2)
    assert isinstance(backbone, ShawTransformer)
    backbone.eval()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(10, 1, 5, generator=gen)
    starts = torch.zeros(10, 1, dtype=torch.bool)
    starts[0] = True
    last = 9

    def last_output(order: list[int]) -> torch.Tensor:
        swapped = x.clone()
        swapped[[last - d for d in order]] = x[[last - d for d in sorted(order)]]
        with torch.no_grad():
            y, _ = backbone(swapped, backbone.initial_state(1), starts)
        return y[last]

    reference = last_output([3, 5])  # the identity
    assert close(last_output([5, 3]), reference, F64_REL)  # both clipped to 2
    assert close(last_output([6, 2]), reference, F64_REL)  # 2 is the clip itself
    assert not torch.allclose(last_output([2, 1]), reference, atol=1e-4)  # 1 vs 2
    assert not torch.allclose(last_output([1, 0]), reference, atol=1e-4)


def test_bad_clip_is_named() -> None:
    with pytest.raises(ValueError, match="clip must be an int >= 0"):
        small_backbone("shaw", clip=-1)
