"""Settings of the Transformer-XL family: ``gtrxl``, ``trxl_i`` and ``trxl``
(implementation: :mod:`txrl.nn.trxl`)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from txrl.backbones import BackboneRecord
from txrl.backbones.common import TRANSFORMER_SHARED, WindowConfig

#: The gates of GTrXL (:func:`txrl.nn.gates.make_gate`), eqs. (11)-(14) of Parisotto et al.
#: 2019 and the sigmoid-tanh gate of its section 3.2.
GATE_NAMES = ("input", "output", "highway", "sigtanh", "gru", "residual")


@dataclasses.dataclass(frozen=True)
class TrXLConfig(WindowConfig):
    """Settings of ``trxl`` and ``trxl_i``: the common transformer settings, no gates
    (``trxl_i`` always uses the ``residual`` gate, ``trxl`` has none), so a config's ``gate``
    is a setting these backbones do not have and ``policy.inapplicable: drop`` clears it.

    ``compile_step`` (default False): on a CPU, run the acting step's layer loop (rollouts,
    ``predict``, ``evaluate_policy``) compiled with ``torch.compile``: one graph instead of
    ~250 small ops, which at the bench setup took the acting step from 6.1 to 3.8 ms in
    one run (``bench/throughput.py``). It compiles at the first step (tens of seconds;
    torch keeps the result in its cache for later runs) and a few times more (a second
    batch size, a copied memory), and needs a C++ compiler. It pays where acting's per-op
    cost matters (the quick start's size: ``learn()`` +24 %), not where the training pass
    dominates (the MiniGrid S9 recipe: no change). The training pass is unchanged; on a
    GPU, rollouts capture the step as a CUDA graph instead (the learners' ``cuda_graph``),
    so the setting applies to CPU steps only.
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
    """Settings of ``gtrxl``: those of :class:`TrXLConfig` and the gate, ``gate`` (default
    ``gru``) with its bias ``gate_bias`` (None: the gate's own default, b_g = 2 for ``gru``)."""

    gate: str | None = None
    gate_bias: float | None = None

    unknown_hint: ClassVar[str] = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gate is not None and self.gate not in GATE_NAMES:
            raise ValueError(f"unknown gate {self.gate!r}; valid gates: {', '.join(GATE_NAMES)}")


BACKBONES = (
    BackboneRecord(
        "gtrxl", GTrXLConfig, "txrl.nn.trxl:build_gtrxl", ("gate", "gate_bias", *TRANSFORMER_SHARED)
    ),
    BackboneRecord("trxl_i", TrXLConfig, "txrl.nn.trxl:build_trxl_i", TRANSFORMER_SHARED),
    BackboneRecord("trxl", TrXLConfig, "txrl.nn.trxl:build_trxl", TRANSFORMER_SHARED),
)
