"""The gates of GTrXL, declared once: name, equation, default bias b_g and meaning. No torch.

Parisotto et al. 2019, "Stabilizing Transformers for Reinforcement Learning": the input,
output, highway and GRU gates of eqs. (11)-(14), the sigmoid-tanh gate of its section 3.2, and
the plain residual connection of TrXL-I. ``x`` is the skip stream (the block's input), ``y``
the sub-layer's output (attention over the memory, or the MLP).

Two sides read each declaration and neither imports the other, so they live here, below both:
the Transformer-XL family's settings (`txrl.backbones.trxl`: a config's ``gate`` and
``gate_bias``, checked without torch; the default b_g its model builds a gate with) and the
module that computes the gate ([`txrl.nn.gates`][txrl.nn.gates]: each gate class holds its declaration,
so its name, and ``txrl inspect``'s reading of it, come from here).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class GateDeclaration:
    """A gating layer g(x, y) of GTrXL: its name, its equation, its default bias b_g and what
    its activation's 1 and 0 mean."""

    name: str
    """The name a config's ``gate`` gives it."""
    title: str
    """What the gate is called, with its equation number, e.g. ``GRU gate (eq. 14)``."""
    equation: str
    """g(x, y) as the module computes it."""
    default_bias: float | None
    """b_g when the config leaves ``gate_bias`` null; None: the gate has no bias term."""
    activation: str
    """The activation whose mean the gate reports (``txrl inspect``'s gate traces)."""
    one_means: str
    zero_means: str


INPUT = GateDeclaration(
    "input",
    "input gate (eq. 11)",
    "g(x, y) = sigma(W_g x) * x + y",
    None,
    "sigma(W_g x)",
    "pass the input on in full beside the update",
    "drop the input",
)
OUTPUT = GateDeclaration(
    "output",
    "output gate (eq. 12)",
    "g(x, y) = x + sigma(W_g x - b_g) * y",
    1.0,
    "sigma(W_g x - b_g)",
    "add the sub-layer's update in full",
    "keep the input (identity)",
)
HIGHWAY = GateDeclaration(
    "highway",
    "highway carry gate (eq. 13)",
    "g(x, y) = sigma(W_g x + b_g) * x + (1 - sigma(W_g x + b_g)) * y",
    1.0,
    "sigma(W_g x + b_g)",
    "keep the input (identity)",
    "replace it by the sub-layer's update",
)
SIGTANH = GateDeclaration(
    "sigtanh",
    "sigmoid-tanh gate (sec. 3.2)",
    "g(x, y) = x + sigma(W_g y - b_g) * tanh(U_g y)",
    1.0,
    "sigma(W_g y - b_g)",
    "add the sub-layer's update in full",
    "keep the input (identity)",
)
GRU = GateDeclaration(
    "gru",
    "GRU gate z (eq. 14)",
    "r = sigma(W_r y + U_r x), z = sigma(W_z y + U_z x - b_g), "
    "h = tanh(W_g y + U_g (r * x)), g(x, y) = (1 - z) * x + z * h",
    2.0,
    "z",
    "replace the input by the sub-layer's update",
    "keep the input (identity)",
)
RESIDUAL = GateDeclaration(
    "residual",
    "residual connection (TrXL-I)",
    "g(x, y) = x + y",
    None,
    "always 1 (no gate)",
    "input + update, ungated (always)",
    "never (no gate)",
)

#: Every gate by its name, in this order.
GATES: dict[str, GateDeclaration] = {
    gate.name: gate for gate in (INPUT, OUTPUT, HIGHWAY, SIGTANH, GRU, RESIDUAL)
}
#: Their names, in the order above.
GATE_NAMES = tuple(GATES)
#: The gate of ``gtrxl`` when the config leaves ``gate`` null: the paper's best.
DEFAULT_GATE = GRU.name

__all__ = [
    "DEFAULT_GATE",
    "GATES",
    "GATE_NAMES",
    "GRU",
    "HIGHWAY",
    "INPUT",
    "OUTPUT",
    "RESIDUAL",
    "SIGTANH",
    "GateDeclaration",
]
