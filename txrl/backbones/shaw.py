"""Settings of ``shaw`` (implementation: :mod:`txrl.nn.variants.shaw`)."""

from __future__ import annotations

import dataclasses

from txrl.backbones.common import WindowConfig, check_int, transformer_record


@dataclasses.dataclass(frozen=True)
class ShawConfig(WindowConfig):
    """Settings of ``shaw``; ``clip`` is k of eq. (2): distances >= k share an embedding."""

    clip: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("clip", self.clip, 0)


BACKBONES = (transformer_record("shaw", ShawConfig, "txrl.nn.variants.shaw:build_shaw"),)
