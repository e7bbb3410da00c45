"""T-maze: a memory task whose memory span is a dial.

The T-maze of Bakker (2001), "Reinforcement Learning with Long Short-Term Memory" (NeurIPS),
with the *passive* and *active* variants of Ni, Ma, Eysenbach and Bacon (2023), "When do
transformers shine in RL? Decoupling memory from credit assignment" (NeurIPS).

Layout for ``length = L``::

             U                  U, D: the two arms of the junction
    [O] S . . . . J             S: start (x = 0), J: junction (x = L)
             D                  O: oracle cell (x = -1), active variant only

* **Passive** (``txrl/TMazePassive-v0``): the cue (which arm is rewarded) is part of the very
  first observation. Memory length ~ L + 1, credit-assignment length 1: only the final turn
  is rewarded and it depends on the remembered cue, not on an earlier action.
* **Active** (``txrl/TMaze-v0``): the cue is shown only when the agent first steps back onto
  the oracle cell behind the start, so it must learn to take that detour and then walk the
  whole corridor. Memory length ~ L + 2 *and* credit-assignment length ~ L + 3: the reward
  for the turn also pays for the first step back, which happened L + 2 steps earlier.

Actions (``Discrete(4)``): 0 forward (+x), 1 backward (-x), 2 up, 3 down. Walls make a move a
no-op. Up/down at the junction is the turn and ends the episode (``terminated``); elsewhere
it is a no-op, as is backward at the start of the passive maze.

Observation (``Box(float32, (3,))``): ``[x / L, cue, at_junction]``, with ``cue`` = +1 (up
is rewarded) or -1 (down) on the single step the cue is visible and 0 otherwise. The
position is observed, so navigation is Markov and the cue is the only thing to remember.
There is deliberately no time feature: with one, a memoryless agent could encode the cue
in *when* it walks (e.g. wait one step for "down") and read it back at the junction.

Reward: +1 for the correct turn, ``-wrong_turn_penalty`` (default 0) for the wrong one,
``-step_penalty`` (default 0) added on every step, the turning step included, and
``-corridor_penalty`` (default 0) on every step before the turn that does not move the agent
forward. The last one is shaping for long corridors: a random walk (forward and backward
equally likely) practically never covers a 100-cell corridor within ``max_steps``, so
without it the turn's reward is never seen. It rewards walking, never the choice of arm,
so the memory problem is unchanged; ``1 / length`` keeps an episode's total shaping within
[-2, 0] (``max_steps`` is twice the optimal length) against the turn's +1. An episode
that has not turned after ``max_steps`` steps is truncated (default: twice the optimal
episode length, i.e. ``2 * (L + 1)`` passive and ``2 * (L + 3)`` active).

``info["is_success"]`` is set on the last step of every episode: ``True`` iff the agent
turned into the rewarded arm (a truncated episode is a failure).

``info["cue_step"]`` and ``info["decision_step"]`` say *when* memory matters, for tools that
mark those steps on a picture of the agent's attention (``txrl inspect``). Steps count
observations from 0, the reset's. ``cue_step`` (the observation that shows the cue: 0 in the
passive maze, the first visit of the oracle cell in the active one) is in the info of that
observation, ``reset``'s for the passive maze, and again on the episode's last step when the
cue was seen, each time with ``info["cue"]``, what the cue said (``"up"`` or ``"down"``: the
arm that pays). ``decision_step`` (the observation on which the agent chose its turn) is in the
info of the turning step; a truncated episode has none.

Why memoryless policies sit at chance (0.5): the junction observation is the same for both
cues, and the cue is never shown again after its one step, so from the first arrival at the
junction on, the process no longer depends on the cue; a policy without memory turns up
with the same probability for either cue. ``tests/envs`` checks this by enumerating every
deterministic memoryless policy on short mazes.

``reset(options={"goal": 1 | -1})`` forces the rewarded arm (+1 up, -1 down), for
evaluation and for exhaustive tests; otherwise it is drawn from the env's seeded RNG.
"""

from __future__ import annotations

from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ._validation import (
    check_choice,
    check_int,
    check_non_negative,
    check_render_mode,
    log_uniform_int,
)

FORWARD, BACKWARD, UP, DOWN = 0, 1, 2, 3


