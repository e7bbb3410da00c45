"""The memory learners end to end on every device torch sees here: the CPU always, and a
CUDA GPU where there is one (CI has none; on a GPU machine each test runs on both).

On a device, a rollout keeps the memory there (the acting state, the trace, the carried-in
memory and the segments the training pass reads), the training pass recomputes what acting
computed (fp32: within 1e-5, as on the CPU), ``predict`` hands back a state on the device
that the next call continues, and the bfloat16 training pass stays within the tolerance
``tests/sb3/test_precision.py`` states.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from txrl import VMPO, MemoryPPO
from txrl.nn.state import clone_state

from ..numeric import DEVICES
from .test_precision import BF16_ABS, recompute, trained

EXACT = 1e-5


def trained_on(
    device: str, algo: type = MemoryPPO, cuda_graph: bool = True, precision: str = "fp32"
) -> MemoryPPO | VMPO:
    """A small model on ``device`` after a few updates, with one fresh rollout in its buffer
    (acted through a CUDA graph on a GPU, unless ``cuda_graph`` is False)."""
    return trained(algo, precision, device=device, cuda_graph=cuda_graph)


def devices_of(state: object) -> set[str]:
    return {field.device.type for field in state}  # type: ignore[attr-defined]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cuda_graph", [True, False])
@pytest.mark.parametrize("algo", [MemoryPPO, VMPO])
def test_rollout_memory_stays_on_the_device_and_training_recomputes_acting(
    device: str, algo: type, cuda_graph: bool
) -> None:
    model = trained_on(device, algo, cuda_graph)
    buffer = model.rollout_buffer
    assert devices_of(buffer.trace) == {device}
    assert devices_of(buffer.initial_memory) == {device}
    assert devices_of(model._memory) == {device}
    batch = buffer.all_segments(model.policy.backbone, model.segment_length)
    assert batch.observations.device.type == device
    values, log_prob, old_values, old_log_prob = recompute(model)
    assert values.device.type == device
    assert (values - old_values).abs().max() <= EXACT
    assert (log_prob - old_log_prob).abs().max() <= EXACT


@pytest.mark.parametrize("device", DEVICES)
def test_predict_keeps_its_state_on_the_device_and_continues_it(device: str) -> None:
    model = trained_on(device)
    env = model.env
    obs = env.reset()
    starts = np.ones(env.num_envs, dtype=bool)
    _, state = model.predict(obs, state=None, episode_start=starts, deterministic=True)
    assert devices_of(state) == {device}
    # the next call continues the state it was given: the same as carrying a copy by hand
    carried = clone_state(state)
    no_start = np.zeros(env.num_envs, dtype=bool)
    first, state = model.predict(obs, state=state, episode_start=no_start, deterministic=True)
    again, _ = model.predict(obs, state=carried, episode_start=no_start, deterministic=True)
    np.testing.assert_array_equal(first, again)
    assert devices_of(state) == {device}


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_training_pass_on_the_device_is_within_tolerance(device: str) -> None:
    model = trained_on(device, precision="bf16")
    values, log_prob, old_values, old_log_prob = recompute(model)
    assert values.dtype == torch.float32
    assert 1e-6 < (values - old_values).abs().max() <= BF16_ABS
    assert (log_prob - old_log_prob).abs().max() <= BF16_ABS
