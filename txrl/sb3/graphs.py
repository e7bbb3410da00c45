"""The rollout's acting step as a CUDA graph: captured once per rollout, replayed every step.

On a GPU, one acting step of a memory policy is a few hundred small kernels (three layers'
products, the ring buffer's writes, the action head), and at a rollout's batch sizes
launching them can cost more than running them (``bench/gpu_throughput.py`` times the eager
step against its replay: ``bench/results/gpu_throughput.txt``). A graph replays the same kernels on the same buffers, so `GraphedActing` keeps static copies
of what the step reads (observation, episode starts, the memory state, advanced in place
each replay) and hands back copies of what it wrote, so nothing a rollout stores is
overwritten by the next replay.

The draw stays outside the graph (a few kernels), so the actions are those eager steps draw
from the same generator state. A graph fixes the addresses it reads. On a GPU the step reads
the parameters themselves, which keep their addresses (the optimizers update them in place),
but what the attention derives from them (its scaled query weights and positional keys,
[`txrl.nn.attention.RelativeMultiHeadAttention.derived_weights`][txrl.nn.attention.RelativeMultiHeadAttention.derived_weights]) is rebuilt after an
update, and a learner drops it at the start of each rollout, so a learner captures a new
graph then rather than keeping one across updates.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces

from txrl.nn.protocol import BackboneOutput
from txrl.nn.state import clone_state
from txrl.sb3.distributions import ActingCategorical, draw_discrete_action
from txrl.sb3.policies import MemoryActorCriticPolicy


def graphs_apply(policy: MemoryActorCriticPolicy) -> bool:
    """Whether `GraphedActing` can take ``policy``'s acting steps: a CUDA device, a
    discrete action space (the draw of a continuous one is not split from its network) and
    a backbone whose acting step can be captured (``Backbone.graph_capturable``: every
    registered backbone but ``adaptive_span``, which crops its memory to the learned span)."""
    return (
        policy.device.type == "cuda"
        and isinstance(policy.action_space, spaces.Discrete)
        and policy.backbone.graph_capturable
    )


def _copy(target: Any, source: Any) -> None:
    """``source`` into ``target`` in place: a tensor, or a dict of them."""
    if isinstance(target, dict):
        for key, value in target.items():
            value.copy_(source[key])
    else:
        target.copy_(source)


def _clone(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: tensor.clone() for key, tensor in value.items()}
    return value.clone()


class GraphedActing:
    """``policy.act`` for one batch of envs, captured as a CUDA graph and replayed.

    :param policy: the acting policy, on a CUDA device, with a discrete action space.
    :param obs: an observation batch (B, ...) (or a dict of them) of the shape acting sees.
    :param state: the memory state to act from; it is copied in, and `state` holds
        the memory from then on (advanced in place by each call).
    :param episode_starts: (B,) bool, any values (a template for the shape).

    Calling it with an observation batch and episode starts returns what ``policy.act``
    returns (actions, values, log-probs, distribution, backbone output), as copies, with
    `state` as the output's state. The graph holds the network
    ([`act_discrete_heads`][txrl.sb3.policies.MemoryActorCriticPolicy.act_discrete_heads]); the action is
    drawn after the replay, eagerly, so the draws are those of eager steps (the same
    generator, the same sequence) and a capture never involves torch's generator.
    """

    def __init__(
        self,
        policy: MemoryActorCriticPolicy,
        obs: Any,
        state: Any,
        episode_starts: torch.Tensor,
    ) -> None:
        if not graphs_apply(policy):
            raise ValueError(
                "a CUDA graph of the acting step needs a policy on a CUDA device with a discrete "
                "action space and a backbone whose graph_capturable is True; this one is on "
                f"{policy.device} with {policy.action_space} and a "
                f"{type(policy.backbone).__name__} (graph_capturable "
                f"{policy.backbone.graph_capturable})"
            )
        self.policy = policy
        with torch.inference_mode():
            self.obs = _clone(obs)
            self.episode_starts = episode_starts.clone()
            self.state = clone_state(state)
            # warm-up on a side stream (lazy caches, kernel choices, the allocator's pool),
            # then the capture; both advance the static state, which is reloaded below
            stream = torch.cuda.Stream(policy.device)
            stream.wait_stream(torch.cuda.current_stream(policy.device))
            with torch.cuda.stream(stream):
                for _ in range(2):
                    self._step()
            torch.cuda.current_stream(policy.device).wait_stream(stream)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._outputs = self._step()
            self.load(state)

    def _step(self) -> tuple[torch.Tensor, ...]:
        log_probs, values, out = self.policy.act_discrete_heads(
            self.obs, self.state, self.episode_starts
        )
        for mine, new in zip(self.state, out.state, strict=True):
            if new is not mine:  # a backbone that does not step in place (e.g. the LSTM)
                mine.copy_(new)
        trace = out.trace
        assert trace is not None  # act_discrete_heads asks the backbone for its trace
        self._trace_type = type(trace)
        return log_probs, values, out.output, *trace

    def load(self, state: Any) -> None:
        """Continue from ``state`` (copied into the graph's memory)."""
        with torch.inference_mode():
            for mine, given in zip(self.state, state, strict=True):
                mine.copy_(given)

    def __call__(
        self, obs: Any, episode_starts: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, ActingCategorical, BackboneOutput]:
        with torch.inference_mode():
            _copy(self.obs, obs)
            self.episode_starts.copy_(episode_starts)
            self.graph.replay()
            log_probs, values, output, *trace = (tensor.clone() for tensor in self._outputs)
            actions, log_prob, distribution = draw_discrete_action(log_probs)
        out = BackboneOutput(output, self.state, self._trace_type(*trace), {}, {})
        return actions, values, log_prob, distribution, out
