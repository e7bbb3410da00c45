"""Linear-attention backbones: ``linear`` (elu+1 features) and ``performer`` (FAVOR+).

* ``linear``: Katharopoulos et al. 2020, "Transformers are RNNs: Fast Autoregressive
  Transformers with Linear Attention".
* ``performer``: Choromanski et al. 2021, "Rethinking Attention with Performers" (FAVOR+).

Legend: T steps, B envs, L layers, H heads, E head width, F features per head, D model
width = H * E, C steps of one chunk.

Katharopoulos et al. 2020, "Transformers are RNNs" (arXiv 2006.16236), section 3.2
("Linearized attention"): attention with a similarity
``sim(q, k) = phi(q)^T phi(k)`` instead of ``exp(q^T k)`` is::

    h_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / (phi(q_i)^T sum_j phi(k_j))

and, causally, the two sums are a recurrent state: ``S_i = S_{i-1} + phi(k_i) v_i^T`` (F x E)
and ``z_i = z_{i-1} + phi(k_i)`` (F) per head and layer, so acting costs O(1) per step
whatever the episode length: there is no window and no ``memory_length``. The state is
cleared at episode starts.

Feature maps phi:

* ``linear``: ``phi(x) = elu(x) + 1`` (positive, so the normaliser is positive).
* ``performer``: positive random features ``phi(x) = exp(w^T x - |x|^2 / 2) / sqrt(m)`` for
  m = ``n_features`` rows w of a fixed, seeded buffer (orthogonal blocks with Gaussian-like
  norms by default), applied to ``x = q / E^(1/4)``, so that
  ``E[phi(q')^T phi(k')] = exp(q^T k / sqrt(E))``, the softmax kernel. The buffer is part of
  the module (saved with it), so step and sequence modes use the same draw. The exponent
  is at most ``|w|^2 / 2`` whatever x is, so it cannot overflow.

Sequence mode works chunk by chunk (``chunk_size`` steps): inside a chunk the quadratic
form ``(phi(Q) phi(K)^T (.) mask) V`` over the steps of the same episode, plus the carried
state for the steps before the chunk's first reset; between chunks the state is carried.
This equals the step-by-step recurrence up to float summation order.

Positions: the sum over the past is order-blind, so (as the paper's autoregressive models
do) a sinusoid of the step's index in its episode is added to the input embedding
(``position_encoding``); the index is part of the state (``steps``).

Blocks are pre-LayerNorm (TrXL-I style): ``h = h + Attn(LN(h))``, ``h = h + MLP(LN(h))``.

Inspection: the attention is implicit (no weights are formed), but ``h_i`` is exactly
``sum_j a_ij v_j`` with ``a_ij = phi(q_i)^T phi(k_j) / (phi(q_i)^T z_i + eps)`` over the
steps j <= i of the episode: non-negative, summing to 1 up to eps. ``txrl inspect`` records
these equivalent weights from each step's own features
(`txrl.inspect.layers.KernelWeights`), since the state keeps only their sums.

Trace: the state before each step (the protocol's default ``state_at``), i.e.
``L * H * F * (E + 1) + 1`` numbers per step and env (``linear``: F = E; ``performer``:
F = ``n_features``), independent of how far back the episode goes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from txrl.backbones.linear import LinearConfig, PerformerConfig
from txrl.nn.attention import sinusoid_table
from txrl.nn.blocks import PreNormBlock, attention_blocks
from txrl.nn.protocol import Backbone, BackboneOutput
from txrl.nn.window import episode_time

EPS = 1e-6  # added to the normaliser, as in the reference implementation of the paper


class LinearState(NamedTuple):
    """Recurrent state of a linear-attention backbone, env on axis 0 (also its per-step trace)."""

    kv: torch.Tensor  # (B, L, H, F, E) S = sum_j phi(k_j) v_j^T over the current episode
    k_sum: torch.Tensor  # (B, L, H, F) z = sum_j phi(k_j)
    steps: torch.Tensor  # (B,) long, steps of the current episode seen so far


# ---------------------------------------------------------------------------- feature maps


def elu_features(x: torch.Tensor) -> torch.Tensor:
    """phi(x) = elu(x) + 1 of Katharopoulos et al.; (..., E) -> (..., E), positive."""
    return F.elu(x) + 1.0


def draw_random_features(
    n_features: int, dim: int, generator: torch.Generator, orthogonal: bool = True
) -> torch.Tensor:
    """Rows w_1..w_m of FAVOR+ -> (m, E), each marginally N(0, I_E).

    Orthogonal: blocks of E rows from the QR of a Gaussian matrix, each row rescaled by the
    norm of an independent Gaussian vector (so row norms are chi-distributed as for i.i.d.
    rows, and rows within a block are exactly orthogonal).
    """
    if not orthogonal:
        return torch.randn(n_features, dim, generator=generator)
    blocks = []
    for _ in range(math.ceil(n_features / dim)):
        gaussian = torch.randn(dim, dim, generator=generator)
        q, r = torch.linalg.qr(gaussian)  # (E, E), orthonormal columns
        # sign fix so that q is Haar-distributed (QR alone biases the directions)
        q = q * torch.sign(torch.diagonal(r))[None, :]
        blocks.append(q.T)
    rows = torch.cat(blocks, dim=0)[:n_features]  # (m, E) unit rows
    norms = torch.randn(n_features, dim, generator=generator).norm(dim=1)  # (m,) chi_E
    return rows * norms[:, None]


def favor_features(x: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
    """Positive random features of FAVOR+; ``x`` (..., E), ``omega`` (m, E) -> (..., m).

    phi(x) = exp(w^T x - |x|^2 / 2) / sqrt(m), so E_w[phi(x)^T phi(y)] = exp(x^T y).
    """
    m = omega.shape[0]
    # w^T x - |x|^2 / 2
    exponent = x @ omega.T - 0.5 * x.square().sum(-1, keepdim=True)  # (..., m)
    return exponent.exp() / math.sqrt(m)


# ---------------------------------------------------------------------------- layers


class KernelAttention(nn.Module):
    """Multi-head causal attention with sim(q, k) = phi(q)^T phi(k), in chunks with a carried state.

    ``feature`` is ``"elu"`` or ``"favor"`` (then ``omega`` (m, E) is a fixed buffer).
    """

    def __init__(self, d_model: int, n_heads: int, feature: str, omega: torch.Tensor | None):
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.feature = feature
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)  # [W_q; W_k; W_v]
        self.out = nn.Linear(d_model, d_model)
        if feature == "favor":
            assert omega is not None
            self.register_buffer("omega", omega)
            self.n_features = omega.shape[0]
        else:
            self.omega = None
            self.n_features = self.head_dim

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """phi of queries or keys (..., E) -> (..., F)."""
        if self.omega is None:
            return elu_features(x)
        # x' = x / E^(1/4), so phi(q')^T phi(k') estimates exp(q^T k / sqrt(E))
        return favor_features(x * self.head_dim**-0.25, self.omega)

    def project(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """phi(Q), phi(K), V of normalised inputs ``z`` (B, C, D) -> (B, H, C, F), (B, H, C, F), (B, H, C, E)."""
        b, c, _ = z.shape
        # (B, C, 3D) -> (B, C, 3, H, E) -> (3, B, H, C, E)
        q, k, v = self.qkv(z).view(b, c, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return self.features(q), self.features(k), v

    def forward(
        self,
        z: torch.Tensor,
        kv: torch.Tensor,
        k_sum: torch.Tensor,
        episode: torch.Tensor,
        *,
        states_after: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """Attend causally over one chunk.

        ``z`` (B, C, D) normalised block inputs; ``kv`` (B, H, F, E) and ``k_sum`` (B, H, F)
        the state before the chunk; ``episode`` (B, C) long, episode index of each step
        counted from the chunk's start (0: continues the carried state). Returns the output
        (B, C, D), the state after the chunk and, if asked, the states after every step
        ((B, C, H, F, E), (B, C, H, F)).
        """
        b, c, _ = z.shape
        fq, fk, v = self.project(z)  # (B, H, C, F), (B, H, C, F), (B, H, C, E)
        carry = episode == 0  # (B, C): no reset in the chunk up to this step
        if c == 1:
            return self._step(fq[:, :, 0], fk[:, :, 0], v[:, :, 0], kv, k_sum, carry, states_after)
        causal = torch.ones(c, c, dtype=torch.bool, device=z.device).tril()
        # (B, C, C): j <= i and j in the same episode as i
        same = (episode[:, :, None] == episode[:, None, :]) & causal
        # phi(q_i)^T phi(k_j) for allowed pairs, zero elsewhere
        sim = (fq @ fk.transpose(-1, -2)).masked_fill(~same[:, None], 0.0)  # (B, H, C, C)
        # phi(q_i)^T S_0 and phi(q_i)^T z_0 for steps that continue the carried state
        carried_num = torch.where(carry[:, None, :, None], fq @ kv, 0.0)  # (B, H, C, E)
        carried_den = torch.where(carry[:, None, :], (fq * k_sum[:, :, None, :]).sum(-1), 0.0)
        # numerator phi(q_i)^T S_i and normaliser phi(q_i)^T z_i
        numerator = sim @ v + carried_num  # (B, H, C, E)
        normaliser = sim.sum(-1) + carried_den  # (B, H, C)
        attended = numerator / (normaliser + EPS)[..., None]  # (B, H, C, E)
        attended = attended.transpose(1, 2).reshape(b, c, self.d_model)  # (B, C, D)

        # state after the chunk: S_0 if the last step continues it, plus its episode's terms
        last = same[:, -1].to(z.dtype)  # (B, C) steps of the last step's episode
        keep = carry[:, -1, None, None]  # (B, 1, 1)
        # S = S_0 + sum_j phi(k_j) v_j^T over the last episode
        new_kv = torch.where(keep[..., None], kv, 0.0) + torch.einsum(
            "bhcf,bhce,bc->bhfe", fk, v, last
        )
        # z = z_0 + sum_j phi(k_j)
        new_k_sum = torch.where(keep, k_sum, 0.0) + torch.einsum("bhcf,bc->bhf", fk, last)
        after = None
        if states_after:
            weights = same.to(z.dtype)  # (B, C, C): step i's state sums steps j of its episode
            kv_after = torch.where(carry[:, :, None, None, None], kv[:, None], 0.0) + torch.einsum(
                "bhjf,bhje,bij->bihfe", fk, v, weights
            )  # (B, C, H, F, E)
            k_sum_after = torch.where(carry[:, :, None, None], k_sum[:, None], 0.0) + torch.einsum(
                "bhjf,bij->bihf", fk, weights
            )  # (B, C, H, F)
            after = (kv_after, k_sum_after)
        return self.out(attended), new_kv, new_k_sum, after

    def _step(
        self,
        fq: torch.Tensor,
        fk: torch.Tensor,
        v: torch.Tensor,
        kv: torch.Tensor,
        k_sum: torch.Tensor,
        carry: torch.Tensor,
        states_after: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """The recurrent form for one step: ``fq``/``fk`` (B, H, F), ``v`` (B, H, E), ``carry`` (B, 1)."""
        keep = carry[:, :, None]  # (B, 1, 1), False at an episode start
        # S_i = S_{i-1} + phi(k_i) v_i^T
        kv = torch.where(keep[..., None], kv, 0.0) + fk[..., :, None] * v[..., None, :]
        # z_i = z_{i-1} + phi(k_i)
        k_sum = torch.where(keep, k_sum, 0.0) + fk
        # phi(q_i)^T S_i / (phi(q_i)^T z_i)
        numerator = (fq[..., None, :] @ kv).squeeze(-2)  # (B, H, E)
        normaliser = (fq * k_sum).sum(-1, keepdim=True)  # (B, H, 1)
        attended = (numerator / (normaliser + EPS)).reshape(fq.shape[0], 1, self.d_model)
        after = (kv[:, None], k_sum[:, None]) if states_after else None
        return self.out(attended), kv, k_sum, after


class LinearTransformer(Backbone):
    """Linear-attention transformer behind the backbone protocol (see the module docstring)."""

    graph_capturable = True

    def __init__(self, config: LinearConfig, feature: str) -> None:
        super().__init__()
        self.config = config
        self.feature = feature
        self.input_dim = config.input_dim
        self.output_dim = config.d_model
        self.embed = nn.Linear(config.input_dim, config.d_model)
        blocks, attentions = [], []
        for layer in range(config.n_layers):
            omega = None
            if isinstance(config, PerformerConfig):
                generator = torch.Generator().manual_seed(config.seed * 1000003 + layer)
                omega = draw_random_features(
                    config.n_features, config.head_dim, generator, config.orthogonal
                )
            attention = KernelAttention(config.d_model, config.n_heads, feature, omega)
            attentions.append(attention)
            blocks.append(PreNormBlock(config, attention, output_relu=False))
        self.blocks = nn.ModuleList(blocks)
        self.n_features: int = attentions[0].n_features

    def initial_state(
        self, batch_size: int, device: torch.device | str | None = None
    ) -> LinearState:
        c = self.config
        placement = self.state_placement(device)
        return LinearState(
            kv=torch.zeros(
                batch_size, c.n_layers, c.n_heads, self.n_features, c.head_dim, **placement
            ),
            k_sum=torch.zeros(batch_size, c.n_layers, c.n_heads, self.n_features, **placement),
            steps=torch.zeros(batch_size, dtype=torch.long, device=placement["device"]),
        )

    def run(
        self,
        x: torch.Tensor,
        state: LinearState,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
        next_state: bool = True,
    ) -> BackboneOutput:
        self.check_inputs(x, state, episode_starts)
        c = self.config
        t, b = episode_starts.shape
        starts = episode_starts.transpose(0, 1)  # (B, T)
        positions = episode_time(state.steps, episode_starts)  # (B, T)
        h = self.embed(x).transpose(0, 1)  # (T, B, I) -> (B, T, D)
        if c.position_encoding:
            table = sinusoid_table(positions.flatten(), c.d_model).to(h.dtype)  # (B*T, D)
            h = h + table.view(b, t, c.d_model)

        kv = list(state.kv.unbind(1))  # L x (B, H, F, E)
        k_sum = list(state.k_sum.unbind(1))  # L x (B, H, F)
        outputs = []
        trace_kv: list[torch.Tensor] = []
        trace_k_sum: list[torch.Tensor] = []
        for begin in range(0, t, c.chunk_size):
            end = min(begin + c.chunk_size, t)
            episode = starts[:, begin:end].long().cumsum(dim=1)  # (B, C)
            h_chunk = h[:, begin:end]  # (B, C, D)
            # the state before the chunk, (B, L, H, F, E) and (B, L, H, F), for the trace
            before = (torch.stack(kv, dim=1), torch.stack(k_sum, dim=1)) if trace else None
            afters = []
            for layer, block in enumerate(attention_blocks(self.blocks)):
                # h + Attn(LN(h)), then + MLP(LN(.))
                z = block.attention_input(h_chunk)
                attended, kv[layer], k_sum[layer], after = block.attention(
                    z, kv[layer], k_sum[layer], episode, states_after=trace
                )
                h_chunk = block(h_chunk, attended)
                afters.append(after)
            outputs.append(h_chunk)
            if before is not None:
                # state before step i of the chunk: before the chunk, then after step i-1
                kv_after = torch.stack([a[0] for a in afters if a is not None], dim=2)
                k_sum_after = torch.stack([a[1] for a in afters if a is not None], dim=2)
                # (B, C, L, ...) -> (C, B, L, ...)
                trace_kv.append(
                    torch.cat((before[0][:, None], kv_after[:, :-1]), dim=1).transpose(0, 1)
                )
                trace_k_sum.append(
                    torch.cat((before[1][:, None], k_sum_after[:, :-1]), dim=1).transpose(0, 1)
                )

        new_state = LinearState(
            kv=torch.stack(kv, dim=1).detach(),
            k_sum=torch.stack(k_sum, dim=1).detach(),
            steps=positions[:, -1] + 1,
        )
        step_trace = None
        if trace:
            steps_before = torch.cat((state.steps[:, None], positions[:, :-1] + 1), dim=1)  # (B, T)
            step_trace = LinearState(
                kv=torch.cat(trace_kv).detach(),
                k_sum=torch.cat(trace_k_sum).detach(),
                steps=steps_before.transpose(0, 1),
            )
        out_stats: dict[str, torch.Tensor] = {}
        if stats:
            out_stats["state_norm"] = new_state.kv.norm(dim=(-2, -1)).mean()
            out_stats["episode_steps"] = new_state.steps.float().mean()
        y = torch.cat(outputs, dim=1).transpose(0, 1)  # (B, T, D) -> (T, B, D)
        # the state is the chunks' running sums, computed anyway: only not handed back
        return BackboneOutput(y, new_state if next_state else None, step_trace, {}, out_stats)


def build_linear(config: LinearConfig) -> LinearTransformer:
    if isinstance(config, PerformerConfig):
        raise ValueError("backbone 'linear' takes a LinearConfig; use backbone 'performer'")
    return LinearTransformer(config, "elu")


def build_performer(config: PerformerConfig) -> LinearTransformer:
    return LinearTransformer(config, "favor")
