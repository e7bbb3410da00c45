"""The acting step as a CUDA graph (``txrl.sb3.graphs``): where it applies, a replay computes
what the eager step computes; elsewhere (a CPU, as on CI) the learners act eagerly, and a
graph is refused with the reason."""

from __future__ import annotations

import warnings

import pytest
import torch

from txrl import MemoryPPO, backbone_names
from txrl.nn import PairedBackbone
from txrl.nn.state import clone_state
from txrl.sb3.graphs import GraphedActing, graphs_apply

from ..nn.conftest import small_backbone
from ..numeric import DEVICES
from .test_backbones_train import small_model as backbone_model
from .test_precision import SMALL, tmaze


def small_model(device: str, **kwargs: object) -> MemoryPPO:
    return MemoryPPO(
        "MlpGTrXLPolicy", tmaze(), n_steps=32, batch_size=64, segment_length=8, seed=0,
        device=device, policy_kwargs=SMALL, **kwargs,
    )  # fmt: skip


def inputs(policy, steps: int, n_envs: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(1)
    shape = (n_envs, *policy.observation_space.shape)
    return [
        (
            torch.randn(shape, generator=gen).to(policy.device),
            (torch.rand(n_envs, generator=gen) < 0.1).to(policy.device),
        )
        for _ in range(steps)
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_a_replayed_step_computes_what_the_eager_step_computes(device: str) -> None:
    model = small_model(device)
    policy = model.policy.eval()
    steps = inputs(policy, 24, 4)  # M = 16: the ring wraps around
    start, (first_obs, first_starts) = policy.initial_state(4), steps[0]
    if not graphs_apply(policy):
        with pytest.raises(ValueError, match=f"needs a policy on a CUDA device.*on {device}"):
            GraphedActing(policy, first_obs, start, first_starts)
        return
    graphed = GraphedActing(policy, first_obs, start, first_starts)
    state = clone_state(start)
    for t, (obs, starts) in enumerate(steps):
        torch.manual_seed(t)
        with torch.inference_mode():
            actions, values, log_prob, dist, out = policy.act(obs, state, starts)
        state = out.state
        torch.manual_seed(t)  # the draw is eager: the same generator state, the same actions
        g_actions, g_values, g_log_prob, g_dist, g_out = graphed(obs, starts)
        assert torch.equal(g_actions, actions)
        assert torch.allclose(g_log_prob, log_prob, atol=1e-6)
        assert torch.allclose(g_values, values, atol=1e-6)
        assert torch.allclose(g_dist.distribution.logits, dist.distribution.logits, atol=1e-6)
        for mine, theirs in zip(g_out.trace, out.trace, strict=True):
            assert torch.allclose(mine, theirs, atol=1e-6)
    # the memory the replays advanced is the memory the eager steps advanced
    for mine, theirs in zip(graphed.state, state, strict=True):
        assert torch.allclose(mine.double(), theirs.double(), atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_rollouts_act_through_a_graph_only_where_it_applies(device: str) -> None:
    model = small_model(device)
    model.learn(64)
    policy = model.policy
    graphed = model._graphed_acting(policy, model._memory)
    assert (graphed is not None) == (device == "cuda")
    off = small_model(device, cuda_graph=False)
    off.learn(64)
    assert off._graphed_acting(off.policy, off._memory) is None


def test_cuda_graph_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="cuda_graph must be True or False, got 'yes'"):
        small_model("cpu", cuda_graph="yes")


def test_every_registered_backbone_but_adaptive_span_says_it_can_be_captured() -> None:
    # adaptive_span crops its memory to the learned span each step, a read of the device
    capturable = {name for name in backbone_names() if small_backbone(name).graph_capturable}
    assert set(backbone_names()) - capturable == {"adaptive_span"}
    assert PairedBackbone(small_backbone("gtrxl"), small_backbone("lstm")).graph_capturable
    assert not PairedBackbone(
        small_backbone("gtrxl"), small_backbone("adaptive_span")
    ).graph_capturable


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", backbone_names())
def test_every_backbone_is_captured_on_a_gpu(name: str, device: str) -> None:
    # each backbone that says it can be captured is, on a GPU (a capture that fails raises)
    model = backbone_model(name, 2, 4, n_steps=16, batch_size=32, segment_length=8, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.learn(32)
        graphed = model._graphed_acting(model.policy, model._memory)
    capturable = model.policy.backbone.graph_capturable
    assert (graphed is not None) == (device == "cuda" and capturable)
