"""A policy's acting step is safe whatever happens around it: linears whose weights are
computed at each call (weight norm, spectral norm, pruning) in the backbone and the heads,
gradients through the acting call, two threads acting with one policy, a copy taken in the
middle of a step; and it acts with the weights the policy has, after writes through
``p.data`` too (a rollout start, or ``on_parameters_changed()`` before ``predict``).
``predict`` keeps the memory it is given across a weight change."""

from __future__ import annotations

import copy
import pickle
import sys
import threading
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations, prune

from txrl import MemoryPPO
from txrl.nn.state import clone_state

from ..numeric import close
from .test_common import TINY, assert_next_rollout_recomputed_exactly, collect_one_rollout
from .test_common import tmaze_env as tmaze

N_ENVS = 3


def tiny_model(compile_step: bool = False, **kwargs: Any) -> MemoryPPO:
    """A tiny GTrXL MemoryPPO on 3 passive T-mazes of length 3."""
    policy_kwargs = dict(TINY, backbone_kwargs={"compile_step": compile_step})
    settings = {"n_steps": 8, "batch_size": 8 * N_ENVS, "segment_length": 4, "n_epochs": 1}
    settings |= kwargs
    return MemoryPPO("MlpGTrXLPolicy", tmaze(N_ENVS), policy_kwargs=policy_kwargs, seed=0, **settings)  # fmt: skip


