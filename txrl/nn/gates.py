"""Gating layers g(x, y) that replace the residual connections of a transformer block.

Parisotto et al. 2019, "Stabilizing Transformers for Reinforcement Learning", eqs. (11)-(14)
of ``references/000_4baccbf6ade0250f.txt`` and the sigmoid-tanh gate of the paper's
section 3.2. ``x`` is the skip stream (the block's input), ``y`` the sub-layer output.

Every gate takes its bias init ``b_g`` as ``bias``. The output, highway, sigmoid-tanh and
GRU gates are built so that a large ``b_g`` makes the gate start as the identity map on x,
which the paper found to be what makes GTrXL train stably. The bias is a learnable
parameter initialised from ``b_g`` (stored as the bias of the gate's linear map).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from txrl.backbones.trxl import GATE_NAMES

DEFAULT_GATE_BIAS = {
    "gru": 2.0,
    "input": 1.0,
    "output": 1.0,
    "highway": 1.0,
    "sigtanh": 1.0,
    "residual": 0.0,
}


class Gate(nn.Module):
    """Base of the gates. When ``stats`` is a list, ``forward`` appends the mean of its gate
    activation (how much of the modulated stream passes) for diagnostics."""

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        raise NotImplementedError


class ResidualGate(Gate):
    """Plain residual ``g(x, y) = x + y`` (TrXL-I)."""

    def __init__(self, d_model: int, bias: float = 0.0) -> None:
        super().__init__()

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        if stats is not None:
            stats.append(torch.ones((), device=x.device))
        return x + y


class InputGate(Gate):
    """Eq. (11): ``g(x, y) = sigma(W_g x + b_g) * x + y``; a sigmoid modulates the skip stream."""

    def __init__(self, d_model: int, bias: float = 1.0) -> None:
        super().__init__()
        self.w_g = nn.Linear(d_model, d_model)
        nn.init.constant_(self.w_g.bias, bias)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        gate = torch.sigmoid(self.w_g(x))
        if stats is not None:
            stats.append(gate.detach().mean())
        return gate * x + y


class OutputGate(Gate):
    """Eq. (12): ``g(x, y) = x + sigma(W_g x - b_g) * y``; a sigmoid modulates the sub-layer output."""

    def __init__(self, d_model: int, bias: float = 1.0) -> None:
        super().__init__()
        self.w_g = nn.Linear(d_model, d_model)
        nn.init.constant_(self.w_g.bias, -bias)  # the "- b_g" of eq. (12)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        gate = torch.sigmoid(self.w_g(x))
        if stats is not None:
            stats.append(gate.detach().mean())
        return x + gate * y


class HighwayGate(Gate):
    """Eq. (13): ``g(x, y) = sigma(W_g x + b_g) * x + (1 - sigma(W_g x + b_g)) * y``."""

    def __init__(self, d_model: int, bias: float = 1.0) -> None:
        super().__init__()
        self.w_g = nn.Linear(d_model, d_model)
        nn.init.constant_(self.w_g.bias, bias)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        carry = torch.sigmoid(self.w_g(x))
        if stats is not None:
            stats.append(carry.detach().mean())
        return carry * x + (1.0 - carry) * y


class SigmoidTanhGate(Gate):
    """Sigmoid-tanh gate (Parisotto et al. 2019, sec. 3.2): ``g(x, y) = x + sigma(W_g y - b_g) * tanh(U_g y)``."""

    def __init__(self, d_model: int, bias: float = 1.0) -> None:
        super().__init__()
        self.w_g = nn.Linear(d_model, d_model)
        self.u_g = nn.Linear(d_model, d_model, bias=False)
        nn.init.constant_(self.w_g.bias, -bias)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        gate = torch.sigmoid(self.w_g(y))
        if stats is not None:
            stats.append(gate.detach().mean())
        return x + gate * torch.tanh(self.u_g(y))


class GRUGate(Gate):
    """Eq. (14), a GRU cell with x as its hidden state and y as its input::

    r = sigma(W_r y + U_r x),  z = sigma(W_z y + U_z x - b_g),
    h_hat = tanh(W_g y + U_g (r * x)),  g(x, y) = (1 - z) * x + z * h_hat
    """

    def __init__(self, d_model: int, bias: float = 2.0) -> None:
        super().__init__()
        # [W_r; W_z; W_g] applied to y, in one product
        self.w_rzg = nn.Linear(d_model, 3 * d_model, bias=False)
        # [U_r; U_z] applied to x; its bias holds the -b_g of z
        self.u_rz = nn.Linear(d_model, 2 * d_model)
        self.u_g = nn.Linear(d_model, d_model, bias=False)
        with torch.no_grad():
            self.u_rz.bias.zero_()
            self.u_rz.bias[d_model:] = -bias

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        """``x``, ``y`` (..., D), computed on (N, D) rows with each product's sum folded
        into it (``addmm``); the output is ``lerp(x, h_hat, z)`` = (1 - z) x + z h_hat."""
        d = x.shape[-1]
        x2, y2 = x.reshape(-1, d), y.reshape(-1, d)  # (..., D) -> (N, D)
        # [W_r y; W_z y], W_g y: one product, split (its gradient is one concatenation)
        wy_rz, wy_g = F.linear(y2, self.w_rzg.weight).split((2 * d, d), dim=-1)  # (N, 2D), (N, D)
        # r, z = sigma(W_r y + U_r x), sigma(W_z y + U_z x - b_g)
        pre_rz = torch.addmm(self.u_rz.bias, x2, self.u_rz.weight.T) + wy_rz  # (N, 2D)
        r, z = torch.sigmoid(pre_rz).chunk(2, dim=-1)
        # h_hat = tanh(W_g y + U_g (r * x))
        h_hat = torch.tanh(torch.addmm(wy_g, r * x2, self.u_g.weight.T))
        if stats is not None:
            stats.append(z.detach().mean())
        # g(x, y) = (1 - z) * x + z * h_hat
        return torch.lerp(x2, h_hat, z).view(x.shape)


_GATES: dict[str, Callable[[int, float], Gate]] = {
    "input": InputGate,
    "output": OutputGate,
    "highway": HighwayGate,
    "sigtanh": SigmoidTanhGate,
    "gru": GRUGate,
    "residual": ResidualGate,
}


def make_gate(name: str, d_model: int, bias: float | None = None) -> Gate:
    """Build gate ``name`` (one of :data:`GATE_NAMES`); ``bias=None`` takes the paper's default b_g."""
    if name not in _GATES:
        raise ValueError(f"unknown gate {name!r}; valid gates: {', '.join(GATE_NAMES)}")
    return _GATES[name](d_model, DEFAULT_GATE_BIAS[name] if bias is None else float(bias))
