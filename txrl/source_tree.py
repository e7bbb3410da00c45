"""In a checkout, ``txrl.envs`` and ``txrl.agents`` are the top-level ``envs/`` and ``agents/``.

The installed package maps those directories into ``txrl`` (``package-dir`` in
pyproject.toml). In a checkout, ``txrl`` itself is the ``txrl/`` directory whenever the
checkout root comes first on ``sys.path`` (``python -m txrl`` run there, a script or a
notebook there), and that directory has no ``envs``/``agents``: without the finder installed
here ``import txrl.envs`` would fail there after a non-editable ``pip install .``, and an
editable install of another checkout would supply that checkout's tasks
(``tests/test_packaging.py::test_checkout_root_works_after_a_regular_install`` runs both).
Only these two names are mapped: putting the root on ``txrl.__path__`` would make
``txrl.tests``, ``txrl.results`` and every other top-level folder importable too.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


class _SourceTreeFinder(importlib.abc.MetaPathFinder):
    """Finds ``txrl.envs`` and ``txrl.agents`` in the top-level ``envs/`` and ``agents/`` of a
    source tree, and nothing else."""

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


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once) if this ``txrl`` is the ``txrl/`` of
    a source tree: first, because an editable install's finder, later on the path, may point
    at another tree."""
    package = Path(__file__).resolve().parent
    root = package.parent
    locations = {f"txrl.{name}": root / name for name in ("envs", "agents")}
    in_source_tree = (root / "pyproject.toml").is_file() and all(
        (directory / "__init__.py").is_file() and not (package / directory.name).exists()
        for directory in locations.values()
    )
    if in_source_tree and not any(
        getattr(finder, "locations", None) == locations for finder in sys.meta_path
    ):
        sys.meta_path.insert(0, _SourceTreeFinder(locations))


__all__ = ["install"]
