"""Small settings for building any registered backbone in tests."""

from __future__ import annotations

import dataclasses
from typing import Any

from txrl.backbones import backbone_config_class, make_backbone
from txrl.nn.protocol import Backbone

SMALL = {"input_dim": 5, "d_model": 16, "n_layers": 2, "n_heads": 2, "memory_length": 4}


def small_backbone(name: str, **overrides: Any) -> Backbone:
    """Backbone ``name`` with the small common settings its config accepts, plus ``overrides``."""
    fields = {f.name for f in dataclasses.fields(backbone_config_class(name))}
    kwargs = {k: v for k, v in SMALL.items() if k in fields}
    kwargs.update(overrides)
    return make_backbone(name, **kwargs)
