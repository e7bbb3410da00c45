"""Settings shared by the transformer families: validation and derived values, written once.

Every transformer config (TrXL's and the variants') is a frozen dataclass that inherits
[`CommonSettings`][txrl.backbones.transformer_settings.CommonSettings], so a bad width, head count, memory length, MLP width or dropout gets
the same error naming the setting, its value and what is valid, whichever backbone it is.
No torch: the config checks read these classes, and each family's ``model`` module builds
from them (the blocks of [`txrl.nn.blocks`][txrl.nn.blocks] read ``d_model``, ``ff_width`` and
``dropout`` of them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from txrl.backbones.record import BackboneRecord, setting_names

#: The transformer settings a config's ``policy:`` section takes by name (the others of a
#: backbone go in ``policy.backbone_kwargs``).
TRANSFORMER_SHARED = ("n_layers", "d_model", "n_heads", "memory_length")


def check_int(name: str, value: Any, minimum: int | None = None, rule: str | None = None) -> None:
    """Raise a ValueError naming ``name``, its value and the valid range unless ``value`` is an
    int (not a bool) and at least ``minimum``; ``rule`` words the range (default "an int >= m")."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if not is_int or (minimum is not None and value < minimum):
        if rule is None:
            rule = "an int" if minimum is None else f"an int >= {minimum}"
        raise ValueError(f"{name} must be {rule}, got {value!r}")


def check_positive(name: str, value: Any) -> None:
    """Raise a ValueError naming ``name`` and its value unless it is an int >= 1."""
    check_int(name, value, 1, "a positive int")


class CommonSettings:
    """Validation and derived values of the settings every transformer backbone shares, for
    frozen dataclasses.

    Checks those of ``input_dim, d_model, n_layers, n_heads, memory_length, d_ff, dropout``
    that the dataclass has (``universal`` has no ``n_layers``, ``linear`` no
    ``memory_length``). A subclass with settings of its own extends ``__post_init__`` and
    calls this one first; ``needs_even_width`` (a class constant or a property) asks for an
    even ``d_model``, for the sinusoid encoding.
    """

    # fields of every subclass; n_layers and memory_length are fields of most
    input_dim: int
    d_model: int
    n_heads: int
    d_ff: int | None
    dropout: float
    needs_even_width: ClassVar[bool] = False

    def __post_init__(self) -> None:
        fields = {f.name for f in dataclasses.fields(self)}  # type: ignore[arg-type]  # subclasses are dataclasses
        for name in ("input_dim", "d_model", "n_layers", "n_heads", "memory_length"):
            if name not in fields:
                continue
            if name == "memory_length":
                check_int(name, getattr(self, name), 0)
            else:
                check_positive(name, getattr(self, name))
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )
        if self.needs_even_width and self.d_model % 2:
            raise ValueError(f"d_model must be even for the sinusoid encoding, got {self.d_model}")
        if self.d_ff is not None:
            check_int("d_ff", self.d_ff, 1, "a positive int or None")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")

    @property
    def ff_width(self) -> int:
        """Width of the position-wise MLP: ``d_ff``, or 4 * d_model when None."""
        return self.d_ff if self.d_ff is not None else 4 * self.d_model

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


@dataclasses.dataclass(frozen=True)
class WindowConfig(CommonSettings):
    """Common settings of the window-memory variants (and all the settings of ``transformer``).

    ``memory_length`` M: steps kept in memory (each step sees the M before it and itself);
    ``d_ff``: width of the position-wise MLP (None: 4 * d_model); ``dropout`` default 0.
    """

    input_dim: int
    d_model: int = 128
    n_layers: int = 3
    n_heads: int = 4
    memory_length: int = 64
    d_ff: int | None = None
    dropout: float = 0.0


def transformer_record(
    name: str, settings: type, implementation: Callable[[Any], Any]
) -> BackboneRecord:
    """The record of a transformer backbone: those of `TRANSFORMER_SHARED` that its
    ``settings`` have are shared (``universal`` has no ``n_layers``, ``linear`` no
    ``memory_length``)."""
    fields = setting_names(settings)
    shared = tuple(key for key in TRANSFORMER_SHARED if key in fields)
    return BackboneRecord(name, settings, implementation, shared)
