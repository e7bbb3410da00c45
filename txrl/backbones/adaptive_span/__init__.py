"""Settings of ``adaptive_span`` (torch model: `txrl.backbones.adaptive_span.model`)."""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import ClassVar

from txrl.backbones.transformer_settings import WindowConfig, transformer_record


@dataclasses.dataclass(frozen=True)
class AdaptiveSpanConfig(WindowConfig):
    """Settings of ``adaptive_span``.

    ``span_ramp``: R, the width of the soft mask's ramp in steps (> 0); ``span_init``: the
    initial span as a fraction of ``memory_length``, in (0, 1).
    """

    span_ramp: float = 4.0
    span_init: float = 0.5

    needs_even_width: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        ramp = self.span_ramp
        if isinstance(ramp, bool) or not isinstance(ramp, int | float) or not ramp > 0:
            raise ValueError(f"span_ramp must be a number > 0, got {ramp!r}")
        init = self.span_init
        if isinstance(init, bool) or not isinstance(init, int | float) or not 0.0 < init < 1.0:
            raise ValueError(
                f"span_init must be in (0, 1) (a fraction of memory_length), got {init!r}"
            )


def _model() -> ModuleType:
    """The family's torch model, `txrl.backbones.adaptive_span.model`, imported (with torch) when
    a backbone of it is built."""
    from txrl.backbones.adaptive_span import model

    return model


BACKBONES = (
    transformer_record(
        "adaptive_span", AdaptiveSpanConfig, lambda settings: _model().build_adaptive_span(settings)
    ),
)
