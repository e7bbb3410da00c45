"""txrl: transformer memory for reinforcement-learning agents.

``txrl.make_backbone`` builds any memory model behind the backbone protocol; the algorithms
that train the learners of :mod:`txrl.learners` are attributes by their class names
(``txrl.MemoryPPO``, ``txrl.VMPO``, ``txrl.RecurrentPPO``: the classes of
:data:`txrl.run.algorithms.ALGORITHMS`). Everything is imported on first use, so that
``import txrl.envs`` (the tasks) does not pull in torch or Stable-Baselines3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from txrl import moved_modules

__version__ = "0.1.0"


class _SourceTreeFinder(importlib.abc.MetaPathFinder):
    """Finds ``txrl.envs`` and ``txrl.agents`` in the top-level ``envs/`` and ``agents/`` of a
    source tree, and nothing else.

    The installed package maps those directories into ``txrl`` (``package-dir`` in
    pyproject.toml). In a checkout, ``txrl`` itself is the ``txrl/`` directory whenever the
    checkout root comes first on ``sys.path`` (``python -m txrl`` run there, a script or a
    notebook there), and that directory has no ``envs``/``agents``: without this finder
    ``import txrl.envs`` would fail there after a non-editable ``pip install .``, and an
    editable install of another checkout would supply that checkout's tasks. Only these two
    names are mapped: putting the root on ``txrl.__path__`` would make ``txrl.tests``,
    ``txrl.results`` and every other top-level folder importable too.
    """

    def __init__(self, locations: dict[str, Path]) -> None:
        self.locations = locations

    def find_spec(
        self,
        fullname: str,
        path: Any = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        directory = self.locations.get(fullname)
        if directory is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, directory / "__init__.py", submodule_search_locations=[str(directory)]
        )


def _find_subpackages_of_the_source_tree() -> None:
    """Install :class:`_SourceTreeFinder` if this ``txrl`` is the ``txrl/`` of a source tree."""
    package = Path(__file__).resolve().parent
    root = package.parent
    locations = {f"{__name__}.{name}": root / name for name in ("envs", "agents")}
    in_source_tree = (root / "pyproject.toml").is_file() and all(
        (directory / "__init__.py").is_file() and not (package / directory.name).exists()
        for directory in locations.values()
    )
    if in_source_tree and not any(
        getattr(finder, "locations", None) == locations for finder in sys.meta_path
    ):
        # First: an editable install's finder, later on the path, may point at another tree.
        sys.meta_path.insert(0, _SourceTreeFinder(locations))


_find_subpackages_of_the_source_tree()

# Modules that moved stay importable under their old paths, so that files an earlier release
# pickled (saved models, checkpoints) still load.
moved_modules.install()

_LAZY = {
    "Backbone": "txrl.nn",
    "BackboneOutput": "txrl.nn",
    # the registry is torch-free: torch comes with the first backbone built
    "backbone_names": "txrl.backbones",
    "make_backbone": "txrl.backbones",
    "register_backbone": "txrl.backbones",
    # the algorithms of txrl.run.algorithms.ALGORITHMS, by class name, each in its learner's folder
    "MemoryPPO": "txrl.learners.ppo.algorithm",
    "VMPO": "txrl.learners.vmpo.algorithm",
    "RecurrentPPO": "txrl.learners.recurrent_ppo.algorithm",
}

if TYPE_CHECKING:
    from txrl.backbones import backbone_names, make_backbone, register_backbone
    from txrl.learners.ppo.algorithm import MemoryPPO
    from txrl.learners.recurrent_ppo.algorithm import RecurrentPPO
    from txrl.learners.vmpo.algorithm import VMPO
    from txrl.nn import Backbone, BackboneOutput


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'txrl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


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
