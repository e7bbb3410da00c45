from __future__ import annotations

import importlib
import inspect
import itertools
import sys
import warnings
from collections import defaultdict
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import txrl.envs
from txrl.envs.popgym_adapter import (
    POPGYM_ENV_NAMES,
    POPGYM_FAMILIES,
    POPGYM_SUCCESS_RULES,
    POPGYM_VARIABLE_DECK_FAMILIES,
    _family,
    make_popgym_env,
    popgym_env_id,
)

from ._helpers import INFINITE_BOX, WRAPPED_ENV, run_env_checkers, same_trajectory

popgym_envs = importlib.import_module("popgym.envs")  # in the test extra: missing is an error


def test_ids_cover_every_installed_popgym_env() -> None:
    # POPGym's registry is ALL (the presets); ALL_BASE holds the configurable families.
    # The Labyrinth tasks depend on mazelib, which txrl does not adapt (see the module doc).
    navigation = {**popgym_envs.NAVIGATION, **popgym_envs.ALL_NAVIGATION}
    upstream = {c.__name__ for c in {**popgym_envs.ALL_BASE, **popgym_envs.ALL}} - {
        c.__name__ for c in navigation
    }
    assert set(POPGYM_ENV_NAMES) == upstream
    assert len(POPGYM_ENV_NAMES) == 56
    assert set(txrl.envs.POPGYM_IDS) == {f"txrl/popgym-{n}-v0" for n in upstream}
    assert set(txrl.envs.POPGYM_IDS) <= set(gym.registry)


@pytest.mark.parametrize("env_id", txrl.envs.POPGYM_IDS)
def test_makes_steps_and_passes_checkers(env_id: str) -> None:
    env = gym.make(env_id)
    space = env.observation_space
    assert isinstance(space, gym.spaces.Box) and space.dtype == np.float32
    assert len(space.shape) == 1
    allowed = [WRAPPED_ENV]
    if "VelocityOnlyCartPole" in env_id:
        allowed.append(INFINITE_BOX)  # POPGym declares unbounded velocities
    run_env_checkers(env, allowed=allowed)
    assert same_trajectory(env, seed=7, n_steps=40)

    # One full random episode: is_success appears exactly at the end, where defined.
    has_rule = (
        _family(env_id.removeprefix("txrl/popgym-").removesuffix("-v0")) in POPGYM_SUCCESS_RULES
    )
    obs, _ = env.reset(seed=1)
    env.action_space.seed(1)
    for _ in range(5000):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert obs in space and np.isfinite(reward)
        if terminated or truncated:
            break
        assert "is_success" not in info
    else:
        raise AssertionError("episode did not end")
    assert ("is_success" in info) == has_rule
    if has_rule:
        assert isinstance(info["is_success"], bool)


def test_discrete_observations_are_one_hot() -> None:
    env = gym.make("txrl/popgym-AutoencodeEasy-v0")  # Tuple(Discrete(2), Discrete(4))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (6,) and obs[:2].sum() == 1 and obs[2:].sum() == 1
    raw = env.unwrapped
    assert obs[0] == 0 and obs[1] == 1  # watch mode
    assert obs[2 + int(raw.deck.suits_idx[raw.deck["system"][-1]])] == 1


def test_family_kwargs_pass_through_and_presets_are_fixed() -> None:
    env = gym.make("txrl/popgym-RepeatPrevious-v0", num_decks=2, k=8)
    assert env.unwrapped.k == 8 and env.unwrapped.deck.num_cards == 104
    with pytest.raises(
        ValueError, match=r"RepeatFirstEasy is a fixed POPGym preset.*\['num_decks'\]"
    ):
        gym.make("txrl/popgym-RepeatFirstEasy-v0", num_decks=3)
    with pytest.raises(ValueError, match=r"invalid kwargs \['bogus'\] for POPGym RepeatFirst"):
        gym.make("txrl/popgym-RepeatFirst-v0", bogus=1)


def test_min_decks_mixes_episode_lengths_and_each_pays_its_own_scale() -> None:
    """With ``min_decks`` each episode deals its own number of decks, drawn log-uniformly;
    an episode of n decks lasts 52 n - 1 steps and pays +-1 / (52 n - 1) per answer, so a
    perfect or a worst episode sums to +-1 whatever its length."""
    env = gym.make("txrl/popgym-RepeatFirst-v0", num_decks=8, min_decks=1)
    run_env_checkers(env, allowed=[WRAPPED_ENV])
    assert same_trajectory(env, seed=5, n_steps=600)
    counts: dict[int, int] = defaultdict(int)
    env.reset(seed=0)
    for episode in range(200):
        raw = env.unwrapped
        first = int(raw._envs[raw.decks].card)  # the suit to repeat
        steps, total, done = 0, 0.0, False
        while not done:  # half the episodes right every time, half wrong every time
            action = first if episode % 2 == 0 else (first + 1) % 4
            _, reward, terminated, truncated, _ = env.step(action)
            steps, total, done = steps + 1, total + float(reward), terminated or truncated
        assert steps == 52 * raw.decks - 1
        assert total == pytest.approx(1.0 if episode % 2 == 0 else -1.0)
        counts[raw.decks] += 1
        env.reset()
    assert set(counts) == set(range(1, 9))
    # log-uniform: a deck count from 1 to 2 is about as likely as one from 4 to 8
    low = counts[1] / 2 + counts[2] / 2
    high = counts[4] / 2 + sum(counts[n] for n in (5, 6, 7)) + counts[8] / 2
    assert 0.5 < low / high < 2.0


