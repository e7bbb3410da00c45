"""MiniGrid's Memory task with its egocentric view memoised: the same observations, faster.

MiniGrid builds each observation in Python (slice the grid around the agent, rotate it,
trace visibility, encode), which is most of the time of a step of ``MemoryEnv``
(``bench/env_speed.py`` times both, ``--env-kwarg cache_views=false`` the uncached env). In
the Memory task nothing in the grid changes during an episode (pick-up is mapped to toggle,
and toggling a key or a ball does nothing; the agent never carries anything), so the view
is a function of the episode's layout, the agent's cell and its heading.
`CachedViewMemoryEnv` keys MiniGrid's own ``gen_obs`` on exactly that and computes
each view once: a cache miss is upstream's code, a hit a copy of what it returned.

The layout key is the grid's own encoding, taken once per episode, so any change of the
grid's contents (a new layout, a random hallway length) is a new key; anything else that
``gen_obs`` reads (what the agent carries, the view size, wall transparency) is in the key
as well. ``tests/envs/test_minigrid_memory.py`` steps this env and upstream's side by side
and compares every observation, reward and flag.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from minigrid.envs.memory import MemoryEnv

#: Layouts kept before the cache starts again (S17Random has at most 4 x 11 layouts).
MAX_LAYOUTS = 256


class CachedViewMemoryEnv(MemoryEnv):
    """``minigrid.envs.MemoryEnv`` whose observations are memoised (see the module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._views: dict[bytes, dict[tuple[Any, ...], np.ndarray]] = {}
        self._layout: dict[tuple[Any, ...], np.ndarray] | None = None

    def _gen_grid(self, width: int, height: int) -> None:
        super()._gen_grid(width, height)
        self._layout = None  # a new grid: its key is taken on the first observation

    def _layout_views(self) -> dict[tuple[Any, ...], np.ndarray]:
        if self._layout is None:
            key = self.grid.encode().tobytes() + bytes((self.width, self.height))
            if key not in self._views and len(self._views) >= MAX_LAYOUTS:
                self._views.clear()
            self._layout = self._views.setdefault(key, {})
        return self._layout

    def gen_obs(self) -> dict[str, Any]:
        carrying = None if self.carrying is None else self.carrying.encode()
        key = (
            int(self.agent_pos[0]),
            int(self.agent_pos[1]),
            int(self.agent_dir),
            carrying,
            self.agent_view_size,
            self.see_through_walls,
        )
        views = self._layout_views()
        image = views.get(key)
        if image is None:
            image = super().gen_obs()["image"]
            views[key] = image
        return {"image": image.copy(), "direction": self.agent_dir, "mission": self.mission}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        # Only pick-up, drop and toggle could change a grid: by putting or removing an object
        # (a cell of ``grid.grid`` replaced) or by toggling the one in front (its state). In
        # this task none does (pick-up is toggle, and keys and balls ignore it). Should one
        # ever change it (a subclass, a new upstream version), the layout is keyed anew and
        # the observation made again.
        if action in (self.actions.left, self.actions.right, self.actions.forward):
            return super().step(action)
        cells = list(self.grid.grid)
        front = self.grid.get(*self.front_pos)
        state = None if front is None else front.encode()
        obs, reward, terminated, truncated, info = super().step(action)
        replaced = any(a is not b for a, b in zip(cells, self.grid.grid, strict=True))
        if replaced or (front is not None and front.encode() != state):
            self._layout = None
            obs = self.gen_obs()
        return obs, reward, terminated, truncated, info
