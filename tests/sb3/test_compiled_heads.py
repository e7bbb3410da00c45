"""The acting heads inside the compiled ring step (``compile_step``): the compiled call that
steps the memory, writes the ring and runs the actor's and critic's heads gives what the
eager acting step gives, follows the weights after optimizer steps and a load, and serves
a second batch size."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from txrl import MemoryPPO
from txrl.nn.state import clone_state

from ..numeric import close
from .test_common import TINY, tmaze_env


def twins(n_envs: int = 3) -> tuple[MemoryPPO, MemoryPPO]:
    """Two models with the same weights, the first acting through the compiled step."""
    compiled = MemoryPPO("MlpGTrXLPolicy", tmaze_env(n_envs), n_steps=8, batch_size=8 * n_envs,
                         segment_length=4, n_epochs=1, seed=0,
                         policy_kwargs=dict(TINY, backbone_kwargs={"compile_step": True}))  # fmt: skip
    eager = MemoryPPO("MlpGTrXLPolicy", tmaze_env(n_envs), n_steps=8, batch_size=8 * n_envs,
                      segment_length=4, n_epochs=1, seed=0, policy_kwargs=dict(TINY))  # fmt: skip
    eager.policy.load_state_dict(compiled.policy.state_dict())
    return compiled, eager


def assert_heads_agree(compiled: MemoryPPO, eager: MemoryPPO, n_envs: int, steps: int) -> None:
    """Log-probs and values of ``steps`` acting steps from the same memory, both ways."""
    generator = torch.Generator().manual_seed(n_envs)
    state = compiled.policy.initial_state(n_envs)
    space = compiled.observation_space
    for t in range(steps):
        obs = torch.rand((n_envs, *space.shape), generator=generator)
        starts = torch.zeros(n_envs, dtype=torch.bool)
        starts[0] = t == steps // 2  # an episode starts halfway for one env
        with torch.inference_mode():
            copy = clone_state(state)
            log_probs, values, out = compiled.policy.act_discrete_heads(obs, state, starts)
            log_probs_e, values_e, out_e = eager.policy.act_discrete_heads(obs, copy, starts)
        assert close(log_probs, log_probs_e, 1e-5)
        assert close(values, values_e, 1e-5)
        for a, b in zip(out.state, out_e.state, strict=True):
            assert close(a.float(), b.float(), 1e-5)
        state = out.state


@pytest.mark.slow  # torch.compile
def test_compiled_heads_follow_weights_loads_and_batch_sizes() -> None:
    compiled, eager = twins()
    assert_heads_agree(compiled, eager, n_envs=3, steps=10)  # memory full from step 6
    assert "_compiled_step_fn" in compiled.policy.backbone.__dict__, "the step ran compiled"
    # kept out of a copy's state: a copy compiles its own
    assert "_compiled_step_fn" not in copy.deepcopy(compiled.policy).backbone.__dict__
    # optimizer steps (fused Adam) change the weights the compiled step reads
    compiled.learn(8 * 3)
    eager.policy.load_state_dict(compiled.policy.state_dict())
    assert_heads_agree(compiled, eager, n_envs=3, steps=8)
    # a load into the compiled model (other weights: the eager twin's, nudged)
    with torch.no_grad():
        for p in eager.policy.parameters():
            p.add_(0.01)
    eager.policy.on_parameters_changed()  # weights written with gradients off: told
    compiled.policy.load_state_dict(eager.policy.state_dict())
    assert_heads_agree(compiled, eager, n_envs=3, steps=8)
    # another batch size (compiles once more, for any size)
    assert_heads_agree(compiled, eager, n_envs=5, steps=8)


@pytest.mark.slow  # torch.compile
def test_compiled_predict_acts_as_the_eager_one() -> None:
    # predict runs the acting step's heads in the compiled call: the greedy actions and the
    # memory it returns are those of the eager predict
    compiled, eager = twins()
    obs = np.stack([compiled.observation_space.sample() for _ in range(3)])
    starts = np.array([True, False, False])
    state = state_e = None
    for _ in range(9):
        actions, state = compiled.predict(obs, state, starts, deterministic=True)
        actions_e, state_e = eager.predict(obs, state_e, starts, deterministic=True)
        assert np.array_equal(actions, actions_e)
        starts = np.zeros(3, dtype=bool)
    for a, b in zip(state, state_e, strict=True):
        assert close(a.float(), b.float(), 1e-5)
