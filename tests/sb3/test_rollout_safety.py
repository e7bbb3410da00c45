"""The rollout's bootstrap at truncations, and what it does with data it cannot use."""

from __future__ import annotations

import tempfile

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3.common.vec_env import DummyVecEnv

from txrl import VMPO, MemoryPPO

TINY = {"d_model": 16, "n_layers": 1, "n_heads": 2, "memory_length": 4, "net_arch": [16]}


class _CountingEnv(gym.Env):
    """Observation [t], reward 0; truncated (never terminated) after ``horizon`` steps."""

    observation_space = spaces.Box(-np.inf, np.inf, (1,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, horizon: int = 3) -> None:
        self.horizon = horizon
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self._t += 1
        obs = np.array([float(self._t)], dtype=np.float32)
        return obs, 0.0, False, self._t >= self.horizon, {}


def _constant_value(policy, value: float) -> None:
    """Make the value head output ``value`` whatever its input."""
    with torch.no_grad():
        policy.value_net.weight.zero_()
        policy.value_net.bias.fill_(value)


def _model(algo, env: DummyVecEnv, n_steps: int, **kwargs):
    """``algo`` with a tiny GTrXL, one segment of ``n_steps`` per env and minibatch."""
    settings = {"n_steps": n_steps, "batch_size": n_steps, "segment_length": n_steps, "seed": 0}
    return algo("MlpGTrXLPolicy", env, policy_kwargs=TINY, **settings, **kwargs)


def _counting_model(algo, **kwargs):
    """``algo`` on two counting envs, one rollout of 9 steps per env, gamma 0.9."""
    return _model(algo, DummyVecEnv([_CountingEnv] * 2), 9, gamma=0.9, **kwargs)


def _first_rollout(model) -> None:
    _, callback = model._setup_learn(model.n_steps * model.n_envs)
    assert model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)


