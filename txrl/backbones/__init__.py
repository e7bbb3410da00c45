"""The memory backbones txrl builds: one registry of name -> (settings dataclass, implementation).

Each family of backbones declares itself once, in one module of this package: the frozen
settings dataclass of each backbone (its fields are every setting a user may give, with
their defaults and checks) and a tuple ``BACKBONES`` of :class:`BackboneRecord`, each naming
its torch implementation as ``"module:callable"`` (``callable(settings) -> Backbone``);
:mod:`txrl.backbones.common` holds what the transformers' settings share.
Everything that needs the list of backbones reads it here: :func:`make_backbone`, the
config's ``policy:`` section (:mod:`txrl.config`), the memory policies' keyword arguments
(:mod:`txrl.sb3.policies`) and ``txrl compare``.

The modules here import no torch (the implementation is named, not imported, until
:func:`make_backbone` builds one), so a config is checked without it. Adding a built-in
backbone is its torch module (``txrl/nn/...``), its settings and record here, and its tests.
Outside txrl, call :func:`register_backbone`.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Built-in families first, in this order (then any other module, by name).
_ORDER = {"trxl": 0, "rnn": 1}


@dataclass(frozen=True)
class BackboneRecord:
    """One backbone: what ``policy.backbone`` names and how :func:`make_backbone` builds it."""

    name: str
    """The name of :func:`make_backbone`, ``policy.backbone`` and ``backbone=`` of a policy."""
    settings: type
    """Frozen dataclass of its settings; ``input_dim`` is the one the policy fills in."""
    implementation: str | Callable[[Any], Any]
    """``"module:callable"`` (imported by :func:`make_backbone` only), or the callable itself;
    ``callable(settings) -> txrl.nn.Backbone``."""
    shared: tuple[str, ...] = ()
    """Its settings that a config's ``policy:`` section and a memory policy's constructor
    take by name (``policy.d_model``, ``MemoryPPO(..., policy_kwargs={"d_model": 64})``);
    the others go in ``backbone_kwargs``."""

    def __post_init__(self) -> None:
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
        """The torch module for ``settings`` (imports the implementation)."""
        return self.factory()(settings)

    def factory(self) -> Callable[[Any], Any]:
        if callable(self.implementation):
            return self.implementation
        module, _, attribute = self.implementation.partition(":")
        return getattr(importlib.import_module(module), attribute)


_REGISTRY: dict[str, BackboneRecord] = {}
_LOADED = False
_BUILTIN_SHARED: tuple[str, ...] = ()


def setting_names(settings: type) -> list[str]:
    """The settings a user gives for dataclass ``settings``, in declaration order."""
    return [f.name for f in dataclasses.fields(settings) if f.init]


def _add(record: BackboneRecord) -> None:
    known = _REGISTRY.get(record.name)
    if known is not None and known != record:
        raise ValueError(f"a backbone named {record.name!r} is already registered")
    _REGISTRY[record.name] = record


def _load_builtin() -> None:
    """Register every backbone module of this package (each defines ``BACKBONES``)."""
    global _LOADED, _BUILTIN_SHARED
    if _LOADED:
        return
    _LOADED = True
    for info in sorted(
        pkgutil.iter_modules(__path__), key=lambda m: (_ORDER.get(m.name, len(_ORDER)), m.name)
    ):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for record in getattr(module, "BACKBONES", ()):
            _add(record)
    _BUILTIN_SHARED = _union(r.shared for r in _REGISTRY.values())


def _union(groups: Any) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for group in groups:
        seen.update(dict.fromkeys(group))
    return tuple(seen)


def register_backbone(
    name: str,
    config_cls: type,
    implementation: str | Callable[[Any], Any] | None = None,
    *,
    shared: tuple[str, ...] | None = None,
) -> Any:
    """Register backbone ``name`` with its settings dataclass ``config_cls``.

    The extension point for new memory models: a backbone registered here is usable by every
    learner, the configs (``policy.backbone: name``) and ``txrl compare`` through its name.
    ``implementation`` is ``callable(settings) -> Backbone`` or its ``"module:callable"``;
    without it this returns a decorator for that callable (``@register_backbone(name, cls)``),
    with it the new :class:`BackboneRecord`.
    ``shared``: its settings a config's ``policy:`` section takes by name; ``None``: those of
    its fields that the built-in backbones share (``d_model``, ``n_layers``, ...).
    """
    _load_builtin()
    if shared is None:
        fields = setting_names(config_cls) if dataclasses.is_dataclass(config_cls) else []
        shared = tuple(key for key in _BUILTIN_SHARED if key in fields)
    unknown = [key for key in shared if key not in _BUILTIN_SHARED]
    if unknown:
        raise ValueError(
            f"backbone {name!r}: shared settings must be among {', '.join(_BUILTIN_SHARED)} "
            f"(the policy section's fields), got {', '.join(unknown)}; give the others in "
            "backbone_kwargs"
        )

    def add(factory: str | Callable[[Any], Any]) -> BackboneRecord:
        if name in _REGISTRY:
            raise ValueError(f"a backbone named {name!r} is already registered")
        record = BackboneRecord(name, config_cls, factory, tuple(shared))
        _REGISTRY[name] = record
        return record

    if implementation is not None:
        return add(implementation)

    def decorate(factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
        add(factory)
        return factory

    return decorate


def backbone_names() -> list[str]:
    """Names accepted by :func:`make_backbone`."""
    _load_builtin()
    return sorted(_REGISTRY)


def get_backbone(name: str) -> BackboneRecord:
    """The record of backbone ``name``; an unknown name is a ValueError listing the valid ones."""
    _load_builtin()
    if name not in _REGISTRY:
        raise ValueError(
            f"unknown backbone {name!r}; valid backbones: {', '.join(sorted(_REGISTRY))}"
        )
    return _REGISTRY[name]


def backbone_config_class(name: str) -> type:
    """The frozen settings dataclass of backbone ``name``."""
    return get_backbone(name).settings


def shared_settings() -> tuple[str, ...]:
    """The settings that a config's ``policy:`` section and the memory policies take by name:
    those the backbones' records share (in the order they first appear)."""
    _load_builtin()
    return _union(r.shared for r in _REGISTRY.values())


def make_backbone(name: str, **kwargs: Any) -> Any:
    """Build backbone ``name`` from keyword settings (imports torch).

    Common settings: ``input_dim, d_model, n_layers, n_heads, memory_length, gate,
    gate_bias``; each backbone accepts the fields of its settings dataclass (see
    :func:`backbone_config_class`). A setting the backbone does not have is an error that
    names it and lists the valid ones.
    """
    record = get_backbone(name)
    config = build_config(record.settings, kwargs, what=f"backbone {name!r}")
    return record.build(config)


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


__all__ = [
    "BackboneRecord",
    "backbone_config_class",
    "backbone_names",
    "build_config",
    "get_backbone",
    "make_backbone",
    "register_backbone",
    "setting_names",
    "shared_settings",
]
