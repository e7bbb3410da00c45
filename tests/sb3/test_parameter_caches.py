"""Caches derived from the weights follow every update, whatever the optimizer."""

from __future__ import annotations

import gymnasium as gym
import pytest
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO


@pytest.mark.parametrize("told", [True, False])
def test_fused_adam_acting_equals_training_after_updates(told: bool) -> None:
    # told=False: the learner's calls to on_parameters_changed do nothing, and the caches
    # still follow the updates (the training pass before each optimizer step, and
    # train() / eval(), drop what the attention derived)
    env = DummyVecEnv([lambda: Monitor(gym.make("txrl/TMazePassive-v0", length=3))] * 2)
    env.seed(0)
    n_envs, n_steps = 2, 16
    model = MemoryPPO(
        "MlpGTrXLPolicy",
        env,
        n_steps=n_steps,
        batch_size=n_steps * n_envs,
        segment_length=8,
        n_epochs=2,
        learning_rate=3e-3,
        policy_kwargs={
            "d_model": 16,
            "n_layers": 2,
            "n_heads": 2,
            "memory_length": 6,
            "net_arch": [16],
            "optimizer_kwargs": {"fused": True},
        },
        seed=0,
    )
    if not told:
        model.policy.backbone.on_parameters_changed = lambda: None  # type: ignore[method-assign]  # nothing cleared
    model.learn(2 * n_steps * n_envs)  # weights updated by fused Adam between rollouts
    callback = model._init_callback(None)
    assert model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)
    model.policy.set_training_mode(True)
    batch = model.rollout_buffer.all_segments(model.policy.backbone, model.segment_length)
    values, log_prob, _, _, _ = model.evaluate_batch(batch)  # gradients on, as in train()
    assert (log_prob - batch.old_log_prob.flatten()).abs().max().item() <= 1e-5
    assert (values - batch.old_values.flatten()).abs().max().item() <= 1e-5
