"""Settings of ``universal`` (torch model: `txrl.backbones.universal.model`)."""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import ClassVar

from txrl.backbones.transformer_settings import CommonSettings, check_positive, transformer_record


@dataclasses.dataclass(frozen=True)
class UniversalConfig(CommonSettings):
    """Settings of ``universal``.

    ``max_steps``: the most depth steps N (default 4); ``act_epsilon``: eps of the halting
    threshold 1 - eps (default 0.01); ``halting_bias``: initial b_h (default 1.0, so that
    pondering starts short).
    """

    input_dim: int
    d_model: int = 128
    n_heads: int = 4
    memory_length: int = 64
    max_steps: int = 4
    act_epsilon: float = 0.01
    halting_bias: float = 1.0
    d_ff: int | None = None  # width of the transition MLP; None means 4 * d_model
    dropout: float = 0.0

    needs_even_width: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("max_steps", self.max_steps)
        if not 0.0 < self.act_epsilon < 1.0:
            raise ValueError(f"act_epsilon must be in (0, 1), got {self.act_epsilon!r}")


def _model() -> ModuleType:
    """The family's torch model, `txrl.backbones.universal.model`, imported (with torch) when
    a backbone of it is built."""
    from txrl.backbones.universal import model

    return model


BACKBONES = (
    transformer_record(
        "universal", UniversalConfig, lambda settings: _model().build_universal(settings)
    ),
)
