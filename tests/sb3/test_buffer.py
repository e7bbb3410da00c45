"""The rollout buffer keeps what a minibatch cannot recompute, and no more."""

from __future__ import annotations

import numpy as np

from txrl import MemoryPPO
from txrl.nn.state import state_nbytes

from .test_common import tiny_kwargs, tmaze_env


def test_kept_segment_states_hold_no_keys_or_values() -> None:
    """Every minibatch re-projects its segments' keys and values with the current weights
    (``refresh_state``), so the states kept for the rollout hold only the layer inputs and
    the counters: about a third of a full state's bytes for the TrXL family."""
    model = MemoryPPO("MlpGTrXLPolicy", tmaze_env(2, length=4), n_steps=24, batch_size=16,
                      segment_length=8, n_epochs=1, policy_kwargs=tiny_kwargs("MlpGTrXLPolicy"),
                      seed=0)  # fmt: skip
    model.learn(48)
    buffer, backbone = model.rollout_buffer, model.policy.backbone
    batch = next(buffer.segments(backbone, 8, 2, generator=np.random.default_rng(0)))
    kept = buffer._segment_states[2]
    assert kept is not None, "the states were kept"
    assert kept.keys.numel() == kept.values.numel() == 0
    assert state_nbytes(kept) < 0.4 * state_nbytes(batch.memory) * kept.hidden.shape[0] / 2
    assert batch.memory.keys.shape == batch.memory.hidden.shape  # a minibatch gets them back


def test_a_separate_critic_memory_keeps_no_keys_or_values_either() -> None:
    """With ``critic_memory="separate"`` each part of the paired state drops its own keys and
    values, and a minibatch gets both back."""
    policy_kwargs = dict(tiny_kwargs("MlpGTrXLPolicy"), critic_memory="separate")
    model = MemoryPPO("MlpGTrXLPolicy", tmaze_env(2, length=4), n_steps=24, batch_size=16,
                      segment_length=8, n_epochs=1, policy_kwargs=policy_kwargs,
                      seed=0)  # fmt: skip
    model.learn(48)
    buffer, backbone = model.rollout_buffer, model.policy.backbone
    batch = next(buffer.segments(backbone, 8, 2, generator=np.random.default_rng(0)))
    kept = buffer._segment_states[2]
    assert kept is not None, "the states were kept"
    for part in ("actor", "critic"):
        assert getattr(kept, f"{part}_keys").numel() == getattr(kept, f"{part}_values").numel() == 0
        memory = batch.memory
        assert getattr(memory, f"{part}_keys").shape == getattr(memory, f"{part}_hidden").shape
