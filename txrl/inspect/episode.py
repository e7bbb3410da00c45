"""The record of one inspected episode: what each step saw, did and attended to, the
measures read from it (attention on the cue at the decision, where each head looks hardest)
and its arrays as ``txrl inspect`` saves them (``episode_<i>.npz``).

[`txrl.inspect.record.record_episodes`][txrl.inspect.record.record_episodes] fills it; the package docstring
([`txrl.inspect`][txrl.inspect]) says what each field holds.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import numpy as np


class InspectError(ValueError):
    """Input ``txrl inspect`` cannot use (named in the message)."""


@dataclasses.dataclass
class EpisodeRecord:
    """Everything recorded over one episode (see the package docstring for each field)."""

    actions: np.ndarray  # (N, ...) the actions taken
    rewards: np.ndarray  # (N,) reward after each step's action
    values: np.ndarray  # (N,) value estimate of each step
    action_probs: np.ndarray | None  # (N, A) for discrete actions, else None
    attention: np.ndarray | None  # (L, H, N, N) weights over absolute steps, or None
    attendable: np.ndarray | None  # (N, N) bool, the keys each step could attend to
    layers: list[str]  # L names of the attention layers
    traces: dict[str, np.ndarray]  # name -> (N,) per-step diagnostics of the backbone
    success: bool | None  # info["is_success"] at the episode's end, None when not reported
    cue_step: int | None
    decision_step: int | None
    frames: list[np.ndarray] = dataclasses.field(default_factory=list)  # (H_px, W_px, 3) each
    # name -> (N, ...) the observations the agent acted on, before observation normalisation:
    # "obs" for a Box space, the keys of a Dict space
    observations: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    hidden: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # layer -> (N, D)
    gates: dict[str, str] = dataclasses.field(default_factory=dict)  # trace name -> gate class
    cue: str | None = None  # what the cue said ("up", "down"), when the env tells
    # the steps whose observation showed the cue, when the env tells (info["cue_in_view"])
    cue_sightings: tuple[int, ...] | None = None
    action_names: list[str] | None = None  # names of the discrete actions, when the env tells
    info: dict[str, Any] = dataclasses.field(default_factory=dict)  # last scalar of each key
    # compressive: (L, H, N, Mc) weights over the compressed slots (oldest first), and
    # (N, N) the slot holding step j when step s acts, -1 where none does
    compressed: np.ndarray | None = None
    compressed_slot: np.ndarray | None = None
    projected: np.ndarray | None = None  # linformer: (L, H, N, k) over its projected slots
    # how the weights read (txrl.inspect.layers.KeyLayout): "window", "kernel" (linear
    # attention's equivalent weights), "compressive" or "projected"
    attention_kind: str = "window"

    @property
    def steps(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def has_attention(self) -> bool:
        """Whether the episode has attention weights to draw (over steps or slots)."""
        return (self.attention is not None and self.attendable is not None) or (
            self.projected is not None
        )

    @property
    def heads(self) -> int:
        """H, the heads of the recorded attention (0 without)."""
        weights = self.attention if self.attention is not None else self.projected
        return 0 if weights is None else int(weights.shape[1])

    @property
    def gate_names(self) -> list[str]:
        return [name for name in self.traces if "gate" in name.rsplit("/", 1)[-1]]

    @property
    def episode_return(self) -> float:
        return float(self.rewards.sum())

    def action_name(self, step: int) -> str:
        action = self.actions[step]
        if self.action_names is not None and action.ndim == 0:
            return self.action_names[int(action)]
        return str(action.tolist())

    def fingerprint(self) -> str:
        """A digest of the observations and actions: equal for byte-identical episodes."""
        digest = hashlib.sha256()
        for name in sorted(self.observations):
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(self.observations[name]).tobytes())
        digest.update(np.ascontiguousarray(self.actions).tobytes())
        return digest.hexdigest()

    def held_weights(self, step: int) -> np.ndarray:
        """The weight step ``step`` gives the memory entry that holds each episode step, (L,
        H, N): the step's own key in the window, or the compressed slot that summarises it
        (the slot's whole weight on each of its c steps, so the row sums to more than 1
        where slots are attended). Needs ``attention``."""
        assert self.attention is not None
        row = self.attention[:, :, step].copy()  # (L, H, N)
        if self.compressed is not None and self.compressed_slot is not None:
            slot = self.compressed_slot[step]  # (N,)
            inside = slot >= 0
            row[:, :, inside] = self.compressed[:, :, step][:, :, slot[inside]]
        return row

    def keys_at(self, step: int) -> int:
        """How many keys step ``step`` could attend to: the steps of its window and the
        compressed slots. Needs ``attendable``."""
        assert self.attendable is not None
        slots = 0
        if self.compressed_slot is not None:
            slots = len(np.unique(self.compressed_slot[step][self.compressed_slot[step] >= 0]))
        return int(self.attendable[step].sum()) + slots

    def cue_mass_at_decision(self) -> np.ndarray | None:
        """Attention mass (L,) at the decision step on the memory entry that holds the cue
        step (its key, or the compressed slot that summarises it), heads averaged; None when
        the episode has no attention, cue or decision step."""
        if self.attention is None or self.cue_step is None or self.decision_step is None:
            return None
        if not (0 <= self.cue_step <= self.decision_step < self.steps):
            return None
        return self.held_weights(self.decision_step)[:, :, self.cue_step].mean(axis=1)

    def sightings_to_decision(self) -> list[int] | None:
        """The steps up to the decision step whose observation showed the cue; None when the
        episode has no decision step or the env does not say when the cue was in view."""
        if self.cue_sightings is None or self.decision_step is None:
            return None
        return [s for s in self.cue_sightings if s <= self.decision_step]

    def sightings_mass_at_decision(self) -> tuple[np.ndarray, float] | None:
        """Attention mass (L,) at the decision step on every step up to it that showed the
        cue, heads averaged, and what uniform attention would give those steps; None when
        the episode has no attention or decision step, or the env does not say when the cue
        was in view.

        `cue_mass_at_decision` reads the first sighting only; an agent that looks at
        the cue again (MiniGrid-Memory's agent may) can keep a later look instead."""
        seen = self.sightings_to_decision()
        if self.attention is None or self.attendable is None or seen is None:
            return None
        assert self.decision_step is not None  # seen is None without it
        if not 0 <= self.decision_step < self.steps:
            return None
        held = self.held_weights(self.decision_step)  # (L, H, N)
        # each entry once: a compressed slot may hold several sightings
        entries: dict[tuple[str, int], int] = {}
        for step in seen:
            slot = (
                -1
                if self.compressed_slot is None
                else self.compressed_slot[self.decision_step, step]
            )
            entries.setdefault(("slot", int(slot)) if slot >= 0 else ("step", step), step)
        row = held[:, :, list(entries.values())]  # (L, H, entries)
        uniform = len(entries) / float(self.keys_at(self.decision_step))
        return row.sum(axis=-1).mean(axis=1), uniform

    def decision_focus(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Where each head looks hardest when the agent decides, and how hard: per layer and
        head (L, H), how many steps back of the decision step its largest attention weight
        lies (0: the decision step itself) and that weight (1: all on one step, a saturated
        softmax). None when the episode has no attention or decision step.

        A head that puts all its weight on the last step or two has learned recency; one
        that reaches back to where the cue was seen has learned the read-out. A weight near 1
        also means its softmax passes almost no gradient to the other steps. A compressed
        slot counts from the oldest step it summarises."""
        if self.attention is None or self.decision_step is None:
            return None
        if not 0 <= self.decision_step < self.steps:
            return None
        held = self.held_weights(self.decision_step)
        row = held[:, :, : self.decision_step + 1]  # (L, H, t+1)
        return self.decision_step - row.argmax(axis=-1), row.max(axis=-1)

    def to_npz(self) -> dict[str, np.ndarray]:
        """The arrays to save; missing parts are left out, scalars are 0-d arrays (-1: none)."""
        data: dict[str, np.ndarray] = {
            "actions": self.actions,
            "rewards": self.rewards,
            "values": self.values,
            "layers": np.array(self.layers, dtype=str),
            "success": np.array(-1 if self.success is None else int(self.success)),
            "cue_step": np.array(-1 if self.cue_step is None else self.cue_step),
            "decision_step": np.array(-1 if self.decision_step is None else self.decision_step),
            "cue": np.array("" if self.cue is None else self.cue),
        }
        if self.cue_sightings is not None:
            data["cue_sightings"] = np.array(self.cue_sightings, dtype=np.int64)
        if self.action_probs is not None:
            data["action_probs"] = self.action_probs
        if self.action_names is not None:
            data["action_names"] = np.array(self.action_names, dtype=str)
        if self.attention is not None and self.attendable is not None:
            data["attention"] = self.attention
            data["attendable"] = self.attendable
        if self.compressed is not None and self.compressed_slot is not None:
            data["compressed"] = self.compressed
            data["compressed_slot"] = self.compressed_slot
        if self.projected is not None:
            data["projected"] = self.projected
        if self.has_attention:
            data["attention_kind"] = np.array(self.attention_kind)
        data.update({f"trace/{name}": values for name, values in self.traces.items()})
        data.update({f"hidden/{name}": values for name, values in self.hidden.items()})
        data.update(
            {name if name == "obs" else f"obs/{name}": v for name, v in self.observations.items()}
        )
        return data
