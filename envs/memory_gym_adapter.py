"""Memory Gym tasks as Gymnasium environments that Stable-Baselines3 accepts.

Memory Gym (Pleines, Pallasch, Zimmer and Preuss 2025, "Memory Gym: Towards Endless Tasks to
Benchmark Memory Capabilities of Agents", JMLR) is a suite of pixel tasks built to test the
memory of transformer and recurrent agents: Mortar Mayhem (remember a shown sequence of
commands, then carry them out), Mystery Path (find an invisible path, remembering where one
fell off) and Searing Spotlights (remember where the agent, coin and exit are once the lights
go out), each in a full version, a Grid version (discrete moves on a grid, Discrete(4)
actions; Searing Spotlights has none) and an Endless version.

It is an optional extra of txrl: memory-gym 1.0.2 pins gymnasium 0.29 and pygame 2.4, so it is
installed without its dependencies (see `MEMORY_GYM_INSTALL_HINT`); this module imports
it only when an env is made, so ``import txrl.envs`` works without it.

Ids: ``txrl/memorygym-<Name>-v0`` where ``<Name>`` is Memory Gym's own id without ``-v0``
(`MEMORY_GYM_ENV_NAMES`), e.g. ``txrl/memorygym-MortarMayhem-Grid-v0`` for
``MortarMayhem-Grid-v0``. Observations are Memory Gym's 84x84x3 uint8 frames (pygame's
column-major layout, so the image is transposed; ``render()`` gives it upright), and for
``MortarMayhemB`` a ``Dict`` that adds the one-hot command sequence; actions are
``Discrete(4)`` (Grid versions and Endless Mystery Path) or ``MultiDiscrete([3, 3])``.

What the adapter ([`MemoryGymTask`][txrl.envs.memory_gym_adapter.MemoryGymTask]) adds, and why:

* ``reset_params``: Memory Gym reads its task settings (``max_steps``, ``command_count``,
  ...) from ``reset(options=...)``, which vectorised envs never pass, so ``gym.make`` takes
  them once as a kwarg; options given to ``reset`` still override them for one episode.
  Unknown keys fail at construction with the valid ones listed.
* ``info["is_success"]`` on the last step, from Memory Gym's ``info["success"]`` (Mortar
  Mayhem: every command carried out, where upstream's ``success`` is 1 even when the agent
  missed the last one, so the adapter also checks that last position; Mystery Path: goal reached; Searing Spotlights: coin
  collected and exit reached). The Endless versions define no success (an episode lasts
  until the agent fails), so the key is left out there.
* Mortar Mayhem B's ``vector_observation`` is copied on every call: upstream returns one
  array each time, so an observation a user keeps would change under them.
* ``render()``: every Memory Gym env draws on pygame's one display surface per process, so
  upstream ``render("rgb_array")`` returns the frame of whichever env drew last; here it
  returns this env's own last frame, upright.
* ``close()``: upstream calls ``pygame.quit()``, which kills the display of every other Memory
  Gym env in the process (e.g. the second env of a ``DummyVecEnv``); here pygame is shut down
  only when the last open one closes, and a closed env reopens the display on ``reset``.

Episodes end as Memory Gym ends them: its time limits (``max_steps``) are reported as
``terminated``, as in the authors' training code, and the tasks never set ``truncated``.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from ._validation import check_render_mode

#: Memory Gym's ids without ``-v0``, mapped to the ``module:class`` that implements each.
MEMORY_GYM_ENTRY_POINTS: dict[str, str] = {
    "MortarMayhem": "mortar_mayhem:MortarMayhemEnv",
    "MortarMayhem-Grid": "mortar_mayhem_grid:GridMortarMayhemEnv",
    "Endless-MortarMayhem": "endless_mortar_mayhem:EndlessMortarMayhemEnv",
    "MortarMayhemB": "mortar_mayhem_b:MortarMayhemTaskBEnv",
    "MortarMayhemB-Grid": "mortar_mayhem_b_grid:GridMortarMayhemTaskBEnv",
    "MysteryPath": "mystery_path:MysteryPathEnv",
    "MysteryPath-Grid": "mystery_path_grid:GridMysteryPathEnv",
    "Endless-MysteryPath": "endless_mystery_path:EndlessMysteryPathEnv",
    "SearingSpotlights": "searing_spotlights:SearingSpotlightsEnv",
    "Endless-SearingSpotlights": "endless_searing_spotlights:EndlessSearingSpotlightsEnv",
}
MEMORY_GYM_ENV_NAMES: tuple[str, ...] = tuple(MEMORY_GYM_ENTRY_POINTS)

#: The install line: the extra brings a pygame that works with gymnasium 1.x, then memory-gym
#: itself goes in without its pins (gymnasium==0.29, pygame==2.4), which would downgrade both.
MEMORY_GYM_INSTALL_HINT = 'pip install ".[memorygym]" && pip install --no-deps memory-gym==1.0.2'

# Open Memory Gym envs of this process; pygame is shut down when the last one closes.
_open_envs = 0


def memory_gym_env_id(name: str) -> str:
    """The txrl id of the Memory Gym task ``name`` (Memory Gym's id without ``-v0``)."""
    return f"txrl/memorygym-{name}-v0"


def import_memory_gym_class(name: str) -> type[gym.Env]:
    """Import the class of Memory Gym task ``name``, or raise ``ImportError`` naming the
    install line."""
    module, _, cls = MEMORY_GYM_ENTRY_POINTS[name].partition(":")
    # Before pygame is imported: no audio device is needed (without this SDL prints ALSA
    # errors on machines without sound), and no banner on stdout.
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        return getattr(importlib.import_module(f"memory_gym.{module}"), cls)
    except ImportError as e:
        raise ImportError(
            f"The Memory Gym tasks need the optional dependency memory-gym, which is not "
            f"installed ({e}). Install it with: {MEMORY_GYM_INSTALL_HINT} (--no-deps because "
            f"memory-gym pins gymnasium==0.29 and pygame==2.4, which would replace the "
            f"versions txrl needs)"
        ) from e


class MemoryGymTask(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """A Memory Gym env with default reset parameters, ``info["is_success"]``, its own
    rendered frame and a close that leaves other Memory Gym envs of the process working.

    Args:
        env: a raw Memory Gym env.
        reset_params: the task's reset parameters for every episode (keys of its
            ``default_reset_parameters``); ``reset(options=...)`` overrides them.
        has_success: whether the task reports ``info["success"]`` at the end of an episode.
        check_last_command: Mortar Mayhem: count a success only if the agent stood on the
            target of the last command (upstream's ``success`` does not check it).
    """

    def __init__(
        self,
        env: gym.Env,
        reset_params: dict[str, Any],
        has_success: bool,
        check_last_command: bool = False,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self,
            reset_params=reset_params,
            has_success=has_success,
            check_last_command=check_last_command,
        )
        super().__init__(env)
        global _open_envs
        _open_envs += 1
        self._open = True
        self._reset_params = dict(reset_params)
        self._has_success = has_success
        self._check_last_command = check_last_command
        self._frame: np.ndarray | None = None

    def _keep_frame(self, obs: Any) -> Any:
        if isinstance(obs, dict):
            self._frame = obs["visual_observation"]
            # Mortar Mayhem B hands out the same command array on every call, which users
            # (and Gymnasium's check_env) may keep; give each call its own.
            return {key: value.copy() for key, value in obs.items()}
        self._frame = obs
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if not self._open:
            self._reopen()
        obs, info = self.env.reset(seed=seed, options={**self._reset_params, **(options or {})})
        return self._keep_frame(obs), info

    def _reopen(self) -> None:
        # Closed envs may be used again (SB3's check_env closes the env after its render
        # check, then resets it): start pygame again if the last close shut it down, and
        # draw on the display surface that is open now.
        global _open_envs
        import pygame  # Memory Gym's own dependency, imported by the env already

        raw = self.env.unwrapped
        if pygame.display.get_surface() is None:
            pygame.init()
            pygame.display.set_mode((raw.screen_dim, raw.screen_dim), pygame.NOFRAME)
        raw.screen = pygame.display.get_surface()
        _open_envs += 1
        self._open = True

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._has_success and (terminated or truncated):
            success = bool(info["success"])
            if self._check_last_command:
                # Mortar Mayhem reports success=1 when its last command is verified, even
                # when the agent was off the target then: check the position it verified.
                raw = self.env.unwrapped
                success = success and raw.normalized_agent_position == raw._target_pos
            info["is_success"] = success
        return self._keep_frame(obs), reward, terminated, truncated, info

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            if self._frame is None:
                raise gym.error.ResetNeeded("call reset() before render()")
            # pygame's surfarray is indexed [x, y]; images are [row, column].
            return np.ascontiguousarray(self._frame.transpose(1, 0, 2))
        return self.env.render()

    def close(self) -> None:
        global _open_envs
        if not self._open:
            return
        self._open = False
        _open_envs -= 1
        if _open_envs == 0:
            self.env.close()  # pygame.quit()
        elif getattr(self.env.unwrapped, "debug_window", None) is not None:
            self.env.unwrapped.debug_window.destroy()  # its "human" window only


def make_memory_gym_env(
    name: str, render_mode: str | None = None, reset_params: dict[str, Any] | None = None
) -> gym.Env:
    """Build the Memory Gym task ``name`` wrapped in [`MemoryGymTask`][txrl.envs.memory_gym_adapter.MemoryGymTask].

    Args:
        name: a task of `MEMORY_GYM_ENV_NAMES`, e.g. ``"MortarMayhem-Grid"``.
        render_mode: ``None``, ``"rgb_array"`` (the 84x84 observation, upright),
            ``"debug_rgb_array"`` (a 336x336 view with the ground truth marked) or
            ``"human"`` (a window).
        reset_params: task settings for every episode, e.g. ``{"max_steps": 64}``; see the
            class's ``default_reset_parameters`` for the keys and Memory Gym's defaults.
    """
    if name not in MEMORY_GYM_ENTRY_POINTS:
        raise ValueError(
            f"name must be one of the Memory Gym tasks {MEMORY_GYM_ENV_NAMES}, got {name!r}"
        )
    reset_params = {} if reset_params is None else reset_params
    if not isinstance(reset_params, dict):
        raise ValueError(f"reset_params must be a dict or None, got {reset_params!r}")
    cls = import_memory_gym_class(name)
    valid = cls.default_reset_parameters  # type: ignore[attr-defined]  # Memory Gym class attr
    unknown = sorted(set(reset_params) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown reset_params {unknown} for Memory Gym {name}; valid keys: {sorted(valid)}"
        )
    render_mode = check_render_mode(
        render_mode, cls.metadata.get("render_modes", []), f"Memory Gym {name}"
    )
    return MemoryGymTask(
        cls(render_mode=render_mode),  # type: ignore[call-arg]  # Memory Gym's signature
        reset_params,
        has_success=not name.startswith("Endless-"),
        check_last_command=name.startswith("MortarMayhem"),
    )
