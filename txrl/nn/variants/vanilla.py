"""The vanilla Transformer over a sliding window of inputs, and the scaffolding shared by the
window-memory ablation variants.

Legend: B envs, T steps, M memory slots, W = M + 1 window positions, K = M + T keys,
L layers, D model width, H heads, E head width, N = B * T windows.

Vanilla Transformer (Vaswani et al. 2017, "Attention Is All You Need"), as the baseline that
Transformer-XL's recurrence improves on (section 2.1 of ``references/000_4baccbf6ade0250f.txt``):
"at the next step, the segment is shifted to the right by only one position, and the new
segment has to be processed all from scratch". Each step re-processes, through every layer,
its window of the last M embedded inputs and itself (a causal encoder over W positions) and
keeps the output at the window's last position. Nothing but the inputs is carried over, so
the receptive field is M steps whatever the depth (TrXL's is L * M).

* ``transformer``: absolute sinusoid encoding, eq. (1) of reference 000::

      p_{i, 2j} = sin(i / 10000^(2j/d)),   p_{i, 2j+1} = cos(i / 10000^(2j/d))

  with i the index of the position in the window (0 the oldest slot, M the current step), so
  positions are coherent when the window slides: a step at window index i has index i - 1 at
  the next step.
* ``transformer_learned_pe``: a learned embedding ``P[i]`` per window index, initialised
  N(0, 0.02^2) (Gehring et al. 2017, "learned positional encoding" in
  ``references/004_7d3d637a3336a351.txt``).

State: the last M embedded inputs (stop-gradient) and their validity; trace: each step's
embedded input, so :meth:`VanillaTransformer.state_at` rebuilds the window with
:func:`txrl.nn.window.window_at`. Cost per step: O(L (W D^2 + W^2 D)), W times TrXL's.

Shared with :mod:`~txrl.nn.variants.shaw`, :mod:`~txrl.nn.variants.adaptive_span`,
:mod:`~txrl.nn.variants.sparse` and :mod:`~txrl.nn.variants.linformer`:
:class:`WindowConfig` (the common settings), :class:`PreNormBlock` (the TrXL-I block),
:func:`gather_windows`, and :class:`SegmentMemoryTransformer`, the Transformer-XL segment
recurrence (eq. 6 of reference 000) with a pluggable attention: layer l attends over
``[SG(m^{l-1}) ; h^{l-1}]``, its cached stop-gradient inputs of the last M steps and the
current ones, under the sliding-window mask of :func:`txrl.nn.window.window_mask`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from txrl.nn.attention import RelativeMultiHeadAttention, rel_shift, sinusoid_table
from txrl.nn.protocol import Backbone, BackboneOutput, register_backbone
from txrl.nn.window import next_valid, slide, window_at, window_mask

# ------------------------------------------------------------------------------ shared


@dataclasses.dataclass(frozen=True)
class WindowConfig:
    """Common settings of the window-memory variants.

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

    # variants whose attention uses the sinusoid table need an even width
    needs_even_width: ClassVar[bool] = False

    def __post_init__(self) -> None:
        for name in ("input_dim", "d_model", "n_layers", "n_heads"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        m = self.memory_length
        if not isinstance(m, int) or isinstance(m, bool) or m < 0:
            raise ValueError(f"memory_length must be an int >= 0, got {m!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if self.needs_even_width and self.d_model % 2:
            raise ValueError(f"d_model must be even for the sinusoid encoding, got {self.d_model}")
        if self.d_ff is not None and (not isinstance(self.d_ff, int) or self.d_ff <= 0):
            raise ValueError(f"d_ff must be a positive int or None, got {self.d_ff!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")

    @property
    def ff_width(self) -> int:
        return self.d_ff if self.d_ff is not None else 4 * self.d_model


def check_int(name: str, value: Any, minimum: int) -> None:
    """Raise a ValueError naming ``name`` unless ``value`` is an int >= ``minimum``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


class PreNormBlock(nn.Module):
    """The identity-map-reordered block of TrXL-I (eq. 10 of reference 000 with the residual gate).

    The caller computes the attention from :meth:`attention_input`, so the block does not
    depend on the attention's signature::

        Y = E + ReLU(MHA(LayerNorm(E)))
        E' = Y + ReLU(MLP(LayerNorm(Y)))
    """

    def __init__(self, config: WindowConfig, attention: nn.Module) -> None:
        super().__init__()
        self.norm_attention = nn.LayerNorm(config.d_model)
        self.attention = attention
        self.norm_mlp = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(config.d_model, config.ff_width),
            nn.ReLU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.ff_width, config.d_model),
        )
        self.dropout = nn.Dropout(config.dropout)

    def attention_input(self, h: torch.Tensor) -> torch.Tensor:
        return self.norm_attention(h)

    def forward(self, h: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """``h`` (..., D) block input, ``attended`` (..., D) the attention output on LayerNorm(h)."""
        # Y = E + ReLU(MHA(LayerNorm(E)))
        y = h + F.relu(self.dropout(attended))
        # E' = Y + ReLU(MLP(LayerNorm(Y)))
        return y + F.relu(self.dropout(self.mlp(self.norm_mlp(y))))


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of attention distributions ``weights`` (..., K), detached."""
    logw = torch.where(weights > 0, weights.clamp_min(1e-30).log(), torch.zeros_like(weights))
    return -(weights * logw).sum(-1).mean().detach()


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


class MultiHeadAttention(nn.Module):
    """Scaled dot-product multi-head attention without positional terms (Vaswani et al. 2017)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.d_model = d_model
        self.query = nn.Linear(d_model, d_model, bias=False)  # W^Q
        self.key_value = nn.Linear(d_model, 2 * d_model, bias=False)  # [W^K; W^V]
        self.out = nn.Linear(d_model, d_model)  # W^O
        self.dropout = dropout

    def forward(
        self, h: torch.Tensor, context: torch.Tensor, allowed: torch.Tensor
    ) -> torch.Tensor:
        """Queries from ``h`` (N, Q, D) over ``context`` (N, C, D); ``allowed`` (N, Q, C) bool."""
        n, q_len, _ = h.shape
        c_len = context.shape[1]
        hd, e = self.n_heads, self.head_dim
        q = self.query(h).view(n, q_len, hd, e).transpose(1, 2)  # (N, H, Q, E)
        keys, values = self.key_value(context).chunk(2, dim=-1)  # (N, C, D) each
        k = keys.reshape(n, c_len, hd, e).transpose(1, 2)  # (N, H, C, E)
        v = values.reshape(n, c_len, hd, e).transpose(1, 2)  # (N, H, C, E)
        # softmax(Q K^T / sqrt(E)) V over the allowed keys
        attended = F.scaled_dot_product_attention(
            q, k, v, attn_mask=allowed[:, None], dropout_p=self.dropout if self.training else 0.0
        )  # (N, H, Q, E)
        return self.out(attended.transpose(1, 2).reshape(n, q_len, self.d_model))  # (N, Q, D)


# ------------------------------------------------------------------ vanilla Transformer


class VanillaState(NamedTuple):
    """Per-env memory of the vanilla Transformer, env on axis 0."""

    inputs: torch.Tensor  # (B, M, D) embedded inputs of the last M steps, stop-gradient
    valid: torch.Tensor  # (B, M) bool, True where the slot holds a step of the current episode


class VanillaTrace(NamedTuple):
    inputs: torch.Tensor  # (T, B, D) each step's embedded input


class VanillaTransformer(Backbone):
    """Causal Transformer encoder re-run over each step's window of inputs (module docstring)."""

    def __init__(self, config: WindowConfig, position: str) -> None:
        super().__init__()
        self.config = config
        self.position = position
        self.input_dim = config.input_dim
        self.output_dim = config.d_model
        self.memory_length = config.memory_length
        window = config.memory_length + 1
        self.embed = nn.Linear(config.input_dim, config.d_model)
        if position == "sinusoid":
            # P of eq. (1), indexed by the position in the window
            table = sinusoid_table(torch.arange(window), config.d_model)  # (W, D)
            self.register_buffer("sinusoid", table, persistent=False)
            self.learned: nn.Embedding | None = None
        else:
            self.learned = nn.Embedding(window, config.d_model)  # P, learned
            nn.init.normal_(self.learned.weight, std=0.02)
        self.blocks = nn.ModuleList(
            PreNormBlock(config, MultiHeadAttention(config.d_model, config.n_heads, config.dropout))
            for _ in range(config.n_layers)
        )

    def position_encoding(self) -> torch.Tensor:
        """P (W, D): row i encodes window index i (0 the oldest slot, M the current step)."""
        if self.learned is not None:
            return self.learned.weight
        return self.sinusoid

    def initial_state(
        self, batch_size: int, device: torch.device | str | None = None
    ) -> VanillaState:
        device = device if device is not None else self.embed.weight.device
        m, d = self.memory_length, self.config.d_model
        return VanillaState(
            inputs=torch.zeros((batch_size, m, d), device=device),
            valid=torch.zeros((batch_size, m), dtype=torch.bool, device=device),
        )

    def encode_windows(self, windows: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """The causal encoder over windows of embedded inputs (N, W, D) with validity (N, W).

        Returns the last layer's output at the last position (N, D). Slot p attends to the
        valid slots q <= p (and always to itself, so empty slots stay finite); the valid
        slots of a window are a suffix, so empty slots never reach a valid one.
        """
        w = windows.shape[1]
        causal = torch.ones(w, w, dtype=torch.bool, device=windows.device).tril()  # (W, W)
        eye = torch.eye(w, dtype=torch.bool, device=windows.device)
        allowed = causal[None] & (valid[:, None, :] | eye[None])  # (N, W, W)
        # X + P, eq. (1)
        h = windows + self.position_encoding()[None]  # (N, W, D)
        last = len(self.blocks) - 1
        for layer, block in enumerate(self.blocks):
            z = block.attention_input(h)  # (N, W, D)
            if layer == last:  # only the last position's output is used
                h = block(h[:, -1:], block.attention(z[:, -1:], z, allowed[:, -1:]))  # (N, 1, D)
            else:
                h = block(h, block.attention(z, z, allowed))  # (N, W, D)
        return h[:, -1]

    def run(
        self,
        x: torch.Tensor,
        state: VanillaState,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
    ) -> BackboneOutput:
        self.check_inputs(x, state, episode_starts)
        t, b = x.shape[:2]
        m = self.memory_length
        e = self.embed(x).transpose(0, 1)  # (T, B, I) -> (B, T, D)
        allowed = window_mask(state.valid, episode_starts, m)  # (B, T, K)
        stream = torch.cat((state.inputs, e), dim=1)  # (B, K, D)
        windows, valid = gather_windows(stream, allowed, m)  # (B, T, W, D), (B, T, W)
        # every step re-processes its whole window: N = B * T independent sequences
        out = self.encode_windows(
            windows.reshape(b * t, m + 1, -1),  # (B, T, W, D) -> (N, W, D)
            valid.reshape(b * t, m + 1),  # (B, T, W) -> (N, W)
        ).view(b, t, -1)  # (N, D) -> (B, T, D)
        new_state = VanillaState(
            inputs=slide(state.inputs, e.detach(), dim=1),  # (B, M, D)
            valid=next_valid(state.valid, episode_starts),
        )
        out_stats: dict[str, torch.Tensor] = {}
        if stats:
            out_stats["window_in_use"] = valid.float().mean().detach()
        step_trace = VanillaTrace(inputs=e.detach().transpose(0, 1)) if trace else None
        return BackboneOutput(out.transpose(0, 1), new_state, step_trace, {}, out_stats)

    def state_at(
        self,
        initial: VanillaState,
        trace: VanillaTrace,
        episode_starts: torch.Tensor,
        t: torch.Tensor,
    ) -> VanillaState:
        inputs, valid = window_at(initial.inputs, trace.inputs, initial.valid, episode_starts, t)
        return VanillaState(inputs, valid)


def _vanilla_factory(position: str) -> Callable[[WindowConfig], VanillaTransformer]:
    def build(config: WindowConfig) -> VanillaTransformer:
        if position == "sinusoid" and config.d_model % 2:
            raise ValueError(
                f"backbone 'transformer' needs an even d_model for the sinusoid encoding, got "
                f"{config.d_model}; use 'transformer_learned_pe' for an odd width"
            )
        return VanillaTransformer(config, position)

    return build


register_backbone("transformer", WindowConfig)(_vanilla_factory("sinusoid"))
register_backbone("transformer_learned_pe", WindowConfig)(_vanilla_factory("learned"))


# ----------------------------------------------------- Transformer-XL segment memory


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


class SegmentMemoryTransformer(Backbone):
    """Transformer-XL segment recurrence (eq. 6 of reference 000) with a pluggable attention.

    Each attention module implements ``project_memory(z) -> (keys, values)`` on layer inputs
    (B, N, D) and ``forward(z, keys, values, plan, stats) -> (B, T, D)``, with z (B, T, D) the
    normalised current inputs, keys/values (B, K, D) memory then current, ``plan`` what
    :meth:`attention_plans` made for its layer, and ``stats`` a dict to fill or None.
    Subclasses give the attentions and may override :meth:`attention_plans`,
    :meth:`aux_losses` and :meth:`extra_stats`.
    """

    def __init__(self, config: WindowConfig, attentions: Sequence[nn.Module]) -> None:
        super().__init__()
        self.config = config
        self.input_dim = config.input_dim
        self.output_dim = config.d_model
        self.memory_length = config.memory_length
        self.embed = nn.Linear(config.input_dim, config.d_model)
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
        c = self.config
        device = device if device is not None else self.embed.weight.device
        shape = (batch_size, c.n_layers, c.memory_length, c.d_model)
        return SegmentState(
            hidden=torch.zeros(shape, device=device),
            keys=torch.zeros(shape, device=device),
            values=torch.zeros(shape, device=device),
            valid=torch.zeros((batch_size, c.memory_length), dtype=torch.bool, device=device),
            step=torch.zeros((batch_size,), dtype=torch.long, device=device),
        )

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
        t, m = x.shape[0], self.memory_length
        h = self.embed(x).transpose(0, 1)  # (T, B, I) -> (B, T, D)
        allowed = window_mask(state.valid, episode_starts, m)  # (B, T, K)
        query_time = episode_time(state.step, episode_starts)  # (B, T)
        plans = self.attention_plans(allowed, query_time)

        out_stats: dict[str, torch.Tensor] = {}
        layer_inputs, new_keys, new_values = [], [], []
        for layer, block in enumerate(self.blocks):
            layer_inputs.append(h.detach())
            # h~ = [SG(m^{l-1}) ; h^{l-1}]: cached keys/values of the memory, new ones of h
            z = block.attention_input(h)  # (B, T, D)
            k_new, v_new = block.attention.project_memory(z)  # (B, T, D) each
            keys = torch.cat((state.keys[:, layer], k_new), dim=1)  # (B, K, D)
            values = torch.cat((state.values[:, layer], v_new), dim=1)  # (B, K, D)
            layer_stats: dict[str, torch.Tensor] | None = {} if stats else None
            h = block(h, block.attention(z, keys, values, plans[layer], layer_stats))
            new_keys.append(keys[:, t:].detach())  # (B, M, D): the last M positions
            new_values.append(values[:, t:].detach())
            if layer_stats is not None:
                out_stats.update({f"layer{layer}/{k}": v for k, v in layer_stats.items()})

        hidden_steps = torch.stack(layer_inputs, dim=1)  # (B, L, T, D)
        new_state = SegmentState(
            hidden=slide(state.hidden, hidden_steps, dim=2),  # (B, L, M, D)
            keys=torch.stack(new_keys, dim=1),  # (B, L, M, D)
            values=torch.stack(new_values, dim=1),  # (B, L, M, D)
            valid=next_valid(state.valid, episode_starts),
            step=query_time[:, -1] + 1,
        )
        if stats:
            out_stats["memory_in_use"] = (
                state.valid.float().mean() if m else torch.zeros((), device=x.device)
            )
            out_stats.update(self.extra_stats())
        # (B, L, T, D) -> (T, B, L, D)
        step_trace = SegmentTrace(hidden=hidden_steps.permute(2, 0, 1, 3)) if trace else None
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
        """Rebuild the memory before step ``t[b]``; keys and values are re-projected, so the
        projection weights get gradient through the memory when called with gradients on."""
        # (B, L, M, D) <-> window entries (B, M, L, D)
        hidden, valid = window_at(
            initial.hidden.transpose(1, 2), trace.hidden, initial.valid, episode_starts, t
        )
        hidden = hidden.transpose(1, 2)  # (B, M, L, D) -> (B, L, M, D)
        keys, values = [], []
        for layer, block in enumerate(self.blocks):
            k_l, v_l = block.attention.project_memory(block.attention_input(hidden[:, layer]))
            keys.append(k_l)
            values.append(v_l)
        # episode time of step t: one past that of step t-1 (the carried-in one at t = 0)
        times = episode_time(initial.step, episode_starts)  # (B, T)
        before = torch.cat((initial.step[:, None], times + 1), dim=1)  # (B, T+1)
        step = before.gather(1, t[:, None])[:, 0]
        return SegmentState(
            hidden, torch.stack(keys, dim=1), torch.stack(values, dim=1), valid, step
        )


def relative_attention(
    attn: RelativeMultiHeadAttention,
    h: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    bias: torch.Tensor,
    *,
    with_weights: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Transformer-XL relative attention (eq. 9 of reference 000) with a per-head additive bias.

    Same scores as :class:`~txrl.nn.attention.RelativeMultiHeadAttention`, plus ``bias``
    broadcastable to (B, H, T, K): -inf where a head may not attend, and any finite
    log-weight (e.g. an adaptive span's log m_z) elsewhere. Queries ``h`` (B, T, D),
    keys/values (B, K, D) from ``attn.project_memory``. Returns (B, T, D) and, when asked,
    the attention weights (B, H, T, K).
    """
    b, t, _ = h.shape
    k = keys.shape[1]
    hd, e = attn.n_heads, attn.head_dim
    q = attn.query(h).view(b, t, hd, e).transpose(1, 2)  # (B, H, T, E)
    key = keys.view(b, k, hd, e).transpose(1, 2)  # (B, H, K, E)
    value = values.view(b, k, hd, e).transpose(1, 2)  # (B, H, K, E)
    scale = 1.0 / math.sqrt(e)
    pos = attn.position_keys(k)  # (K, H, E), distances K-1 .. 0
    # (b) + (d): (q + v) (W_kR R)^T, then the relative shift
    qv = q + attn.position_bias[None, :, None, :]  # (B, H, T, E)
    position_scores = rel_shift(torch.einsum("bhte,khe->bhtk", qv, pos))  # (B, H, T, K)
    mask = position_scores * scale + bias  # (B, H, T, K)
    # (a) + (c): (q + u) k^T
    qu = q + attn.content_bias[None, :, None, :]  # (B, H, T, E)
    weights = None
    dropout = attn.dropout if attn.training else 0.0
    if with_weights:
        scores = torch.einsum("bhte,bhke->bhtk", qu, key) * scale + mask
        weights = scores.softmax(dim=-1)  # (B, H, T, K)
        attended = F.dropout(weights, dropout, attn.training) @ value  # (B, H, T, E)
    else:
        attended = F.scaled_dot_product_attention(
            qu, key, value, attn_mask=mask, dropout_p=dropout
        )  # (B, H, T, E)
    attended = attended.transpose(1, 2).reshape(b, t, attn.d_model)  # (B, T, D)
    return attn.out(attended), weights
