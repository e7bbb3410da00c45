import pytest
import torch
import torch.nn.functional as F

from txrl.nn.attention import RelativeMultiHeadAttention, RingPlan, rel_shift

from ..numeric import F32_REL, close
from .reference import naive_relative_attention


def random_allowed(b: int, t: int, m: int, gen: torch.Generator) -> torch.Tensor:
    """Random masks that always keep each query's own position (distance 0) and never the future."""
    k = m + t
    allowed = torch.rand(b, t, k, generator=gen) < 0.7
    query_pos = torch.arange(t)[:, None] + m
    key_pos = torch.arange(k)[None, :]
    allowed &= (key_pos <= query_pos)[None]
    allowed |= (key_pos == query_pos)[None]
    return allowed


@pytest.mark.parametrize("memory", [0, 1, 7])
@pytest.mark.parametrize("steps", [1, 2, 6])
@pytest.mark.parametrize("heads", [1, 4])
def test_shifted_relative_attention_equals_naive(memory: int, steps: int, heads: int) -> None:
    gen = torch.Generator().manual_seed(memory * 100 + steps * 10 + heads)
    torch.manual_seed(memory + 31 * steps + heads)
    d = 16
    attn = RelativeMultiHeadAttention(d, heads)
    # non-zero u and v so terms (c) and (d) are exercised
    torch.nn.init.normal_(attn.content_bias)
    torch.nn.init.normal_(attn.position_bias)
    b = 3
    h = torch.randn(b, steps, d, generator=gen)
    memory_h = torch.randn(b, memory, d, generator=gen)
    allowed = random_allowed(b, steps, memory, gen)
    memory_kv = attn.project_memory(memory_h)
    new_kv = attn.project_memory(h)
    fast, _ = attn(h, *memory_kv, *new_kv, allowed)
    slow = naive_relative_attention(attn, h, memory_h, allowed)
    # float32 only (the sinusoids are float32): a tolerance relative to the outputs' magnitude
    assert close(fast, slow, F32_REL)
    with_stats, stats = attn(h, *memory_kv, *new_kv, allowed, with_stats=True)
    assert close(with_stats, slow, F32_REL)
    assert stats is not None and torch.isfinite(stats.entropy)


@pytest.mark.parametrize("per_slot", [False, True])
def test_one_step_over_a_ring_equals_naive(per_slot: bool) -> None:
    # attend_one reads the memory as a ring (slots in any order, each at its distance), with
    # the products over the memory batched (eager) or per slot (compiled): eq. (8) both ways
    gen = torch.Generator().manual_seed(5)
    torch.manual_seed(5)
    d, heads, m, b = 16, 4, 7, 3
    attn = RelativeMultiHeadAttention(d, heads)
    torch.nn.init.normal_(attn.content_bias)
    torch.nn.init.normal_(attn.position_bias)
    h = torch.randn(b, 1, d, generator=gen)
    memory_h = torch.randn(b, m, d, generator=gen)  # oldest first
    allowed = random_allowed(b, 1, m, gen)  # (B, 1, M+1)
    position = torch.tensor([0, 3, 6])  # each env's oldest slot
    order = (torch.arange(m)[None] - position[:, None]) % m  # (B, M): slot j's place, oldest first
    ring_h = memory_h.gather(1, order[..., None].expand(b, m, d))  # (B, M, D) as a ring
    ring_allowed = torch.cat((allowed[:, 0, :m].gather(1, order), allowed[:, 0, m:]), dim=1)
    mask = torch.zeros(b, 1, m + 1).masked_fill(~ring_allowed[:, None], float("-inf"))
    plan = RingPlan(F.pad(order, (0, 1), value=m)[:, None], mask, None, per_slot)
    with torch.no_grad():
        key, value = attn.project_memory(h[:, 0])
        out = attn.attend_one(h[:, 0], key, value, attn.project_memory(ring_h), plan)
        expected = naive_relative_attention(attn, h, memory_h, allowed)[:, 0]
    assert close(out, expected, F32_REL)


def test_rel_shift_aligns_distances() -> None:
    t, m = 4, 3
    k = m + t
    # column c of the input holds distance K-1-c
    scores = torch.arange(k - 1, -1, -1, dtype=torch.float32).repeat(t, 1)
    shifted = rel_shift(scores)
    for i in range(t):
        for j in range(m + i + 1):
            assert shifted[i, j].item() == m + i - j


def test_position_keys_cache_tracks_weight_updates() -> None:
    attn = RelativeMultiHeadAttention(8, 2)
    with torch.no_grad():
        first = attn.position_keys(5).clone()
        attn.position_key.weight.add_(1.0)
        second = attn.position_keys(5)
    assert not torch.allclose(first, second)


def test_heads_must_divide_width() -> None:
    with pytest.raises(ValueError, match="divisible by n_heads"):
        RelativeMultiHeadAttention(10, 4)
