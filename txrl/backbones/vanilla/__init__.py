"""Settings of ``transformer`` and ``transformer_learned_pe`` (torch model: `txrl.backbones.vanilla.model`)."""

from __future__ import annotations

from types import ModuleType

from txrl.backbones.transformer_settings import WindowConfig, transformer_record


def _model() -> ModuleType:
    """The family's torch model, `txrl.backbones.vanilla.model`, imported (with torch) when
    a backbone of it is built."""
    from txrl.backbones.vanilla import model

    return model


BACKBONES = (
    transformer_record(
        "transformer", WindowConfig, lambda settings: _model().build_transformer(settings)
    ),
    transformer_record(
        "transformer_learned_pe",
        WindowConfig,
        lambda settings: _model().build_transformer_learned_pe(settings),
    ),
)
