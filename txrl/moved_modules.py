"""Old module paths of txrl, kept importable, so that files an earlier release pickled still load.

A saved model (SB3's archive pickles the class of its rollout buffer, V-MPO's loss settings
and whatever else the algorithm keeps) and a checkpoint's resume state name each class by
its module's path. When a module moves, [`MOVED_MODULES`][txrl.moved_modules.MOVED_MODULES] maps its old path to the
module that holds those classes now, and [`install`][txrl.moved_modules.install] (called by ``import txrl``) puts a
finder on ``sys.meta_path`` that imports the new module under the old name. So
``MemoryPPO.load(path)``, ``txrl eval`` and ``txrl train --resume`` read those files as they
read new ones, and ``import txrl.rl.buffer`` in old user code still works, with a
`DeprecationWarning` that names the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

#: Old module path -> the module that holds its classes now. A module whose classes went to
#: several modules maps to the one holding those a saved model or resume state pickles.
MOVED_MODULES = {
    "txrl.checkpoint": "txrl.run.checkpoint",
    "txrl.rl.buffer": "txrl.sb3.buffer",
    "txrl.rl.vmpo_loss": "txrl.learners.vmpo.settings",
    "txrl.rl.vmpo_settings": "txrl.learners.vmpo.settings",
    "txrl.sb3.ppo": "txrl.learners.ppo.algorithm",
    "txrl.sb3.vmpo": "txrl.learners.vmpo.algorithm",
    "txrl.sb3.recurrent_ppo": "txrl.learners.recurrent_ppo.algorithm",
}


def _old_packages() -> set[str]:
    """Packages that exist only as parents of an old path (``txrl.rl``)."""
    parents: set[str] = set()
    for old in MOVED_MODULES:
        parts = old.split(".")
        parents.update(".".join(parts[:i]) for i in range(2, len(parts)))
    return parents


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module that holds its classes now, or an empty package."""

    def __init__(self, new: str | None) -> None:
        self.new = new
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        if self.new is None:
            return None  # the default: an empty module object (the spec makes it a package)
        warnings.warn(
            f"{spec.name} moved to {self.new}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        if self.spec is not None:
            module.__spec__ = self.spec  # the import system set the old path's spec on it


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds each old path of [`MOVED_MODULES`][txrl.moved_modules.MOVED_MODULES] and the packages above it that are gone.

    It is the last finder on ``sys.meta_path``, asked only for what no other finder found:
    a module that exists under an old path is imported as itself."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in MOVED_MODULES:
            return importlib.machinery.ModuleSpec(fullname, _Alias(MOVED_MODULES[fullname]))
        if fullname in _old_packages():
            return importlib.machinery.ModuleSpec(fullname, _Alias(None), is_package=True)
        return None


def install() -> None:
    """Put the finder of the old paths on ``sys.meta_path``, last (once)."""
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())


__all__ = ["MOVED_MODULES", "install"]
