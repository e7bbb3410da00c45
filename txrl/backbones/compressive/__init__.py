"""Settings of ``compressive`` (torch model: `txrl.backbones.compressive.model`)."""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import ClassVar

from txrl.backbones.transformer_settings import WindowConfig, check_positive, transformer_record

COMPRESSIONS = ("pool", "conv")


@dataclasses.dataclass(frozen=True)
class CompressiveConfig(WindowConfig):
    """Settings of ``compressive``.

    ``compressed_length``: Mc compressed slots per layer (default 32);
    ``compression_rate``: c evicted steps per compressed slot (default 3);
    ``compression``: ``"pool"`` or ``"conv"`` (default ``"conv"``, the paper's best).
    """

    compressed_length: int = 32
    compression_rate: int = 3
    compression: str = "conv"

    needs_even_width: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("compressed_length", self.compressed_length)
        check_positive("compression_rate", self.compression_rate)
        if self.compression not in COMPRESSIONS:
            raise ValueError(
                f"unknown compression {self.compression!r}; valid compressions: {', '.join(COMPRESSIONS)}"
            )


def _model() -> ModuleType:
    """The family's torch model, `txrl.backbones.compressive.model`, imported (with torch) when
    a backbone of it is built."""
    from txrl.backbones.compressive import model

    return model


BACKBONES = (
    transformer_record(
        "compressive", CompressiveConfig, lambda settings: _model().build_compressive(settings)
    ),
)
