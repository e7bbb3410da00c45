"""POPGym tasks as flat-``Box`` environments that Stable-Baselines3 accepts.

POPGym (Morad, Kortvelesy, Bettini, Liwicki and Prorok 2023, "POPGym: Benchmarking Partially
Observable Reinforcement Learning", ICLR) is a suite of partially observable tasks, many of
them pure memory probes (RepeatFirst, RepeatPrevious, Autoencode, CountRecall, ...). It is an
optional extra of txrl (``pip install txrl[popgym]``): this module imports it only when an
env is made, so ``import txrl.envs`` works, and stays fast, without it.

Ids: ``txrl/popgym-<Name>-v0`` where ``<Name>`` is a POPGym class name (see
`POPGYM_ENV_NAMES`): the 14 task families (``RepeatFirst``, ...) whose constructor
kwargs can be passed to ``gym.make``, and their fixed ``Easy``/``Medium``/``Hard`` presets,
which take no kwargs. Every id takes ``render_mode``: ``None``, or for the CartPole and
Pendulum tasks ``"human"`` or ``"rgb_array"`` (the card and board tasks draw nothing). Names
follow the classes, so POPGym's own id ``popgym-VelocityOnlyCartpoleEasy-v0`` is
``txrl/popgym-VelocityOnlyCartPoleEasy-v0`` here.
The Labyrinth tasks are not included: POPGym itself registers them only when the separate
``mazelib`` package is installed.

What the adapter changes, and why:

* Observations: ``Discrete``/``MultiDiscrete``/``Tuple`` spaces are flattened (one-hot per
  discrete part, concatenated) with Gymnasium's ``FlattenObservation`` and cast to float32
  with ``DtypeObservation``; float32 ``Box`` observations are passed through.
* Actions: ``Box`` actions (the Pendulum tasks) are rescaled to [-1, 1] with
  ``RescaleAction`` (``normalize_actions=False`` keeps POPGym's range); discrete actions are
  untouched (``MultiDiscrete`` for Battleship and MineSweeper, which SB3 supports).
* Infos: [`FreshInfo`][txrl.envs.wrappers.FreshInfo] copies the info arrays, because CountRecall
  and MultiarmedBandit hand out the same mutable array on every call, which Gymnasium 1.x's
  ``check_env`` rejects.
* ``min_decks`` (the families of `POPGYM_VARIABLE_DECK_FAMILIES`: Autoencode,
  RepeatPrevious, RepeatFirst, CountRecall, HigherLower): each episode deals a number of
  decks drawn log-uniformly between ``min_decks`` and ``num_decks`` ([`VariableDecks`][txrl.envs.popgym_adapter.VariableDecks]),
  so one env mixes short episodes with long ones, as the T-maze's ``min_length`` mixes
  corridors; the env's spaces are those of ``num_decks`` decks. ``None`` (the default) keeps
  POPGym's fixed ``num_decks``. Concentration also takes ``num_decks`` but shows every card
  of its decks, so its observation grows with the count: ``min_decks`` is refused there.
* ``info["is_success"]`` on the last step, only where the task defines a win (see
  [`POPGYM_SUCCESS_RULES`][txrl.envs.popgym_adapter.POPGYM_SUCCESS_RULES]): Battleship (all ships sunk), Concentration (all pairs
  found), MineSweeper (every free square revealed without hitting a mine) and the three
  CartPole variants (pole kept up for the whole episode). The other tasks (Autoencode,
  RepeatFirst, RepeatPrevious, CountRecall, HigherLower, MultiarmedBandit and the Pendulum
  variants) score per step and define no success, so the key is left out.
"""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import DtypeObservation, FlattenObservation, RescaleAction

from ._validation import check_int, check_render_mode, log_uniform_int
from .wrappers import EpisodeSuccessInfo, FreshInfo

#: The POPGym task families (base classes, configurable through kwargs).
POPGYM_FAMILIES: tuple[str, ...] = (
    "Autoencode",
    "RepeatPrevious",
    "RepeatFirst",
    "CountRecall",
    "PositionOnlyCartPole",
    "PositionOnlyPendulum",
    "VelocityOnlyCartPole",
    "NoisyPositionOnlyCartPole",
    "NoisyPositionOnlyPendulum",
    "MultiarmedBandit",
    "HigherLower",
    "Battleship",
    "Concentration",
    "MineSweeper",
)
POPGYM_LEVELS: tuple[str, ...] = ("Easy", "Medium", "Hard")

