"""MiniGrid Memory tasks with compact observations, for SB3 and small networks.

MiniGrid (Chevalier-Boisvert et al. 2023, "Minigrid & Miniworld: Modular & Customizable
Reinforcement Learning Environments for Goal-Oriented Tasks", NeurIPS Datasets and
Benchmarks) has a Memory task: the agent sees an object in a small room, walks down a
corridor out of sight of it, and must step onto the matching one of two objects at the end.

Upstream observations are a ``Dict`` with a text ``MissionSpace``, which SB3 rejects. Here:

* default: the 7x7x3 egocentric view alone, ``Box(0, 255, (7, 7, 3), uint8)``, channel-last,
  via MiniGrid's own `minigrid.wrappers.ImgObsWrapper`. The three channels are
  categorical codes (object type, colour, door state), not pixels, so the values are small;
  SB3's ``MlpPolicy`` flattens it, a small custom CNN can read it as an image (SB3's
  ``NatureCNN`` needs at least 36x36 and ``check_env`` warns about that, as it must).
* ``with_direction=True``: ``Dict(image=Box(...), direction=Discrete(4))`` via Gymnasium's
  `FilterObservation` (use SB3's ``MultiInputPolicy``).

``info["is_success"]`` is set at the end of each episode: ``True`` iff the agent stepped on the
matching object, which is exactly when the upstream reward ``1 - 0.9 * t / max_steps`` is
positive (the wrong object ends the episode with reward 0; a timeout truncates).

``info["cue_step"]`` and ``info["decision_step"]`` (`MemoryStepsInfo`) say when memory
matters, for tools that mark those steps on pictures of the agent's attention: steps count
observations from 0 (the reset's); ``cue_step`` is the first observation in which the object
of the start room is in view (the agent may start in the hallway, facing away from it, and
never see it), ``decision_step`` the observation on which the agent chose the move onto one
of the two objects at the hallway's end. ``info["cue_in_view"]`` is in every observation's
info: whether that observation shows the object (an agent may look at it many times, and a
later look may be the one its memory keeps).

``actions=["left", "right", "forward"]`` (names of `minigrid.core.actions.Actions`)
keeps only those actions ([`DiscreteActionSubset`][txrl.envs.wrappers.DiscreteActionSubset]); the task needs
no others, the upstream task offers all 7 (pickup, drop, toggle and done change nothing here).

Observations are memoised (`CachedViewMemoryEnv`): the
grid of a Memory episode never changes, so each view (layout, cell, heading) is built once by
MiniGrid's own code and copied after that, the same arrays without building them again;
``cache_views=False`` steps the upstream class as it is.

Ids (registered by `txrl.envs.register_envs`): ``txrl/MiniGrid-MemoryS7-v0``, ``S9``,
``S11``, ``S13``, ``S13Random``, ``S17Random``, one per upstream ``MiniGrid-Memory*-v0``.
Extra kwargs (``max_steps``, ...) go to ``minigrid.envs.MemoryEnv``.
MiniGrid is imported when an env is made, not when ``txrl.envs`` is imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator
from gymnasium.wrappers import FilterObservation

from ._validation import check_render_mode
from .wrappers import DiscreteActionSubset, EpisodeSuccessInfo

#: txrl id -> upstream MiniGrid id.
MINIGRID_MEMORY_IDS: dict[str, str] = {
    f"txrl/MiniGrid-Memory{size}-v0": f"MiniGrid-Memory{size}-v0"
    for size in ("S7", "S9", "S11", "S13", "S13Random", "S17Random")
}


class MemoryStepsInfo(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Report the cue and decision steps of a MiniGrid Memory episode in ``info``.

    ``cue_step`` is put in the info of the observation that first shows the start room's
    object, and again on the episode's last step, each time with ``cue``, that object's type
    (``"key"`` or ``"ball"``, what ``txrl inspect --probe cue`` decodes); ``cue_in_view`` in
    every observation's info (True when it shows the object); ``decision_step`` in the info
    of the step that reached one of the two end objects. Visibility is read from the observation itself
    (MiniGrid marks cells hidden behind walls as unseen), so nothing is rendered twice.
    Wraps the upstream env directly: it needs its ``Dict`` observation.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self._t = 0
        self._cue_step: int | None = None
        # the start room's object: its cell and type code, read once an episode (reset)
        self._cue_cell = (0, 0)
        self._cue_code = -1

    def _cue_in_view(self, obs: dict[str, Any]) -> bool:
        coords = self.env.unwrapped.relative_coords(*self._cue_cell)
        if coords is None:
            return False
        return bool(obs["image"][coords[0], coords[1], 0] == self._cue_code)

    def _cue_name(self) -> str:
        """The start room's object type (``"key"`` or ``"ball"``): what must be matched."""
        return str(self.env.unwrapped.grid.get(*self._cue_cell).type)

    def _note_cue(self, obs: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
        in_view = self._cue_in_view(obs)
        info = {**info, "cue_in_view": in_view}
        if self._cue_step is None and in_view:
            self._cue_step = self._t
            info.update(cue_step=self._t, cue=self._cue_name())
        return info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        from minigrid.core.constants import OBJECT_TO_IDX

        obs, info = self.env.reset(seed=seed, options=options)
        grid_env = self.env.unwrapped
        self._cue_cell = (1, grid_env.height // 2 - 1)  # where MemoryEnv puts that object
        self._cue_code = OBJECT_TO_IDX[grid_env.grid.get(*self._cue_cell).type]
        self._t = 0
        self._cue_step = None
        return obs, self._note_cue(obs, info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._t += 1
        info = self._note_cue(obs, info)
        if terminated or truncated:
            info = dict(info)
            if self._cue_step is not None:
                info["cue_step"] = self._cue_step
                info["cue"] = self._cue_name()
            grid_env = self.env.unwrapped
            if tuple(grid_env.agent_pos) in (grid_env.success_pos, grid_env.failure_pos):
                info["decision_step"] = self._t - 1  # chosen on the previous observation
        return obs, reward, terminated, truncated, info


def make_minigrid_memory(
    upstream_id: str,
    with_direction: bool = False,
    actions: Sequence[str] | None = None,
    cache_views: bool = True,
    render_mode: str | None = None,
    **kwargs: Any,
) -> gym.Env:
    """Build a MiniGrid Memory env with the compact observation described in the module doc.

    Args:
        upstream_id: one of the values of `MINIGRID_MEMORY_IDS`.
        with_direction: also return the agent's heading (``Dict`` observation).
        actions: names of MiniGrid actions to keep, in order (e.g. ``["left", "right",
            "forward"]``); ``None``: all 7 upstream actions.
        cache_views: memoise the egocentric views (see the module doc).
        render_mode: ``None`` or one of MiniGrid's modes, ``"human"`` (a window) and
            ``"rgb_array"`` (what Stable-Baselines3 asks for when it makes an env from its id).
        **kwargs: forwarded to ``minigrid.envs.MemoryEnv`` (over the upstream id's kwargs).
    """
    valid = tuple(MINIGRID_MEMORY_IDS.values())
    if upstream_id not in valid:
        raise ValueError(f"upstream_id must be one of {valid}, got {upstream_id!r}")
    for flag, value in (("with_direction", with_direction), ("cache_views", cache_views)):
        if value not in (True, False):
            raise ValueError(f"{flag} must be True or False, got {value!r}")
    try:
        importlib.import_module("minigrid")  # registers the upstream ids
        from minigrid.wrappers import ImgObsWrapper
    except ImportError as e:
        raise ImportError(
            f"{upstream_id} needs the `minigrid` package (a txrl dependency): pip install minigrid"
        ) from e

    # Build the upstream class directly rather than through gym.make: the outer gym.make of
    # the txrl id already adds the env checker and order enforcement, once.
    spec = gym.spec(upstream_id)
    assert isinstance(spec.entry_point, str)
    if cache_views:
        from ._minigrid_cached import CachedViewMemoryEnv as creator
    else:
        creator = load_env_creator(spec.entry_point)
    # Checked here: MiniGrid stores any render_mode and draws nothing for one it lacks.
    render_mode = check_render_mode(render_mode, creator.metadata["render_modes"], upstream_id)
    env = creator(**{**spec.kwargs, **kwargs}, render_mode=render_mode)
    env = EpisodeSuccessInfo(MemoryStepsInfo(env), rule="positive_reward_on_termination")
    if actions is not None:
        from minigrid.core.actions import Actions

        names = [a.name for a in Actions]
        if isinstance(actions, str) or any(a not in names for a in actions):
            raise ValueError(
                f"actions must be a list of MiniGrid action names {names}, got {actions!r}"
            )
        env = DiscreteActionSubset(env, [Actions[a].value for a in actions])
    if with_direction:
        return FilterObservation(env, filter_keys=["image", "direction"])
    return ImgObsWrapper(env)
