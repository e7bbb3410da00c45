"""The rollout buffer keeps what a minibatch cannot recompute, and no more."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from txrl import MemoryPPO
from txrl.nn.state import state_nbytes, state_to_numpy
from txrl.sb3 import buffer as buffer_module

from ..numeric import F32_REL, close
from .test_backbones_train import small_model
from .test_common import collect_one_rollout, tiny_kwargs, tmaze_env


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


@pytest.mark.parametrize("name", ["compressive", "gru"])
@pytest.mark.parametrize("rebuild", [False, True], ids=["kept states", "rebuilt per minibatch"])
def test_a_state_trace_is_kept_at_segment_starts_only(
    name: str, rebuild: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backbone whose trace is its whole state (``trace_is_state``) keeps it at the steps
    a segment starts at, one in S, and the training pass still reproduces acting, from the
    states kept for the rollout and from states rebuilt per minibatch alike."""
    if rebuild:
        monkeypatch.setattr(buffer_module, "SEGMENT_STATES_MAX_BYTES", 0)
    model = small_model(name, 2, 6, n_steps=16, batch_size=32, segment_length=8, n_epochs=1)
    backbone = model.policy.backbone
    assert backbone.trace_is_state
    model.learn(32)
    collect_one_rollout(model)
    buffer = model.rollout_buffer
    assert buffer.trace_stride == 8
    assert {field.shape[0] for field in buffer.trace} == {16 // 8}
    model.policy.set_training_mode(True)
    for batch in buffer.segments(backbone, 8, 1, shuffle=False):
        values, log_prob, *_ = model.evaluate_batch(batch)
        assert close(log_prob, batch.old_log_prob.flatten(), F32_REL)
        assert close(values, batch.old_values.flatten(), F32_REL)
    assert (buffer._segment_states[2] is None) == rebuild
    with pytest.raises(ValueError, match="kept every 8th step"):
        next(buffer.segments(backbone, 4, 1))


def test_a_rollout_asks_for_the_traces_the_buffer_keeps_only() -> None:
    """Where the trace is the state (a copy of the memory per step), a rollout asks the
    policy for the trace of the segment starts only, the steps the buffer keeps; the
    trace of a step it keeps cannot be left out."""
    asked: list[bool] = []
    model = small_model("compressive", 2, 6, n_steps=16, batch_size=32, segment_length=8,
                        n_epochs=1)  # fmt: skip
    act = model.policy.act

    def spy(*args: Any, trace: bool = True, **kwargs: Any) -> Any:
        asked.append(trace)
        return act(*args, trace=trace, **kwargs)

    model.policy.act = spy  # type: ignore[method-assign]  # records what the rollout asks
    model.learn(16)
    assert asked == [step % 8 == 0 for step in range(16)]
    buffer = model.rollout_buffer
    assert buffer.trace.hidden.shape[0] == 2  # steps 0 and 8
    buffer.reset()
    buffer.keep_trace_every(8)
    assert buffer.wants_trace()
    with pytest.raises(ValueError, match="the trace of step 0 is kept, got None"):
        buffer.add_trace(None)


def test_a_compressive_buffer_keeps_no_keys_or_values() -> None:
    """The Compressive Transformer's state caches the keys and values of its memory; its
    trace (the state before each step) and the states kept for the rollout leave them out,
    and each minibatch projects them again with the current weights."""
    model = small_model("compressive", 2, 6, n_steps=16, batch_size=32, segment_length=8,
                        n_epochs=1)  # fmt: skip
    model.learn(32)
    collect_one_rollout(model)
    buffer, backbone = model.rollout_buffer, model.policy.backbone
    assert buffer.trace.keys.numel() == buffer.trace.values.numel() == 0
    carried = buffer.initial_memory  # read by no segment: the trace holds each start's state
    assert carried.keys.numel() == carried.values.numel() == 0
    batch = next(buffer.segments(backbone, 8, 2, shuffle=False))
    kept = buffer._segment_states[2]
    assert kept is not None and kept.keys.numel() == kept.values.numel() == 0
    memory = batch.memory
    assert memory.keys.shape[2] == memory.compressed.shape[2] + memory.hidden.shape[2]
    assert memory.keys.requires_grad  # projected with the current weights, with gradient


def test_a_compressive_memory_saved_without_keys_and_values_is_restored() -> None:
    """A checkpoint of a compressive run saved before the state held keys and values holds
    its six other fields, one saved before its slots were rings its first eight (slots
    oldest first): restored, the rings start at slot 0 and the next rollout projects the
    keys and values from the memory, as from the whole memory."""
    model = small_model("compressive", 2, 6, n_steps=16, batch_size=32, segment_length=8,
                        n_epochs=1)  # fmt: skip
    model.learn(32)
    backbone = model.policy.backbone
    memory = model._memory
    assert memory is not None and bool(memory.compressed_position.any())  # the rings moved
    saved = model.get_memory()
    assert saved is not None and len(saved) == 10
    # older runs saved their slots oldest first, without ring positions (8 fields), and
    # before that without keys and values (6)
    oldest_first = state_to_numpy(backbone.ordered(memory))
    model.set_memory(saved)
    whole = backbone.ordered(model._live_memory(2))
    for n in (8, 6):
        model.set_memory(oldest_first[:n])
        restored = model._live_memory(2)
        assert not restored.position.any() and not restored.compressed_position.any()
        for a, b in zip(restored, whole, strict=True):
            assert close(a.float(), b.float(), F32_REL)
    with pytest.raises(ValueError, match="tuple of 10 arrays"):
        model.set_memory(saved[:5])  # anything else is refused as before


def test_a_trxl_trace_is_kept_at_every_step() -> None:
    """TrXL's trace is a step's layer inputs, from which `state_at` rebuilds the window of
    any step: every step's is kept."""
    model = small_model("gtrxl", 2, 6, n_steps=16, batch_size=32, segment_length=8, n_epochs=1)
    assert not model.policy.backbone.trace_is_state
    model.learn(32)
    assert model.rollout_buffer.trace_stride == 1
    assert {field.shape[0] for field in model.rollout_buffer.trace} == {16}


def test_keep_trace_every_names_what_is_valid() -> None:
    model = small_model("gru", 2, 6, n_steps=16, batch_size=32, segment_length=8, n_epochs=1)
    buffer = model.rollout_buffer
    buffer.reset()
    with pytest.raises(ValueError, match="must divide the rollout's 16 steps, got 5"):
        buffer.keep_trace_every(5)
