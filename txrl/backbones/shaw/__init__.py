"""Settings of ``shaw`` (torch model: :mod:`txrl.backbones.shaw.model`)."""

from __future__ import annotations

import dataclasses

from txrl.backbones.transformer_settings import WindowConfig, check_int, transformer_record


@dataclasses.dataclass(frozen=True)
class ShawConfig(WindowConfig):
    """Settings of ``shaw``; ``clip`` is k of eq. (2): distances >= k share an embedding."""

    clip: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("clip", self.clip, 0)


BACKBONES = (transformer_record("shaw", ShawConfig, f"{__name__}.model:build_shaw"),)
