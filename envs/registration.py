"""Gymnasium registration of the txrl memory tasks, and a picklable env factory.

Registering happens when ``txrl.envs`` is imported (`register_envs`). Entry points are
``"module:attr"`` strings, so nothing heavy (MiniGrid, POPGym, Memory Gym) is imported until an env is
made. A process that has not imported txrl (e.g. a ``SubprocVecEnv`` worker started with
``spawn``/``forkserver``) can still build a task with Gymnasium's ``"module:id"`` form::

    gym.make("txrl.envs:txrl/TMaze-v0", length=50)

or with `make_env_fn`, whose factories import ``txrl.envs`` themselves.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from .memory_gym_adapter import MEMORY_GYM_ENV_NAMES, memory_gym_env_id
from .minigrid_memory import MINIGRID_MEMORY_IDS
from .popgym_adapter import POPGYM_ENV_NAMES, popgym_env_id

TMAZE_ID = "txrl/TMaze-v0"
TMAZE_PASSIVE_ID = "txrl/TMazePassive-v0"
DELAYED_RECALL_ID = "txrl/DelayedRecall-v0"

#: The tasks implemented in txrl (as opposed to adapters of other suites).
TXRL_TASK_IDS: tuple[str, ...] = (TMAZE_ID, TMAZE_PASSIVE_ID, DELAYED_RECALL_ID)
#: ``txrl/MiniGrid-Memory*-v0`` adapters.
MINIGRID_IDS: tuple[str, ...] = tuple(MINIGRID_MEMORY_IDS)
#: ``txrl/popgym-*-v0`` adapters (need the ``popgym`` extra when made).
POPGYM_IDS: tuple[str, ...] = tuple(popgym_env_id(name) for name in POPGYM_ENV_NAMES)
#: ``txrl/memorygym-*-v0`` adapters (need the ``memorygym`` extra and memory-gym when made).
MEMORY_GYM_IDS: tuple[str, ...] = tuple(memory_gym_env_id(name) for name in MEMORY_GYM_ENV_NAMES)
ALL_IDS: tuple[str, ...] = TXRL_TASK_IDS + MINIGRID_IDS + POPGYM_IDS + MEMORY_GYM_IDS

# The T-maze and delayed-recall envs check their actions themselves and end their own
# episodes, so Gymnasium's OrderEnforcing wrapper (a Python call per step) and TimeLimit
# (not needed: the envs truncate internally) are left out of the gym.make stack. The
# passive env checker is kept: it only inspects the first reset and step.
_LEAN = {"order_enforce": False, "max_episode_steps": None}


def _specs() -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    specs: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
        (TMAZE_ID, "txrl.envs.tmaze:TMazeEnv", {"active": True}, _LEAN),
        (TMAZE_PASSIVE_ID, "txrl.envs.tmaze:TMazeEnv", {"active": False}, _LEAN),
        (DELAYED_RECALL_ID, "txrl.envs.delayed_recall:DelayedRecallEnv", {}, _LEAN),
    ]
    specs += [
        (txrl_id, "txrl.envs.minigrid_memory:make_minigrid_memory", {"upstream_id": up}, {})
        for txrl_id, up in MINIGRID_MEMORY_IDS.items()
    ]
    specs += [
        (popgym_env_id(name), "txrl.envs.popgym_adapter:make_popgym_env", {"name": name}, {})
        for name in POPGYM_ENV_NAMES
    ]
    specs += [
        (
            memory_gym_env_id(name),
            "txrl.envs.memory_gym_adapter:make_memory_gym_env",
            {"name": name},
            {},
        )
        for name in MEMORY_GYM_ENV_NAMES
    ]
    return specs


def register_envs() -> None:
    """Register every txrl id with Gymnasium. Idempotent: registered ids are left alone."""
    for env_id, entry_point, kwargs, options in _specs():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, kwargs=kwargs, **options)


@dataclass(frozen=True)
class EnvFactory:
    """Picklable env constructor, callable without arguments; see `make_env_fn`."""

    env_id: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    previous_action_reward: bool = False

    def __call__(self, **overrides: Any) -> gym.Env:
        """Make the env; ``overrides`` update the stored kwargs (SB3's ``make_vec_env``
        passes its ``env_kwargs`` this way)."""
        # Unpickling this class already imports txrl.envs; importing it again here keeps the
        # factory correct when it is called in a process that built it some other way.
        envs = importlib.import_module("txrl.envs")
        env = gym.make(self.env_id, **{**self.kwargs, **overrides})
        if self.previous_action_reward:
            return envs.PreviousActionReward(env)
        if getattr(env.unwrapped, "obs_requires_prev_action", False):
            # POPGym's flag for tasks whose observation does not say what the agent did (e.g.
            # MineSweeper shows a count but not which square was clicked); POPGym's own
            # baselines always feed the previous action
            warnings.warn(
                f"{self.env_id}: the task's observation does not include the agent's last "
                "action, which it needs (obs_requires_prev_action); pass "
                "previous_action_reward=True (env.previous_action_reward: true in a config)",
                UserWarning,
                stacklevel=2,
            )
        return env


def make_env_fn(env_id: str, *, previous_action_reward: bool = False, **kwargs: Any) -> EnvFactory:
    """Return a picklable callable that imports ``txrl.envs`` and calls ``gym.make``.

    For vectorised envs, e.g. ``SubprocVecEnv([make_env_fn("txrl/TMaze-v0", length=50)] * 8,
    start_method="spawn")``. ``env_id`` may be any registered id, or ``"module:id"``.
    The id is looked up now, so a typo fails here rather than in a worker process.
    ``previous_action_reward=True`` wraps the env in `PreviousActionReward`.
    """
    module, _, name = env_id.rpartition(":")
    if module:
        importlib.import_module(module)
    gym.spec(name)  # raises gymnasium.error.NameNotFound / VersionNotFound for a bad id
    return EnvFactory(env_id, dict(kwargs), previous_action_reward)
