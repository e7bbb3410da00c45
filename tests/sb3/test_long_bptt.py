"""Long backpropagation through time for the recurrent memories: ``segment_length`` is how far
back a gradient reaches. A training segment starts from the stored, detached state of its first
step and recomputes every one of its steps with gradient, so the loss at its last step reaches
its first step's input and nothing before it; the training pass over a long segment with
episodes starting inside it is the acting pass, in float64."""

from __future__ import annotations

import pytest
import torch

from txrl import MemoryPPO
from txrl.backbones import make_backbone

from ..numeric import F64_REL, close
from .test_common import collect_one_rollout, tmaze_env

RECURRENT = ["lstm", "gru", "ffm"]


@pytest.mark.parametrize("name", RECURRENT)
def test_a_segment_of_1024_steps_recomputes_acting_with_episode_starts_inside(
    name: str, float64: None
) -> None:
    """A rollout of 2,048 steps acted one step at a time; the training pass recomputes its
    second segment of 1,024 steps, with three episodes starting inside it, from the state
    that ``state_at`` rebuilds from the acting trace (the rollout buffer's path)."""
    torch.manual_seed(0)
    backbone = make_backbone(name, input_dim=4, d_model=8, n_layers=1)
    steps, envs, segment = 2048, 2, 1024
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(steps, envs, 4, generator=gen)
    starts = torch.zeros(steps, envs, dtype=torch.bool)
    starts[0] = True
    starts[[1100, 1500, 2000], 0] = True  # env 0: episodes start inside the second segment
    starts[1024, 1] = True  # env 1: one starts at the segment's first step
    outputs, traces, state = [], [], backbone.initial_state(envs)
    with torch.no_grad():
        for t in range(steps):
            out = backbone.step(x[t : t + 1], state, starts[t : t + 1], trace=True)
            outputs.append(out.output)
            traces.append(out.trace)
            state = out.state
    acting = torch.cat(outputs)  # (T, B, D)
    trace = type(traces[0])(*(torch.cat(f) for f in zip(*traces, strict=True)))
    first = torch.full((envs,), segment)
    memory = backbone.state_at(backbone.initial_state(envs), trace, starts, first)
    training, _ = backbone(x[segment:], memory, starts[segment:])  # with gradient, as training
    assert close(training, acting[segment:], F64_REL)


def first_rollout(model: MemoryPPO) -> None:
    """The first rollout of a new model (``learn``'s setup first: the envs' first reset)."""
    model._setup_learn(model.n_steps * model.n_envs)
    collect_one_rollout(model)


def long_segment_model(policy: str) -> MemoryPPO:
    """MemoryPPO on T-mazes longer than its rollout, 2 envs, 2 segments of 256 steps each."""
    model = MemoryPPO(
        policy,
        tmaze_env(2, length=600),
        n_steps=512,
        batch_size=1024,
        segment_length=256,
        n_epochs=1,
        seed=0,
        policy_kwargs={"hidden_size": 16, "net_arch": [16]},
    )
    model.policy.to(torch.float64)  # a gradient through 255 steps is far below float32's range
    first_rollout(model)
    model.policy.set_training_mode(True)
    return model


@pytest.mark.parametrize("policy", ["MlpLstmPolicy", "MlpGruPolicy"])
def test_the_gradient_reaches_the_first_step_of_a_segment_and_no_step_before_it(
    policy: str,
) -> None:
    model = long_segment_model(policy)
    batch = model.rollout_buffer.all_segments(model.policy.backbone, model.segment_length)
    steps, segments = batch.episode_starts.shape
    assert (steps, segments) == (256, 4)
    assert batch.env_index.tolist() == [0, 0, 1, 1]  # env 0: steps 0-255, then 256-511
    assert batch.start.tolist() == [0, 256, 0, 256]
    assert not batch.episode_starts[:, 1].any()  # one episode throughout env 0's second segment
    # the memory's input at every step: the features of the observations (float64; the
    # observations themselves pass through SB3's float32 preprocessing)
    features: list[torch.Tensor] = []

    def keep_features(
        module: torch.nn.Module, inputs: object, output: torch.Tensor
    ) -> torch.Tensor:
        features.append(output.detach().requires_grad_(True))  # a leaf: its own gradient
        return features[-1]

    hook = model.policy.features_extractor.register_forward_hook(keep_features)
    values, *_ = model.evaluate_batch(batch)
    hook.remove()
    # the value at the last step of env 0's second segment: X = S * G rows, time-major
    values.reshape(steps, segments)[-1, 1].backward()
    (extracted,) = features
    assert extracted.grad is not None
    gradient = extracted.grad.reshape(steps, segments, -1)  # (X, F) -> (S, G, F)
    assert gradient[0, 1].abs().sum() > 0  # 255 steps back, the segment's first step
    # the segment starts from the stored state of step 256, detached: nothing reaches back
    # into the segment before it
    assert torch.equal(gradient[:, 0], torch.zeros_like(gradient[:, 0]))


@pytest.mark.parametrize("policy", ["MlpLstmPolicy", "MlpGruPolicy"])
def test_the_training_pass_over_long_segments_matches_acting(policy: str) -> None:
    """The learner's own path in float64 (segments of 256 from the rollout buffer), episodes
    of 22 steps starting inside each: log-probabilities and values as acting stored them, to
    the buffer's float32 rounding."""
    model = MemoryPPO(
        policy,
        tmaze_env(2, length=20),
        n_steps=512,
        batch_size=1024,
        segment_length=256,
        n_epochs=1,
        seed=0,
        policy_kwargs={"hidden_size": 16, "net_arch": [16]},
    )
    model.policy.to(torch.float64)
    first_rollout(model)
    batch = model.rollout_buffer.all_segments(model.policy.backbone, model.segment_length)
    assert batch.episode_starts[1:].any(dim=0).all()  # every segment has a start inside
    with torch.no_grad():
        values, log_prob, *_ = model.evaluate_batch(batch)
    old_log_prob = batch.old_log_prob.flatten().to(log_prob)
    torch.testing.assert_close(log_prob, old_log_prob, rtol=0, atol=1e-5)
    torch.testing.assert_close(values, batch.old_values.flatten().to(values), rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_steps": 1000, "segment_length": 1024}, r"n_steps \(1000\) must be a multiple"),
        ({"n_steps": 1536, "segment_length": 1024}, r"valid segment lengths for n_steps=1536"),
        ({"batch_size": 1000, "segment_length": 1024}, r"batch_size \(1000\) must be a multiple"),
    ],
)
def test_a_segment_that_does_not_divide_the_rollout_names_the_valid_lengths(
    kwargs: dict[str, int], message: str
) -> None:
    settings = {"n_steps": 1024, "batch_size": 2048, **kwargs}
    with pytest.raises(ValueError, match=message):
        MemoryPPO("MlpGruPolicy", tmaze_env(2), policy_kwargs={"hidden_size": 8}, **settings)