def test_min_decks_is_checked() -> None:
    with pytest.raises(ValueError, match=r"min_decks must be at most num_decks \(4\), got 5"):
        gym.make("txrl/popgym-RepeatFirst-v0", num_decks=4, min_decks=5)
    with pytest.raises(ValueError, match=r"min_decks must be an integer >= 1, got 0"):
        gym.make("txrl/popgym-CountRecall-v0", min_decks=0)
    with pytest.raises(
        ValueError, match=r"min_decks applies to a POPGym family that takes num_decks.*MineSweeper"
    ):
        gym.make("txrl/popgym-MineSweeper-v0", min_decks=1)
    with pytest.raises(ValueError, match=r"RepeatFirstHard is not one"):
        gym.make("txrl/popgym-RepeatFirstHard-v0", min_decks=1)
    # min_decks=None is the fixed count, as POPGym deals it
    env = gym.make("txrl/popgym-RepeatFirst-v0", num_decks=2, min_decks=None)
    assert env.unwrapped.deck.num_cards == 104


def test_unknown_name_raises_a_clear_value_error() -> None:
    with pytest.raises(
        ValueError, match=r"name must be one of the POPGym tasks .*got 'RepeatLast'"
    ):
        make_popgym_env("RepeatLast")
    with pytest.raises(ValueError, match=r"normalize_actions must be True or False, got 2"):
        make_popgym_env("RepeatFirst", normalize_actions=2)


def test_missing_popgym_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "popgym", None)
    monkeypatch.setitem(sys.modules, "popgym.envs", None)
    with pytest.raises(ImportError, match=r"popgym") as excinfo:
        gym.make("txrl/popgym-RepeatFirstEasy-v0")
    assert "pip install txrl[popgym]" in str(excinfo.value)


def test_pendulum_actions_are_normalized_unless_asked_not_to() -> None:
    env = gym.make("txrl/popgym-PositionOnlyPendulumEasy-v0")
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    raw = gym.make("txrl/popgym-PositionOnlyPendulum-v0", normalize_actions=False)
    assert raw.action_space == raw.unwrapped.action_space  # POPGym's [-2, 2]
    # +1 in the normalized space is the maximal torque.
    env.reset(seed=0)
    raw.reset(seed=0)
    a, _, _, _, _ = env.step(np.array([1.0], dtype=np.float32))
    b, _, _, _, _ = raw.step(np.array([2.0], dtype=np.float32))
    assert np.allclose(a, b)


def test_infos_are_not_shared_between_calls() -> None:
    # Upstream CountRecall returns the same `counts` array from every call.
    env = gym.make("txrl/popgym-CountRecallEasy-v0")
    _, info0 = env.reset(seed=0)
    before = info0["counts"].copy()
    _, _, _, _, info1 = env.step(0)
    assert info1["counts"] is not info0["counts"]
    assert np.array_equal(info0["counts"], before)


def _run(env: gym.Env, actions: Any, seed: int) -> tuple[bool, bool, dict[str, Any]]:
    env.reset(seed=seed)
    for action in actions:
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return terminated, truncated, info
    raise AssertionError("episode did not end")


def test_battleship_success_means_all_ships_sunk() -> None:
    env = gym.make("txrl/popgym-BattleshipEasy-v0")
    env.reset(seed=2)
    ships = [np.array(c) for c in np.argwhere(env.unwrapped.board == 1)]
    terminated, _, info = _run(env, ships, seed=2)
    assert terminated and info["is_success"] is True
    # Shooting the same empty square until the moves run out: truncated, a failure.
    empty = np.argwhere(env.unwrapped.board == 0)[0]
    terminated, truncated, info = _run(env, itertools.repeat(empty), seed=2)
    assert truncated and not terminated and info["is_success"] is False


def test_minesweeper_success_means_board_cleared_without_a_mine() -> None:
    env = gym.make("txrl/popgym-MineSweeperEasy-v0")
    env.reset(seed=5)
    grid = env.unwrapped.hidden_grid
    free, mines = np.argwhere(grid == 0), np.argwhere(grid == 1)
    terminated, _, info = _run(env, free, seed=5)
    assert terminated and info["is_success"] is True
    terminated, _, info = _run(env, [free[0], mines[0]], seed=5)
    assert terminated and info["is_success"] is False


