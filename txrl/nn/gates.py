"""Gating layers g(x, y) that replace the residual connections of a transformer block.

Parisotto et al. 2019, "Stabilizing Transformers for Reinforcement Learning" (arXiv
1910.06764), section 3.2 "Gating Layers": the input, output, highway, sigmoid-tanh and
GRU-type gates. ``x`` is the skip stream (the block's input), ``y`` the sub-layer output.

Each class computes one gate and holds its declaration (`txrl.gate_declarations`,
torch-free: its name, its equation, the paper's default b_g, what its 1 and 0 mean), by whose
name `GATE_CLASSES` finds it; the bias b_g is an argument of the module, with no default
here: the Transformer-XL family's model builds each gate with the bias of the config or of the
declaration. The output, highway, sigmoid-tanh and GRU gates are built so that a large b_g
makes the gate start as the identity map on x, which the paper found to be what makes GTrXL
train stably. The bias is a learnable parameter initialised from b_g (stored as the bias of
the gate's linear map); [`Gate.b_g`][txrl.nn.gates.Gate.b_g] reads it back. The paper's input
gate has no bias: with ``bias=None`` it has none, and with a ``bias`` given it learns one
initialised there.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from txrl.gate_declarations import (
    GRU,
    HIGHWAY,
    INPUT,
    OUTPUT,
    RESIDUAL,
    SIGTANH,
    GateDeclaration,
)


class Gate(nn.Module):
    """Base of the gates. When ``stats`` is a list, ``forward`` appends the mean of its gate
    activation (how much of the modulated stream passes) for diagnostics."""

    #: the gate's declaration: its name (a config's ``gate``), equation and default b_g
    declaration: ClassVar[GateDeclaration]

    @classmethod
    def required_bias(cls, bias: float | None) -> float:
        """``bias`` as the float b_g of a gate whose equation has one (None is an error)."""
        if bias is None:
            raise ValueError(
                f"gate {cls.declaration.name!r} needs its bias b_g (the Transformer-XL family's settings "
                "declare each gate's default)"
            )
        return float(bias)

    def b_g(self) -> float | None:
        """The bias b_g as the parameters hold it now (the mean over the width); None for a
        gate without a bias term."""
        return None

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        raise NotImplementedError


class ResidualGate(Gate):
    """Plain residual ``g(x, y) = x + y`` (TrXL-I)."""

    declaration = RESIDUAL

    def __init__(self, d_model: int, bias: float | None = None) -> None:
        super().__init__()
        if bias is not None:
            raise ValueError(f"the residual connection has no bias, got bias={bias!r}")

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        if stats is not None:
            stats.append(torch.ones((), device=x.device))
        return x + y


class InputGate(Gate):
    """Input gate (sec. 3.2): ``g(x, y) = sigma(W_g x) * x + y``; a sigmoid modulates the
    skip stream.

    The equation has no bias, nor has the gate by default; ``bias`` given: a learnable bias
    initialised to it, ``sigma(W_g x + b_g)`` (an option outside the paper)."""

    declaration = INPUT

    def __init__(self, d_model: int, bias: float | None = None) -> None:
        super().__init__()
        self.w_g = nn.Linear(d_model, d_model, bias=bias is not None)
        if bias is not None:
            nn.init.constant_(self.w_g.bias, bias)

    def b_g(self) -> float | None:
        return None if self.w_g.bias is None else float(self.w_g.bias.detach().mean())

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        gate = torch.sigmoid(self.w_g(x))
        if stats is not None:
            stats.append(gate.detach().mean())
        return gate * x + y


class OutputGate(Gate):
    """Output gate (sec. 3.2): ``g(x, y) = x + sigma(W_g x - b_g) * y``; a sigmoid modulates
    the sub-layer output."""

    declaration = OUTPUT

    def __init__(self, d_model: int, bias: float | None) -> None:
        super().__init__()
        b_g = self.required_bias(bias)
        self.w_g = nn.Linear(d_model, d_model)
        nn.init.constant_(self.w_g.bias, -b_g)  # the "- b_g" of the output gate

    def b_g(self) -> float | None:
        return -float(self.w_g.bias.detach().mean())

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        gate = torch.sigmoid(self.w_g(x))
        if stats is not None:
            stats.append(gate.detach().mean())
        return x + gate * y


class HighwayGate(Gate):
    """Highway gate (sec. 3.2): ``g(x, y) = sigma(W_g x + b_g) * x + (1 - sigma(W_g x + b_g)) * y``."""

    declaration = HIGHWAY

    def __init__(self, d_model: int, bias: float | None) -> None:
        super().__init__()
        b_g = self.required_bias(bias)
        self.w_g = nn.Linear(d_model, d_model)
        nn.init.constant_(self.w_g.bias, b_g)

    def b_g(self) -> float | None:
        return float(self.w_g.bias.detach().mean())

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        carry = torch.sigmoid(self.w_g(x))
        if stats is not None:
            stats.append(carry.detach().mean())
        return carry * x + (1.0 - carry) * y


class SigmoidTanhGate(Gate):
    """Sigmoid-tanh gate (Parisotto et al. 2019, sec. 3.2): ``g(x, y) = x + sigma(W_g y - b_g) * tanh(U_g y)``."""

    declaration = SIGTANH

    def __init__(self, d_model: int, bias: float | None) -> None:
        super().__init__()
        b_g = self.required_bias(bias)
        self.w_g = nn.Linear(d_model, d_model)
        self.u_g = nn.Linear(d_model, d_model, bias=False)
        nn.init.constant_(self.w_g.bias, -b_g)  # the "- b_g" of sigma(W_g y - b_g)

    def b_g(self) -> float | None:
        return -float(self.w_g.bias.detach().mean())

    def forward(
        self, x: torch.Tensor, y: torch.Tensor, stats: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        gate = torch.sigmoid(self.w_g(y))
        if stats is not None:
            stats.append(gate.detach().mean())
        return x + gate * torch.tanh(self.u_g(y))


class GRUGate(Gate):
    """GRU-type gate (Parisotto et al. 2019, sec. 3.2), a GRU cell with x as its hidden state
    and y as its input::

    r = sigma(W_r y + U_r x),  z = sigma(W_z y + U_z x - b_g),
    h_hat = tanh(W_g y + U_g (r * x)),  g(x, y) = (1 - z) * x + z * h_hat
    """

    declaration = GRU

    def __init__(self, d_model: int, bias: float | None) -> None:
        super().__init__()
        b_g = self.required_bias(bias)
        # [W_r; W_z; W_g] applied to y, in one product
        self.w_rzg = nn.Linear(d_model, 3 * d_model, bias=False)
        # [U_r; U_z] applied to x; its bias holds the -b_g of z
        self.u_rz = nn.Linear(d_model, 2 * d_model)
        self.u_g = nn.Linear(d_model, d_model, bias=False)
        with torch.no_grad():
            self.u_rz.bias.zero_()
            self.u_rz.bias[d_model:] = -b_g  # the "- b_g" of z

    def b_g(self) -> float | None:
        d = self.u_g.in_features
        return -float(self.u_rz.bias.detach()[d:].mean())

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


#: The module of each gate, by its declared name (:data:`txrl.gate_declarations.GATES`).
GATE_CLASSES: dict[str, type[Gate]] = {
    cls.declaration.name: cls
    for cls in (InputGate, OutputGate, HighwayGate, SigmoidTanhGate, GRUGate, ResidualGate)
}


def make_gate(name: str, d_model: int, bias: float | None = None) -> Gate:
    """Build gate ``name`` (a key of `GATE_CLASSES`) of width ``d_model`` with bias b_g
    ``bias``: a number for the output, highway, sigmoid-tanh and GRU gates; for the input
    gate None (the paper's, without a bias) or the initial value of a learnable one; None for the
    residual connection."""
    if name not in GATE_CLASSES:
        raise ValueError(f"unknown gate {name!r}; valid gates: {', '.join(GATE_CLASSES)}")
    return GATE_CLASSES[name](d_model, None if bias is None else float(bias))
