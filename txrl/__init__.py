"""txrl: transformer memory for reinforcement-learning agents.

``txrl.make_backbone`` builds any memory model behind the backbone protocol; the learners
of :mod:`txrl.learners` are attributes by their class names (``txrl.MemoryPPO``,
``txrl.VMPO``, ``txrl.RecurrentPPO``). Everything is imported on first use, so that
``import txrl.envs`` (the tasks) does not pull in torch or Stable-Baselines3.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "Backbone": "txrl.nn",
    "BackboneOutput": "txrl.nn",
    "backbone_names": "txrl.nn",
    "make_backbone": "txrl.nn",
    "register_backbone": "txrl.nn",
}

if TYPE_CHECKING:
    from txrl.nn import Backbone, BackboneOutput, backbone_names, make_backbone, register_backbone
    from txrl.sb3.ppo import MemoryPPO
    from txrl.sb3.recurrent_ppo import RecurrentPPO
    from txrl.sb3.vmpo import VMPO


def _learner_classes() -> dict[str, Any]:
    from txrl.learners import learners

    return {learner.class_name: learner for learner in learners()}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if not name.startswith("_"):
        learner = _learner_classes().get(name)
        if learner is not None:
            return learner.algorithm_class()
    raise AttributeError(f"module 'txrl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY, *_learner_classes()])


__all__ = [
    "VMPO",
    "Backbone",
    "BackboneOutput",
    "MemoryPPO",
    "RecurrentPPO",
    "__version__",
    "backbone_names",
    "make_backbone",
    "register_backbone",
]
