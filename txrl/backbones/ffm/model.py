"""Fast and Forgetful Memory (Morad et al., NeurIPS 2023), behind the backbone protocol.

Legend: T steps, B envs, L layers, I input width, D output width (``d_model``), m traces
(``memory_size``), c frequencies (``context_size``).

**The aggregator** (the paper's Sec. 4, "Fast and Forgetful Aggregator"). The state of a
layer is a complex matrix S in C^{m x c}: row i is a trace of the input that decays at rate
alpha_i > 0, read at c frequencies omega_j::

    gamma = exp(-alpha) exp(i omega)^T                          in C^{m x c}
    S_k   = gamma (.) S_{k-1} + x~_k 1_c^T                          (recurrent form)
    S_k   = gamma^{k+1} (.) S_{-1} + sum_{j=0..k} gamma^{k-j} (.) (x~_j 1_c^T)   (closed form)

(``(.)``: elementwise product; powers of gamma are elementwise). |gamma| < 1, so every input
is forgotten (the "forgetful" prior), and the phase omega t of gamma^t tells the reader how
long ago an input came (relative time).

**The cell** (Sec. 4, "Fast and Forgetful Memory"; Fig. 2), from the input o_k::

    x~_k = l1(o_k) (.) sigma(l2(o_k))                            input gate
    S_k  = gamma (.) S_{k-1} + x~_k 1_c^T                        the aggregator
    z_k  = l3(Flatten(Re[S_k] || Im[S_k]))                       the read-out
    y_k  = LN(z_k) (.) sigma(l4(o_k)) + l5(o_k) (.) (1 - sigma(l4(o_k)))   output gate

with l1..l5 linear layers (l1, l2, l4, l5 computed as one) and LN a layer norm without
affine weights. Layers stack: a layer's y is the next one's o.

**Episode starts.** S is cleared before a step that starts an episode: S_k = keep_k gamma
(.) S_{k-1} + x~_k 1_c^T, keep_k = 0 at a start and 1 otherwise. The product of the
multipliers over steps (t-d, t] is gamma^d times the product of those keeps, so the
recurrence stays a linear scan with a per-step coefficient.

**A sequence at once.** The closed form sums gamma^{k-j} x~_j for all j <= k; computed as
written (gamma^{-j} cumulated, then multiplied by gamma^k, as the authors' implementation
does) it overflows unless alpha t stays below the log of the largest float. Here the sum is a
Hillis-Steele scan instead: after rounds d = 1, 2, 4, ... (ceil(log2 T) of them) each S_t has
added the sum over its window of 2d steps, every coefficient a power gamma^d with |gamma^d|
<= 1, so no term grows and no alpha is clamped. A single step (acting) is the same code with
T = 1 and no round: acting equals training by construction, and the float64 tests check it.

Parameters: alpha is stored unconstrained as ``decay_raw`` and used through softplus (so
|gamma| < 1 always); omega is ``frequency``. At initialisation alpha is spaced evenly from
the rate that keeps ``forgotten_at`` of an input after ``max_period`` steps to ln 2 (half per
step), and the periods 2 pi / omega evenly from ``min_period`` to ``max_period``, close to
the authors' implementation (whose fastest rate is its overflow bound instead, about ln 2 for
1,024 steps in float64).

The state is S itself, real and imaginary parts apart, env on axis 0: (B, L, m, c) each. It
is small (2 L m c floats), so the trace is the state in force before each step and the
protocol's default ``state_at`` applies, as for the LSTM and GRU.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from txrl.backbones.ffm import FFMConfig
from txrl.nn.protocol import Backbone, BackboneOutput


class FFMState(NamedTuple):
    """Per-env memory of ``ffm``: S of every layer. Legend: B envs, L layers, m traces, c
    frequencies."""

    real: torch.Tensor  # (B, L, m, c) Re[S]
    imag: torch.Tensor  # (B, L, m, c) Im[S]


class FFMCell(nn.Module):
    """One layer: input gate, aggregator, read-out and output gate (see the module docstring)."""

    def __init__(self, input_dim: int, config: FFMConfig) -> None:
        super().__init__()
        m, c, d = config.memory_size, config.context_size, config.d_model
        self.memory_size, self.context_size, self.d_model = m, c, d
        # l1 (m), l5 (D), l2 (m) and l4 (D) in one matrix
        self.project = nn.Linear(input_dim, 2 * m + 2 * d)
        self.read_out = nn.Linear(2 * m * c, d)  # l3
        self.norm = nn.LayerNorm(d, elementwise_affine=False)  # LN
        slowest = -math.log(config.forgotten_at) / config.max_period
        alpha = torch.linspace(slowest, math.log(2.0), m)  # (m,)
        self.decay_raw = nn.Parameter(torch.log(torch.expm1(alpha)))  # softplus^-1(alpha)
        periods = torch.linspace(config.min_period, config.max_period, c)  # (c,)
        self.frequency = nn.Parameter(2 * math.pi / periods)  # omega

    @property
    def decay(self) -> torch.Tensor:
        """alpha > 0, (m,): the rate at which each trace forgets."""
        return F.softplus(self.decay_raw)

    def gamma_power(self, d: int) -> torch.Tensor:
        """gamma^d = exp(-alpha d) exp(i omega d), complex (m, c)."""
        rate = self.decay[:, None].expand(-1, self.context_size)  # (m, c)
        phase = self.frequency[None, :].expand(self.memory_size, -1)  # (m, c)
        return torch.exp(torch.complex(-rate * d, phase * d))

    def forward(
        self, o: torch.Tensor, memory: torch.Tensor, keep: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``o`` (T, B, I), ``memory`` S_{-1} complex (B, m, c), ``keep`` (T, B) 0 at an episode
        start. Returns y (T, B, D) and S_0..S_{T-1} complex (T, B, m, c)."""
        m, d = self.memory_size, self.d_model
        value, through, gate_in, gate_out = self.project(o).split([m, d, m, d], dim=-1)
        # x~_k = l1(o_k) (.) sigma(l2(o_k))
        x_tilde = value * torch.sigmoid(gate_in)  # (T, B, m)
        states = self.aggregate(x_tilde, memory, keep)  # (T, B, m, c)
        # z_k = l3(Flatten(Re[S_k] || Im[S_k])): (T, B, m, c) -> (T, B, m, c, 2) -> (T, B, 2mc)
        z = self.read_out(torch.view_as_real(states).flatten(start_dim=2))
        # y_k = LN(z_k) (.) sigma(l4(o_k)) + l5(o_k) (.) (1 - sigma(l4(o_k)))
        out_gate = torch.sigmoid(gate_out)
        return self.norm(z) * out_gate + through * (1 - out_gate), states

    def aggregate(
        self, x_tilde: torch.Tensor, memory: torch.Tensor, keep: torch.Tensor
    ) -> torch.Tensor:
        """S_t = keep_t gamma (.) S_{t-1} + x~_t 1_c^T for every t, by a Hillis-Steele scan.

        ``x_tilde`` (T, B, m) real, ``memory`` S_{-1} (B, m, c) complex, ``keep`` (T, B).
        After the round of offset d, ``partial[t]`` is the sum over steps (t - 2d, t] and
        ``kept[t]`` the product of the keeps over (t - 2d, t]: combining element t with
        element t - d multiplies the latter by gamma^d and by the keeps of (t - d, t].
        """
        steps = x_tilde.shape[0]
        # the sums in the parameters' precision, also under bfloat16 autocast (which has no
        # complex type, and would round a long sum at 8 bits)
        x_tilde = x_tilde.to(self.decay_raw.dtype)
        # x~_t 1_c^T: (T, B, m) -> (T, B, m, c), imaginary part 0
        inputs = x_tilde[..., None].expand(-1, -1, -1, self.context_size)
        partial = torch.complex(inputs, torch.zeros_like(inputs))
        # the carried-in memory enters at step 0: keep_0 gamma (.) S_{-1}
        carried = keep[0, :, None, None] * self.gamma_power(1) * memory  # (B, m, c)
        partial = torch.cat((partial[:1] + carried, partial[1:]))
        kept = keep  # (T, B): keeps over (t - d, t] before the round of offset d
        d = 1
        while d < steps:
            # S-window of t gains gamma^d (.) keeps(t-d, t] (.) S-window of t - d
            reach = kept[d:, :, None, None] * self.gamma_power(d)  # (T - d, B, m, c)
            partial = torch.cat((partial[:d], partial[d:] + reach * partial[:-d]))
            kept = torch.cat((kept[:d], kept[d:] * kept[:-d]))
            d *= 2
        return partial


