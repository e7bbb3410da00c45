"""The Transformer-XL family, ``gtrxl``, ``trxl_i`` and ``trxl``: settings, records and the
declaration of GTrXL's gates, torch-free (torch model: :mod:`txrl.backbones.trxl.model`).

Each gate is declared here once (:data:`GATES`): the config checks a gate's name and bias
without torch, and ``txrl inspect`` and the docs read what it means. The gate modules of
:mod:`txrl.nn.gates` compute the gates by the same names and take their bias as an argument;
:mod:`txrl.backbones.trxl.model` joins the two, building each block's gate with the bias the
config gives or the declared default.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import ClassVar

from txrl.backbones.record import BackboneRecord
from txrl.backbones.transformer_settings import TRANSFORMER_SHARED, WindowConfig


@dataclasses.dataclass(frozen=True)
class GateDeclaration:
    """A gating layer g(x, y) of GTrXL, declared once: its name, its equation, its default
    bias b_g and what its activation's 1 and 0 mean. ``x`` is the skip stream (the block's
    input), ``y`` the sub-layer's output (attention over the memory, or the MLP). The module
    that computes it is the gate of the same name in :mod:`txrl.nn.gates`; the config,
    ``txrl inspect`` and the docs read this declaration."""

    name: str
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


#: The gates of GTrXL: eqs. (11)-(14) of Parisotto et al. 2019, "Stabilizing Transformers
#: for Reinforcement Learning", the sigmoid-tanh gate of its section 3.2, and the plain
#: residual connection of TrXL-I.
GATES: dict[str, GateDeclaration] = {
    gate.name: gate
    for gate in (
        GateDeclaration(
            "input",
            "input gate (eq. 11)",
            "g(x, y) = sigma(W_g x) * x + y",
            None,
            "sigma(W_g x)",
            "pass the input on in full beside the update",
            "drop the input",
        ),
        GateDeclaration(
            "output",
            "output gate (eq. 12)",
            "g(x, y) = x + sigma(W_g x - b_g) * y",
            1.0,
            "sigma(W_g x - b_g)",
            "add the sub-layer's update in full",
            "keep the input (identity)",
        ),
        GateDeclaration(
            "highway",
            "highway carry gate (eq. 13)",
            "g(x, y) = sigma(W_g x + b_g) * x + (1 - sigma(W_g x + b_g)) * y",
            1.0,
            "sigma(W_g x + b_g)",
            "keep the input (identity)",
            "replace it by the sub-layer's update",
        ),
        GateDeclaration(
            "sigtanh",
            "sigmoid-tanh gate (sec. 3.2)",
            "g(x, y) = x + sigma(W_g y - b_g) * tanh(U_g y)",
            1.0,
            "sigma(W_g y - b_g)",
            "add the sub-layer's update in full",
            "keep the input (identity)",
        ),
        GateDeclaration(
            "gru",
            "GRU gate z (eq. 14)",
            "r = sigma(W_r y + U_r x), z = sigma(W_z y + U_z x - b_g), "
            "h = tanh(W_g y + U_g (r * x)), g(x, y) = (1 - z) * x + z * h",
            2.0,
            "z",
            "replace the input by the sub-layer's update",
            "keep the input (identity)",
        ),
        GateDeclaration(
            "residual",
            "residual connection (TrXL-I)",
            "g(x, y) = x + y",
            None,
            "always 1 (no gate)",
            "input + update, ungated (always)",
            "never (no gate)",
        ),
    )
}
#: Their names, in the order above.
GATE_NAMES = tuple(GATES)
#: The gate of ``gtrxl`` when the config leaves ``gate`` null: the paper's best.
DEFAULT_GATE = "gru"


@dataclasses.dataclass(frozen=True)
class TrXLConfig(WindowConfig):
    """Settings of ``trxl`` and ``trxl_i``: the common transformer settings, no gates
    (``trxl_i`` always uses the ``residual`` gate, ``trxl`` has none), so a config's ``gate``
    is a setting these backbones do not have and ``policy.inapplicable: drop`` clears it.

    ``compile_step`` (default False): on a CPU, run the acting step's layer loop (rollouts,
    ``predict``, ``evaluate_policy``) compiled with ``torch.compile``: one graph instead of
    some hundreds of small ops, whose per-op overhead dominates an acting step of a small
    model. It compiles at the first step (tens of seconds; torch keeps the result in its
    cache for later runs) and a few times more (a second batch size, a copied memory), and
    needs a C++ compiler. It pays where acting dominates a run, not where the training pass
    does (``bench/throughput.py`` measures both). The training pass is unchanged; on a GPU,
    rollouts capture the step as a CUDA graph instead (the learners' ``cuda_graph``), so the
    setting applies to CPU steps only.
    """

    compile_step: bool = False

    needs_even_width: ClassVar[bool] = True  # the sinusoid encoding of eq. (1)
    unknown_hint: ClassVar[str] = (
        "the gates are settings of backbone 'gtrxl' (trxl_i is gtrxl with the residual gate)"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.compile_step, bool):
            raise ValueError(f"compile_step must be true or false, got {self.compile_step!r}")


@dataclasses.dataclass(frozen=True)
class GTrXLConfig(TrXLConfig):
    """Settings of ``gtrxl``: those of :class:`TrXLConfig` and the gate, ``gate`` (None:
    :data:`DEFAULT_GATE`) with its bias ``gate_bias`` (None: the gate's declared default,
    :data:`GATES`; a gate without a bias term refuses one, except the input gate, whose eq.
    (11) has none but which takes a learnable bias initialised to ``gate_bias`` when given)."""

    gate: str | None = None
    gate_bias: float | None = None

    unknown_hint: ClassVar[str] = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gate is not None and self.gate not in GATE_NAMES:
            raise ValueError(f"unknown gate {self.gate!r}; valid gates: {', '.join(GATE_NAMES)}")
        if self.gate == "residual" and self.gate_bias is not None:
            raise ValueError(
                "gate 'residual' has no bias: leave gate_bias null, or pick a gate with one "
                f"({', '.join(n for n, g in GATES.items() if g.default_bias is not None)}, or "
                "input with a bias of its own)"
            )


def _model() -> ModuleType:
    """The family's torch model, :mod:`txrl.backbones.trxl.model`, imported (with torch) when
    a backbone of it is built."""
    from txrl.backbones.trxl import model

    return model


BACKBONES = (
    BackboneRecord(
        "gtrxl",
        GTrXLConfig,
        lambda settings: _model().build_gtrxl(settings),
        ("gate", "gate_bias", *TRANSFORMER_SHARED),
    ),
    BackboneRecord(
        "trxl_i", TrXLConfig, lambda settings: _model().build_trxl_i(settings), TRANSFORMER_SHARED
    ),
    BackboneRecord(
        "trxl", TrXLConfig, lambda settings: _model().build_trxl(settings), TRANSFORMER_SHARED
    ),
)
