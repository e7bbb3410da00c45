"""Universal Transformer with per-position Adaptive Computation Time: backbone ``universal``.

Dehghani, Gouws, Vinyals, Uszkoreit and Kaiser 2019, "Universal Transformers"; ACT from
Graves 2016, "Adaptive Computation Time for Recurrent Neural Networks". Dehghani et al.
(arXiv 1807.03819), section 2 ("Model Description"): one block applied recurrently in depth,
with the coordinate (position and depth-step) embeddings, and per-position dynamic halting
(section 2.2); the halting weights and ponder cost of Graves (arXiv 1603.08983), section 2.

Legend: T steps, B envs, N depth steps (``max_steps``), M memory slots, K = M + T keys,
D model width.

One shared layer is applied up to N times ("depth steps") to every position. At depth step n
the layer input is the state plus a coordinate embedding, ``u^n = s^{n-1} + P^n``, and the
layer is a pre-LayerNorm (TrXL-I style) block with a position-wise transition::

    A^n = u^n + MHA(LN(u^n))          s^n = A^n + Transition(LN(A^n))

Coordinates: the depth coordinate of P^n is the sinusoid of n (eq. "PE(i, t, delta)" of the
reference restricted to its time part); the position coordinate is carried by
Transformer-XL relative attention ([`txrl.nn.attention.RelativeMultiHeadAttention`][txrl.nn.attention.RelativeMultiHeadAttention]),
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
`UniversalTransformer.state_at` rebuilds the window as for TrXL.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from txrl.backbones.universal import UniversalConfig
from txrl.nn.attention import RelativeMultiHeadAttention, sinusoid_table
from txrl.nn.blocks import PreNormBlock
from txrl.nn.memory import (
    LayerMemoryBackbone,
    MemoryState,
    MemoryTrace,
    by_layer,
    memory_in_use,
)
from txrl.nn.protocol import BackboneOutput
from txrl.nn.window import window_mask

UniversalState = MemoryState  # Transformer-XL's memory, shared with the TrXL family
UniversalTrace = MemoryTrace


class ACTResult(NamedTuple):
    """Per-position results of one call (for tests and diagnostics)."""

    output: torch.Tensor  # (B, T, D) mean-field output y
    state: UniversalState | None  # None when computed with next_state=False
    depth_inputs: torch.Tensor  # (B, N, T, D) u^n, detached
    weights: torch.Tensor  # (B, T, N) p^n (zero after the halting step)
    steps: torch.Tensor  # (B, T) N, the number of depth steps taken
    remainder: torch.Tensor  # (B, T) R
    ponder: torch.Tensor  # (B, T) rho = N + R
    attention_entropy: torch.Tensor | None


class SharedLayer(PreNormBlock):
    """The layer applied at every depth step, a pre-LayerNorm block whose MLP is the
    transition (``A^n = u^n + MHA(LN(u^n))``, ``s^n = A^n + Transition(LN(A^n))``), and the
    halting unit."""

    attention: RelativeMultiHeadAttention

    def __init__(self, config: UniversalConfig) -> None:
        attention = RelativeMultiHeadAttention(config.d_model, config.n_heads, config.dropout)
        super().__init__(config, attention, output_relu=False)
        self.halting = nn.Linear(config.d_model, 1)  # W_h, b_h
        nn.init.constant_(self.halting.bias, config.halting_bias)

    def halting_probability(self, s: torch.Tensor) -> torch.Tensor:
        """h^n = sigmoid(W_h s^n + b_h); (B, T, D) -> (B, T)."""
        return torch.sigmoid(self.halting(s)).squeeze(-1)


class UniversalTransformer(LayerMemoryBackbone):
    """Universal Transformer with ACT behind the backbone protocol (see the module docstring).

    Its memory is that of `LayerMemoryBackbone` with the N
    depth steps in the role of layers.
    """

    state_type = UniversalState
    trace_type = UniversalTrace
    depth_embedding: torch.Tensor  # (N, D) buffer

    def __init__(self, config: UniversalConfig) -> None:
        super().__init__(config, config.max_steps)
        self.layer = SharedLayer(config)
        # P^n: sinusoid of the depth step n = 1..N, added at every depth step
        depth = torch.arange(1, config.max_steps + 1)
        self.register_buffer(
            "depth_embedding", sinusoid_table(depth, config.d_model), persistent=False
        )  # (N, D)

    def project_hidden(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of the cached depth-step inputs (B, N, M, D), all by the shared layer."""
        return self.layer.attention.project_memory(self.layer.attention_input(hidden))

    def compute(
        self,
        x: torch.Tensor,
        state: UniversalState,
        episode_starts: torch.Tensor,
        *,
        with_stats: bool = False,
        next_state: bool = True,
    ) -> ACTResult:
        """The whole computation with its per-position ACT quantities; ``run`` wraps it."""
        self.check_inputs(x, state, episode_starts)
        state = self.ordered(state)
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
            depth_inputs.append(u)
            z = self.layer.attention_input(u)  # (B, T, D)
            k_new, v_new = self.layer.attention.project_memory(z)  # (B, T, D) each
            new_keys.append(k_new)
            new_values.append(v_new)
            memory = (state.keys[:, n], state.values[:, n])  # (B, M, D) each
            attended, attn_stats = self.layer.attention(
                z, *memory, k_new, v_new, allowed, with_stats=with_stats
            )
            if attn_stats is not None:
                entropies.append(attn_stats.entropy)
            # s^n: A^n = u^n + MHA(LN(u^n)), s^n = A^n + Transition(LN(A^n))
            s_next = self.layer(u, attended)
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

        new_state = (
            self.write(state, *by_layer(depth_inputs, new_keys, new_values), episode_starts)
            if next_state
            else None
        )
        return ACTResult(
            output=output,
            state=new_state,
            depth_inputs=torch.stack(depth_inputs, dim=1).detach(),  # (B, N, T, D)
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
        next_state: bool = True,
    ) -> BackboneOutput:
        result = self.compute(x, state, episode_starts, with_stats=stats, next_state=next_state)
        out_stats: dict[str, torch.Tensor] = {}
        if stats:
            assert result.attention_entropy is not None
            out_stats["depth_steps"] = result.steps.mean().detach()
            out_stats["ponder_cost"] = result.ponder.mean().detach()
            out_stats["max_depth_fraction"] = (result.steps == self.config.max_steps).float().mean()
            out_stats["attention_entropy"] = result.attention_entropy
            out_stats["memory_in_use"] = memory_in_use(state.valid)
        step_trace = self.trace_of(result.depth_inputs.unbind(1)) if trace else None
        aux = {"ponder_cost": result.ponder.mean()}
        return BackboneOutput(
            result.output.transpose(0, 1), result.state, step_trace, aux, out_stats
        )


def build_universal(config: UniversalConfig) -> UniversalTransformer:
    return UniversalTransformer(config)
