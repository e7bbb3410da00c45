"""Defining properties of ``linformer``: a query reads the keys of its own window only through
their k projections E K (and the values through F V)."""

from __future__ import annotations

import math

import pytest
import torch

from txrl.backbones.linformer.model import LinformerAttention, LinformerTransformer
from txrl.nn.pluggable_attention import window_validity
from txrl.nn.window import window_mask

from ..nn.conftest import small_backbone
from ..numeric import F64_REL, close


def build(**overrides: int) -> LinformerTransformer:
    torch.manual_seed(0)
    backbone = small_backbone("linformer", **overrides)
    assert isinstance(backbone, LinformerTransformer)
    backbone.eval()
    return backbone


def test_keys_enter_only_through_their_projection(float64: None) -> None:
    """Two key sets with equal E K give equal outputs; others do not."""
    backbone = build(memory_length=7, proj_dim=3)
    attention = backbone.blocks[0].attention
    w, d = 8, backbone.config.d_model
    z = torch.randn(2, 1, d)
    keys, values = attention.project_memory(torch.randn(2, w, d))
    valid = torch.ones(2, 1, w, dtype=torch.bool)
    # a perturbation in the null space of E (k x W, k < W) leaves E K unchanged
    _, _, vh = torch.linalg.svd(attention.proj_key.detach())
    null = vh[3:]  # (W - k, W)
    e_matrix = attention.proj_key.detach()
    assert close(
        e_matrix @ null.T, torch.zeros(3, w - 3), F64_REL, scale=e_matrix.abs().max().item()
    )
    invisible = null.T @ torch.randn(w - 3, d)  # (W, D)
    with torch.no_grad():
        out = attention(z, keys, values, valid)
        same = attention(z, keys + 5.0 * invisible, values, valid)
        other = attention(z, keys + torch.randn(w, d), values, valid)
    assert close(same, out, F64_REL)
    assert not torch.allclose(out, other, atol=1e-3)


def naive_linformer(
    attention: LinformerAttention,
    z: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    valid: torch.Tensor,
) -> torch.Tensor:
    """One query at a time: its window, invalid rows zeroed, E K and F V, the softmax."""
    b, t, d = z.shape
    w = attention.memory_length + 1
    hd, e = attention.n_heads, attention.head_dim
    out = torch.zeros(b, t, d)
    for bi in range(b):
        for i in range(t):
            mask = valid[bi, i, :, None].float()  # (W, 1)
            k_win = keys[bi, i : i + w] * mask  # rows of the window, out-of-episode zeroed
            v_win = values[bi, i : i + w] * mask
            ek = (attention.proj_key @ k_win).view(-1, hd, e)  # (k, H, E)
            fv = (attention.proj_value @ v_win).view(-1, hd, e)
            q = attention.query(z[bi, i]).view(hd, e)
            scores = torch.einsum("he,rhe->hr", q, ek) / math.sqrt(e)
            out[bi, i] = torch.einsum("hr,rhe->he", scores.softmax(-1), fv).reshape(d)
    return attention.out(out)


@pytest.mark.parametrize(("memory", "steps"), [(0, 3), (4, 1), (4, 6)])
def test_each_query_projects_its_own_window(memory: int, steps: int, float64: None) -> None:
    backbone = build(memory_length=memory, proj_dim=3)
    attention = backbone.blocks[0].attention
    d = backbone.config.d_model
    gen = torch.Generator().manual_seed(memory + steps)
    valid_memory = torch.rand(2, memory, generator=gen) < 0.6
    valid_memory = valid_memory.cummin(dim=1).values.flip(1)  # valid slots are the newest
    starts = torch.rand(steps, 2, generator=gen) < 0.3
    allowed = window_mask(valid_memory, starts, memory)
    valid = window_validity(allowed, memory)
    z = torch.randn(2, steps, d, generator=gen)
    keys, values = attention.project_memory(torch.randn(2, memory + steps, d, generator=gen))
    with torch.no_grad():
        fast = attention(z, keys, values, valid)
        slow = naive_linformer(attention, z, keys, values, valid)
    assert close(fast, slow, F64_REL)


def test_bad_proj_dim_is_named() -> None:
    with pytest.raises(ValueError, match="proj_dim must be an int >= 1"):
        small_backbone("linformer", proj_dim=0)
