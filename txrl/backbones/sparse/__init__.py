"""Settings of ``sparse_strided`` and ``sparse_fixed`` (torch model: `txrl.backbones.sparse.model`)."""

from __future__ import annotations

import dataclasses
import math
from types import ModuleType
from typing import ClassVar

from txrl.backbones.transformer_settings import WindowConfig, check_int, transformer_record

PATTERNS = ("strided", "fixed")
COMBINE_MODES = ("heads", "union", "layers")


@dataclasses.dataclass(frozen=True)
class SparseConfig(WindowConfig):
    """Settings of ``sparse_strided`` and ``sparse_fixed``.

    ``stride``: l (None: round(sqrt(memory_length + 1)), at least 1); ``summary``: c, the
    summary steps per block of the fixed pattern (1 <= c <= l); ``combine``: ``"heads"``,
    ``"union"`` or ``"layers"`` (module docstring).
    """

    stride: int | None = None
    summary: int = 1
    combine: str = "heads"

    needs_even_width: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stride is not None:
            check_int("stride", self.stride, 1)
        check_int("summary", self.summary, 1)
        if self.summary > self.stride_length:
            raise ValueError(
                f"summary ({self.summary}) must be at most the stride ({self.stride_length})"
            )
        if self.combine not in COMBINE_MODES:
            raise ValueError(f"unknown combine {self.combine!r}; valid: {', '.join(COMBINE_MODES)}")

    @property
    def stride_length(self) -> int:
        """l: ``stride``, or round(sqrt(memory_length + 1)) when None."""
        if self.stride is not None:
            return self.stride
        return max(1, round(math.sqrt(self.memory_length + 1)))


def _model() -> ModuleType:
    """The family's torch model, `txrl.backbones.sparse.model`, imported (with torch) when
    a backbone of it is built."""
    from txrl.backbones.sparse import model

    return model


BACKBONES = (
    transformer_record(
        "sparse_strided", SparseConfig, lambda settings: _model().build_sparse_strided(settings)
    ),
    transformer_record(
        "sparse_fixed", SparseConfig, lambda settings: _model().build_sparse_fixed(settings)
    ),
)
