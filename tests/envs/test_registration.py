from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import warnings

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

import txrl.envs
from txrl.envs import EnvFactory, make_env_fn, register_envs

from .test_tmaze import CueReader


def _python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_every_id_is_registered_and_register_envs_is_idempotent() -> None:
    assert len(txrl.envs.ALL_IDS) == len(set(txrl.envs.ALL_IDS)) == 3 + 6 + 56 + 10
    before = {i: gym.registry[i] for i in txrl.envs.ALL_IDS}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # re-registering would warn "Overriding environment"
        register_envs()
        register_envs()
    assert all(gym.registry[i] is spec for i, spec in before.items())


def test_envs_modules_import_neither_torch_nor_optional_suites() -> None:
    # txrl's own __init__ imports its models lazily, so this covers it too.
    out = _python(
        """
        import sys
        import gymnasium as gym
        import txrl.envs
        heavy = ("torch", "stable_baselines3", "popgym", "minigrid", "memory_gym")
        print("after import:", sorted(m for m in heavy if m in sys.modules))
        for env_id in (*txrl.envs.TXRL_TASK_IDS, "txrl/MiniGrid-MemoryS7-v0",
                       "txrl/popgym-RepeatFirstEasy-v0"):
            env = gym.make(env_id)
            env.reset(seed=0)
            env.step(env.action_space.sample())
        print("after make:", sorted(m for m in heavy if m in sys.modules))
        """
    )
    assert "after import: []" in out
    assert "after make: ['minigrid', 'popgym']" in out


def test_module_colon_id_form_works_in_a_fresh_process() -> None:
    out = _python(
        """
        import sys
        import gymnasium as gym
        assert "txrl" not in sys.modules
        env = gym.make("txrl.envs:txrl/TMaze-v0", length=50)
        obs, _ = env.reset(seed=0)
        print(type(env.unwrapped).__name__, env.unwrapped.length, obs.shape)
        """
    )
    assert out.split() == ["TMazeEnv", "50", "(3,)"]


def test_make_env_fn_is_picklable_and_validates_the_id() -> None:
    fn = make_env_fn("txrl/TMazePassive-v0", length=7)
    clone = pickle.loads(pickle.dumps(fn))
    assert isinstance(clone, EnvFactory) and clone == fn
    env = clone()
    assert env.unwrapped.length == 7 and not env.unwrapped.active
    assert make_env_fn("txrl.envs:txrl/DelayedRecall-v0", k=2)().unwrapped.k == 2
    with pytest.raises(gym.error.Error, match="TMase"):
        make_env_fn("txrl/TMase-v0")


def test_spec_round_trip() -> None:
    for env_id, kwargs in [
        ("txrl/TMaze-v0", {"length": 9}),
        ("txrl/popgym-PositionOnlyPendulumEasy-v0", {}),
    ]:
        env = gym.make(env_id, **kwargs)
        again = gym.make(env.spec)
        assert again.spec == env.spec
        assert np.array_equal(env.reset(seed=1)[0], again.reset(seed=1)[0])


def _solve_vectorized(venv: VecEnv, n_envs: int, episodes: int) -> list[bool]:
    readers = [CueReader(active=True) for _ in range(n_envs)]
    successes: list[bool] = []
    venv.seed(0)
    obs = venv.reset()
    while len(successes) < episodes:
        actions = np.array([readers[i](obs[i]) for i in range(n_envs)])
        obs, _, dones, infos = venv.step(actions)
        for i in np.flatnonzero(dones):
            successes.append(infos[i]["is_success"])
            readers[i] = CueReader(active=True)
    return successes


@pytest.mark.slow  # spawned env worker processes
def test_subproc_vec_env_with_spawn() -> None:
    venv = SubprocVecEnv([make_env_fn("txrl/TMaze-v0", length=6)] * 2, start_method="spawn")
    try:
        assert venv.observation_space.shape == (3,)
        assert venv.get_attr("length") == [6, 6]
        successes = _solve_vectorized(venv, 2, episodes=10)
    finally:
        venv.close()
    assert successes and all(successes)


def test_dummy_vec_env() -> None:
    venv = DummyVecEnv([make_env_fn("txrl/TMaze-v0", length=3)] * 3)
    assert all(_solve_vectorized(venv, 3, episodes=12))


def test_make_vec_env_passes_env_kwargs_to_the_factory() -> None:
    venv = make_vec_env(make_env_fn("txrl/TMaze-v0", length=3), n_envs=2, env_kwargs={"length": 4})
    assert venv.get_attr("length") == [4, 4]
    successes = _solve_vectorized(venv, 2, episodes=6)
    assert all(successes)