class TMazeEnv(gym.Env[np.ndarray, np.int64]):
    """Passive or active T-maze with a corridor of ``length`` cells (see the module docstring).

    Args:
        length: corridor length L >= 1, the number of forward moves from the start to the
            junction; the dial for the memory span.
        active: ``True``: cue at the oracle cell one step behind the start (Ni et al.'s
            active T-maze); ``False``: cue in the first observation (passive).
        step_penalty: subtracted from the reward on every step (>= 0).
        wrong_turn_penalty: subtracted when the agent turns into the wrong arm (>= 0).
        corridor_penalty: subtracted on every step that neither moves the agent forward nor
            turns at the junction (>= 0); shaping for long corridors.
        max_steps: steps before truncation; must allow the optimal path. ``None``: twice
            the optimal episode length.
        min_length: ``None``: every corridor has ``length`` cells. An int in
            [1, ``length``]: each episode's corridor length is drawn from the env's seeded
            generator, log-uniformly between ``min_length`` and ``length`` (every scale of
            span as likely: a training distribution whose short corridors teach where the
            cue is, and whose long ones ask for it over the whole span); ``max_steps``
            ``None`` then follows each episode's length.
        render_mode: ``None``, ``"ansi"`` (text) or ``"rgb_array"`` (a small image; what
            Stable-Baselines3 asks for when it makes an env from its id).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        length: int = 10,
        active: bool = True,
        step_penalty: float = 0.0,
        wrong_turn_penalty: float = 0.0,
        corridor_penalty: float = 0.0,
        max_steps: int | None = None,
        render_mode: str | None = None,
        min_length: int | None = None,
    ) -> None:
        self.length = check_int("length", length, minimum=1)
        self.max_length = self.length
        self.min_length = (
            None if min_length is None else check_int("min_length", min_length, minimum=1)
        )
        if self.min_length is not None and self.min_length > self.max_length:
            raise ValueError(
                f"min_length must be at most length ({self.max_length}), got {self.min_length}"
            )
        self.active = bool(check_choice("active", active, (True, False)))
        self.step_penalty = check_non_negative("step_penalty", step_penalty)
        self.wrong_turn_penalty = check_non_negative("wrong_turn_penalty", wrong_turn_penalty)
        self.corridor_penalty = check_non_negative("corridor_penalty", corridor_penalty)
        # Passive: L forward moves + the turn. Active: one step back, L + 1 forward, the turn.
        self.optimal_steps = self.length + (3 if self.active else 1)
        if max_steps is None:
            self.max_steps = 2 * self.optimal_steps
        else:
            self.max_steps = check_int("max_steps", max_steps, minimum=self.optimal_steps)
        self._max_steps_given = max_steps is not None
        self.render_mode = check_render_mode(
            render_mode, self.metadata["render_modes"], "the T-maze"
        )

        self.observation_space = spaces.Box(
            low=np.array([-1.0, -1.0, 0.0], dtype=np.float32),
            high=np.array([1.0, 1.0, 1.0], dtype=np.float32),
            dtype=np.float32,
        )
        self.action_space = spaces.Discrete(4)

        self._x_min = -1 if self.active else 0
        self._inv_length = 1.0 / self.length
        # Written in place every step and copied on return: no per-step allocation besides
        # the copy, and callers that keep observations never see them change underneath.
        self._obs = np.zeros(3, dtype=np.float32)
        self._x = 0
        self._t = 0
        self._goal = 1
        self._cue_pending = False
        self._cue_step: int | None = None
        self._turned: int | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if options is not None and "goal" in options:
            self._goal = int(check_choice('options["goal"]', options["goal"], (1, -1)))
        else:
            self._goal = 1 if self.np_random.random() < 0.5 else -1
        if self.min_length is not None:
            self._set_length(self._draw_length())
        self._x = 0
        self._t = 0
        self._turned = None
        self._cue_pending = self.active
        self._cue_step = None if self.active else 0
        obs = self._obs
        obs[0] = 0.0
        obs[1] = 0.0 if self.active else float(self._goal)
        obs[2] = 0.0
        return obs.copy(), ({} if self.active else {"cue_step": 0, "cue": self._cue_name})

    def _draw_length(self) -> int:
        """A corridor length, log-uniform on [min_length, length] (rounded)."""
        assert self.min_length is not None
        return log_uniform_int(self.np_random, self.min_length, self.max_length)

    def _set_length(self, length: int) -> None:
        """This episode's corridor: ``length`` cells, its optimal and (default) longest run."""
        self.length = length
        self._inv_length = 1.0 / length
        self.optimal_steps = length + (3 if self.active else 1)
        if not self._max_steps_given:
            self.max_steps = 2 * self.optimal_steps

    @property
    def _cue_name(self) -> str:
        """What the cue says: ``"up"`` or ``"down"`` (the arm that pays)."""
        return "up" if self._goal == 1 else "down"

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        a = int(action)
        x = self._x
        length = self.length
        reward = -self.step_penalty
        terminated = False
        if a == FORWARD and x < length:
            x += 1
        elif a == FORWARD:
            reward -= self.corridor_penalty  # forward into the junction's wall
        elif a == BACKWARD:
            reward -= self.corridor_penalty
            if x > self._x_min:
                x -= 1
        elif a in (UP, DOWN):
            if x == length:
                terminated = True
                self._turned = 1 if a == UP else -1
            else:
                reward -= self.corridor_penalty
        else:
            raise ValueError(f"action must be one of 0, 1, 2, 3 (Discrete(4)), got {action!r}")
        self._x = x
        self._t += 1

        obs = self._obs
        obs[0] = x * self._inv_length
        if self._cue_pending and x == -1:
            # Active variant: the oracle shows the cue on the first visit only, so a second
            # visit cannot refresh a forgotten cue.
            self._cue_pending = False
            self._cue_step = self._t
            obs[1] = self._goal
        else:
            obs[1] = 0.0
        obs[2] = 1.0 if x == length else 0.0

        info: dict[str, Any] = {}
        if self._cue_step is not None and (self._cue_step == self._t or terminated):
            info["cue_step"] = self._cue_step
            info["cue"] = self._cue_name
        if terminated:
            success = self._turned == self._goal
            reward += 1.0 if success else -self.wrong_turn_penalty
            info["is_success"] = success
            info["decision_step"] = self._t - 1  # the turn was chosen on the previous observation
            return obs.copy(), reward, True, False, info
        if self._t >= self.max_steps:
            if self._cue_step is not None:
                info["cue_step"] = self._cue_step
                info["cue"] = self._cue_name
            info["is_success"] = False
            return obs.copy(), reward, False, True, info
        return obs.copy(), reward, False, False, info

    def render(self) -> str | np.ndarray | None:
        if self.render_mode == "rgb_array":
            return _text_to_image(self._ansi())
        if self.render_mode != "ansi":
            return None
        return self._ansi()

    def _ansi(self) -> str:
        offset = 1 if self.active else 0
        cells = ["O"] if self.active else []
        cells += ["S"] + ["."] * (self.length - 1) + ["J"]
        agent_col = self._x + offset
        cells[agent_col] = "A"
        pad = " " * (self.length + offset)
        up = "+" if self._goal == 1 else "-"
        down = "+" if self._goal == -1 else "-"
        if self._turned is not None:
            # After the turn the agent stands in an arm, not at the junction.
            cells[agent_col] = "J"
            up, down = ("A", down) if self._turned == 1 else (up, "A")
        return f"{pad}{up}\n{''.join(cells)}\n{pad}{down}\n"


# Colours of the characters of the text rendering, for ``rgb_array`` (8x8 pixels a cell).
_COLOURS = {
    " ": (0, 0, 0),
    ".": (128, 128, 128),
    "S": (90, 90, 160),
    "O": (200, 160, 40),
    "J": (160, 160, 160),
    "A": (220, 40, 40),
    "+": (40, 180, 40),
    "-": (60, 60, 60),
}


def _text_to_image(text: str, cell: int = 8) -> np.ndarray:
    """The text rendering as an RGB image, one coloured square per character."""
    rows = text.rstrip("\n").split("\n")
    width = max(len(row) for row in rows)
    image = np.zeros((len(rows), width, 3), dtype=np.uint8)
    for r, row in enumerate(rows):
        for c, char in enumerate(row):
            image[r, c] = _COLOURS.get(char, (255, 255, 255))
    return np.kron(image, np.ones((cell, cell, 1), dtype=np.uint8))
