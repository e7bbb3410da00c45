"""The Memory Gym adapter: ids, spaces, checkers, is_success, reset_params, shared pygame.

memory-gym is installed outside the test extra (it pins gymnasium 0.29; see the ``memorygym``
extra), so the tests that make envs need it installed and are skipped without it; the install
line and the error raised without memory-gym are checked either way.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env

import txrl.envs
from txrl.envs.memory_gym_adapter import (
    MEMORY_GYM_ENTRY_POINTS,
    MEMORY_GYM_ENV_NAMES,
    MEMORY_GYM_INSTALL_HINT,
    make_memory_gym_env,
    memory_gym_env_id,
)

from ._helpers import WRAPPED_ENV, run_env_checkers, same_trajectory

HAS_MEMORY_GYM = importlib.util.find_spec("memory_gym") is not None
needs_memory_gym = pytest.mark.skipif(
    not HAS_MEMORY_GYM, reason=f"memory-gym is not installed ({MEMORY_GYM_INSTALL_HINT})"
)
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

#: Short episodes for every task: a time limit where the task has one, two commands otherwise.
SHORT: dict[str, dict[str, Any]] = {
    name: {"command_count": [2]} if name.startswith("MortarMayhem") else {"max_steps": 24}
    for name in MEMORY_GYM_ENV_NAMES
}


def _name(env_id: str) -> str:
    return env_id.removeprefix("txrl/memorygym-").removesuffix("-v0")


def test_install_line_matches_the_extra_and_the_error() -> None:
    # Read as text: tomllib is 3.11+, and txrl supports 3.10.
    text = PYPROJECT.read_text()
    assert re.search(r'^memorygym = \["pygame>=2\.6"\]$', text, re.MULTILINE)
    assert re.search(r'^all = \["txrl\[[a-z,]*\bmemorygym\b', text, re.MULTILINE)
    # The pyproject comment documents the same line as the error message.
    assert MEMORY_GYM_INSTALL_HINT in text
    assert MEMORY_GYM_INSTALL_HINT.startswith('pip install ".[memorygym]" && ')
    assert "pip install --no-deps memory-gym==" in MEMORY_GYM_INSTALL_HINT
    if HAS_MEMORY_GYM:
        pinned = MEMORY_GYM_INSTALL_HINT.rpartition("memory-gym==")[2]
        assert metadata.version("memory-gym") == pinned
        major, minor = (int(p) for p in metadata.version("pygame").split(".")[:2])
        assert (major, minor) >= (2, 6)
        assert int(metadata.version("gymnasium").split(".")[0]) >= 1  # not downgraded


def test_missing_memory_gym_names_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "memory_gym", None)
    monkeypatch.setitem(sys.modules, "memory_gym.mortar_mayhem_grid", None)
    with pytest.raises(ImportError, match=r"memory-gym") as excinfo:
        gym.make("txrl/memorygym-MortarMayhem-Grid-v0")
    assert MEMORY_GYM_INSTALL_HINT in str(excinfo.value)
    assert "--no-deps because memory-gym pins gymnasium==0.29" in str(excinfo.value)


def test_bad_arguments_fail_before_importing() -> None:
    with pytest.raises(ValueError, match=r"name must be one of the Memory Gym tasks .*'Maze'"):
        make_memory_gym_env("Maze")
    with pytest.raises(ValueError, match=r"reset_params must be a dict or None, got 3"):
        make_memory_gym_env("MysteryPath-Grid", reset_params=3)  # type: ignore[arg-type]


@needs_memory_gym
def test_ids_cover_every_memory_gym_task() -> None:
    import memory_gym  # noqa: F401  # registers Memory Gym's own ids

    upstream = {
        env_id.removesuffix("-v0"): spec.entry_point
        for env_id, spec in gym.registry.items()
        if isinstance(spec.entry_point, str) and spec.entry_point.startswith("memory_gym.")
    }
    assert upstream == {n: f"memory_gym.{e}" for n, e in MEMORY_GYM_ENTRY_POINTS.items()}
    assert tuple(map(memory_gym_env_id, MEMORY_GYM_ENV_NAMES)) == txrl.envs.MEMORY_GYM_IDS
    assert set(txrl.envs.MEMORY_GYM_IDS) <= set(gym.registry)


@needs_memory_gym
@pytest.mark.parametrize("env_id", txrl.envs.MEMORY_GYM_IDS)
def test_makes_steps_passes_checkers_and_reports_success(env_id: str) -> None:
    name = _name(env_id)
    env = gym.make(env_id, reset_params=SHORT[name])
    frame_space = env.observation_space
    if name.startswith("MortarMayhemB"):  # adds the one-hot command sequence
        assert isinstance(frame_space, gym.spaces.Dict)
        frame_space = frame_space["visual_observation"]
    assert frame_space == gym.spaces.Box(0, 255, (84, 84, 3), np.uint8)
    grid = name.endswith("-Grid") or name == "Endless-MysteryPath"
    expected_actions = gym.spaces.Discrete(4) if grid else gym.spaces.MultiDiscrete([3, 3])
    assert env.action_space == expected_actions
    run_env_checkers(env, allowed=[WRAPPED_ENV])
    # Upstream Endless Mortar Mayhem carries state from one episode into the next (two fresh
    # envs agree from reset(seed=3), one env reset twice does not), so it is left out here.
    if name != "Endless-MortarMayhem":
        assert same_trajectory(env, seed=3, n_steps=30)

    # Random episodes: is_success appears exactly on the last step, from Memory Gym's own
    # success, and never for the Endless versions, which define none.
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    for _ in range(2):
        for _ in range(1000):
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            assert obs in env.observation_space and np.isfinite(reward)
            if terminated or truncated:
                break
            assert "is_success" not in info
        else:
            raise AssertionError("episode did not end")
        if name.startswith("Endless-"):
            assert "is_success" not in info and "success" not in info
        elif info["is_success"]:
            assert info["success"] == 1
        env.reset()
    env.close()


@needs_memory_gym
def test_is_success_is_true_on_won_episodes() -> None:
    # One command on a 3x3 arena: random moves carry it out in some episodes, not in others.
    # Memory Gym's own success is 1 after the last command even when the agent missed it.
    env = gym.make(
        "txrl/memorygym-MortarMayhem-Grid-v0",
        reset_params={"arena_size": 3, "command_count": [1]},
    )
    env.action_space.seed(0)
    outcomes = set()
    for seed in range(40):
        env.reset(seed=seed)
        while True:
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            if terminated or truncated:
                break
        raw = env.unwrapped
        on_target = raw.normalized_agent_position == raw._target_pos
        assert info["success"] == 1 and info["is_success"] is on_target
        outcomes.add(info["is_success"])
    assert outcomes == {True, False}
    env.close()


@needs_memory_gym
def test_reset_params_apply_to_every_episode_and_are_checked() -> None:
    env = gym.make("txrl/memorygym-MysteryPath-Grid-v0", reset_params={"max_steps": 5})
    for seed in range(2):
        env.reset(seed=seed)
        assert env.unwrapped.max_episode_steps == 5
    # Options given to reset override them for that episode only.
    env.reset(seed=0, options={"max_steps": 7})
    assert env.unwrapped.max_episode_steps == 7
    env.reset(seed=0)
    assert env.unwrapped.max_episode_steps == 5
    env.close()
    with pytest.raises(
        ValueError,
        match=re.escape("unknown reset_params ['max_step'] for Memory Gym MysteryPath-Grid;")
        + r" valid keys: \[.*'max_steps'",
    ):
        gym.make("txrl/memorygym-MysteryPath-Grid-v0", reset_params={"max_step": 5})


@needs_memory_gym
def test_envs_of_one_process_keep_their_own_frames_and_survive_closes() -> None:
    # All Memory Gym envs of a process draw on pygame's single display surface.
    venv = make_vec_env("txrl/memorygym-MysteryPath-Grid-v0", n_envs=2, seed=0)
    obs = venv.reset()
    assert not np.array_equal(obs[0], obs[1])  # different seeds, different paths
    frames = venv.env_method("render")
    for i in range(2):
        assert np.array_equal(frames[i], obs[i].transpose(1, 0, 2))
    # Closing one env leaves the other drawing; a closed env is usable again after reset.
    venv.envs[0].close()
    obs, _, _, _ = venv.step(np.array([1, 2]))
    assert obs[1].any()
    again, _ = venv.envs[0].reset(seed=5)
    assert again.any()
    venv.close()
    env = gym.make("txrl/memorygym-SearingSpotlights-v0")
    assert env.reset(seed=0)[0].any()  # pygame starts again after the last close
    env.close()
