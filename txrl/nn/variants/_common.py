"""Plumbing shared by the variant backbones; each variant module holds its paper's part.

Legend: B envs, T steps, L layers (or depth steps), M memory slots, W = M + 1 window
positions, K = M + T keys, H heads, E head width, D model width = H * E.

* Settings: :class:`CommonSettings` validates the common settings (one routine for all
  variants); :class:`WindowConfig` is the frozen dataclass of the common fields that most
  variants subclass for their own fields.
* Blocks: :func:`feed_forward`, the position-wise MLP, and :class:`PreNormBlock`, the
  identity-map-reordered block of TrXL-I (eq. 10 of ``references/000_4baccbf6ade0250f.txt``
  with the residual gate) or, without its ReLUs, the plain pre-LayerNorm block.
* Attention: :class:`ProjectedAttention` (W^Q, [W^K; W^V], W^O), :func:`split_heads`,
  :func:`merge_heads`, :func:`attention_entropy`, and :func:`relative_attention`,
  Transformer-XL's relative attention (eq. 9 of reference 000) under any mask.
* Windows (on top of :mod:`txrl.nn.window`): :func:`key_distances`, :func:`gather_windows`,
  :func:`window_validity`, :func:`episode_time`.
* Memory: :class:`txrl.nn.memory.LayerMemoryBackbone`, Transformer-XL's memory (eq. 6 of reference 000):
  per layer, the stop-gradient inputs of the last M steps and their keys and values, with
  ``initial_state``, the sliding update, the per-step trace and ``state_at``; and
  :class:`SegmentMemoryTransformer`, that memory under TrXL-I blocks with a pluggable
  attention (``shaw``, ``adaptive_span``, ``sparse_*``, ``linformer``): layer l attends over
  ``[SG(m^{l-1}) ; h^{l-1}]``, its cached inputs of the last M steps and the current ones,
  under the sliding-window mask of :func:`txrl.nn.window.window_mask`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from txrl.nn.attention import RelativeMultiHeadAttention, rel_shift
from txrl.nn.memory import LayerMemoryBackbone, memory_in_use
from txrl.nn.protocol import BackboneOutput
from txrl.nn.window import window_mask

# ------------------------------------------------------------------------------ settings


def check_int(name: str, value: Any, minimum: int | None = None, rule: str | None = None) -> None:
    """Raise a ValueError naming ``name``, its value and the valid range unless ``value`` is an
    int (not a bool) and at least ``minimum``; ``rule`` words the range (default "an int >= m")."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if not is_int or (minimum is not None and value < minimum):
        if rule is None:
            rule = "an int" if minimum is None else f"an int >= {minimum}"
        raise ValueError(f"{name} must be {rule}, got {value!r}")


def check_positive(name: str, value: Any) -> None:
    """Raise a ValueError naming ``name`` and its value unless it is an int >= 1."""
    check_int(name, value, 1, "a positive int")


