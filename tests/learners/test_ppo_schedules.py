"""MemoryPPO's ``lin_<x>`` settings: from a config to SB3's schedules and into each update's loss."""

from __future__ import annotations

import pytest

from txrl.config import ConfigError, TrainConfig
from txrl.run.algorithms import settings_kwargs


def test_lin_rates_decay_linearly_to_zero_over_the_budget() -> None:
    """rl-baselines3-zoo's ``lin_<x>``: x at the start, 0 at the end of the budget."""
    import gymnasium as gym
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.utils import LinearSchedule
    from stable_baselines3.common.vec_env import DummyVecEnv

    import txrl.envs  # registers the tasks
    from tests._runs import TINY

    ppo = dict(TINY["ppo"], learning_rate="lin_1e-3", clip_range="lin_0.2")
    config = TrainConfig.from_dict(dict(TINY, ppo=ppo))
    kwargs = settings_kwargs(config.learner_settings)
    assert isinstance(kwargs["learning_rate"], LinearSchedule)
    assert kwargs["learning_rate"](0.25) == pytest.approx(2.5e-4)
    assert kwargs["clip_range"](0.5) == pytest.approx(0.1)

    rates: list[float] = []

    class Rates(BaseCallback):
        def _on_rollout_start(self) -> None:
            rates.append(self.model.policy.optimizer.param_groups[0]["lr"])

        def _on_step(self) -> bool:
            return True

    env = DummyVecEnv([lambda: gym.make("txrl/TMazePassive-v0", length=3)] * 2)
    model = txrl.MemoryPPO(
        "MlpGTrXLPolicy", env, policy_kwargs=config.policy.policy_kwargs(), **kwargs
    )
    model.learn(8 * 32, callback=Rates())  # 8 rollouts of 16 steps x 2 envs
    # before rollout k the previous update ran at progress 1 - k/8: 1e-3 * (1 - k/8)
    assert rates == pytest.approx([1e-3 * (1 - k / 8) for k in range(8)])


def test_a_lin_entropy_bonus_decays_in_memory_ppos_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ppo.ent_coef: lin_<x>``: the loss of each update gets x times the progress remaining."""
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv

    import txrl.envs  # registers the tasks
    import txrl.learners.ppo.algorithm as ppo_module
    from tests._runs import TINY

    config = TrainConfig.from_dict(dict(TINY, ppo=dict(TINY["ppo"], ent_coef="lin_0.1")))
    kwargs = settings_kwargs(config.learner_settings)
    coefficients: list[float] = []
    loss = ppo_module.ppo_loss

    def recording(**kw: object) -> object:
        coefficients.append(kw["ent_coef"])  # type: ignore[arg-type]
        return loss(**kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ppo_module, "ppo_loss", recording)
    env = DummyVecEnv([lambda: gym.make("txrl/TMazePassive-v0", length=3)] * 2)
    model = txrl.MemoryPPO(
        "MlpGTrXLPolicy", env, policy_kwargs=config.policy.policy_kwargs(), **kwargs
    )
    model.learn(4 * 32)  # 4 rollouts of 16 steps x 2 envs
    per_update = sorted(set(coefficients), reverse=True)
    assert per_update == pytest.approx([0.1 * (1 - k / 4) for k in range(1, 5)])


def test_memory_ppos_update_settings_read_each_schedule_at_the_progress() -> None:
    """One typed, immutable PPOUpdate per ``train()``: clip ranges and the entropy bonus
    read from their schedules at the progress remaining, None for an unset value clip."""
    import gymnasium as gym
    from stable_baselines3.common.logger import Logger

    import txrl.envs  # registers the tasks
    from tests._runs import TINY
    from txrl.learners.ppo.algorithm import PPOUpdate
    from txrl.sb3.schedule import schedule

    config = TrainConfig.from_dict(TINY)
    env = gym.make("txrl/TMazePassive-v0", length=3)

    def update(**kwargs: object) -> PPOUpdate:
        model = txrl.MemoryPPO(
            "MlpGTrXLPolicy", env, policy_kwargs=config.policy.policy_kwargs(), **kwargs
        )
        model.set_logger(Logger(folder=None, output_formats=[]))
        model._current_progress_remaining = 0.25
        return model._update_settings()

    scheduled = update(
        clip_range=schedule("lin_0.4"),
        clip_range_vf=schedule("lin_2"),
        ent_coef=schedule("lin_0.1"),
    )
    assert scheduled == pytest.approx(PPOUpdate(clip_range=0.1, clip_range_vf=0.5, ent_coef=0.025))
    assert isinstance(scheduled, PPOUpdate)
    assert update(clip_range=0.3, ent_coef=0.01) == PPOUpdate(0.3, None, 0.01)
    with pytest.raises(AttributeError):
        scheduled.ent_coef = 1.0  # type: ignore[misc]


def test_recurrent_ppo_takes_no_entropy_schedule() -> None:
    """sb3-contrib's RecurrentPPO wants a float: ``lin_`` is MemoryPPO's alone, and refused."""
    with pytest.raises(ConfigError, match=r"recurrent_ppo\.ent_coef must be a number >= 0, got"):
        TrainConfig.from_dict({"algo": "recurrent_ppo", "recurrent_ppo": {"ent_coef": "lin_0.1"}})


@pytest.mark.parametrize("bad", ["cos_1e-3", "lin_", "lin_0", "lin_-1e-3", "linear"])
def test_a_rate_that_is_neither_a_number_nor_lin_is_refused(bad: str) -> None:
    with pytest.raises(
        ConfigError,
        match=rf"ppo.learning_rate must be a number > 0 or a string lin_<number>, got '{bad}'",
    ):
        TrainConfig.from_dict({"ppo": {"learning_rate": bad}})
