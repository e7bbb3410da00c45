"""A Griffe extension for the API reference: ``txrl.envs`` and ``txrl.agents`` live in
``envs/`` and ``agents/`` at the top of the repository and install as subpackages of
``txrl`` (``package-dir`` in ``pyproject.toml``). Griffe reads packages from their folders,
where ``txrl/`` has no ``envs``; this extension loads each folder and hangs it under
``txrl`` by its installed name, so the pages can name ``txrl.envs.TMazeEnv`` as users
import it. ``mkdocs.yml`` loads it (``extensions:`` of the Python handler).
"""

from __future__ import annotations

from typing import Any

import griffe

#: Installed name under ``txrl`` -> the folder it is installed from, as in ``pyproject.toml``.
EXTERNAL_SUBPACKAGES = {"envs": "envs", "agents": "agents"}


class ExternalSubpackages(griffe.Extension):
    """Attach ``envs/`` and ``agents/`` to the loaded ``txrl`` package."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.path != "txrl":
            return
        for name, folder in EXTERNAL_SUBPACKAGES.items():
            pkg.set_member(name, loader.load(folder, try_relative_path=False))