class CommonSettings:
    """Validation and derived values of the settings the variants share, for frozen dataclasses.

    Checks those of ``input_dim, d_model, n_layers, n_heads, memory_length, d_ff, dropout``
    that the dataclass has (``universal`` has no ``n_layers``, ``linear`` no
    ``memory_length``). A subclass with settings of its own extends ``__post_init__`` and
    calls this one first; ``needs_even_width`` (a class constant or a property) asks for an
    even ``d_model``, for the sinusoid encoding.
    """

    # fields of every subclass; n_layers and memory_length are fields of most
    input_dim: int
    d_model: int
    n_heads: int
    d_ff: int | None
    dropout: float
    needs_even_width: ClassVar[bool] = False

    def __post_init__(self) -> None:
        fields = {f.name for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        for name in ("input_dim", "d_model", "n_layers", "n_heads", "memory_length"):
            if name not in fields:
                continue
            if name == "memory_length":
                check_int(name, getattr(self, name), 0)
            else:
                check_positive(name, getattr(self, name))
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if self.needs_even_width and self.d_model % 2:
            raise ValueError(f"d_model must be even for the sinusoid encoding, got {self.d_model}")
        if self.d_ff is not None:
            check_int("d_ff", self.d_ff, 1, "a positive int or None")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")

    @property
    def ff_width(self) -> int:
        """Width of the position-wise MLP: ``d_ff``, or 4 * d_model when None."""
        return self.d_ff if self.d_ff is not None else 4 * self.d_model

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


@dataclasses.dataclass(frozen=True)
class WindowConfig(CommonSettings):
    """Common settings of the window-memory variants (and all the settings of ``transformer``).

    ``memory_length`` M: steps kept in memory (each step sees the M before it and itself);
    ``d_ff``: width of the position-wise MLP (None: 4 * d_model); ``dropout`` default 0.
    """

    input_dim: int
    d_model: int = 128
    n_layers: int = 3
    n_heads: int = 4
    memory_length: int = 64
    d_ff: int | None = None
    dropout: float = 0.0


# ------------------------------------------------------------------------------ blocks


def feed_forward(config: CommonSettings) -> nn.Sequential:
    """The position-wise MLP D -> ff_width -> D with a ReLU (and dropout) in between."""
    d, width = config.d_model, config.ff_width
    return nn.Sequential(
        nn.Linear(d, width), nn.ReLU(), nn.Dropout(config.dropout), nn.Linear(width, d)
    )


class PreNormBlock(nn.Module):
    """Pre-LayerNorm block around any attention module.

    With ``output_relu`` (default), the identity-map-reordered block of TrXL-I (eq. 10 of
    reference 000 with the residual gate)::

        Y = E + ReLU(MHA(LayerNorm(E)))
        E' = Y + ReLU(MLP(LayerNorm(Y)))

    without, the plain pre-LayerNorm block ``Y = E + MHA(LN(E))``, ``E' = Y + MLP(LN(Y))``.
    The caller computes the attention from :meth:`attention_input`, so the block does not
    depend on the attention's signature.
    """

    def __init__(
        self, config: CommonSettings, attention: nn.Module, *, output_relu: bool = True
    ) -> None:
        super().__init__()
        self.norm_attention = nn.LayerNorm(config.d_model)
        self.attention = attention
        self.norm_mlp = nn.LayerNorm(config.d_model)
        self.mlp = feed_forward(config)
        self.dropout = nn.Dropout(config.dropout)
        self.activation = nn.ReLU() if output_relu else nn.Identity()

    def attention_input(self, h: torch.Tensor) -> torch.Tensor:
        return self.norm_attention(h)

    def forward(self, h: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """``h`` (..., D) block input, ``attended`` (..., D) the attention output on LayerNorm(h)."""
        # Y = E + ReLU(MHA(LayerNorm(E)))
        y = h + self.activation(self.dropout(attended))
        # E' = Y + ReLU(MLP(LayerNorm(Y)))
        return y + self.activation(self.dropout(self.mlp(self.norm_mlp(y))))


# ------------------------------------------------------------------------------ attention


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


class ProjectedAttention(nn.Module):
    """Base of multi-head attentions with projections W^Q, [W^K; W^V] and W^O (D = H * E)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.query = nn.Linear(d_model, d_model, bias=False)  # W^Q
        self.key_value = nn.Linear(d_model, 2 * d_model, bias=False)  # [W^K; W^V]
        self.out = nn.Linear(d_model, d_model)  # W^O
        self.dropout = dropout

    def project_memory(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys z W^K and values z W^V of layer inputs (B, N, D) -> 2 x (B, N, D)."""
        keys, values = self.key_value(z).chunk(2, dim=-1)
        return keys, values


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
    """Transformer-XL relative attention (eq. 9 of reference 000) under any mask.

    Same scores as :class:`~txrl.nn.attention.RelativeMultiHeadAttention`, with its
    parameters. Queries ``h`` (B, T, D), keys/values (B, K, D) from ``attn.project_memory``.
    ``mask``: bool, which pairs may attend, or float, an additive bias (-inf where a pair may
    not attend, any finite log-weight such as an adaptive span's log m_z elsewhere); (B, T, K)
    for every head, or broadcastable to (B, H, T, K). Positions: by default the keys are
    ``[memory ; h]`` and query i sits at K - T + i; ``distance`` (B, T, K) long in
    [0, n_distances) gives each pair's distance instead. Returns (B, T, D) and, when asked,
    the attention weights (B, H, T, K).
    """
    b, t, _ = h.shape
    k = keys.shape[1]
    hd = attn.n_heads
    q = split_heads(attn.query(h), hd)  # (B, H, T, E)
    key, value = split_heads(keys, hd), split_heads(values, hd)  # (B, H, K, E)
    scale = 1.0 / math.sqrt(attn.head_dim)
    # (b) + (d): (q + v)^T W_kR R_{i-j}
    qv = q + attn.position_bias[None, :, None, :]  # (B, H, T, E)
    if distance is None:
        # one product against the K distances K-1 .. 0, then the relative shift
        position_scores = rel_shift(torch.einsum("bhte,khe->bhtk", qv, attn.position_keys(k)))
    else:
        # W_kR R_d for d = 0..n-1 (position_keys lists them from n-1 down), gathered per pair
        assert n_distances is not None
        position = attn.position_keys(n_distances).flip(0)  # (n, H, E)
        by_distance = torch.einsum("bhte,nhe->bhtn", qv, position)  # (B, H, T, n)
        position_scores = by_distance.gather(-1, distance[:, None].expand(b, hd, t, k))
    if mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=h.dtype, device=h.device).masked_fill(
            ~mask, float("-inf")
        )
    if mask.dim() == 3:
        mask = mask[:, None]  # the same for every head
    bias = position_scores * scale + mask  # (B, H, T, K)
    # (a) + (c): (q + u)^T k_j
    qu = q + attn.content_bias[None, :, None, :]  # (B, H, T, E)
    weights = None
    dropout = attn.dropout if attn.training else 0.0
    if with_weights:
        scores = torch.einsum("bhte,bhke->bhtk", qu, key) * scale + bias
        weights = scores.softmax(dim=-1)  # (B, H, T, K)
        attended = F.dropout(weights, dropout, attn.training) @ value  # (B, H, T, E)
    else:
        attended = F.scaled_dot_product_attention(
            qu, key, value, attn_mask=bias, dropout_p=dropout
        )  # (B, H, T, E)
    return attn.out(merge_heads(attended)), weights  # (B, T, D)


class MaskedRelativeAttention(nn.Module):
    """Base of the pluggable attentions that are :func:`relative_attention` under a mask of
    their own; :meth:`attend` runs it and records the attention entropy in ``stats``."""

    def __init__(self, config: CommonSettings) -> None:
        super().__init__()
        self.relative = RelativeMultiHeadAttention(config.d_model, config.n_heads, config.dropout)

    def project_memory(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.relative.project_memory(z)

    def attend(
        self,
        z: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor,
        stats: dict[str, torch.Tensor] | None,
    ) -> torch.Tensor:
        out, weights = relative_attention(
            self.relative, z, keys, values, mask, with_weights=stats is not None
        )
        if stats is not None:
            assert weights is not None
            stats["attention_entropy"] = attention_entropy(weights)
        return out


# ------------------------------------------------------------------------------ windows


def key_distances(t: int, k: int, device: torch.device) -> torch.Tensor:
    """d = i - j for query i (key position K - T + i) and key j -> (T, K) long (< 0: future)."""
    query_pos = torch.arange(t, device=device)[:, None] + (k - t)
    return query_pos - torch.arange(k, device=device)[None, :]


def gather_windows(
    stream: torch.Tensor, allowed: torch.Tensor, m: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each step's own window of W = M + 1 positions (the M before it and itself, oldest first).

    ``stream`` (B, M+T, ...) memory entries followed by the T steps' entries, ``allowed``
    (B, T, M+T) from :func:`txrl.nn.window.window_mask`. Returns the windows (B, T, W, ...)
    (a strided view, no copy) and their validity (B, T, W); position W-1 is the step itself.
    """
    # (B, K, ...) -> (B, T, ..., W) -> (B, T, W, ...)
    windows = stream.unfold(1, m + 1, 1).movedim(-1, 2)
    return windows, window_validity(allowed, m)


def window_validity(allowed: torch.Tensor, m: int) -> torch.Tensor:
    """``allowed`` (B, T, M+T) read per window: (B, T, W), slot w of step i is key i + w."""
    b, t = allowed.shape[:2]
    index = torch.arange(t, device=allowed.device)[:, None] + torch.arange(
        m + 1, device=allowed.device
    )  # (T, W): key position of window slot w of step i
    return allowed.gather(2, index[None].expand(b, t, m + 1))  # (B, T, W)


def episode_time(step: torch.Tensor, episode_starts: torch.Tensor) -> torch.Tensor:
    """Index of each step within its episode.

    ``step`` (B,) long: the episode time of the step after the carried-in memory (steps of the
    current episode seen so far); ``episode_starts`` (T, B). Returns (B, T) long.
    """
    t = episode_starts.shape[0]
    index = torch.arange(t, device=step.device)  # (T,)
    starts = episode_starts.transpose(0, 1)  # (B, T)
    last_start = torch.where(starts, index, -1).cummax(dim=1).values  # (B, T)
    return torch.where(last_start >= 0, index - last_start, step[:, None] + index)


# ------------------------------------------------------------------------------ memory


class SegmentState(NamedTuple):
    """Per-env memory of a segment-recurrent variant, env on axis 0 of every field."""

    hidden: torch.Tensor  # (B, L, M, D) cached layer inputs of the last M steps, stop-gradient
    keys: torch.Tensor  # (B, L, M, D) their keys (a cache derived from hidden)
    values: torch.Tensor  # (B, L, M, D) their values (a cache derived from hidden)
    valid: torch.Tensor  # (B, M) bool, True where the slot holds a step of the current episode
    step: torch.Tensor  # (B,) long, episode time of the next step (steps of the episode so far)


class SegmentTrace(NamedTuple):
    """What a rollout stores per step: L*D floats, not L*M*D."""

    hidden: torch.Tensor  # (T, B, L, D) layer inputs of each step


class SegmentMemoryTransformer(LayerMemoryBackbone):
    """Transformer-XL segment recurrence (eq. 6 of reference 000) with a pluggable attention.

    Each attention module implements ``project_memory(z) -> (keys, values)`` on layer inputs
    (B, N, D) and ``forward(z, keys, values, plan, stats) -> (B, T, D)``, with z (B, T, D) the
    normalised current inputs, keys/values (B, K, D) memory then current, ``plan`` what
    :meth:`attention_plans` made for its layer, and ``stats`` a dict to fill or None.
    Subclasses give the attentions and may override :meth:`attention_plans`,
    :meth:`aux_losses` and :meth:`extra_stats`.
    """

    state_type = SegmentState
    trace_type = SegmentTrace

    def __init__(self, config: WindowConfig, attentions: Sequence[nn.Module]) -> None:
        super().__init__(config, config.n_layers)
        self.blocks = nn.ModuleList(PreNormBlock(config, attention) for attention in attentions)

    def attention_plans(self, allowed: torch.Tensor, query_time: torch.Tensor) -> list[Any]:
        """Per layer, what its attention needs besides z, keys and values.

        ``allowed`` (B, T, K) the sliding-window mask, ``query_time`` (B, T) each step's index
        in its episode. Default: the window mask for every layer.
        """
        del query_time
        return [allowed] * len(self.blocks)

    def aux_losses(self) -> dict[str, torch.Tensor]:
        return {}

    def extra_stats(self) -> dict[str, torch.Tensor]:
        return {}

    def initial_state(
        self, batch_size: int, device: torch.device | str | None = None
    ) -> SegmentState:
        *memory, valid = self.empty_memory(batch_size, device)
        step = torch.zeros((batch_size,), dtype=torch.long, device=valid.device)
        return SegmentState(*memory, valid, step)

    def run(
        self,
        x: torch.Tensor,
        state: SegmentState,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
    ) -> BackboneOutput:
        self.check_inputs(x, state, episode_starts)
        h = self.embed(x).transpose(0, 1)  # (T, B, I) -> (B, T, D)
        allowed = window_mask(state.valid, episode_starts, self.memory_length)  # (B, T, K)
        query_time = episode_time(state.step, episode_starts)  # (B, T)
        plans = self.attention_plans(allowed, query_time)

        out_stats: dict[str, torch.Tensor] = {}
        layer_inputs, new_keys, new_values = [], [], []
        for layer, block in enumerate(self.blocks):
            layer_inputs.append(h)
            # h~ = [SG(m^{l-1}) ; h^{l-1}]: cached keys/values of the memory, new ones of h
            z = block.attention_input(h)  # (B, T, D)
            k_new, v_new = block.attention.project_memory(z)  # (B, T, D) each
            new_keys.append(k_new)
            new_values.append(v_new)
            keys = torch.cat((state.keys[:, layer], k_new), dim=1)  # (B, K, D)
            values = torch.cat((state.values[:, layer], v_new), dim=1)  # (B, K, D)
            layer_stats: dict[str, torch.Tensor] | None = {} if stats else None
            h = block(h, block.attention(z, keys, values, plans[layer], layer_stats))
            if layer_stats is not None:
                out_stats.update({f"layer{layer}/{k}": v for k, v in layer_stats.items()})

        new_state = self.next_state(
            state, layer_inputs, new_keys, new_values, episode_starts, step=query_time[:, -1] + 1
        )
        if stats:
            out_stats["memory_in_use"] = memory_in_use(state.valid)
            out_stats.update(self.extra_stats())
        step_trace = self.trace_of(layer_inputs) if trace else None
        return BackboneOutput(
            h.transpose(0, 1), new_state, step_trace, self.aux_losses(), out_stats
        )

    def state_at(
        self,
        initial: SegmentState,
        trace: SegmentTrace,
        episode_starts: torch.Tensor,
        t: torch.Tensor,
    ) -> SegmentState:
        """Rebuild the memory before step ``t[b]`` (keys and values re-projected) and its
        episode time: one past that of step t-1 (the carried-in one at t = 0)."""
        times = episode_time(initial.step, episode_starts)  # (B, T)
        before = torch.cat((initial.step[:, None], times + 1), dim=1)  # (B, T+1)
        step = before.gather(1, t[:, None])[:, 0]
        return SegmentState(*self.memory_at(initial, trace, episode_starts, t), step)
