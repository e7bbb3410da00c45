"""Relative multi-head attention of Transformer-XL (Dai et al. 2019).

Legend used in every shape comment: B batch (envs), T query steps, M memory slots,
K = M + T key positions, H heads, E head width, D model width = H * E.

For query i and key j at relative distance ``i - j`` the score is that of
Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context",
sec. 3.3 (relative positional encodings)::

    A[i, j] = q_i^T k_j              (a) content
            + q_i^T W_kR R_{i-j}     (b) content-dependent positional bias
            + u^T k_j                (c) global content bias
            + v^T W_kR R_{i-j}       (d) global positional bias

with k_j = W_kE h_j and the sinusoid R without parameters. Terms (a)+(c) are one product
``(q + u) k^T`` and terms (b)+(d) are ``(q + v) (W_kR R)^T``. The positional product is done
once against the K distances in reversed order (the matrix Q of the reference, "qQ^T")
and then each pair's distance is read off: by a left shift row by row ([`rel_shift`][txrl.nn.attention.rel_shift])
in a sequence, by a gather in an acting step whose memory is a ring. That costs O(T K E)
instead of building a (T, K, E) tensor of per-pair embeddings.

One implementation of the score serves a sequence ([`relative_attention`][txrl.nn.attention.relative_attention]) and one
step over a memory kept as a ring ([`RelativeMultiHeadAttention.attend_one`][txrl.nn.attention.RelativeMultiHeadAttention.attend_one], what the
layer loop calls for an acting step, `txrl.nn.memory.LayerMemoryBackbone.step`) alike:
the scaled ``(q + u)`` and ``(q + v)`` come from one set of derived weights
([`RelativeMultiHeadAttention.derived_weights`][txrl.nn.attention.RelativeMultiHeadAttention.derived_weights]: ``W_q / sqrt(E)`` with biases
``u / sqrt(E)`` and ``v / sqrt(E)``), terms (b)+(d) from
[`RelativeMultiHeadAttention.position_scores`][txrl.nn.attention.RelativeMultiHeadAttention.position_scores]. Only the product of terms (a)+(c)
differs: a sequence hands it to ``scaled_dot_product_attention`` (fused with the softmax
and the values), a step takes it against the (B, M, D) memory in place without splitting
it by head. The test suite holds an independent pair-by-pair version of eq. (8).

Inspection hook: inside ``with AttentionRecorder() as recorder:``, every call computes its
softmax weights explicitly (the same scores, not a second implementation) and hands them
to ``recorder.calls``; outside such a block nothing changes (``txrl inspect`` uses it).
"""

from __future__ import annotations

import math
from types import TracebackType
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn


def sinusoid_table(distances: torch.Tensor, d_model: int) -> torch.Tensor:
    """Sinusoid encoding R of eq. (1): ``R[p, 2k] = sin(p / 10000^(2k/D))``, ``R[p, 2k+1] = cos(..)``.

    ``distances`` (N,) of any real dtype -> (N, d_model) float32.
    """
    if d_model % 2:
        raise ValueError(f"sinusoid encoding needs an even d_model, got {d_model}")
    exponents = torch.arange(0, d_model, 2, dtype=torch.float32, device=distances.device)
    inv_freq = 1.0 / (10000 ** (exponents / d_model))
    angles = distances.to(torch.float32)[:, None] * inv_freq[None, :]  # (N, D/2)
    table = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (N, D/2, 2)
    return table.flatten(-2)  # (N, D), interleaved sin/cos


def rel_shift(scores: torch.Tensor) -> torch.Tensor:
    """Left-shift row i of ``scores`` (..., T, K) by ``T - 1 - i`` columns.

    Column k of the input holds distance ``K - 1 - k`` (keys in reversed order, as Q in
    the reference). The output's column j then holds the score for distance ``(K - T) + i - j``,
    that is query i (absolute position K - T + i) against key j. Entries with ``j > K - T + i``
    (the future) are garbage and must be masked by the caller.
    """
    *lead, t, k = scores.shape
    padded = F.pad(scores, (1, 0))  # (..., T, K+1): a zero column on the left
    padded = padded.view(*lead, k + 1, t)  # same memory read as K+1 rows of length T
    return padded[..., 1:, :].reshape(*lead, t, k)  # drop the first row -> (..., T, K)


#: What the score derives from the weights for K keys: the weight (2D, D) and bias (2D) of
#: the scaled query terms, and the positional keys per head (H, E, K)
DerivedWeights = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


