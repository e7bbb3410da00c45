"""txrl: transformer memory for reinforcement-learning agents.

``txrl.make_backbone`` builds any memory model behind the backbone protocol; the learners
(``txrl.MemoryPPO``, ``txrl.VMPO``) are imported lazily so that the pure-torch core does
not pull in Stable-Baselines3.
"""

from __future__ import annotations

from typing import Any

from txrl.nn import Backbone, BackboneOutput, backbone_names, make_backbone, register_backbone

__version__ = "0.1.0"

_LAZY = {
    "MemoryPPO": "txrl.sb3.ppo",
    "VMPO": "txrl.sb3.vmpo",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'txrl' has no attribute {name!r}")


__all__ = [
    "Backbone",
    "BackboneOutput",
    "__version__",
    "backbone_names",
    "make_backbone",
    "register_backbone",
]
