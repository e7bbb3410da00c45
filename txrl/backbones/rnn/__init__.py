"""Settings of the recurrent baselines ``lstm`` and ``gru`` (torch model: `txrl.backbones.rnn.model`)."""

from __future__ import annotations

import dataclasses
from types import ModuleType

from txrl.backbones.record import BackboneRecord


@dataclasses.dataclass(frozen=True)
class RNNConfig:
    """Settings of the recurrent baselines; ``hidden_size`` is a synonym of ``d_model``."""

    input_dim: int
    d_model: int = 128
    n_layers: int = 1
    hidden_size: int | None = None

    def __post_init__(self) -> None:
        if self.hidden_size is not None:
            if self.d_model not in (128, self.hidden_size):
                raise ValueError(
                    f"hidden_size ({self.hidden_size}) and d_model ({self.d_model}) disagree; give one of them"
                )
            object.__setattr__(self, "d_model", self.hidden_size)
        for name in ("input_dim", "d_model", "n_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")


_SHARED = ("n_layers", "d_model", "hidden_size")


def _model() -> ModuleType:
    """The family's torch model, `txrl.backbones.rnn.model`, imported (with torch) when
    a backbone of it is built."""
    from txrl.backbones.rnn import model

    return model


BACKBONES = (
    BackboneRecord("lstm", RNNConfig, lambda settings: _model().build_lstm(settings), _SHARED),
    BackboneRecord("gru", RNNConfig, lambda settings: _model().build_gru(settings), _SHARED),
)
