"""Memory tasks for comparing memory architectures: tasks where memory is the difficulty.

Importing ``txrl.envs`` registers these Gymnasium ids ([`register_envs`][envs.register_envs], idempotent):

* ``txrl/TMaze-v0`` (active) and ``txrl/TMazePassive-v0``: the T-maze of Bakker (2001) in the
  two variants of Ni et al. (2023); kwarg ``length`` sets the corridor, hence the memory span
  ([`txrl.envs.tmaze`][txrl.envs.tmaze]).
* ``txrl/DelayedRecall-v0``: remember ``k`` of ``n_symbols`` symbols across ``delay`` steps of
  distractors ([`txrl.envs.delayed_recall`][txrl.envs.delayed_recall]).
* ``txrl/MiniGrid-MemoryS7-v0`` ... ``txrl/MiniGrid-MemoryS17Random-v0``: MiniGrid's Memory
  tasks (Chevalier-Boisvert et al.) with SB3-compatible observations
  ([`txrl.envs.minigrid_memory`][txrl.envs.minigrid_memory]).
* ``txrl/popgym-<Name>-v0``: the POPGym suite (Morad et al. 2023) with flat float32
  observations; needs ``pip install txrl[popgym]`` ([`txrl.envs.popgym_adapter`][txrl.envs.popgym_adapter]).
* ``txrl/memorygym-<Name>-v0``: the Memory Gym suite (Pleines et al. 2025): Mortar Mayhem,
  Mystery Path and Searing Spotlights in their full, Grid and Endless versions, 84x84 pixel
  observations; needs ``pip install ".[memorygym]" && pip install --no-deps memory-gym==1.0.2``
  ([`txrl.envs.memory_gym_adapter`][txrl.envs.memory_gym_adapter]).

All of them set ``info["is_success"]`` at the end of an episode (POPGym and Memory Gym: where
the task defines a success), and take ``render_mode``: ``None`` or a mode of the env's
``metadata["render_modes"]``; any other mode fails with an error listing the valid ones,
which Stable-Baselines3's ``make_vec_env`` understands (it asks for ``"rgb_array"`` and makes
a task that draws nothing without it). Nothing here imports torch or Stable-Baselines3.

In a process that has not imported txrl (SB3 ``SubprocVecEnv`` workers under ``spawn`` or
``forkserver``), use ``gym.make("txrl.envs:txrl/TMaze-v0", length=50)``, e.g.
``make_vec_env("txrl.envs:txrl/TMaze-v0", n_envs=8, vec_env_cls=SubprocVecEnv)``, or the
picklable factories of [`make_env_fn`][envs.make_env_fn].
"""

from .delayed_recall import DelayedRecallEnv
from .memory_gym_adapter import MEMORY_GYM_ENV_NAMES, make_memory_gym_env, memory_gym_env_id
from .minigrid_memory import MINIGRID_MEMORY_IDS, make_minigrid_memory
from .popgym_adapter import POPGYM_ENV_NAMES, make_popgym_env, popgym_env_id
from .registration import (
    ALL_IDS,
    DELAYED_RECALL_ID,
    MEMORY_GYM_IDS,
    MINIGRID_IDS,
    POPGYM_IDS,
    TMAZE_ID,
    TMAZE_PASSIVE_ID,
    TXRL_TASK_IDS,
    EnvFactory,
    make_env_fn,
    register_envs,
)
from .tmaze import TMazeEnv
from .wrappers import DiscreteActionSubset, EpisodeSuccessInfo, FreshInfo, PreviousActionReward

register_envs()

__all__ = [
    "ALL_IDS",
    "DELAYED_RECALL_ID",
    "MEMORY_GYM_ENV_NAMES",
    "MEMORY_GYM_IDS",
    "MINIGRID_IDS",
    "MINIGRID_MEMORY_IDS",
    "POPGYM_ENV_NAMES",
    "POPGYM_IDS",
    "TMAZE_ID",
    "TMAZE_PASSIVE_ID",
    "TXRL_TASK_IDS",
    "DelayedRecallEnv",
    "DiscreteActionSubset",
    "EnvFactory",
    "EpisodeSuccessInfo",
    "FreshInfo",
    "PreviousActionReward",
    "TMazeEnv",
    "make_env_fn",
    "make_memory_gym_env",
    "make_minigrid_memory",
    "make_popgym_env",
    "memory_gym_env_id",
    "popgym_env_id",
    "register_envs",
]