#: Every POPGym class name adapted here: the families, then their presets.
POPGYM_ENV_NAMES: tuple[str, ...] = POPGYM_FAMILIES + tuple(
    f"{family}{level}" for family in POPGYM_FAMILIES for level in POPGYM_LEVELS
)

#: Family -> rule of :data:`txrl.envs.wrappers.SUCCESS_RULES`; families not listed get no
#: ``info["is_success"]``.
POPGYM_SUCCESS_RULES: dict[str, str] = {
    "Battleship": "terminated",
    "Concentration": "terminated",
    "MineSweeper": "minesweeper_cleared",
    "PositionOnlyCartPole": "survived",
    "VelocityOnlyCartPole": "survived",
    "NoisyPositionOnlyCartPole": "survived",
}

#: The families whose deck count :class:`VariableDecks` may vary: they take ``num_decks`` and
#: their observation space is the same at any count (the action space too, except
#: CountRecall's, a count up to the decks' cards, which grows: the largest one is used).
#: Concentration takes ``num_decks`` but observes every card of its decks, so it is not one.
POPGYM_VARIABLE_DECK_FAMILIES: tuple[str, ...] = (
    "Autoencode",
    "RepeatPrevious",
    "RepeatFirst",
    "CountRecall",
    "HigherLower",
)

POPGYM_INSTALL_HINT = "pip install txrl[popgym]"


def popgym_env_id(name: str) -> str:
    """The txrl id of the POPGym class ``name``."""
    return f"txrl/popgym-{name}-v0"


def _family(name: str) -> str:
    for level in POPGYM_LEVELS:
        if name.endswith(level) and name[: -len(level)] in POPGYM_FAMILIES:
            return name[: -len(level)]
    return name


def import_popgym_envs() -> ModuleType:
    """Import ``popgym.envs``, or raise ``ImportError`` naming the txrl extra to install."""
    try:
        return importlib.import_module("popgym.envs")
    except ImportError as e:
        raise ImportError(
            f"The POPGym tasks need the optional dependency popgym, which is not installed "
            f"({e}). Install it with: {POPGYM_INSTALL_HINT}"
        ) from e


class VariableDecks(gym.Env):
    """A POPGym card task whose every episode deals its own number of decks.

    One POPGym env per deck count from ``min_decks`` to ``num_decks`` is built up front; each
    reset draws a count log-uniformly on that range (rounded: every scale of episode length
    about equally often) and plays that env's episode. The spaces are those of the largest
    count, ``num_decks``: the observation space is the same at every count (the families of
    `POPGYM_VARIABLE_DECK_FAMILIES`), and CountRecall's answers, counts up to its
    decks' cards, are then those of its longest episodes (a smaller deal takes the larger
    answers as wrong ones). Each env scales its rewards by its own episode length, so an
    episode pays between -1 and 1 whatever its length, as in POPGym. ``decks`` is the count
    of the episode being played.
    """

    def __init__(self, cls: type, min_decks: int, num_decks: int, **kwargs: Any) -> None:
        self.min_decks = min_decks
        self.num_decks = num_decks
        self._envs = {n: cls(num_decks=n, **kwargs) for n in range(min_decks, num_decks + 1)}
        largest = self._envs[num_decks]
        self.observation_space = largest.observation_space
        self.action_space = largest.action_space
        self.metadata = getattr(largest, "metadata", {})
        self.render_mode: str | None = None
        self.decks = min_decks
        self._seeded = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None or not self._seeded:
            # Each inner env deals from its own generator, seeded from this env's.
            for env in self._envs.values():
                env.reset(seed=int(self.np_random.integers(2**31)))
            self._seeded = True
        self.decks = log_uniform_int(self.np_random, self.min_decks, self.num_decks)
        return self._envs[self.decks].reset(options=options)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        return self._envs[self.decks].step(action)


