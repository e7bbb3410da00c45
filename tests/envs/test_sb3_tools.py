"""Every registered ``txrl/...`` id works with Stable-Baselines3's own tools.

``make_vec_env`` makes an env from its id with ``render_mode="rgb_array"`` unless told
otherwise, and retries without it on a ``TypeError``; ``SubprocVecEnv`` workers under
``forkserver``/``spawn`` have not imported txrl. These tests make every id the way those
tools do, so a task that rejects ``render_mode``, or one that cannot be made in a worker,
fails here rather than in a user's training script.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import textwrap
import warnings

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.env_util import make_vec_env

import txrl.envs

from ._helpers import INFINITE_BOX, SMALL_IMAGE, WRAPPED_ENV

HAS_POPGYM = importlib.util.find_spec("popgym") is not None
# memory-gym cannot be in the test extra (it pins an old gymnasium; see the memorygym extra).
HAS_MEMORY_GYM = importlib.util.find_spec("memory_gym") is not None
MISSING_IDS = (set() if HAS_POPGYM else set(txrl.envs.POPGYM_IDS)) | (
    set() if HAS_MEMORY_GYM else set(txrl.envs.MEMORY_GYM_IDS)
)
TXRL_IDS = sorted(
    env_id for env_id in gym.registry if env_id.startswith("txrl/") and env_id not in MISSING_IDS
)
#: Warnings SB3's checker may give, and why: the txrl ids are wrapped by gym.make; MiniGrid's
#: 7x7 view is not a CNN-sized image; POPGym's velocity-only CartPole declares unbounded
#: observations.
EXPECTED_WARNINGS = re.compile("|".join((WRAPPED_ENV, SMALL_IMAGE, INFINITE_BOX)))


def test_the_registry_holds_exactly_the_txrl_ids() -> None:
    assert set(TXRL_IDS) == set(txrl.envs.ALL_IDS) - MISSING_IDS
    assert HAS_POPGYM, "popgym is in the test extra; without it the POPGym ids go untested"


def _check_frame(frame: object, mode: str) -> None:
    if mode.endswith("rgb_array"):  # Memory Gym also draws "debug_rgb_array"
        assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8
        assert frame.ndim == 3 and frame.shape[2] == 3 and frame.any()
    else:
        assert mode == "ansi" and isinstance(frame, str) and frame


@pytest.mark.parametrize("env_id", TXRL_IDS)
def test_make_vec_env_render_modes_and_check_env(env_id: str) -> None:
    venv = make_vec_env(env_id, n_envs=2, seed=0)
    try:
        venv.reset()
        _, rewards, _, _ = venv.step(np.array([venv.action_space.sample() for _ in range(2)]))
        assert rewards.shape == (2,)
        (metadata, _) = venv.get_attr("metadata")
        modes = list(metadata.get("render_modes", []))
        # SB3 asks for rgb_array; a task that draws nothing is made again without a mode.
        sb3_mode = "rgb_array" if "rgb_array" in modes else None
        assert venv.get_attr("render_mode") == [sb3_mode, sb3_mode]
    finally:
        venv.close()

    # "human" opens a window; every other mode the task declares is drawn here.
    for mode in [None, *(m for m in modes if m != "human")]:
        env = gym.make(env_id, render_mode=mode)
        env.reset(seed=0)
        assert env.render_mode == mode
        if mode is not None:
            _check_frame(env.render(), mode)
            env.step(env.action_space.sample())
            _check_frame(env.render(), mode)
        env.close()

    valid = re.escape(repr((None, *modes)))
    with (
        pytest.raises(ValueError, match=rf"render_mode must be one of {valid} .*got 'video'"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")  # Gymnasium's own warning for an undeclared mode
        gym.make(env_id, render_mode="video")

    env = gym.make(env_id, render_mode=sb3_mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, warn=True, skip_render_check=False)
    env.close()
    unexpected = [str(w.message) for w in caught if not EXPECTED_WARNINGS.search(str(w.message))]
    assert not unexpected, unexpected


@pytest.mark.slow  # a fresh process and its env workers
def test_subproc_vec_env_workers_make_the_ids_themselves() -> None:
    # One id per family, made by SubprocVecEnv workers of a process that never imports txrl:
    # the "txrl.envs:" prefix has each worker import (and so register) the tasks. The fork
    # server imports SB3 (and torch) once, so the workers start in a fraction of a second.
    ids = [
        "txrl/TMaze-v0",
        "txrl/DelayedRecall-v0",
        "txrl/MiniGrid-MemoryS7-v0",
        "txrl/popgym-RepeatPreviousEasy-v0",
        "txrl/popgym-PositionOnlyCartPoleEasy-v0",
        *(["txrl/memorygym-MortarMayhem-Grid-v0"] if HAS_MEMORY_GYM else []),
    ]
    code = """
        import multiprocessing, os, sys
        import numpy as np
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.vec_env import SubprocVecEnv

        if __name__ == "__main__":
            multiprocessing.set_forkserver_preload(["stable_baselines3.common.vec_env"])
            for env_id in sys.argv[1:]:
                venv = make_vec_env("txrl.envs:" + env_id, n_envs=2, seed=0,
                                    vec_env_cls=SubprocVecEnv,
                                    vec_env_kwargs={"start_method": "forkserver"})
                venv.reset()
                _, rewards, _, _ = venv.step(
                    np.array([venv.action_space.sample() for _ in range(2)]))
                specs = venv.env_method("get_wrapper_attr", "spec")
                modes = venv.get_attr("render_mode")
                print(env_id, *sorted({s.id for s in specs}), rewards.shape,
                      *sorted(set(map(str, modes))))
                venv.close()
            assert "txrl" not in sys.modules
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *ids],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ids
    for env_id, line in zip(ids, lines, strict=True):
        mode = "None" if "RepeatPrevious" in env_id else "rgb_array"
        assert line.split() == [env_id, env_id, "(2,)", mode]
