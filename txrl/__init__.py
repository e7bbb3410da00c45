"""txrl: transformer memory for reinforcement-learning agents.

``txrl.make_backbone`` builds any memory model behind the backbone protocol; the algorithms
that train the learners of [`txrl.learners`][txrl.learners] are attributes by their class names
(``txrl.MemoryPPO``, ``txrl.VMPO``, ``txrl.RecurrentPPO``: the classes of
[`txrl.run.algorithms.ALGORITHMS`][txrl.run.algorithms.ALGORITHMS]). Everything is imported on first use
(`__getattr__`), so that ``import txrl.envs`` (the tasks) does not pull in torch or
Stable-Baselines3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from txrl import moved_modules, source_tree

__version__ = "0.1.0"

# Two import finders, each in its own module with the test that shows what breaks without it:
# in a checkout, txrl.envs and txrl.agents are its top-level envs/ and agents/
# (tests/test_packaging.py), and modules that moved stay importable under their old paths, so
# that files an earlier release pickled (saved models, checkpoints) still load
# (tests/test_checkpoint_moves.py).
source_tree.install()
moved_modules.install()

if TYPE_CHECKING:
    from txrl.backbones import backbone_names, make_backbone, register_backbone
    from txrl.learners.ppo.algorithm import MemoryPPO
    from txrl.learners.recurrent_ppo.algorithm import RecurrentPPO
    from txrl.learners.vmpo.algorithm import VMPO
    from txrl.nn import Backbone, BackboneOutput


def __getattr__(name: str) -> Any:
    """The names of ``__all__`` below, each imported when it is first read."""
    if name == "MemoryPPO":
        from txrl.learners.ppo.algorithm import MemoryPPO

        return MemoryPPO
    if name == "VMPO":
        from txrl.learners.vmpo.algorithm import VMPO

        return VMPO
    if name == "RecurrentPPO":
        from txrl.learners.recurrent_ppo.algorithm import RecurrentPPO

        return RecurrentPPO
    if name in ("backbone_names", "make_backbone", "register_backbone"):
        # the registry is torch-free: torch comes with the first backbone built
        from txrl import backbones

        return getattr(backbones, name)
    if name in ("Backbone", "BackboneOutput"):
        from txrl import nn

        return getattr(nn, name)
    raise AttributeError(f"module 'txrl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
