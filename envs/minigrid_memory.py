"""MiniGrid Memory tasks with compact observations, for SB3 and small networks.

MiniGrid (Chevalier-Boisvert et al. 2023, "Minigrid & Miniworld: Modular & Customizable
Reinforcement Learning Environments for Goal-Oriented Tasks", NeurIPS Datasets and
Benchmarks) has a Memory task: the agent sees an object in a small room, walks down a
corridor out of sight of it, and must step onto the matching one of two objects at the end.

Upstream observations are a ``Dict`` with a text ``MissionSpace``, which SB3 rejects. Here:

* default: the 7x7x3 egocentric view alone, ``Box(0, 255, (7, 7, 3), uint8)``, channel-last,
  via MiniGrid's own :class:`minigrid.wrappers.ImgObsWrapper`. The three channels are
  categorical codes (object type, colour, door state), not pixels, so the values are small;
  SB3's ``MlpPolicy`` flattens it, a small custom CNN can read it as an image (SB3's
  ``NatureCNN`` needs at least 36x36 and ``check_env`` warns about that, as it must).
* ``with_direction=True``: ``Dict(image=Box(...), direction=Discrete(4))`` via Gymnasium's
  :class:`~gymnasium.wrappers.FilterObservation` (use SB3's ``MultiInputPolicy``).

``info["is_success"]`` is set at the end of each episode: ``True`` iff the agent stepped on the
matching object, which is exactly when the upstream reward ``1 - 0.9 * t / max_steps`` is
positive (the wrong object ends the episode with reward 0; a timeout truncates).

Ids (registered by :func:`txrl.envs.register_envs`): ``txrl/MiniGrid-MemoryS7-v0``, ``S9``,
``S11``, ``S13``, ``S13Random``, ``S17Random``, one per upstream ``MiniGrid-Memory*-v0``.
Extra kwargs (``max_steps``, ``render_mode``, ...) go to ``minigrid.envs.MemoryEnv``.
MiniGrid is imported when an env is made, not when ``txrl.envs`` is imported.
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator
from gymnasium.wrappers import FilterObservation

from .wrappers import EpisodeSuccessInfo

#: txrl id -> upstream MiniGrid id.
MINIGRID_MEMORY_IDS: dict[str, str] = {
    f"txrl/MiniGrid-Memory{size}-v0": f"MiniGrid-Memory{size}-v0"
    for size in ("S7", "S9", "S11", "S13", "S13Random", "S17Random")
}


def make_minigrid_memory(upstream_id: str, with_direction: bool = False, **kwargs: Any) -> gym.Env:
    """Build a MiniGrid Memory env with the compact observation described in the module doc.

    Args:
        upstream_id: one of the values of :data:`MINIGRID_MEMORY_IDS`.
        with_direction: also return the agent's heading (``Dict`` observation).
        **kwargs: forwarded to ``minigrid.envs.MemoryEnv`` (over the upstream id's kwargs).
    """
    valid = tuple(MINIGRID_MEMORY_IDS.values())
    if upstream_id not in valid:
        raise ValueError(f"upstream_id must be one of {valid}, got {upstream_id!r}")
    if with_direction not in (True, False):
        raise ValueError(f"with_direction must be True or False, got {with_direction!r}")
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
    env = load_env_creator(spec.entry_point)(**{**spec.kwargs, **kwargs})
    env = EpisodeSuccessInfo(env, rule="positive_reward_on_termination")
    if with_direction:
        return FilterObservation(env, filter_keys=["image", "direction"])
    return ImgObsWrapper(env)
