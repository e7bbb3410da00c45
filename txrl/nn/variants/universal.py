"""Universal Transformer with per-position Adaptive Computation Time: backbone ``universal``.

Dehghani, Gouws, Vinyals, Uszkoreit and Kaiser 2019, "Universal Transformers"; ACT from
Graves 2016, "Adaptive Computation Time for Recurrent Neural Networks". Equations from
``references/004_7d3d637a3336a351.txt`` (sections "Adaptive Computation Time" and "Make it
Recurrent") and section 5 of ``references/002_afda1b2d62c4b1c2.txt``.

Legend: T steps, B envs, N depth steps (``max_steps``), M memory slots, K = M + T keys,
D model width.

One shared layer is applied up to N times ("depth steps") to every position. At depth step n
the layer input is the state plus a coordinate embedding, ``u^n = s^{n-1} + P^n``, and the
layer is a pre-LayerNorm (TrXL-I style) block with a position-wise transition::

    A^n = u^n + MHA(LN(u^n))          s^n = A^n + Transition(LN(A^n))

Coordinates: the depth coordinate of P^n is the sinusoid of n (eq. "PE(i, t, delta)" of the
reference restricted to its time part); the position coordinate is carried by
Transformer-XL relative attention (:class:`txrl.nn.attention.RelativeMultiHeadAttention`),
so it is the distance in time within the memory window rather than an absolute index.

Memory: like Transformer-XL with the N depth steps in the role of layers, the input u^n of
every depth step is cached (stop-gradient) for the last M steps, so step n of a position
attends over the depth-n inputs of the M steps before it and itself. Acting step by step
and running a sequence compute the same thing. Every depth step is computed for every
position (fixed cost N per step, independent of the batch), halted positions are frozen.

ACT (Graves 2016), per position, in parallel over positions::

    h^n = sigmoid(W_h s^n + b_h)                                 halting unit
    N   = min(min{n : sum_{n'<=n} h^{n'} >= 1 - eps}, max_steps)
    R   = 1 - sum_{n<N} h^n                                      remainder
    p^n = h^n for n < N,  p^N = R                                (sum_n p^n = 1)
    y   = sum_{n<=N} p^n s^n                                     mean-field output
    rho = N + R                                                  ponder cost

After N a position's state is copied unchanged (it still serves as a key for others).
Halting is a hard threshold: step and sequence modes, which differ by float rounding, agree
unless a cumulative halting probability lies within rounding of ``1 - eps``.
``aux_losses["ponder_cost"]`` is the mean of rho over the T x B positions; a learner adds it
with its own coefficient (Graves' tau). ``b_h`` starts at ``halting_bias``.

Trace: the depth-step inputs of each step, N * D numbers per step and env, from which
:meth:`UniversalTransformer.state_at` rebuilds the window as for TrXL.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import torch
from torch import nn

from txrl.nn.attention import RelativeMultiHeadAttention, sinusoid_table
from txrl.nn.protocol import Backbone, BackboneOutput, register_backbone
from txrl.nn.window import next_valid, slide, window_at, window_mask


class UniversalState(NamedTuple):
    """Per-env memory, env on axis 0 of every field."""

    hidden: torch.Tensor  # (B, N, M, D) cached depth-step inputs u^n of the last M steps
    keys: torch.Tensor  # (B, N, M, D) W_kE LN(u^n) (a cache, derived from hidden)
    values: torch.Tensor  # (B, N, M, D) W_v LN(u^n) (a cache, derived from hidden)
    valid: torch.Tensor  # (B, M) bool, True where the slot holds a step of the current episode


class UniversalTrace(NamedTuple):
    """Per step: the input of every depth step, N * D numbers."""

    hidden: torch.Tensor  # (T, B, N, D)


class ACTResult(NamedTuple):
    """Per-position results of one call (for tests and diagnostics)."""

    output: torch.Tensor  # (B, T, D) mean-field output y
    state: UniversalState
    depth_inputs: torch.Tensor  # (B, N, T, D) u^n, detached
    weights: torch.Tensor  # (B, T, N) p^n (zero after the halting step)
    steps: torch.Tensor  # (B, T) N, the number of depth steps taken
    remainder: torch.Tensor  # (B, T) R
    ponder: torch.Tensor  # (B, T) rho = N + R
    attention_entropy: torch.Tensor | None


@dataclasses.dataclass(frozen=True)
class UniversalConfig:
    """Settings of ``universal``.

    ``max_steps``: the most depth steps N (default 4); ``act_epsilon``: eps of the halting
    threshold 1 - eps (default 0.01); ``halting_bias``: initial b_h (default 1.0, so that
    pondering starts short).
    """

    input_dim: int
    d_model: int = 128
    n_heads: int = 4
    memory_length: int = 64
    max_steps: int = 4
    act_epsilon: float = 0.01
    halting_bias: float = 1.0
    d_ff: int | None = None  # width of the transition MLP; None means 4 * d_model
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("input_dim", "d_model", "n_heads", "max_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.memory_length, int) or self.memory_length < 0:
            raise ValueError(f"memory_length must be an int >= 0, got {self.memory_length!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if self.d_model % 2:
            raise ValueError(f"d_model must be even for the sinusoid encoding, got {self.d_model}")
        if not 0.0 < self.act_epsilon < 1.0:
            raise ValueError(f"act_epsilon must be in (0, 1), got {self.act_epsilon!r}")
        if self.d_ff is not None and (not isinstance(self.d_ff, int) or self.d_ff <= 0):
            raise ValueError(f"d_ff must be a positive int, got {self.d_ff!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")

    @property
    def ff_width(self) -> int:
        return self.d_ff if self.d_ff is not None else 4 * self.d_model


class SharedLayer(nn.Module):
    """The layer applied at every depth step: pre-LN attention, pre-LN transition, halting unit."""

    def __init__(self, config: UniversalConfig) -> None:
        super().__init__()
        self.norm_attention = nn.LayerNorm(config.d_model)
        self.attention = RelativeMultiHeadAttention(config.d_model, config.n_heads, config.dropout)
        self.norm_transition = nn.LayerNorm(config.d_model)
        self.transition = nn.Sequential(
            nn.Linear(config.d_model, config.ff_width),
            nn.ReLU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.ff_width, config.d_model),
        )
        self.dropout = nn.Dropout(config.dropout)
        self.halting = nn.Linear(config.d_model, 1)  # W_h, b_h
        nn.init.constant_(self.halting.bias, config.halting_bias)

    def attention_input(self, u: torch.Tensor) -> torch.Tensor:
        return self.norm_attention(u)

    def forward(
        self,
        u: torch.Tensor,
        z: torch.Tensor,
        memory: tuple[torch.Tensor, torch.Tensor],
        new: tuple[torch.Tensor, torch.Tensor],
        allowed: torch.Tensor,
        with_stats: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``u`` (B, T, D) depth-step input, ``z`` = LN(u); keys and values of the cached
        ``memory`` (B, M, D) and of the ``new`` steps (B, T, D) -> s^n (B, T, D)."""
        attended, attn_stats = self.attention(z, *memory, *new, allowed, with_stats=with_stats)
        # A^n = u^n + MHA(LN(u^n))
        a = u + self.dropout(attended)
        # s^n = A^n + Transition(LN(A^n))
        s = a + self.dropout(self.transition(self.norm_transition(a)))
        return s, (attn_stats.entropy if attn_stats is not None else None)

    def halting_probability(self, s: torch.Tensor) -> torch.Tensor:
        """h^n = sigmoid(W_h s^n + b_h); (B, T, D) -> (B, T)."""
        return torch.sigmoid(self.halting(s)).squeeze(-1)


