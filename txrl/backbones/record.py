"""What a backbone declares to the registry: its [`BackboneRecord`][txrl.backbones.record.BackboneRecord]. No torch.

A record names a backbone, its frozen settings dataclass and its builder. A built-in family's
builder is a one-line function of its torch-free package that imports the family's ``model``
module when it is called, so declaring a backbone (and checking a config against it) imports
nothing of its torch model; [`BackboneRecord.build`][txrl.backbones.record.BackboneRecord.build] calls it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def setting_names(settings: type) -> list[str]:
    """The settings a user gives for dataclass ``settings``, in declaration order."""
    return [f.name for f in dataclasses.fields(settings) if f.init]


@dataclass(frozen=True)
class BackboneRecord:
    """One backbone: what ``policy.backbone`` names and how [`txrl.backbones.make_backbone`][txrl.backbones.make_backbone]
    builds it."""

    name: str
    """The name of [`make_backbone`][txrl.backbones.make_backbone], ``policy.backbone`` and
    ``backbone=`` of a policy."""
    settings: type
    """Frozen dataclass of its settings; ``input_dim`` is the one the policy fills in."""
    implementation: Callable[[Any], Any]
    """``implementation(settings) -> txrl.nn.Backbone``. A built-in family's imports the
    ``model`` module of its own package when it is called, not before:
    ``lambda settings: _model().build_x(settings)``, where the package's ``_model()`` is the
    one line ``from txrl.backbones.<family> import model``."""
    shared: tuple[str, ...] = ()
    """Its settings that a config's ``policy:`` section and a memory policy's constructor
    take by name (``policy.d_model``, ``MemoryPPO(..., policy_kwargs={"d_model": 64})``);
    the others go in ``backbone_kwargs``."""

    def __post_init__(self) -> None:
        if not callable(self.implementation):
            raise TypeError(
                f"backbone {self.name!r}: its implementation must be a callable "
                f"settings -> Backbone, got {self.implementation!r} (a family imports its "
                "model inside it: lambda settings: _model().build_x(settings))"
            )
        if not dataclasses.is_dataclass(self.settings):
            raise TypeError(
                f"backbone {self.name!r}: its settings must be a dataclass, got {self.settings!r}"
            )
        fields = setting_names(self.settings)
        missing = [key for key in self.shared if key not in fields]
        if missing:
            raise ValueError(
                f"backbone {self.name!r} shares {', '.join(missing)}, which its settings "
                f"{self.settings.__name__} lack; its settings: {', '.join(fields)}"
            )

    def build(self, settings: Any) -> Any:
        """The torch module for ``settings`` (a built-in family's model, and torch, are
        imported here)."""
        return self.implementation(settings)


def build_config(config_cls: type, kwargs: dict[str, Any], *, what: str) -> Any:
    """Instantiate dataclass ``config_cls`` from ``kwargs``, naming unknown keys."""
    valid = setting_names(config_cls)
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        hint = getattr(config_cls, "unknown_hint", "")
        raise ValueError(
            f"{what} has no setting {', '.join(map(repr, unknown))}; valid settings: "
            f"{', '.join(valid)}" + (f" ({hint})" if hint else "")
        )
    return config_cls(**kwargs)
