"""Settings of ``linformer`` (torch model: `txrl.backbones.linformer.model`)."""

from __future__ import annotations

import dataclasses
from types import ModuleType

from txrl.backbones.transformer_settings import WindowConfig, check_int, transformer_record


@dataclasses.dataclass(frozen=True)
class LinformerConfig(WindowConfig):
    """Settings of ``linformer``; ``proj_dim`` is k, the projected length (>= 1)."""

    proj_dim: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("proj_dim", self.proj_dim, 1)


def _model() -> ModuleType:
    """The family's torch model, `txrl.backbones.linformer.model`, imported (with torch) when
    a backbone of it is built."""
    from txrl.backbones.linformer import model

    return model


BACKBONES = (
    transformer_record(
        "linformer", LinformerConfig, lambda settings: _model().build_linformer(settings)
    ),
)