def make_popgym_env(
    name: str,
    normalize_actions: bool = True,
    render_mode: str | None = None,
    min_decks: int | None = None,
    **kwargs: Any,
) -> gym.Env:
    """Build the POPGym task ``name`` with the flat float32 observations described above.

    Args:
        name: a POPGym class name from `POPGYM_ENV_NAMES`.
        normalize_actions: rescale a ``Box`` action space to [-1, 1].
        render_mode: ``None`` or a mode of the task's ``metadata["render_modes"]`` (the
            CartPole and Pendulum tasks: ``"human"``, ``"rgb_array"``; the others draw
            nothing). Accepted by presets and families alike.
        min_decks: ``None``, or for a family that takes ``num_decks``, the fewest decks an
            episode deals: each episode's count is drawn log-uniformly between ``min_decks``
            and ``num_decks`` ([`VariableDecks`][txrl.envs.popgym_adapter.VariableDecks]).
        **kwargs: constructor kwargs of a family (e.g. ``num_decks``); presets take none.
    """
    if name not in POPGYM_ENV_NAMES:
        raise ValueError(f"name must be one of the POPGym tasks {POPGYM_ENV_NAMES}, got {name!r}")
    if normalize_actions not in (True, False):
        raise ValueError(f"normalize_actions must be True or False, got {normalize_actions!r}")
    family = _family(name)
    if kwargs and name != family:
        raise ValueError(
            f"{name} is a fixed POPGym preset and takes no kwargs, got {sorted(kwargs)}; "
            f"pass them to the family instead: gym.make({popgym_env_id(family)!r}, ...)"
        )
    cls = getattr(import_popgym_envs(), name)
    try:
        inspect.signature(cls).bind(**kwargs)
    except TypeError as e:
        raise ValueError(
            f"invalid kwargs {sorted(kwargs)} for POPGym {name}{inspect.signature(cls)}: {e}"
        ) from e

    render_mode = check_render_mode(
        render_mode, cls.metadata.get("render_modes", []), f"POPGym {name}"
    )

    raw: gym.Env = (
        cls(**kwargs) if min_decks is None else _variable_decks(name, cls, min_decks, kwargs)
    )
    # Set after construction: several presets (PositionOnlyPendulumHard, ...) take no
    # constructor arguments, and the Gymnasium classic-control bases only store the mode.
    raw.render_mode = render_mode
    env: gym.Env = FreshInfo(raw)
    if family in POPGYM_SUCCESS_RULES:
        # Innermost, so the rule sees POPGym's own reward and termination flags.
        env = EpisodeSuccessInfo(env, rule=POPGYM_SUCCESS_RULES[family])
    obs_space = env.observation_space
    if not (
        isinstance(obs_space, spaces.Box)
        and len(obs_space.shape) == 1
        and obs_space.dtype == np.float32
    ):
        env = FlattenObservation(env)
        if env.observation_space.dtype != np.float32:
            env = DtypeObservation(env, np.float32)
    act_space = env.action_space
    if (
        normalize_actions
        and isinstance(act_space, spaces.Box)
        and not (np.all(act_space.low == -1.0) and np.all(act_space.high == 1.0))
    ):
        # float32 bounds: float64 ones would make Box warn about lowered precision.
        env = RescaleAction(env, min_action=np.float32(-1.0), max_action=np.float32(1.0))
    return env


def _variable_decks(name: str, cls: type, min_decks: Any, kwargs: dict[str, Any]) -> VariableDecks:
    """[`VariableDecks`][txrl.envs.popgym_adapter.VariableDecks] of the family ``cls``, after checking that it deals decks and
    that ``min_decks`` is at most its ``num_decks``."""
    families = ", ".join(POPGYM_VARIABLE_DECK_FAMILIES)
    parameter = inspect.signature(cls).parameters.get("num_decks")
    if (
        parameter is not None
        and name == _family(name)
        and name not in POPGYM_VARIABLE_DECK_FAMILIES
    ):
        raise ValueError(
            f"min_decks cannot vary {name}'s decks: its observation shows every card of its "
            "decks, so its observation space grows with num_decks and one env cannot deal "
            f"different counts; train it at a fixed num_decks (min_decks: null); families that "
            f"take it: {families}"
        )
    if parameter is None or name != _family(name):
        raise ValueError(
            f"min_decks applies to a POPGym family that takes num_decks, one of {families}; "
            f"{name} is not one"
        )
    num_decks = kwargs.pop("num_decks", parameter.default)
    num_decks = check_int("num_decks", num_decks, minimum=1)
    min_decks = check_int("min_decks", min_decks, minimum=1)
    if min_decks > num_decks:
        raise ValueError(f"min_decks must be at most num_decks ({num_decks}), got {min_decks}")
    return VariableDecks(cls, min_decks, num_decks, **kwargs)
