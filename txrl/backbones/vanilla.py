"""Settings of ``transformer`` and ``transformer_learned_pe`` (implementation: :mod:`txrl.nn.variants.vanilla`)."""

from __future__ import annotations

from txrl.backbones.common import WindowConfig, transformer_record

BACKBONES = (
    transformer_record("transformer", WindowConfig, "txrl.nn.variants.vanilla:build_transformer"),
    transformer_record(
        "transformer_learned_pe",
        WindowConfig,
        "txrl.nn.variants.vanilla:build_transformer_learned_pe",
    ),
)