class FFMBackbone(Backbone):
    """A stack of FFM cells, the memory cleared at episode starts."""

    graph_capturable = True

    def __init__(self, config: FFMConfig) -> None:
        super().__init__()
        self.config = config
        self.input_dim = config.input_dim
        self.output_dim = config.d_model
        widths = [config.input_dim] + [config.d_model] * (config.n_layers - 1)
        self.cells = nn.ModuleList(FFMCell(width, config) for width in widths)

    def initial_state(self, batch_size: int, device: torch.device | str | None = None) -> FFMState:
        placement = self.state_placement(device)
        shape = (
            batch_size,
            self.config.n_layers,
            self.config.memory_size,
            self.config.context_size,
        )
        return FFMState(torch.zeros(shape, **placement), torch.zeros(shape, **placement))

    def run(
        self,
        x: torch.Tensor,
        state: FFMState,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
        next_state: bool = True,
    ) -> BackboneOutput:
        self.check_inputs(x, state, episode_starts)
        keep = (~episode_starts).to(x.dtype)  # (T, B)
        memory = torch.complex(state.real, state.imag)  # (B, L, m, c)
        y, finals, befores = x, [], []
        for layer, cell in enumerate(self.cells):
            y, states = cell(y, memory[:, layer], keep)  # states (T, B, m, c)
            finals.append(states[-1])
            if trace:
                # the state before step t: S_{t-1}, S_{-1} at t = 0 (before any reset)
                befores.append(torch.cat((memory[None, :, layer], states[:-1])))
        final = None
        if next_state:
            stacked = torch.stack(finals, dim=1).detach()  # (B, L, m, c)
            final = FFMState(stacked.real.contiguous(), stacked.imag.contiguous())
        step_trace = None
        if trace:
            before = torch.stack(befores, dim=2).detach()  # (T, B, L, m, c)
            step_trace = FFMState(before.real.contiguous(), before.imag.contiguous())
        return BackboneOutput(y, final, step_trace, {}, {})


# the implementation that the record of txrl.backbones.ffm names


def build_ffm(config: FFMConfig) -> FFMBackbone:
    return FFMBackbone(config)