class UniversalTransformer(Backbone):
    """Universal Transformer with ACT behind the backbone protocol (see the module docstring)."""

    def __init__(self, config: UniversalConfig) -> None:
        super().__init__()
        self.config = config
        self.input_dim = config.input_dim
        self.output_dim = config.d_model
        self.memory_length = config.memory_length
        self.embed = nn.Linear(config.input_dim, config.d_model)
        self.layer = SharedLayer(config)
        # P^n: sinusoid of the depth step n = 1..N, added at every depth step
        depth = torch.arange(1, config.max_steps + 1)
        self.register_buffer(
            "depth_embedding", sinusoid_table(depth, config.d_model), persistent=False
        )  # (N, D)

    def initial_state(
        self, batch_size: int, device: torch.device | str | None = None
    ) -> UniversalState:
        c = self.config
        device = device if device is not None else self.embed.weight.device
        shape = (batch_size, c.max_steps, c.memory_length, c.d_model)
        return UniversalState(
            hidden=torch.zeros(shape, device=device),
            keys=torch.zeros(shape, device=device),
            values=torch.zeros(shape, device=device),
            valid=torch.zeros((batch_size, c.memory_length), dtype=torch.bool, device=device),
        )

    def compute(
        self,
        x: torch.Tensor,
        state: UniversalState,
        episode_starts: torch.Tensor,
        *,
        with_stats: bool = False,
    ) -> ACTResult:
        """The whole computation with its per-position ACT quantities; ``run`` wraps it."""
        self.check_inputs(x, state, episode_starts)
        c = self.config
        t, m = x.shape[0], self.memory_length
        s = self.embed(x).transpose(0, 1)  # (T, B, I) -> (B, T, D), s^0
        allowed = window_mask(state.valid, episode_starts, m)  # (B, T, K)
        b = s.shape[0]

        cumulative = s.new_zeros(b, t)  # sum of h^n over steps taken before halting
        running = torch.ones(b, t, dtype=torch.bool, device=s.device)
        output = torch.zeros_like(s)
        steps = s.new_zeros(b, t)
        remainder = s.new_zeros(b, t)
        weights, depth_inputs, new_keys, new_values, entropies = [], [], [], [], []
        for n in range(c.max_steps):
            # u^n = s^{n-1} + P^n
            u = s + self.depth_embedding[n].to(s.dtype)
            depth_inputs.append(u.detach())
            z = self.layer.attention_input(u)  # (B, T, D)
            k_new, v_new = self.layer.attention.project_memory(z)  # (B, T, D) each
            new_keys.append(k_new.detach())
            new_values.append(v_new.detach())
            memory = (state.keys[:, n], state.values[:, n])  # (B, M, D) each
            s_next, entropy = self.layer(u, z, memory, (k_new, v_new), allowed, with_stats)
            if entropy is not None:
                entropies.append(entropy)
            # halted positions keep their state
            s = torch.where(running[..., None], s_next, s)
            # h^n = sigmoid(W_h s^n + b_h)
            h = self.layer.halting_probability(s)  # (B, T)
            if n == c.max_steps - 1:
                halt_now = running
            else:
                halt_now = running & (cumulative + h >= 1.0 - c.act_epsilon)
            # p^n = h^n before the halting step, R = 1 - sum_{n'<N} h^{n'} at it
            p = torch.where(halt_now, 1.0 - cumulative, torch.where(running, h, 0.0))
            # y = sum_n p^n s^n
            output = output + p[..., None] * s
            steps = steps + running.to(s.dtype)
            remainder = torch.where(halt_now, 1.0 - cumulative, remainder)
            cumulative = cumulative + torch.where(running & ~halt_now, h, 0.0)
            running = running & ~halt_now
            weights.append(p)

        inputs = torch.stack(depth_inputs, dim=1)  # (B, N, T, D)
        new_state = UniversalState(
            hidden=slide(state.hidden, inputs, dim=2),  # (B, N, M, D)
            keys=slide(state.keys, torch.stack(new_keys, dim=1), dim=2),  # (B, N, M, D)
            values=slide(state.values, torch.stack(new_values, dim=1), dim=2),
            valid=next_valid(state.valid, episode_starts),
        )
        return ACTResult(
            output=output,
            state=new_state,
            depth_inputs=inputs,
            weights=torch.stack(weights, dim=-1),  # (B, T, N)
            steps=steps,
            remainder=remainder,
            ponder=steps + remainder,  # rho = N + R
            attention_entropy=torch.stack(entropies).mean() if entropies else None,
        )

    def run(
        self,
        x: torch.Tensor,
        state: UniversalState,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
    ) -> BackboneOutput:
        result = self.compute(x, state, episode_starts, with_stats=stats)
        out_stats: dict[str, torch.Tensor] = {}
        if stats:
            assert result.attention_entropy is not None
            out_stats["depth_steps"] = result.steps.mean().detach()
            out_stats["ponder_cost"] = result.ponder.mean().detach()
            out_stats["max_depth_fraction"] = (result.steps == self.config.max_steps).float().mean()
            out_stats["attention_entropy"] = result.attention_entropy
            out_stats["memory_in_use"] = (
                state.valid.float().mean() if self.memory_length else torch.zeros(())
            )
        # (B, N, T, D) -> (T, B, N, D)
        step_trace = (
            UniversalTrace(hidden=result.depth_inputs.permute(2, 0, 1, 3)) if trace else None
        )
        aux = {"ponder_cost": result.ponder.mean()}
        return BackboneOutput(
            result.output.transpose(0, 1), result.state, step_trace, aux, out_stats
        )

    def state_at(
        self,
        initial: UniversalState,
        trace: UniversalTrace,
        episode_starts: torch.Tensor,
        t: torch.Tensor,
    ) -> UniversalState:
        """Rebuild the window before step ``t[b]``; keys and values are re-projected (as TrXL)."""
        # (B, N, M, D) <-> window entries (B, M, N, D)
        hidden, valid = window_at(
            initial.hidden.transpose(1, 2), trace.hidden, initial.valid, episode_starts, t
        )
        hidden = hidden.transpose(1, 2)  # (B, M, N, D) -> (B, N, M, D)
        keys, values = self.layer.attention.project_memory(self.layer.attention_input(hidden))
        return UniversalState(hidden, keys, values, valid)


@register_backbone("universal", UniversalConfig)
def _build(config: UniversalConfig) -> UniversalTransformer:
    return UniversalTransformer(config)
