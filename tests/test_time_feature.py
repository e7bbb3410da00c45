"""``env.time_feature``: the fraction of the episode's step limit left, appended to each
observation (Pardo et al. 2018), in training, evaluation and a resumed run alike."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from sb3_contrib.common.wrappers import TimeFeatureWrapper

from tests._runs import TINY, crash_after, tiny, train_tiny
from tests.test_hostile_inputs import SPACE_ENVS
from txrl import cli
from txrl.config import TrainConfig
from txrl.errors import ConfigError
from txrl.run.checkpoint import RESUME_MEMBER
from txrl.run.envs import make_envs, make_eval_env, restore_envs
from txrl.run.preflight import resolve
from txrl.run.run_files import CHECKPOINT_DIR

TIME = {**TINY["env"], "time_feature": True}
NO_LIMIT = "txrl_test/MultiBinaryActions-v0"  # a Box observation and no step limit
assert NO_LIMIT in SPACE_ENVS  # registered by the hostile-input cases


def time_feature(env: gym.Env) -> TimeFeatureWrapper:
    while not isinstance(env, TimeFeatureWrapper):
        env = env.env  # type: ignore[attr-defined]
    return env


def config(**env: object) -> TrainConfig:
    return TrainConfig.from_dict(tiny(env={**TINY["env"], **env}))


def test_the_feature_counts_down_the_episode_limit_and_restarts_with_each_episode() -> None:
    # POPGym RepeatPreviousMedium: 103 steps an episode, its max_episode_length
    cfg = config(id="txrl/popgym-RepeatPreviousMedium-v0", kwargs={}, time_feature=True)
    resolve(cfg)
    envs = make_envs(cfg, 2, 0)
    obs = np.asarray(envs.reset())
    assert obs.shape == (2, 5)
    seen = [obs[:, -1]]
    for _ in range(103):
        obs, _, dones, infos = envs.step(np.zeros(2, dtype=np.int64))
        obs = np.asarray(obs)
        if dones.any():
            assert dones.all()
            seen.append(np.array([info["terminal_observation"][-1] for info in infos]))
        seen.append(obs[:, -1])
    feature = np.stack(seen)
    expected = 1 - np.arange(104) / 103
    np.testing.assert_allclose(feature[:104], np.stack([expected] * 2, axis=1), atol=1e-6)
    np.testing.assert_allclose(feature[104], 1.0)  # the next episode's first observation
    envs.close()


def test_an_evaluation_on_a_longer_corridor_counts_from_its_own_limit() -> None:
    cfg = TrainConfig.from_dict(tiny(env=TIME, eval={**TINY["eval"], "env_kwargs": {"length": 30}}))
    train, evaluate = make_envs(cfg, 1, 0), make_eval_env(cfg, episodes=1)
    train.reset(), evaluate.reset()
    for _ in range(2):
        obs_train = np.asarray(train.step(np.zeros(1, dtype=np.int64))[0])
        obs_eval = np.asarray(evaluate.step(np.zeros(1, dtype=np.int64))[0])
    limit_train = train.envs[0].unwrapped.max_steps  # type: ignore[attr-defined]
    limit_eval = evaluate.envs[0].unwrapped.max_steps  # type: ignore[attr-defined]
    assert limit_eval > limit_train
    assert obs_train[0, -1] == pytest.approx(1 - 2 / limit_train)
    assert obs_eval[0, -1] == pytest.approx(1 - 2 / limit_eval)
    train.close(), evaluate.close()


def test_a_given_step_limit_is_used() -> None:
    envs = make_envs(config(time_feature=True, time_feature_steps=4), 1, 0)
    envs.reset()
    obs = np.asarray(envs.step(np.zeros(1, dtype=np.int64))[0])
    assert obs[0, -1] == pytest.approx(0.75)
    envs.close()


def test_bad_settings_name_what_is_valid() -> None:
    with pytest.raises(ConfigError, match=r"env\.time_feature is false"):
        config(time_feature_steps=10)
    with pytest.raises(ConfigError, match="1-D Box observation"):
        resolve(config(id="txrl/MiniGrid-MemoryS7-v0", kwargs={}, time_feature=True))
    # CartPole's registered limit (500) is found; a task that gives none needs the setting
    resolve(config(id="CartPole-v1", kwargs={}, time_feature=True))
    with pytest.raises(ConfigError, match=r"set env\.time_feature_steps"):
        resolve(config(id=NO_LIMIT, kwargs={}, time_feature=True))
    resolve(config(id=NO_LIMIT, kwargs={}, time_feature=True, time_feature_steps=10))


def test_a_killed_run_resumes_with_its_envs_mid_episode(tmp_path: Path) -> None:
    run_dir = train_tiny(tmp_path, env={**TIME, "kwargs": {"length": 30}})
    assert cli.main(["eval", str(run_dir), "--episodes", "2"]) == 0
    crash_after(run_dir, 64)
    with zipfile.ZipFile(run_dir / CHECKPOINT_DIR / "step_000000064.zip") as archive:
        state = pickle.loads(archive.read(RESUME_MEMBER))
    cfg = TrainConfig.from_dict(tiny(env={**TIME, "kwargs": {"length": 30}}))
    envs, exact = restore_envs(cfg, state)
    assert exact
    # restored mid-episode: the feature goes on from where the checkpoint left it
    counts = [time_feature(env)._current_step for env in envs.envs]  # type: ignore[attr-defined]
    assert any(c > 0 for c in counts)
    envs.close()
    assert cli.main(["train", "--resume", str(run_dir)]) == 0
