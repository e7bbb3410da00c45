"""Two memories side by side behind the backbone protocol: one for the actor, one for the critic.

A memory policy normally feeds its actor and its critic from one memory, so the value loss
shapes what the actor remembers and reads. [`PairedBackbone`][txrl.nn.pair.PairedBackbone] runs two backbones of
any kind on the same input, each with its own state, and concatenates their outputs; the
policy gives the first part to the actor's head and the second to the critic's
(``critic_memory="separate"``; sb3-contrib's RecurrentPPO gives its critic an LSTM of its
own in the same way by default).

The pair's state and trace are flat NamedTuples (env on axis 0, resp. (T, B) leading) whose
fields are the actor's, prefixed ``actor_``, then the critic's, prefixed ``critic_``, so
every helper of `txrl.nn.state` and every learner handles them as any other state.
"""

from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any

import torch

from txrl.nn.protocol import Backbone, BackboneOutput


@functools.cache
def _paired_type(kind: str, actor_type: type, critic_type: type) -> type:
    """The NamedTuple holding an actor's ``kind`` (state or trace) and a critic's, one per
    pair of types, so states of one pair always share a type."""
    actor_fields: tuple[str, ...] = actor_type._fields  # type: ignore[attr-defined]  # NamedTuple classes
    critic_fields: tuple[str, ...] = critic_type._fields  # type: ignore[attr-defined]  # NamedTuple classes
    fields = [f"actor_{f}" for f in actor_fields] + [f"critic_{f}" for f in critic_fields]
    paired = namedtuple(f"Paired{kind}", fields)  # type: ignore[misc]  # a name built at run time
    paired.parts = (actor_type, critic_type)  # type: ignore[attr-defined]  # read back by _split
    return paired


def _join(kind: str, actor: tuple[Any, ...] | None, critic: tuple[Any, ...] | None) -> Any:
    if actor is None or critic is None:
        return None
    return _paired_type(kind, type(actor), type(critic))(*actor, *critic)


def _split(paired: Any) -> tuple[Any, Any]:
    actor_type, critic_type = paired.parts
    n = len(actor_type._fields)
    return actor_type(*paired[:n]), critic_type(*paired[n:])


class PairedBackbone(Backbone):
    """``actor`` and ``critic`` backbones on the same input; output ``[actor | critic]``.

    :param actor, critic: backbones with the same ``input_dim``; `split` cuts an
        output back into their parts. Auxiliary losses of the same name are summed, and
        diagnostics are reported per part (``actor/...``, ``critic/...``).
    """

    def __init__(self, actor: Backbone, critic: Backbone) -> None:
        super().__init__()
        if actor.input_dim != critic.input_dim:
            raise ValueError(
                f"actor and critic backbones must take the same input_dim, got "
                f"{actor.input_dim} and {critic.input_dim}"
            )
        self.actor = actor
        self.critic = critic
        self.input_dim = actor.input_dim
        self.output_dim = actor.output_dim + critic.output_dim

    @property
    def graph_capturable(self) -> bool:  # type: ignore[override]  # Backbone's class attribute, here derived from the parts
        return self.actor.graph_capturable and self.critic.graph_capturable

    def split(self, output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """An output (..., output_dim) cut into the actor's and the critic's features."""
        return output[..., : self.actor.output_dim], output[..., self.actor.output_dim :]

    def initial_state(self, batch_size: int, device: torch.device | str | None = None) -> Any:
        return _join(
            "State",
            self.actor.initial_state(batch_size, device),
            self.critic.initial_state(batch_size, device),
        )

    def _combine(self, actor: BackboneOutput, critic: BackboneOutput) -> BackboneOutput:
        aux = dict(actor.aux_losses)
        for name, loss in critic.aux_losses.items():
            aux[name] = aux[name] + loss if name in aux else loss
        stats = {f"actor/{k}": v for k, v in actor.stats.items()}
        stats |= {f"critic/{k}": v for k, v in critic.stats.items()}
        return BackboneOutput(
            output=torch.cat((actor.output, critic.output), dim=-1),
            state=_join("State", actor.state, critic.state),
            trace=_join("Trace", actor.trace, critic.trace),
            aux_losses=aux,
            stats=stats,
        )

    def run(
        self,
        x: torch.Tensor,
        state: Any,
        episode_starts: torch.Tensor,
        *,
        trace: bool = False,
        stats: bool = False,
        next_state: bool = True,
    ) -> BackboneOutput:
        actor_state, critic_state = _split(state)
        return self._combine(
            self.actor.run(
                x, actor_state, episode_starts, trace=trace, stats=stats, next_state=next_state
            ),
            self.critic.run(
                x, critic_state, episode_starts, trace=trace, stats=stats, next_state=next_state
            ),
        )

    def step(
        self, x: torch.Tensor, state: Any, episode_starts: torch.Tensor, *, trace: bool = False
    ) -> BackboneOutput:
        actor_state, critic_state = _split(state)
        return self._combine(
            self.actor.step(x, actor_state, episode_starts, trace=trace),
            self.critic.step(x, critic_state, episode_starts, trace=trace),
        )

    def state_at(
        self, initial: Any, trace: Any, episode_starts: torch.Tensor, t: torch.Tensor
    ) -> Any:
        actor_initial, critic_initial = _split(initial)
        actor_trace, critic_trace = _split(trace)
        return _join(
            "State",
            self.actor.state_at(actor_initial, actor_trace, episode_starts, t),
            self.critic.state_at(critic_initial, critic_trace, episode_starts, t),
        )

    @property
    def trace_is_state(self) -> bool:
        # state_at reads both traces at the same steps
        return self.actor.trace_is_state and self.critic.trace_is_state

    def refresh_state(self, state: Any) -> Any:
        actor_state, critic_state = _split(state)
        return _join(
            "State", self.actor.refresh_state(actor_state), self.critic.refresh_state(critic_state)
        )

    def without_caches(self, state: Any) -> Any:
        actor_state, critic_state = _split(state)
        return _join(
            "State",
            self.actor.without_caches(actor_state),
            self.critic.without_caches(critic_state),
        )

    def ordered(self, state: Any) -> Any:
        """``state`` with each part in its backbone's canonical order (a TrXL ring buffer
        unrolled oldest first, as a sequence call leaves it), for comparisons."""
        actor_state, critic_state = _split(state)
        return _join(
            "State",
            getattr(self.actor, "ordered", lambda s: s)(actor_state),
            getattr(self.critic, "ordered", lambda s: s)(critic_state),
        )
