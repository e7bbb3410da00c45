"""``critic_memory="separate"``: a critic with a memory of its own beside the actor's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from txrl import VMPO, MemoryPPO
from txrl.config import TrainConfig
from txrl.errors import ConfigError
from txrl.learners.recurrent_ppo import lstm_policy
from txrl.nn import PairedBackbone
from txrl.nn.state import state_to_numpy
from txrl.run.preflight import resolve

from .test_common import (
    TINY,
    assert_next_rollout_recomputed_exactly,
    collect_one_rollout,
    tmaze_env,
)

SEPARATE = dict(TINY, critic_memory="separate")


def model(algo=MemoryPPO, **kwargs):
    return algo(
        "MlpGTrXLPolicy",
        tmaze_env(2),
        n_steps=24,
        batch_size=48,  # one minibatch: its first pass comes before any gradient step
        segment_length=8,
        n_epochs=1,
        policy_kwargs=SEPARATE | kwargs,
        seed=0,
    )


@pytest.mark.parametrize("algo", [MemoryPPO, VMPO])
def test_training_pass_reproduces_acting_with_two_memories(algo) -> None:
    learner = model(algo)
    assert isinstance(learner.policy.backbone, PairedBackbone)
    learner.learn(3 * 48)  # memory carried across rollouts, weights updated in between
    assert learner.logger.name_to_value["train/approx_kl"] == pytest.approx(0.0, abs=1e-6)
    assert_next_rollout_recomputed_exactly(learner)


def test_the_value_trains_only_the_critics_memory_and_the_policy_only_the_actors() -> None:
    learner = model()
    learner.learn(48)
    collect_one_rollout(learner)
    policy = learner.policy

    def grads(of: str) -> tuple[float, float]:
        policy.zero_grad(set_to_none=True)
        batch = learner.rollout_buffer.all_segments(policy.backbone, learner.segment_length)
        values, log_prob, _, _, _ = learner.evaluate_batch(batch)
        (values.sum() if of == "value" else log_prob.sum()).backward()

        def norm(module: torch.nn.Module) -> float:
            return sum(float(p.grad.abs().sum()) for p in module.parameters() if p.grad is not None)

        return norm(policy.backbone.actor), norm(policy.backbone.critic)

    actor, critic = grads("value")
    assert actor == 0.0 and critic > 0.0
    actor, critic = grads("log_prob")
    assert actor > 0.0 and critic == 0.0
    # and the shared default: the value loss reaches the one memory
    shared = MemoryPPO(
        "MlpGTrXLPolicy",
        tmaze_env(2),
        n_steps=8,
        batch_size=16,
        segment_length=8,
        policy_kwargs=TINY,
    )
    assert not isinstance(shared.policy.backbone, PairedBackbone)


def test_save_load_and_predict_keep_both_memories(tmp_path) -> None:
    learner = model(predict_past=[1])
    learner.learn(48)
    learner.save(tmp_path / "model.zip")
    loaded = MemoryPPO.load(tmp_path / "model.zip")
    assert loaded.policy.critic_memory == "separate"
    assert isinstance(loaded.policy.backbone, PairedBackbone)
    env = tmaze_env(2, seed=3)
    obs, starts = env.reset(), np.ones(2, dtype=bool)
    state_a = state_b = None
    for _ in range(5):
        act_a, state_a = learner.predict(obs, state_a, starts, deterministic=True)
        act_b, state_b = loaded.predict(obs, state_b, starts, deterministic=True)
        assert np.array_equal(act_a, act_b)
        obs, _, starts, _ = env.step(act_a)
    assert state_a._fields[0].startswith("actor_") and any(
        f.startswith("critic_") for f in state_a._fields
    )
    # a state handed back as arrays (saved, or built by hand) is accepted too
    arrays = state_to_numpy(state_a)
    act_c, _ = learner.predict(obs, arrays, starts, deterministic=True)
    act_d, _ = learner.predict(obs, state_a, starts, deterministic=True)
    assert np.array_equal(act_c, act_d)


def test_a_bad_critic_memory_is_named() -> None:
    with pytest.raises(
        ValueError, match="critic_memory must be one of shared, separate, got 'own'"
    ):
        model(critic_memory="own")


def test_the_config_passes_it_to_txrl_policies_and_to_recurrent_ppo() -> None:
    base = {"name": "t", "env": {"id": "txrl/TMazePassive-v0"}}
    config = resolve(TrainConfig.from_dict(base | {"policy": {"critic_memory": "separate"}}))
    assert config.policy.policy_kwargs()["critic_memory"] == "separate"
    assert "critic_memory" not in resolve(TrainConfig.from_dict(base)).policy.policy_kwargs()
    lstm = resolve(
        TrainConfig.from_dict(
            base
            | {"algo": "recurrent_ppo", "policy": {"backbone": "lstm", "critic_memory": "shared"}}
        )
    )
    _, kwargs = lstm_policy(lstm.policy, "Mlp")
    assert kwargs["shared_lstm"] is True and kwargs["enable_critic_lstm"] is False
    with pytest.raises(ConfigError, match=r"policy\.critic_memory must be one of"):
        TrainConfig.from_dict(base | {"policy": {"critic_memory": "own"}})