class RingPlan(NamedTuple):
    """What every layer of one step over a memory kept as a ring shares (K = M + 1 keys: the
    M slots as they lie, then the step itself); made by the layer loop's owner
    (`txrl.nn.memory.LayerMemoryBackbone.ring_plan`)."""

    key_index: torch.Tensor  # (B, 1, K) long, each key's place in the distances M .. 0
    mask: torch.Tensor  # (B, 1, K) float, 0 where the key may be attended to, -inf elsewhere
    # the layer's attention's derived_weights for K keys (None: its own, looked up)
    weights: DerivedWeights | None
    # the products over the memory as a multiply and a sum per slot and head, which a
    # compiled step fuses into one pass over the memory (E products per slot and head);
    # False: batched products over the whole memory, what an eager step runs fastest (D
    # products per slot and head, one library call each)
    per_slot: bool = False


class AttentionStats(NamedTuple):
    """Diagnostics of one attention call, averaged over batch, heads and queries."""

    entropy: torch.Tensor  # () mean entropy of the attention distribution, in nats
    keys_attended: torch.Tensor  # () mean number of keys a query may attend to


class RecordedAttention(NamedTuple):
    """The weights of one attention call, handed to an [`AttentionRecorder`][txrl.nn.attention.AttentionRecorder]."""

    module: nn.Module  # the RelativeMultiHeadAttention that made the call
    weights: torch.Tensor  # (B, H, T, K) softmax weights; keys are M memory slots then T steps
    allowed: torch.Tensor  # (B, T, K) bool, the pairs that may attend (weights are 0 elsewhere)


class AttentionRecorder:
    """Collects the attention weights of every [`RelativeMultiHeadAttention`][txrl.nn.attention.RelativeMultiHeadAttention] call made
    while it is active, in call order, detached.

    ``with AttentionRecorder() as recorder: backbone.run(...)``. The weights are computed
    on the explicit-softmax path (the fused ``scaled_dot_product_attention`` hands none
    out), so outputs equal those of an unrecorded call up to float rounding. One recorder is
    active at a time; the hook is for diagnostics, not for training.
    """

    def __init__(self) -> None:
        self.calls: list[RecordedAttention] = []

    def __enter__(self) -> AttentionRecorder:
        global _active_recorder
        if _active_recorder is not None:
            raise RuntimeError("an AttentionRecorder is already active; nest none inside another")
        _active_recorder = self
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        global _active_recorder
        _active_recorder = None


_active_recorder: AttentionRecorder | None = None


