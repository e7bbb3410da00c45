"""MemoryPPO trains with every registered backbone through ``MlpMemoryPolicy`` (ablations)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from txrl import MemoryPPO, backbone_names
from txrl.backbones import backbone_config_class

from ..numeric import F32_REL, close
from .test_common import collect_one_rollout, tmaze_env

SMALL = {"d_model": 16, "n_layers": 1, "n_heads": 2, "memory_length": 4}
# the auxiliary losses the backbones document, which the learner must add and log
AUX = {
    "adaptive_span": "span_l1",
    "compressive": "attention_reconstruction",
    "universal": "ponder_cost",
}


def small_model(name: str, n_envs: int, length: int, **kwargs) -> MemoryPPO:
    """MemoryPPO with backbone ``name`` at the SMALL settings its config has."""
    fields = {f.name for f in dataclasses.fields(backbone_config_class(name))}
    settings = {k: v for k, v in SMALL.items() if k in fields}
    policy_kwargs = {"backbone": name, **settings, "net_arch": [16]}
    return MemoryPPO(
        "MlpMemoryPolicy",
        tmaze_env(n_envs, length=length),
        policy_kwargs=policy_kwargs,
        seed=0,
        **kwargs,
    )


@pytest.mark.slow  # 2048 training steps per backbone
@pytest.mark.parametrize("name", backbone_names())
def test_memory_ppo_trains_with_backbone(name: str) -> None:
    model = small_model(
        name,
        4,
        4,
        n_steps=64,
        batch_size=128,
        segment_length=16,
        n_epochs=2,
        aux_loss_coef={"span_l1": 1e-3},
    )
    model.learn(2048)
    logged = model.logger.name_to_value
    assert math.isfinite(logged["train/loss"])
    if name in AUX:
        assert math.isfinite(logged[f"train/aux/{AUX[name]}"])


@pytest.mark.parametrize("name", backbone_names())
def test_training_pass_reproduces_acting_for_every_backbone(name: str) -> None:
    model = small_model(
        name,
        2,
        6,
        n_steps=16,
        batch_size=32,
        segment_length=8,
        n_epochs=2,
        learning_rate=1e-2,  # large steps, so memory cached with stale weights would show
    )
    model.learn(3 * 32)  # memory carried across rollouts, weights updated between
    collect_one_rollout(model)
    model.policy.set_training_mode(True)
    batch = model.rollout_buffer.all_segments(model.policy.backbone, model.segment_length)
    values, log_prob, *_ = model.evaluate_batch(batch)
    # float32 acting vs training pass: a tolerance relative to the magnitudes compared
    assert close(log_prob, batch.old_log_prob.flatten(), F32_REL)
    assert close(values, batch.old_values.flatten(), F32_REL)
