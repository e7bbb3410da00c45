"""Settings of ``linformer`` (torch model: :mod:`txrl.backbones.linformer.model`)."""

from __future__ import annotations

import dataclasses

from txrl.backbones.transformer_settings import WindowConfig, check_int, transformer_record


@dataclasses.dataclass(frozen=True)
class LinformerConfig(WindowConfig):
    """Settings of ``linformer``; ``proj_dim`` is k, the projected length (>= 1)."""

    proj_dim: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("proj_dim", self.proj_dim, 1)


BACKBONES = (transformer_record("linformer", LinformerConfig, f"{__name__}.model:build_linformer"),)
