"""The memory policies' ``predict_past`` auxiliary loss: which pairs count, what it trains,
what it keeps through save/load, and the errors its settings give."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from stable_baselines3.common.vec_env import DummyVecEnv
from torch import nn

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import VMPO, MemoryPPO
from txrl.config import TrainConfig
from txrl.errors import ConfigError
from txrl.run.preflight import resolve

SMALL = {"d_model": 16, "n_layers": 1, "n_heads": 2, "memory_length": 8}


def tmaze(n_envs: int = 2) -> DummyVecEnv:
    return DummyVecEnv([lambda: gym.make("txrl/TMazePassive-v0", length=3)] * n_envs)


def model(algo: type = MemoryPPO, **policy: object) -> MemoryPPO:
    return algo(
        "MlpGTrXLPolicy",
        tmaze(),
        n_steps=16,
        batch_size=16,
        segment_length=8,
        n_epochs=1,
        seed=0,
        policy_kwargs=SMALL | policy,
    )


def test_only_pairs_within_one_episode_count() -> None:
    """With the head the identity, a prediction equal to the standardised target scores 0 and
    one off by 1 in every feature scores 1: pairs across an episode start are left out, the
    rest averaged."""
    policy = model(predict_past=[2]).policy
    policy.past_heads = nn.Identity()  # head_2(output_t) = output_t
    t, b, f = 6, 2, 5
    features = torch.randn(t, b, f) * 3.0 + 1.0
    flat = features.reshape(t * b, f)
    standard = (features - flat.mean(0)) / flat.std(0, unbiased=False)
    starts = torch.zeros(t, b, dtype=torch.bool)
    starts[3, 0] = True  # env 0: episodes [0, 2] and [3, 5]
    output = torch.full((t, b, f), 100.0)  # far off wherever it is not set below
    output[2:, 1] = standard[:-2, 1]  # env 1's four pairs: exact
    output[2, 0] = standard[0, 0] + 1.0  # env 0's pair (0, 2): off by 1 in every feature
    output[5, 0] = standard[3, 0]  # env 0's pair (3, 5): exact
    # env 0's pairs (1, 3) and (2, 4) cross the start at 3 and must not count (100 away)
    loss = policy._past_prediction_loss(output, features, starts)
    assert loss.item() == pytest.approx(1.0 / 6, rel=1e-4)


def test_no_pair_gives_zero_with_a_graph() -> None:
    policy = model(predict_past=[1]).policy
    device = policy.device
    output = torch.randn(4, 2, 16, device=device, requires_grad=True)
    starts = torch.ones(4, 2, dtype=torch.bool, device=device)  # one-step episodes: no pair
    features = torch.randn(4, 2, policy.features_dim, device=device)
    loss = policy._past_prediction_loss(output, features, starts)
    assert loss.item() == 0.0
    loss.backward()  # a loss the learner can add and back-propagate
    assert output.grad is not None


@pytest.mark.parametrize("algo", [MemoryPPO, VMPO])
def test_learners_add_it_log_it_and_train_its_heads(algo: type, tmp_path) -> None:
    learner = model(algo, predict_past=[0, 1, 3])
    heads = learner.policy.past_heads.weight.detach().clone()
    assert heads.shape == (3 * learner.policy.features_dim, 16)  # K * F rows, D columns
    learner.learn(64)
    # the last update's records (SB3 dumps the logs before each update, not after)
    assert 0.0 < learner.logger.name_to_value["train/aux/past_prediction"] < 10.0
    assert not torch.equal(heads, learner.policy.past_heads.weight)

    learner.save(tmp_path / "model.zip")
    loaded = algo.load(tmp_path / "model.zip")
    assert loaded.policy.predict_past == (0, 1, 3)
    assert torch.equal(loaded.policy.past_heads.weight, learner.policy.past_heads.weight)


def test_off_by_default() -> None:
    policy = model().policy
    assert policy.predict_past == () and not hasattr(policy, "past_heads")


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        ([-1], "predict_past must be a list of ints >= 0"),
        ([1.5], "predict_past must be a list of ints >= 0"),
        ([True], "predict_past must be a list of ints >= 0"),
        ([2, 2], "lists an offset twice"),
        ([1, 8], r"offsets \[8\] reach beyond a training sequence of segment_length 8"),
    ],
)
def test_bad_offsets_are_named(offsets: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        model(predict_past=offsets)


def test_config_checks_the_offsets_against_the_learner() -> None:
    tiny = {
        "env": {"id": "txrl/TMazePassive-v0", "kwargs": {"length": 3}, "n_envs": 2},
        "policy": SMALL | {"predict_past": [1, 32]},
        "ppo": {"n_steps": 32, "segment_length": 32, "batch_size": 64},
    }
    with pytest.raises(
        ConfigError, match=r"predict_past offsets must be below ppo\.segment_length \(32\)"
    ):
        resolve(TrainConfig.from_dict(tiny))
    rppo = {
        "algo": "recurrent_ppo",
        "env": tiny["env"],
        "policy": {"backbone": "lstm", "predict_past": [1]},
    }
    with pytest.raises(
        ConfigError, match=r"policy\.predict_past applies to txrl's memory learners"
    ):
        resolve(TrainConfig.from_dict(rppo))
    ok = TrainConfig.from_dict(dict(tiny, policy=SMALL | {"predict_past": [1, 4]}))
    assert resolve(ok).policy.policy_kwargs()["predict_past"] == [1, 4]


@pytest.mark.parametrize("algo", [MemoryPPO, VMPO])
@pytest.mark.parametrize(
    "aux", [{"predict_past": [1, 2]}, {"reconstruct_observation": True}], ids=["past", "recon"]
)
def test_auxiliary_modules_leave_the_shared_initial_weights_as_they_are(
    algo: type, aux: dict
) -> None:
    """At a given seed, turning an auxiliary loss on adds its modules and changes no weight
    the policy has without it, so a paired on/off study differs only in the loss."""
    plain = model(algo).policy.state_dict()
    with_aux = model(algo, **aux).policy.state_dict()
    assert set(plain) < set(with_aux)
    for name, tensor in plain.items():
        torch.testing.assert_close(with_aux[name], tensor, rtol=0, atol=0, msg=name)
