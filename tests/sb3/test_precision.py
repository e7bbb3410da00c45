"""``training_precision="bf16"``: the training pass under bfloat16 autocast, within a stated
tolerance of fp32, with acting untouched.

The tolerance: bfloat16 keeps 8 bits of mantissa (a relative rounding of 2^-8 ~ 4e-3 per
product), and the heads read latents of order 1 (tanh MLPs), so log-probs and values
recomputed by a bf16 training pass are within ``BF16_ABS`` = 2e-2 of the fp32 acting pass's,
and the gradient of a loss points the same way as fp32's (cosine >= 0.999). A real bug
(a wrong memory, a missing term) moves them by far more.
"""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import VMPO, MemoryPPO
from txrl.config import TrainConfig
from txrl.errors import ConfigError
from txrl.run.preflight import resolve

BF16_ABS = 2e-2
SMALL = {"d_model": 32, "n_layers": 2, "n_heads": 2, "memory_length": 16, "net_arch": [32]}


def tmaze(n_envs: int = 4) -> DummyVecEnv:
    env = DummyVecEnv([lambda: Monitor(gym.make("txrl/TMazePassive-v0", length=6))] * n_envs)
    env.seed(0)
    return env


def trained(
    algo: type, precision: str, dtype: torch.dtype | None = None, **kwargs: object
) -> MemoryPPO | VMPO:
    """A model after a few updates, with one fresh rollout in its buffer (``dtype``: the
    policy moved to it before training; ``kwargs``: more of the learner's arguments, e.g.
    its device)."""
    model = algo(
        "MlpGTrXLPolicy",
        tmaze(),
        n_steps=32,
        batch_size=128,
        segment_length=8,
        n_epochs=1,
        seed=0,
        policy_kwargs=dict(SMALL, training_precision=precision),
        **kwargs,
    )
    if dtype is not None:
        model.policy.to(dtype)
    model.learn(256)
    callback = model._init_callback(None)
    assert model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)
    model.policy.set_training_mode(True)
    return model


def recompute(
    model: MemoryPPO | VMPO,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The training pass over the whole rollout: values, log-probs and the acting pass's."""
    batch = model.rollout_buffer.all_segments(model.policy.backbone, model.segment_length)
    values, log_prob, _, _, _ = model.evaluate_batch(batch)
    return values, log_prob, batch.old_values.flatten(), batch.old_log_prob.flatten()


@pytest.mark.parametrize("algo", [MemoryPPO, VMPO])
def test_bf16_training_pass_is_within_tolerance_of_fp32_acting(algo: type) -> None:
    model = trained(algo, "bf16")
    values, log_prob, old_values, old_log_prob = recompute(model)
    assert values.dtype == log_prob.dtype == torch.float32  # heads and losses stay fp32
    assert (values - old_values).abs().max() <= BF16_ABS
    assert (log_prob - old_log_prob).abs().max() <= BF16_ABS
    # bf16 is really in use: the recomputation is not the fp32 one
    assert (values - old_values).abs().max() > 1e-6

    model.policy.training_precision = "fp32"
    values, log_prob, old_values, old_log_prob = recompute(model)
    assert (values - old_values).abs().max() <= 1e-5  # the same weights, fp32: exact again
    assert (log_prob - old_log_prob).abs().max() <= 1e-5


def test_bf16_gradient_points_as_fp32() -> None:
    model = trained(MemoryPPO, "bf16")

    def gradient(precision: str) -> torch.Tensor:
        model.policy.training_precision = precision
        model.policy.zero_grad()
        values, log_prob, _, _ = recompute(model)
        (log_prob.mean() + values.pow(2).mean()).backward()
        return torch.cat(
            [p.grad.flatten() for p in model.policy.parameters() if p.grad is not None]
        )

    bf16, fp32 = gradient("bf16"), gradient("fp32")
    assert torch.nn.functional.cosine_similarity(bf16, fp32, dim=0) >= 0.999
    assert not torch.equal(bf16, fp32)


def test_bf16_learns_finite_and_is_kept_by_save_and_load(tmp_path) -> None:
    model = trained(MemoryPPO, "bf16")
    model.learn(256, reset_num_timesteps=False)
    assert all(torch.isfinite(p).all() for p in model.policy.parameters())
    model.save(tmp_path / "model.zip")
    loaded = MemoryPPO.load(tmp_path / "model.zip")
    assert loaded.policy.training_precision == "bf16"


def test_unknown_precision_is_refused_with_the_valid_ones() -> None:
    with pytest.raises(
        ValueError, match=r"training_precision must be one of fp32, bf16, got 'fp16'"
    ):
        MemoryPPO("MlpGTrXLPolicy", tmaze(), policy_kwargs=dict(SMALL, training_precision="fp16"))


def test_config_passes_it_to_memory_learners_and_refuses_it_for_recurrent_ppo() -> None:
    base = {"env": {"id": "txrl/TMazePassive-v0"}, "policy": {"training_precision": "bf16"}}
    config = TrainConfig.from_dict(base)
    assert config.policy.policy_kwargs()["training_precision"] == "bf16"
    assert "training_precision" not in TrainConfig.from_dict({}).policy.policy_kwargs()
    rppo = dict(
        base, algo="recurrent_ppo", policy={"backbone": "lstm", "training_precision": "bf16"}
    )
    with pytest.raises(ConfigError, match=r"policy\.training_precision 'bf16' applies to"):
        resolve(TrainConfig.from_dict(rppo))
    with pytest.raises(ConfigError, match="training_precision"):
        TrainConfig.from_dict({"policy": {"training_precision": "fp16"}})


@pytest.mark.parametrize("algo", [MemoryPPO, VMPO])
def test_a_float64_policy_trains_and_its_training_pass_matches_acting(algo: type) -> None:
    """``policy.to(torch.float64)`` acts and trains in float64: the training pass keeps the
    heads' dtype (it casts to fp32 only after a bf16 trunk) and recomputes the rollout's
    log-probabilities and values to the rollout buffer's float32 rounding."""
    model = trained(algo, "fp32", dtype=torch.float64)
    assert all(p.dtype == torch.float64 for p in model.policy.parameters())
    with torch.no_grad():
        values, log_prob, old_values, old_log_prob = recompute(model)
    assert values.dtype == log_prob.dtype == torch.float64
    torch.testing.assert_close(log_prob, old_log_prob.to(log_prob), rtol=0, atol=1e-5)
    torch.testing.assert_close(values, old_values.to(values), rtol=0, atol=1e-5)