class RelativeMultiHeadAttention(nn.Module):
    """Multi-head attention with Transformer-XL relative positions (Dai et al. 2019, sec. 3.3).

    Keys and values are computed by `project_memory` for both memory and new
    positions, so a caller acting one step at a time can keep them: per step the cost is
    O(D^2) for the new token's projections plus O(M D) for attending over M cached keys.

    What the score derives from the weights alone ([`derived_weights`][txrl.nn.attention.RelativeMultiHeadAttention.derived_weights]: the scaled
    query weights and the positional keys ``W_kR R_{0..K-1}``) is kept between calls made
    with gradients off, so an acting step does not rebuild it, and dropped on these events:
    any call with gradients on (a training pass, which comes before every optimizer step),
    ``train()`` / ``eval()``, a loaded state dict, and [`clear_parameter_cache`][txrl.nn.attention.RelativeMultiHeadAttention.clear_parameter_cache] (what
    [`txrl.nn.protocol.Backbone.on_parameters_changed`][txrl.nn.protocol.Backbone.on_parameters_changed] calls). A copy of the module
    starts without. Weights written otherwise with gradients off (``p.data``, ``p.copy_``
    under ``torch.no_grad``) are followed once one of those events has happened.
    """

    head_features: torch.Tensor  # (H, D) buffer

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by n_heads ({n_heads}); "
                f"valid n_heads for this width: {[h for h in range(1, d_model + 1) if d_model % h == 0]}"
            )
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.query = nn.Linear(d_model, d_model, bias=False)  # W_q
        self.key_value = nn.Linear(d_model, 2 * d_model, bias=False)  # [W_kE; W_v]
        self.position_key = nn.Linear(d_model, d_model, bias=False)  # W_kR
        self.out = nn.Linear(d_model, d_model)
        # u and v of eq. (8), one per head
        self.content_bias = nn.Parameter(torch.zeros(n_heads, self.head_dim))
        self.position_bias = nn.Parameter(torch.zeros(n_heads, self.head_dim))
        self.dropout = dropout
        # (H, D) one-hot of each head's features: per-head products of one step as single
        # batched products over the contiguous (M, D) memory, without splitting it by head.
        # Kept (H, D) so that a query spread over it is row-major: a (B, H, D) operand with
        # H fastest sends MKL's batched product of the scores down a slower path
        # (bench/results/throughput_changes.md, "eager attention over the memory")
        self.register_buffer(
            "head_features",
            torch.eye(n_heads).repeat_interleave(self.head_dim, dim=1),
            persistent=False,
        )
        # derived_weights by number of keys, kept while gradients are off (class docstring)
        self._cache: dict[int, DerivedWeights] = {}
        self.register_load_state_dict_post_hook(_forget_derived_weights)

    def project_memory(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Content keys ``W_kE h`` and values ``W_v h`` of layer inputs h (B, N, D) -> 2 x (B, N, D)."""
        keys, values = self.key_value(h).chunk(2, dim=-1)
        return keys, values

    def position_keys(self, n_keys: int) -> torch.Tensor:
        """``W_kR R_d`` for distances d = K-1, ..., 0 (the matrix Q of the reference) -> (K, H, E)."""
        weight = self.position_key.weight
        distances = torch.arange(n_keys - 1, -1, -1, device=weight.device)
        table = sinusoid_table(distances, self.d_model).to(weight.dtype)  # (K, D)
        return self.position_key(table).view(n_keys, self.n_heads, self.head_dim)

    def derived_weights(self, n_keys: int) -> DerivedWeights:
        """What the score derives from the weights for ``n_keys`` keys:

        * weight (2D, D) and bias (2D) of one product giving the scaled query terms
          ``(q + u) / sqrt(E)`` and ``(q + v) / sqrt(E)``: ``[W_q; W_q] / sqrt(E)`` with bias
          ``[u; v] / sqrt(E)``;
        * the positional keys per head (H, E, K) ([`position_keys`][txrl.nn.attention.RelativeMultiHeadAttention.position_keys]), laid out for a
          batched product per head.

        Built at each call with gradients on; kept and reused with them off, until one of
        the events of the class docstring drops it."""
        if torch.is_grad_enabled():
            self._cache.clear()  # a training pass: the weights may change after it
            return self._derive(n_keys)
        found = self._cache.get(n_keys)
        if found is None:
            # inference tensors whichever way gradients are off, so a compiled step that
            # reads them sees one kind
            with torch.inference_mode():
                found = self._cache.setdefault(n_keys, self._derive(n_keys))
        return found

    def _derive(self, n_keys: int) -> DerivedWeights:
        scale = 1.0 / math.sqrt(self.head_dim)
        w_q = self.query.weight * scale  # (D, D)
        bias = torch.cat((self.content_bias.flatten(), self.position_bias.flatten())) * scale
        position_keys = self.position_keys(n_keys).permute(1, 2, 0).contiguous()  # (H, E, K)
        return torch.cat((w_q, w_q)), bias, position_keys  # (2D, D), (2D,), (H, E, K)

    def clear_parameter_cache(self) -> None:
        """Drop what [`derived_weights`][txrl.nn.attention.RelativeMultiHeadAttention.derived_weights] kept (after weights written with gradients off)."""
        self._cache.clear()

    def train(self, mode: bool = True) -> RelativeMultiHeadAttention:
        self._cache.clear()
        return super().train(mode)

    def __getstate__(self) -> dict[str, object]:
        # a copy (deepcopy, pickle) derives from its own weights
        state = dict(super().__getstate__())
        state["_cache"] = {}
        return state

    def position_scores(self, qv: torch.Tensor, position_keys: torch.Tensor) -> torch.Tensor:
        """Terms (b) + (d), ``(q + v)^T W_kR R_d``, of N queries' ``qv`` (..., D) (N rows,
        each a view of D features) against the distances d = K-1, ..., 0 of
        ``position_keys`` (H, E, K) ([`derived_weights`][txrl.nn.attention.RelativeMultiHeadAttention.derived_weights]), one batched product per head
        -> (H, N, K), heads first as the product leaves them."""
        by_head = qv.view(-1, self.n_heads, self.head_dim).transpose(0, 1)  # (H, N, E)
        return torch.bmm(by_head, position_keys)

    def over_memory(
        self,
        z: torch.Tensor,
        memory: tuple[torch.Tensor, torch.Tensor],
        new: tuple[torch.Tensor, torch.Tensor],
        plan: torch.Tensor | RingPlan,
        stats: dict[str, torch.Tensor] | None,
    ) -> torch.Tensor:
        """A layer's attention in `txrl.nn.memory.LayerMemoryBackbone`'s loop: cached
        keys and values ``memory`` (B, M, D) and those of the new steps ``new`` stay apart.
        ``plan``: the window mask (B, T, K) of a sequence of T steps (z and ``new`` (B, T, D)),
        whose memory has its slots oldest first; or the [`RingPlan`][txrl.nn.attention.RingPlan] of one step over a
        memory kept as a ring (z and ``new`` (B, D), one row per env), attended by
        [`attend_one`][txrl.nn.attention.RelativeMultiHeadAttention.attend_one] over the memory read in place."""
        if isinstance(plan, RingPlan):
            return self.attend_one(z, *new, memory, plan)
        attended, attn_stats = self(z, *memory, *new, plan, with_stats=stats is not None)
        if stats is not None:
            assert attn_stats is not None
            stats["attention_entropy"] = attn_stats.entropy
        return attended

    def forward(
        self,
        h: torch.Tensor,
        memory_keys: torch.Tensor,
        memory_values: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        allowed: torch.Tensor,
        *,
        with_stats: bool = False,
    ) -> tuple[torch.Tensor, AttentionStats | None]:
        """Attend from queries ``h`` (B, T, D) to M memory positions and the T positions of ``h``.

        ``memory_keys``/``memory_values`` (B, M, D) and ``keys``/``values`` (B, T, D) come from
        `project_memory`. ``allowed`` (B, T, M+T) bool says which pairs may attend.
        Returns (B, T, D) and, with ``with_stats``, the attention's diagnostics.
        """
        recorder = _active_recorder
        out, weights = relative_attention(
            self,
            h,
            torch.cat((memory_keys, keys), dim=1),  # (B, K, D)
            torch.cat((memory_values, values), dim=1),  # (B, K, D)
            allowed,
            with_weights=with_stats or recorder is not None,
        )
        if recorder is not None:
            assert weights is not None
            recorder.calls.append(RecordedAttention(self, weights.detach(), allowed))
        stats = None
        if with_stats:
            assert weights is not None
            stats = AttentionStats(attention_entropy(weights), allowed.sum(-1).float().mean())
        return out, stats

    def attend_one(
        self,
        z: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        memory: tuple[torch.Tensor, torch.Tensor],
        plan: RingPlan,
    ) -> torch.Tensor:
        """Attention of one step (T = 1) with the scores of [`relative_attention`][txrl.nn.attention.relative_attention]: from
        its attention input ``z``, key and value (B, D) each, over the cached keys and values
        ``memory`` (B, M, D) read in place, in the order ``plan`` gives -> (B, D).
        (a) + (c) as ``(q + u) k^T`` over the memory and over the step's own key, (b) + (d)
        as ``(q + v) (W_kR R)^T`` over the M + 1 distances ([`position_scores`][txrl.nn.attention.RelativeMultiHeadAttention.position_scores]), read
        per slot. The product of (a) + (c) over the memory takes the (B, M, D) memory as it
        lies, without splitting it by head: a copy of the memory would cost more than the
        rest of the step.
        """
        memory_keys, memory_values = memory
        b, m, d = memory_keys.shape
        hd, e = self.n_heads, self.head_dim
        derived = plan.weights if plan.weights is not None else self.derived_weights(m + 1)
        weight, bias, position_keys = derived
        qu, qv = F.linear(z, weight, bias).chunk(2, dim=-1)  # (B, D) each, scaled
        position = self.position_scores(qv, position_keys).transpose(0, 1)  # (B, H, K)
        # each slot's score read at its distance, -inf where not allowed
        position = position.gather(2, plan.key_index.expand(b, hd, m + 1)) + plan.mask
        own_score = (qu * key).view(b, hd, e).sum(-1, keepdim=True) + position[..., m:]  # (B, H, 1)
        if plan.per_slot:
            # (a) + (c) over the memory, per slot and head: E products each
            by_slot = memory_keys.view(b, m, hd, e) * qu.view(b, 1, hd, e)  # (B, M, H, E)
            memory_scores = by_slot.sum(-1).transpose(1, 2) + position[..., :m]  # (B, H, M)
            weights = torch.cat((memory_scores, own_score), dim=2).softmax(dim=-1)  # (B, H, K)
            # sum_j w_j v_j per head
            by_head = weights[..., :m].transpose(1, 2)[..., None]  # (B, M, H, 1)
            own_head = (by_head * memory_values.view(b, m, hd, e)).sum(1)  # (B, H, E)
        else:
            # (a) + (c) over the memory: the (B, H, D) block-diagonal (q + u) against the
            # (B, M, D) keys read in place, one batched product
            qu_by_head = qu.view(b, 1, d) * self.head_features  # (B, H, D), row-major
            memory_scores = torch.baddbmm(
                position[..., :m], qu_by_head, memory_keys.transpose(1, 2)
            )  # (B, H, M)
            weights = torch.cat((memory_scores, own_score), dim=2).softmax(dim=-1)  # (B, H, K)
            # sum_j w_j v_j per head: every head's weights against all D features, then the
            # features of its own head (the diagonal blocks) kept
            by_head = torch.bmm(weights[..., :m], memory_values).view(b, hd, hd, e)  # (B, H, H, E)
            own_head = by_head.diagonal(dim1=1, dim2=2).transpose(1, 2)  # (B, H, E)
        attended = own_head + weights[..., m:] * value.view(b, hd, e)  # (B, H, E)
        return self.out(attended.reshape(b, d))


def _forget_derived_weights(module: nn.Module, incompatible_keys: object) -> None:
    """Post-hook of ``load_state_dict``: new weights, so nothing derived from the old ones."""
    del incompatible_keys
    if isinstance(module, RelativeMultiHeadAttention):
        module.clear_parameter_cache()


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(..., N, D) -> (..., H, N, E)."""
    return x.unflatten(-1, (n_heads, -1)).transpose(-3, -2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(..., H, N, E) -> (..., N, D)."""
    return x.transpose(-3, -2).flatten(-2)


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of attention distributions ``weights`` (..., K), detached."""
    logw = torch.where(weights > 0, weights.clamp_min(1e-30).log(), torch.zeros_like(weights))
    return -(weights * logw).sum(-1).mean().detach()


def relative_attention(
    attn: RelativeMultiHeadAttention,
    h: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    distance: torch.Tensor | None = None,
    n_distances: int | None = None,
    *,
    with_weights: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Transformer-XL relative attention (Dai et al. 2019, sec. 3.3) under any mask: the one
    place every sequence-mode relative attention of txrl computes its scores.

    Queries ``h`` (B, T, D), keys/values (B, K, D) from ``attn.project_memory``.
    ``mask``: bool, which pairs may attend, or float, an additive bias (-inf where a pair may
    not attend, any finite log-weight such as an adaptive span's log m_z elsewhere); (B, T, K)
    for every head, or broadcastable to (B, H, T, K). Positions: by default the keys are
    ``[memory ; h]`` and query i sits at K - T + i; ``distance`` (B, T, K) long in
    [0, n_distances) gives each pair's distance instead. Returns (B, T, D) and, when asked,
    the attention weights (B, H, T, K).
    """
    b, t, d = h.shape
    k = keys.shape[1]
    hd = attn.n_heads
    n = k if distance is None else n_distances
    assert n is not None, "a distance per pair comes with n_distances"
    # the query terms (q + u) / sqrt(E) and (q + v) / sqrt(E), as in one step (attend_one)
    weight, bias, position_keys = attn.derived_weights(n)
    q = F.linear(h, weight[:d])  # (B, T, D), scaled
    qu = split_heads(q + bias[:d], hd)  # (B, H, T, E)
    key, value = split_heads(keys, hd), split_heads(values, hd)  # (B, H, K, E)
    # (b) + (d): (q + v)^T W_kR R_{i-j}, against the distances n-1 .. 0
    by_distance = attn.position_scores(q + bias[d : 2 * d], position_keys)  # (H, B*T, n)
    by_distance = by_distance.view(hd, b, t, n).transpose(0, 1)  # (B, H, T, n)
    if distance is None:
        position_scores = rel_shift(by_distance)  # the relative shift
    else:
        index = (n - 1 - distance)[:, None].expand(b, hd, t, k)  # each pair's column
        position_scores = by_distance.gather(-1, index)
    if mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=h.dtype, device=h.device).masked_fill(
            ~mask, float("-inf")
        )
    if mask.dim() == 3:
        mask = mask[:, None]  # the same for every head
    scores_bias = position_scores + mask  # (B, H, T, K)
    # (a) + (c): (q + u)^T k_j
    weights = None
    dropout = attn.dropout if attn.training else 0.0
    if with_weights:
        scores = torch.einsum("bhte,bhke->bhtk", qu, key) + scores_bias
        weights = scores.softmax(dim=-1)  # (B, H, T, K)
        attended = F.dropout(weights, dropout, attn.training) @ value  # (B, H, T, E)
    else:
        attended = F.scaled_dot_product_attention(
            qu, key, value, attn_mask=scores_bias, dropout_p=dropout, scale=1.0
        )  # (B, H, T, E), qu already scaled
    return attn.out(merge_heads(attended)), weights  # (B, T, D)