def observations(model: MemoryPPO, steps: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:  # fmt: skip
    """``steps`` random observation batches and episode starts (one reset halfway)."""
    generator = torch.Generator().manual_seed(seed)
    shape = model.observation_space.shape
    assert shape is not None
    batches = []
    for t in range(steps):
        starts = torch.zeros(N_ENVS, dtype=torch.bool)
        starts[seed % N_ENVS] = t == steps // 2
        batches.append((torch.rand((N_ENVS, *shape), generator=generator), starts))
    return batches


def acting_outputs(policy: Any, batches: list, *, grad: bool = False) -> list[torch.Tensor]:
    """Log-probs and values of each step, acting from an empty memory: without gradients (in
    inference mode, as rollouts act: the ring step) or with them (the sequence pass)."""
    state = policy.initial_state(N_ENVS)
    outputs = []
    for obs, starts in batches:
        with torch.inference_mode(not grad), torch.set_grad_enabled(grad):
            log_probs, values, out = policy.act_discrete_heads(obs, state, starts)
        outputs.append(torch.cat((log_probs, values), dim=1).detach().clone())
        state = out.state
    return outputs


def reparametrize(policy: Any) -> None:
    """Linears of the backbone and of the heads with weights computed at each call."""
    parametrizations.weight_norm(policy.action_net)
    parametrizations.spectral_norm(policy.value_net)
    prune.l1_unstructured(policy.mlp_extractor.policy_net[0], "weight", amount=0.3)
    parametrizations.weight_norm(policy.backbone.embed)
    prune.l1_unstructured(policy.backbone.blocks[0].mlp[0], "weight", amount=0.3)


def assert_model_parameters(policy: nn.Module) -> None:
    """Every parameter of ``policy`` is a trainable ``nn.Parameter`` of its own."""
    for name, p in policy.named_parameters():
        assert type(p) is nn.Parameter and p.requires_grad and not p.is_inference(), name


@pytest.mark.parametrize("compile_step", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_reparametrized_linears_in_the_backbone_and_the_heads_act(compile_step: bool) -> None:
    model = tiny_model(compile_step)
    policy = model.policy.eval()
    reparametrize(policy)
    batches = observations(model, steps=10, seed=0)  # memory full from step 7
    fast = acting_outputs(policy, batches)
    reference = acting_outputs(policy, batches, grad=True)
    for a, b in zip(fast, reference, strict=True):
        assert close(a, b, 1e-5)
    assert_model_parameters(policy)


def test_gradients_through_the_acting_call_reach_the_heads_with_compile_step() -> None:
    # with gradients on, the heads run on the parameters, not on copies of them
    model = tiny_model(compile_step=True)
    policy = model.policy
    (obs, starts), *_ = observations(model, steps=1, seed=1)
    _, values, log_prob, _, _ = policy.act(obs, policy.initial_state(N_ENVS), starts)
    (values.sum() + log_prob.sum()).backward()
    for module in (policy.action_net, policy.value_net, policy.mlp_extractor.policy_net[0],
                   policy.mlp_extractor.value_net[0], policy.backbone.embed):  # fmt: skip
        assert module.weight.grad is not None and module.weight.grad.abs().sum() > 0


def test_two_threads_acting_with_one_policy_agree_with_one() -> None:
    model = tiny_model()
    policy = model.policy.eval()
    sequences = [observations(model, steps=60, seed=seed) for seed in (1, 2)]
    expected = [acting_outputs(policy, batches) for batches in sequences]
    results: list[Any] = [None, None]

    def act(index: int) -> None:
        try:
            results[index] = [acting_outputs(policy, sequences[index]) for _ in range(3)]
        except Exception as error:  # handed to the main thread
            results[index] = error

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns within steps, not between them
    try:
        threads = [threading.Thread(target=act, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    for result, reference in zip(results, expected, strict=True):
        if isinstance(result, Exception):
            raise result
        for outputs in result:
            for a, b in zip(outputs, reference, strict=True):
                assert close(a, b, 1e-6)
    assert_model_parameters(policy)


@pytest.mark.parametrize("duplicate", [copy.deepcopy, lambda m: pickle.loads(pickle.dumps(m))])
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_a_copy_taken_in_the_middle_of_a_step_trains(duplicate, mode: str) -> None:
    model = tiny_model()
    policy = model.policy.eval()
    copies: list[Any] = []

    def take_copy(module: nn.Module, args: Any, output: Any) -> None:
        handle.remove()  # once, and not part of the copy
        # inference mode would make the copy's tensors inference tensors (torch's rule):
        # a hook that copies the model leaves it for the copy
        with torch.inference_mode(False):
            copies.append(duplicate(policy))

    handle = policy.backbone.blocks[0].register_forward_hook(take_copy)
    (obs, starts), *_ = observations(model, steps=1, seed=3)
    context = torch.no_grad() if mode == "no_grad" else torch.inference_mode()
    with context:
        policy.act_discrete_heads(obs, policy.initial_state(N_ENVS), starts)
    (duplicate_policy,) = copies
    assert_model_parameters(duplicate_policy)
    for (name, p), q in zip(policy.state_dict().items(), duplicate_policy.state_dict().values(), strict=True):  # fmt: skip
        assert torch.equal(p, q), name
    # it trains: gradients reach every head and an optimizer step changes the weights
    before = {name: p.detach().clone() for name, p in duplicate_policy.named_parameters()}
    optimizer = torch.optim.SGD(duplicate_policy.parameters(), lr=0.1)
    _, values, log_prob, _, _ = duplicate_policy.act(obs, duplicate_policy.initial_state(N_ENVS), starts)  # fmt: skip
    (values.sum() + log_prob.sum()).backward()
    optimizer.step()
    for name in ("action_net.weight", "value_net.weight", "backbone.embed.weight"):
        assert not torch.equal(before[name], duplicate_policy.get_parameter(name)), name


def write_through_data(policy: nn.Module, seed: int) -> None:
    """Every parameter moved by a small random step written through ``p.data`` (as an EMA or
    a weight perturbation may be): no version counter records it."""
    generator = torch.Generator().manual_seed(seed)
    for p in policy.parameters():
        p.data.copy_(p.detach() + 0.1 * torch.randn(p.shape, generator=generator))


@pytest.mark.parametrize("compile_step", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_predict_acts_with_weights_written_through_data_once_told(compile_step: bool) -> None:
    # no event drops what acting derived after a write through p.data: the writer says so
    model, twin = tiny_model(compile_step), tiny_model()
    obs = np.stack([model.observation_space.sample() for _ in range(N_ENVS)])
    starts, carry_on = np.array([True, False, True]), np.zeros(N_ENVS, dtype=bool)
    _, state = model.predict(obs, None, starts, deterministic=True)
    for _ in range(3):  # whatever the acting step derives from the weights, derived
        _, state = model.predict(obs, state, carry_on, deterministic=True)
    write_through_data(model.policy, seed=4)
    model.policy.on_parameters_changed()
    twin.policy.load_state_dict(model.policy.state_dict())  # the same weights, fresh
    given = clone_state(state)
    actions, after = model.predict(obs, state, carry_on, deterministic=True)
    twin_actions, twin_after = twin.predict(obs, given, carry_on, deterministic=True)
    assert np.array_equal(actions, twin_actions)
    for a, b in zip(after, twin_after, strict=True):
        assert close(a.float(), b.float(), 1e-5)


def test_a_rollout_acts_with_weights_written_through_data() -> None:
    n_steps = 24
    model = tiny_model(n_steps=n_steps, batch_size=n_steps * N_ENVS, segment_length=8)
    model.learn(n_steps * N_ENVS)  # a rollout and an update
    collect_one_rollout(model)  # whatever acting derives from the updated weights, derived
    write_through_data(model.policy, seed=5)
    # the next rollout acts with the written weights: the training pass recomputes it
    assert_next_rollout_recomputed_exactly(model)


def test_predict_keeps_the_memory_it_is_given_across_a_weight_change() -> None:
    # the state is data (as RecurrentPPO's LSTM state): its keys and values stay as the old
    # weights computed them, and only the new step is computed with the new weights
    model = tiny_model()
    policy, backbone = model.policy, model.policy.backbone
    obs = np.stack([model.observation_space.sample() for _ in range(N_ENVS)])
    carry_on = np.zeros(N_ENVS, dtype=bool)
    _, state = model.predict(obs, None, np.ones(N_ENVS, dtype=bool), deterministic=True)
    for _ in range(4):
        _, state = model.predict(obs, state, carry_on, deterministic=True)
    with torch.no_grad():  # a weight change, as an optimizer step writes it
        generator = torch.Generator().manual_seed(6)
        for p in policy.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=generator))
    given = clone_state(state)
    _, after = model.predict(obs, state, carry_on, deterministic=True)
    with torch.no_grad():
        x = policy.features_extractor(torch.as_tensor(obs).float())[None]  # (1, B, F)
        starts = torch.zeros(1, N_ENVS, dtype=torch.bool)
        as_given = backbone.run(x, given, starts).state
        refreshed = backbone.run(x, backbone.refresh_state(given), starts).state
    ordered = backbone.ordered(after)
    for a, b in zip(ordered, as_given, strict=True):
        assert close(a.float(), b.float(), 1e-5)
    # what a refreshed memory would have given instead: other keys, another step
    assert not close(ordered.keys, refreshed.keys, 1e-3)
    assert not close(ordered.hidden[:, :, -1], refreshed.hidden[:, :, -1], 1e-3)