def test_concentration_success_means_all_pairs_found() -> None:
    env = gym.make("txrl/popgym-ConcentrationEasy-v0")
    env.reset(seed=0)
    by_value: dict[int, list[int]] = defaultdict(list)
    for position, value in enumerate(env.unwrapped.state):
        by_value[int(value)].append(position)
    flips = [p for positions in by_value.values() for p in positions]  # pairs stay adjacent
    terminated, _, info = _run(env, flips, seed=0)
    assert terminated and info["is_success"] is True
    terminated, truncated, info = _run(env, itertools.repeat(0), seed=0)
    assert truncated and not terminated and info["is_success"] is False


def test_cartpole_success_means_the_pole_stayed_up() -> None:
    env = gym.make("txrl/popgym-PositionOnlyCartPole-v0", max_episode_length=100)
    for seed in range(3):
        env.reset(seed=seed)
        while True:
            x, x_dot, theta, theta_dot = env.unwrapped.state  # privileged balancing controller
            action = int(theta + 0.3 * theta_dot + 0.01 * x + 0.05 * x_dot > 0)
            _, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert truncated and not terminated and info["is_success"] is True
    terminated, _, info = _run(env, itertools.repeat(0), seed=0)  # always push left: falls
    assert terminated and info["is_success"] is False


def test_registry_ids_use_class_names() -> None:
    assert popgym_env_id("VelocityOnlyCartPoleEasy") == "txrl/popgym-VelocityOnlyCartPoleEasy-v0"
    env = gym.make("txrl/popgym-VelocityOnlyCartPoleEasy-v0")
    assert type(env.unwrapped).__name__ == "VelocityOnlyCartPoleEasy"


def test_a_task_that_needs_the_previous_action_warns_without_it() -> None:
    # POPGym's MineSweeper shows how many mines border the clicked square, not which square
    # was clicked: without the previous action no memory can tell the squares apart
    with pytest.warns(UserWarning, match="previous_action_reward=True"):
        txrl.envs.make_env_fn("txrl/popgym-MineSweeperEasy-v0")()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        txrl.envs.make_env_fn("txrl/popgym-MineSweeperEasy-v0", previous_action_reward=True)()
        txrl.envs.make_env_fn("txrl/popgym-CountRecallEasy-v0")()  # its observation suffices


def test_min_decks_gives_the_spaces_of_the_largest_episode() -> None:
    """CountRecall's answer is a count up to its decks' cards: with ``min_decks`` the env
    acts in the space of ``num_decks`` (79 counts for three decks), so a three-deck episode's
    every right answer can be given, and a one-deck episode takes the same actions."""
    env = gym.make("txrl/popgym-CountRecall-v0", num_decks=3, min_decks=1)
    assert env.action_space == gym.spaces.Discrete(79)
    fixed = gym.make("txrl/popgym-CountRecall-v0", num_decks=3)
    assert env.observation_space == fixed.observation_space
    env.reset(seed=0)
    raw = env.unwrapped
    while raw.decks != 1:  # a one-deck episode answers in the three-deck space too
        env.reset()
    _, _, terminated, truncated, _ = env.step(78)
    assert not (terminated or truncated)


def test_min_decks_is_refused_where_the_decks_change_the_observation() -> None:
    """Concentration shows every card of its decks: its observation grows with the count,
    so one env cannot deal different counts; the error names the families that can."""
    with pytest.raises(ValueError) as error:
        gym.make("txrl/popgym-Concentration-v0", num_decks=2, min_decks=1)
    message = str(error.value)
    assert "min_decks cannot vary Concentration's decks" in message
    assert "observation" in message
    assert "Autoencode, RepeatPrevious, RepeatFirst, CountRecall, HigherLower" in message
    assert "Concentration" not in message.split("families that take it:")[1]


def test_the_variable_deck_families_are_those_whose_spaces_hold_at_every_count() -> None:
    """POPGYM_VARIABLE_DECK_FAMILIES, from POPGym itself: the families that take num_decks and
    observe the same space at 1 and 3 decks, whose smaller deals act in a part of the larger
    one's action space."""
    variable = []
    for family in POPGYM_FAMILIES:
        cls = getattr(popgym_envs, family)
        if "num_decks" not in inspect.signature(cls).parameters:
            continue
        small, large = cls(num_decks=1), cls(num_decks=3)
        if small.observation_space != large.observation_space:
            continue
        variable.append(family)
        if small.action_space != large.action_space:  # CountRecall: counts up to the cards
            assert isinstance(small.action_space, gym.spaces.Discrete)
            assert isinstance(large.action_space, gym.spaces.Discrete)
            assert small.action_space.start == large.action_space.start
            assert small.action_space.n < large.action_space.n
    assert tuple(variable) == POPGYM_VARIABLE_DECK_FAMILIES
