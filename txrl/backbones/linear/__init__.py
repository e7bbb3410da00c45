"""Settings of ``linear`` and ``performer`` (torch model: `txrl.backbones.linear.model`)."""

from __future__ import annotations

import dataclasses
from types import ModuleType

from txrl.backbones.transformer_settings import (
    CommonSettings,
    check_int,
    check_positive,
    transformer_record,
)


@dataclasses.dataclass(frozen=True)
class LinearConfig(CommonSettings):
    """Settings of ``linear``.

    ``position_encoding``: add the sinusoid of the step's index in its episode to the input
    embedding. ``chunk_size``: steps per chunk in sequence mode (cost only, not the result).
    """

    input_dim: int
    d_model: int = 128
    n_layers: int = 3
    n_heads: int = 4
    d_ff: int | None = None  # width of the position-wise MLP; None means 4 * d_model
    dropout: float = 0.0
    position_encoding: bool = True
    chunk_size: int = 64

    @property
    def needs_even_width(self) -> bool:  # type: ignore[override]  # a setting here, a class constant elsewhere
        return self.position_encoding

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("chunk_size", self.chunk_size)


@dataclasses.dataclass(frozen=True)
class PerformerConfig(LinearConfig):
    """Settings of ``performer``: those of ``linear`` plus the random features.

    ``n_features``: m, random features per head (default 64). ``seed``: seed of the fixed
    feature draw. ``orthogonal``: draw the rows in orthogonal blocks (FAVOR+) rather than
    i.i.d. Gaussian.
    """

    n_features: int = 64
    seed: int = 0
    orthogonal: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("n_features", self.n_features)
        check_int("seed", self.seed)


def _model() -> ModuleType:
    """The family's torch model, `txrl.backbones.linear.model`, imported (with torch) when
    a backbone of it is built."""
    from txrl.backbones.linear import model

    return model


BACKBONES = (
    transformer_record("linear", LinearConfig, lambda settings: _model().build_linear(settings)),
    transformer_record(
        "performer", PerformerConfig, lambda settings: _model().build_performer(settings)
    ),
)
