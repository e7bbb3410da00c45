"""Settings of ``transformer`` and ``transformer_learned_pe`` (torch model: :mod:`txrl.backbones.vanilla.model`)."""

from __future__ import annotations

from txrl.backbones.transformer_settings import WindowConfig, transformer_record

BACKBONES = (
    transformer_record("transformer", WindowConfig, f"{__name__}.model:build_transformer"),
    transformer_record(
        "transformer_learned_pe",
        WindowConfig,
        f"{__name__}.model:build_transformer_learned_pe",
    ),
)
