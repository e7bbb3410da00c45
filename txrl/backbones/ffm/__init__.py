"""Settings of ``ffm``, Fast and Forgetful Memory (torch model: `txrl.backbones.ffm.model`).

Morad, Kortvelesy, Liwicki and Prorok, "Reinforcement Learning with Fast and Forgetful
Memory", NeurIPS 2023: a recurrent memory whose state is m decaying traces of the input, each
read at c frequencies, so that one step is an elementwise multiply-add and a whole sequence is
a parallel scan.
"""

from __future__ import annotations

import dataclasses
import math
from types import ModuleType

from txrl.backbones.record import BackboneRecord


@dataclasses.dataclass(frozen=True)
class FFMConfig:
    """Settings of ``ffm``. The state of a layer holds 2 m c floats (real and imaginary
    parts): 256 at the defaults, as many as an LSTM of width 128 holds."""

    input_dim: int
    d_model: int = 128
    """Width of each layer's output (the paper's output size)."""
    n_layers: int = 1
    """FFM cells stacked, each reading the one below."""
    memory_size: int = 32
    """m: decaying traces per layer, each forgetting at its own rate alpha."""
    context_size: int = 4
    """c: frequencies omega at which every trace is read (the temporal context)."""
    min_period: float = 1.0
    """Shortest period, in steps, of the initial frequencies: omega = 2 pi / period, the
    periods evenly spaced from ``min_period`` to ``max_period``."""
    max_period: float = 1024.0
    """Longest period, in steps, of the initial frequencies, and the horizon of the slowest
    initial trace: it keeps ``forgotten_at`` of an input after ``max_period`` steps."""
    forgotten_at: float = 0.01
    """Fraction of an input that the slowest initial trace keeps after ``max_period`` steps;
    the fastest halves it each step, the others evenly spaced between."""

    def __post_init__(self) -> None:
        for name in ("input_dim", "d_model", "n_layers", "memory_size", "context_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        for name in ("min_period", "max_period"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number of steps, got {value!r}")
        if self.max_period < self.min_period:
            raise ValueError(
                f"max_period ({self.max_period}) must be >= min_period ({self.min_period})"
            )
        if not isinstance(self.forgotten_at, int | float) or not 0 < self.forgotten_at < 0.5:
            raise ValueError(
                "forgotten_at must be a fraction in (0, 0.5) (below the fastest trace's "
                f"one half per step), got {self.forgotten_at!r}"
            )


def _model() -> ModuleType:
    """The family's torch model, `txrl.backbones.ffm.model`, imported (with torch) when
    a backbone of it is built."""
    from txrl.backbones.ffm import model

    return model


BACKBONES = (
    BackboneRecord(
        "ffm", FFMConfig, lambda settings: _model().build_ffm(settings), ("n_layers", "d_model")
    ),
)