def test_truncation_bootstrap_uses_the_acting_network_in_eval_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a target network acting, the final observation of a truncated episode is valued
    by that network (whose memory the rollout carries), not by the one being trained."""
    model = _counting_model(VMPO, target_update_period=1000, popart=False)
    assert model.target_policy is not None
    _constant_value(model.target_policy, 2.0)
    _constant_value(model.policy, 50.0)
    model.policy.set_training_mode(True)  # as train() leaves it
    target = model.target_policy
    modes: list[bool] = []  # the target's training flag at each value_of call
    value_of = target.value_of

    def recording_value_of(*args, **kwargs):
        modes.append(target.training)
        return value_of(*args, **kwargs)

    monkeypatch.setattr(target, "value_of", recording_value_of)
    _first_rollout(model)
    assert len(modes) > 1 and not any(modes)  # truncations and the rollout's end, in eval mode
    step = np.arange(9)[:, None]  # (N, 1): every third step ends an episode by truncation
    expected = np.where(step % 3 == 2, 0.9 * 2.0, 0.0) * np.ones((1, 2))
    np.testing.assert_allclose(model.rollout_buffer.rewards, expected, rtol=1e-6)


def test_truncation_bootstrap_without_a_target_network() -> None:
    model = _counting_model(MemoryPPO)
    _constant_value(model.policy, 3.0)
    _first_rollout(model)
    step = np.arange(9)[:, None]
    expected = np.where(step % 3 == 2, 0.9 * 3.0, 0.0) * np.ones((1, 2))
    np.testing.assert_allclose(model.rollout_buffer.rewards, expected, rtol=1e-6)


class _BrokenEnv(_CountingEnv):
    """A counting env whose step ``at`` emits ``value`` in the observation or the reward."""

    def __init__(self, field: str, value: float, at: int = 4) -> None:
        super().__init__(horizon=100)
        self.field, self.value, self.at = field, value, at

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self._t == self.at:
            if self.field == "observation":
                obs = np.array([self.value], dtype=np.float32)
            else:
                reward = self.value
        return obs, reward, terminated, truncated, info


def _env_with_one_broken(field: str, value: float) -> DummyVecEnv:
    """Three envs; env 1 breaks at its 4th step (rollout step 3)."""
    return DummyVecEnv(
        [_CountingEnv, lambda: _BrokenEnv(field, value), lambda: _CountingEnv(horizon=100)]
    )


@pytest.mark.parametrize("algo", [MemoryPPO, VMPO])
@pytest.mark.parametrize("field", ["observation", "reward"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_env_data_is_named_with_env_and_step(algo, field: str, value: float) -> None:
    model = _model(algo, _env_with_one_broken(field, value), 8)
    with pytest.raises(ValueError, match=rf"non-finite {field}.* env 1 at rollout step 3"):
        model.learn(24)


def test_non_finite_check_can_warn_or_be_switched_off() -> None:
    def model(check_finite: str) -> MemoryPPO:
        env = _env_with_one_broken("reward", float("nan"))
        return _model(MemoryPPO, env, 8, check_finite=check_finite)

    warned = model("warn")
    callback = warned._setup_learn(24)[1]
    with pytest.warns(RuntimeWarning, match="non-finite reward .* env 1 at rollout step 3"):
        warned.collect_rollouts(warned.env, callback, warned.rollout_buffer, warned.n_steps)
    assert np.isnan(warned.rollout_buffer.rewards[3, 1])  # kept, as asked
    silent = model("off")
    callback = silent._setup_learn(24)[1]
    silent.collect_rollouts(silent.env, callback, silent.rollout_buffer, silent.n_steps)
    with pytest.raises(ValueError, match="check_finite must be one of 'raise', 'warn', 'off'"):
        model("sometimes")


@pytest.mark.parametrize("algo", [MemoryPPO, VMPO])
def test_a_non_finite_loss_stops_training_before_the_weights_change(algo) -> None:
    """Finite but huge rewards overflow the squared value error in float32."""
    env = DummyVecEnv([lambda: _BrokenEnv("reward", 1e30, at=1)] * 2)
    # PopArt rescales the value head before training; without it nothing changes the weights
    extra = {"popart": False} if algo is VMPO else {}
    model = _model(algo, env, 8, **extra)
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    with pytest.raises(FloatingPointError, match="non-finite training update after 0 epochs"):
        model.learn(16)
    after = model.policy.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("verbose", [0, 1])
def test_learn_without_tensorboard_creates_no_folder(
    tmp_path, monkeypatch: pytest.MonkeyPatch, verbose: int
) -> None:
    """SB3's default logger makes an empty ``SB3-<date>`` folder in the temp dir for every
    ``learn`` without ``tensorboard_log``; txrl's learners log to stdout (or nowhere) without one."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    model = _counting_model(MemoryPPO, verbose=verbose)
    model.learn(18)
    model.learn(18, reset_num_timesteps=False)
    assert not list(tmp_path.glob("SB3-*"))
    assert model.logger.dir is None


class _SpaceEnv(gym.Env):
    action_space = spaces.Discrete(2)

    def __init__(self, observation_space: spaces.Space) -> None:
        self.observation_space = observation_space


@pytest.mark.parametrize("algo", [MemoryPPO, VMPO])
@pytest.mark.parametrize(
    ("space", "name"),
    [
        (spaces.Graph(spaces.Box(-1, 1, (3,)), spaces.Discrete(2)), "Graph"),
        (spaces.Text(8), "Text"),
        (spaces.Sequence(spaces.Discrete(3)), "Sequence"),
    ],
)
def test_unsupported_observation_space_is_named_before_sb3_wraps_the_env(
    algo, space: spaces.Space, name: str
) -> None:
    with pytest.raises(ValueError, match=rf"unsupported observation space {name}.*valid: Box"):
        algo("MlpGTrXLPolicy", _SpaceEnv(space))
