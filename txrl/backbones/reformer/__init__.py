"""Settings of ``reformer`` (torch model: `txrl.backbones.reformer.model`)."""

from __future__ import annotations

import dataclasses
from types import ModuleType

from txrl.backbones.transformer_settings import WindowConfig, check_int, transformer_record


@dataclasses.dataclass(frozen=True)
class ReformerConfig(WindowConfig):
    """Settings of ``reformer``.

    ``n_buckets``: hash buckets per head (even, default 4); ``seed``: seed of the fixed
    random rotations.
    """

    n_buckets: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.n_buckets, int) or self.n_buckets < 2 or self.n_buckets % 2:
            raise ValueError(
                f"n_buckets must be an even int >= 2 (h(x) = argmax([xR; -xR])), got {self.n_buckets!r}"
            )
        check_int("seed", self.seed)


def _model() -> ModuleType:
    """The family's torch model, `txrl.backbones.reformer.model`, imported (with torch) when
    a backbone of it is built."""
    from txrl.backbones.reformer import model

    return model


BACKBONES = (
    transformer_record(
        "reformer", ReformerConfig, lambda settings: _model().build_reformer(settings)
    ),
)
