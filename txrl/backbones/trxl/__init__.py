"""The Transformer-XL family, ``gtrxl``, ``trxl_i`` and ``trxl``: settings and records,
torch-free (torch model: `txrl.backbones.trxl.model`).

GTrXL's gates are declared once, in `txrl.gate_declarations` ([`GATES`][txrl.backbones.trxl.GATES], their
names, equations and default b_g, named here too): the config checks a gate's name and bias
against them without torch, and ``txrl inspect`` and the docs read what each means. Each
gate module of [`txrl.nn.gates`][txrl.nn.gates] holds its declaration and takes its bias as an argument;
`txrl.backbones.trxl.model` builds each block's gate with the bias the config gives or
the declared default.
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import ClassVar

from txrl.backbones.record import BackboneRecord
from txrl.backbones.transformer_settings import TRANSFORMER_SHARED, WindowConfig
from txrl.gate_declarations import DEFAULT_GATE, GATE_NAMES, GATES, GateDeclaration


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
    """Settings of ``gtrxl``: those of [`TrXLConfig`][txrl.backbones.trxl.TrXLConfig] and the gate, ``gate`` (None:
    `DEFAULT_GATE`) with its bias ``gate_bias`` (None: the gate's declared default,
    [`GATES`][txrl.backbones.trxl.GATES]; a gate without a bias term refuses one, except the input gate, whose eq.
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
    """The family's torch model, `txrl.backbones.trxl.model`, imported (with torch) when
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

__all__ = [
    "BACKBONES",
    "DEFAULT_GATE",
    "GATES",
    "GATE_NAMES",
    "GTrXLConfig",
    "GateDeclaration",
    "TrXLConfig",
]
