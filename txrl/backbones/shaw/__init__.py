"""Settings of ``shaw`` (torch model: `txrl.backbones.shaw.model`)."""

from __future__ import annotations

import dataclasses
from types import ModuleType

from txrl.backbones.transformer_settings import WindowConfig, check_int, transformer_record


@dataclasses.dataclass(frozen=True)
class ShawConfig(WindowConfig):
    """Settings of ``shaw``; ``clip`` is k of eq. (2): distances >= k share an embedding."""

    clip: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("clip", self.clip, 0)


def _model() -> ModuleType:
    """The family's torch model, `txrl.backbones.shaw.model`, imported (with torch) when
    a backbone of it is built."""
    from txrl.backbones.shaw import model

    return model


BACKBONES = (
    transformer_record("shaw", ShawConfig, lambda settings: _model().build_shaw(settings)),
)
