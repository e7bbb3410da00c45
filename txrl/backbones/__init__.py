"""The memory backbones txrl builds, one family per package, and their registry.

A family is a package of its own, ``txrl/backbones/<family>/``:

* ``__init__.py``, torch-free: the frozen settings dataclass of each backbone (its fields
  are every setting a user may give, with their defaults and checks) and a tuple
  ``BACKBONES`` of [`BackboneRecord`][txrl.backbones.BackboneRecord], one per backbone of the family;
* ``model.py``: its torch model, built from the papers' computation in `txrl.nn`
  (attention, blocks, gates, memory). The package's ``__init__`` holds the one function that
  imports it, ``_model()`` (``from txrl.backbones.<family> import model``), and each record
  builds through it, ``lambda settings: _model().build_x(settings)``, so the model module
  is imported only when [`make_backbone`][txrl.backbones.make_backbone] builds one.

[`BUILTIN_BACKBONES`][txrl.backbones.BUILTIN_BACKBONES] below is the registry's whole table: the built-in families,
imported by name, and their records in order. [`txrl.backbones.transformer_settings`][txrl.backbones.transformer_settings]
holds what the transformer families' settings share; `txrl.backbones.record` the
record itself. Everything that needs the list of backbones reads it here:
[`make_backbone`][txrl.backbones.make_backbone], the config's ``policy:`` section ([`txrl.config`][txrl.config]), the memory
policies' keyword arguments (`txrl.sb3.policies`) and ``txrl compare``.

Nothing imported here imports torch, so a config is checked without it. Adding a built-in
family is its package here (settings, records, ``model.py``), its row in
[`BUILTIN_BACKBONES`][txrl.backbones.BUILTIN_BACKBONES] and its test (``tests/backbones/test_<family>.py``). Outside
txrl, call [`register_backbone`][txrl.backbones.register_backbone].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from txrl.backbones import (
    adaptive_span,
    compressive,
    ffm,
    linear,
    linformer,
    reformer,
    rnn,
    shaw,
    sparse,
    trxl,
    universal,
    vanilla,
)
from txrl.backbones.record import BackboneRecord, build_config, setting_names

#: The backbones txrl ships, family by family, in the order they are listed (``gtrxl`` first:
#: the default). Each row is a family's records (its package's ``BACKBONES``).
BUILTIN_BACKBONES: tuple[BackboneRecord, ...] = (
    *trxl.BACKBONES,  # gtrxl, trxl_i, trxl
    *rnn.BACKBONES,  # lstm, gru
    *vanilla.BACKBONES,  # transformer, transformer_learned_pe
    *shaw.BACKBONES,  # shaw
    *adaptive_span.BACKBONES,  # adaptive_span
    *compressive.BACKBONES,  # compressive
    *universal.BACKBONES,  # universal
    *sparse.BACKBONES,  # sparse_strided, sparse_fixed
    *reformer.BACKBONES,  # reformer
    *linear.BACKBONES,  # linear, performer
    *linformer.BACKBONES,  # linformer
    *ffm.BACKBONES,  # ffm
)


def _union(groups: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for group in groups:
        seen.update(dict.fromkeys(group))
    return tuple(seen)


def _table(records: Iterable[BackboneRecord]) -> dict[str, BackboneRecord]:
    table: dict[str, BackboneRecord] = {}
    for record in records:
        if record.name in table:
            raise ValueError(f"two backbones are named {record.name!r}")
        table[record.name] = record
    return table


_REGISTRY: dict[str, BackboneRecord] = _table(BUILTIN_BACKBONES)
#: The settings the built-in backbones share: those a registered backbone may share too.
_BUILTIN_SHARED = _union(record.shared for record in BUILTIN_BACKBONES)


def register_backbone(
    name: str,
    config_cls: type,
    implementation: Callable[[Any], Any] | None = None,
    *,
    shared: tuple[str, ...] | None = None,
) -> Any:
    """Register backbone ``name`` with its settings dataclass ``config_cls``.

    The extension point for new memory models: a backbone registered here is usable by every
    learner, the configs (``policy.backbone: name``) and ``txrl compare`` through its name.
    ``implementation`` is ``callable(settings) -> Backbone``; without it this returns a
    decorator for that callable (``@register_backbone(name, cls)``), with it the new
    [`BackboneRecord`][txrl.backbones.BackboneRecord].
    ``shared``: its settings a config's ``policy:`` section takes by name; ``None``: those of
    its fields that the built-in backbones share (``d_model``, ``n_layers``, ...).
    """
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

    def add(factory: Callable[[Any], Any]) -> BackboneRecord:
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
    """Names accepted by [`make_backbone`][txrl.backbones.make_backbone]."""
    return sorted(_REGISTRY)


def get_backbone(name: str) -> BackboneRecord:
    """The record of backbone ``name``; an unknown name is a ValueError listing the valid ones."""
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
    return _union(record.shared for record in _REGISTRY.values())


def make_backbone(name: str, **kwargs: Any) -> Any:
    """Build backbone ``name`` from keyword settings (imports torch).

    Common settings: ``input_dim, d_model, n_layers, n_heads, memory_length, gate,
    gate_bias``; each backbone accepts the fields of its settings dataclass (see
    [`backbone_config_class`][txrl.backbones.backbone_config_class]). A setting the backbone does not have is an error that
    names it and lists the valid ones.
    """
    record = get_backbone(name)
    config = build_config(record.settings, kwargs, what=f"backbone {name!r}")
    return record.build(config)


__all__ = [
    "BUILTIN_BACKBONES",
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
