"""The rollout buffer keeps what a minibatch cannot recompute, and no more."""

from __future__ import annotations

from typing import Any

import numpy as np

from txrl import MemoryPPO
from txrl.nn.state import state_nbytes

from .test_common import tiny_kwargs, tmaze_env


def _kept_and_minibatch(policy_kwargs: dict) -> tuple[Any, Any]:
    """The state kept for the third segment of a trained model's last rollout (three
    segments of 8 steps per env), and a minibatch of two segments."""
    model = MemoryPPO("MlpGTrXLPolicy", tmaze_env(2, length=4), n_steps=24, batch_size=16,
                      segment_length=8, n_epochs=1, policy_kwargs=policy_kwargs,
                      seed=0)  # fmt: skip
    model.learn(48)
    buffer, backbone = model.rollout_buffer, model.policy.backbone
    batch = next(buffer.segments(backbone, 8, 2, generator=np.random.default_rng(0)))
    kept = buffer._segment_states[2]
    assert kept is not None, "the states were kept"
    return kept, batch


def test_kept_segment_states_hold_no_keys_or_values() -> None:
    """Every minibatch re-projects its segments' keys and values with the current weights
    (``refresh_state``), so the states kept for the rollout hold only the layer inputs and
    the counters: about a third of a full state's bytes for the TrXL family."""
    kept, batch = _kept_and_minibatch(tiny_kwargs("MlpGTrXLPolicy"))
    assert kept.keys.numel() == kept.values.numel() == 0
    assert state_nbytes(kept) < 0.4 * state_nbytes(batch.memory) * kept.hidden.shape[0] / 2
    assert batch.memory.keys.shape == batch.memory.hidden.shape  # a minibatch gets them back


def test_a_separate_critic_memory_keeps_no_keys_or_values_either() -> None:
    """With ``critic_memory="separate"`` each part of the paired state drops its own keys and
    values, and a minibatch gets both back."""
    kept, batch = _kept_and_minibatch(dict(tiny_kwargs("MlpGTrXLPolicy"), critic_memory="separate"))
    for part in ("actor", "critic"):
        assert getattr(kept, f"{part}_keys").numel() == getattr(kept, f"{part}_values").numel() == 0
        memory = batch.memory
        assert getattr(memory, f"{part}_keys").shape == getattr(memory, f"{part}_hidden").shape
