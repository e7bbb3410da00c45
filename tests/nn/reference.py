"""An independent reference for the relative attention of :mod:`txrl.nn.attention`: every
(i, j) score of eq. (8) of Dai et al. 2019 computed directly, terms (a) to (d) apart."""

from __future__ import annotations

import math

import torch

from txrl.nn.attention import RelativeMultiHeadAttention, sinusoid_table


def naive_relative_attention(
    attn: RelativeMultiHeadAttention, h: torch.Tensor, memory: torch.Tensor, allowed: torch.Tensor
) -> torch.Tensor:
    """Reference implementation: every (i, j) score of eq. (8) computed directly.

    ``h`` (B, T, D) queries, ``memory`` (B, M, D) earlier layer inputs, ``allowed`` (B, T, M+T).
    Quadratic in memory (a (T, K, D) tensor of per-pair embeddings R_{i-j}); for tests only.
    """
    b, t, d = h.shape
    m = memory.shape[1]
    k = m + t
    hd, e = attn.n_heads, attn.head_dim
    context = torch.cat((memory, h), dim=1)  # (B, K, D)
    keys, values = attn.project_memory(context)
    q = attn.query(h).view(b, t, hd, e)  # (B, T, H, E)
    key = keys.view(b, k, hd, e)
    value = values.view(b, k, hd, e)
    query_pos = torch.arange(t, device=h.device)[:, None] + m  # absolute position of query i
    key_pos = torch.arange(k, device=h.device)[None, :]
    distance = (query_pos - key_pos).clamp(min=0)  # (T, K); negative ones are masked below
    r = sinusoid_table(distance.flatten(), d).view(t, k, d)  # R_{i-j} per pair
    wr = attn.position_key(r).view(t, k, hd, e)  # W_kR R_{i-j}
    u, v = attn.content_bias, attn.position_bias
    term_a = torch.einsum("bthe,bkhe->bhtk", q, key)
    term_b = torch.einsum("bthe,tkhe->bhtk", q, wr)
    term_c = torch.einsum("he,bkhe->bhk", u, key)[:, :, None, :]
    term_d = torch.einsum("he,tkhe->htk", v, wr)[None]
    scores = (term_a + term_b + term_c + term_d) / math.sqrt(e)
    scores = scores.masked_fill(~allowed[:, None], float("-inf"))
    weights = scores.softmax(-1)
    attended = torch.einsum("bhtk,bkhe->bthe", weights, value).reshape(b, t, d)
    return attn.out(attended)
