"""Delayed recall: reproduce k symbols after a delay filled with distractors.

A sequence-memory probe in the line of the copy / delayed-recall tasks used to test recurrent
memory (Hochreiter and Schmidhuber 1997, "Long Short-Term Memory"; the "Autoencode" and
"RepeatFirst" tasks of Morad et al. 2023, POPGym, are close relatives). It isolates memory the
way the T-maze does (Bakker 2001; Ni et al. 2023): nothing the agent does before the recall
phase changes the environment, so the only route to reward is remembering what it was shown.

Episode (``T = 2k + delay`` steps, then ``terminated``)::

    t:      0 .. k-1          k .. k+delay-1          k+delay .. 2k+delay-1
    phase:  show s_0..s_k-1   delay (distractors)     recall: act s_0, s_1, ..., s_k-1

Observation (``Box(float32, (2 * n_symbols + 3,))``), three blocks:

* ``[0, n)``: one-hot of the shown symbol (show phase only);
* ``[n, 2n)``: one-hot of a uniformly random distractor symbol (delay phase only, all zero
  with ``distractors=False``), on its own channel so that it cannot be mistaken for a symbol
  to remember but still has to be ignored;
* ``[2n, 2n + 3)``: one-hot phase flag (show, delay, recall).

Actions: ``Discrete(n_symbols)``; they are ignored outside the recall phase. The j-th recall
action is compared with ``s_j``; each correct one is rewarded ``1 / k`` (so the return is the
fraction recalled). ``info["is_success"]`` (last step) is ``True`` iff all k are correct, and
``info["n_correct"]`` counts the correct ones.

The memory span from ``s_0`` to its recall is ``k + delay`` steps, so ``delay`` is the dial.
Every recall observation is identical, hence a memoryless policy answers independently of
the symbols: chance is ``1 / n_symbols`` per symbol and ``n_symbols ** -k`` for success.

``reset(options={"symbols": [...]})`` forces the k symbols (for evaluation and exhaustive
tests); otherwise symbols and distractors are drawn from the env's seeded RNG.
"""

from __future__ import annotations

from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ._validation import check_choice, check_int, check_render_mode


class DelayedRecallEnv(gym.Env[np.ndarray, np.int64]):
    """Show ``k`` of ``n_symbols`` symbols, wait ``delay`` steps, ask for them back in order.

    Args:
        n_symbols: vocabulary size (>= 2; with one symbol there is nothing to remember).
        k: number of symbols to memorise (>= 1).
        delay: steps between the last shown symbol and the first recall step (>= 0).
        distractors: show random symbols on the distractor channel during the delay.
        render_mode: ``None``, ``"ansi"`` (text) or ``"rgb_array"`` (symbols shown and answers
            given as coloured squares; what Stable-Baselines3 asks for when it makes an env from
            its id).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        n_symbols: int = 4,
        k: int = 3,
        delay: int = 10,
        distractors: bool = True,
        render_mode: str | None = None,
    ) -> None:
        self.n_symbols = check_int("n_symbols", n_symbols, minimum=2)
        self.k = check_int("k", k, minimum=1)
        self.delay = check_int("delay", delay, minimum=0)
        self.distractors = bool(check_choice("distractors", distractors, (True, False)))
        self.render_mode = check_render_mode(
            render_mode, self.metadata["render_modes"], "the delayed-recall task"
        )

        n = self.n_symbols
        self.episode_length = 2 * self.k + self.delay
        self._recall_start = self.k + self.delay
        self._flag_show, self._flag_delay, self._flag_recall = 2 * n, 2 * n + 1, 2 * n + 2
        self.observation_space = spaces.Box(0.0, 1.0, shape=(2 * n + 3,), dtype=np.float32)
        self.action_space = spaces.Discrete(n)
        self._reward_per_symbol = 1.0 / self.k

        self._obs = np.zeros(2 * n + 3, dtype=np.float32)
        self._symbols = np.zeros(self.k, dtype=np.int64)
        self._distractor_seq = np.zeros(self.delay, dtype=np.int64)
        self._answers: list[int] = []
        self._t = 0
        self._n_correct = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if options is not None and "symbols" in options:
            symbols = np.asarray(options["symbols"])
            if (
                symbols.shape != (self.k,)
                or not np.issubdtype(symbols.dtype, np.integer)
                or symbols.min() < 0
                or symbols.max() >= self.n_symbols
            ):
                raise ValueError(
                    f'options["symbols"] must be {self.k} integers in [0, {self.n_symbols}), '
                    f"got {options['symbols']!r}"
                )
            self._symbols = symbols.astype(np.int64)
        else:
            self._symbols = self.np_random.integers(self.n_symbols, size=self.k)
        # All randomness is drawn here, so an episode is a pure function of the seed and the
        # (ignored-until-recall) actions cannot shift the RNG stream.
        self._distractor_seq = self.np_random.integers(self.n_symbols, size=self.delay)
        self._t = 0
        self._n_correct = 0
        self._answers = []
        self._write_obs(0)
        return self._obs.copy(), {}

    def _write_obs(self, t: int) -> None:
        obs = self._obs
        obs.fill(0.0)
        if t < self.k:
            obs[self._symbols[t]] = 1.0
            obs[self._flag_show] = 1.0
        elif t < self._recall_start:
            if self.distractors:
                obs[self.n_symbols + self._distractor_seq[t - self.k]] = 1.0
            obs[self._flag_delay] = 1.0
        elif t < self.episode_length:
            obs[self._flag_recall] = 1.0
        # t == episode_length: the terminal observation stays all zero.

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        a = int(action)
        if not 0 <= a < self.n_symbols:
            raise ValueError(
                f"action must be in [0, {self.n_symbols}) (Discrete({self.n_symbols})), "
                f"got {action!r}"
            )
        t = self._t
        reward = 0.0
        if t >= self._recall_start:
            self._answers.append(a)
            if a == self._symbols[t - self._recall_start]:
                self._n_correct += 1
                reward = self._reward_per_symbol
        t += 1
        self._t = t
        self._write_obs(t)
        if t >= self.episode_length:
            info = {"is_success": self._n_correct == self.k, "n_correct": self._n_correct}
            return self._obs.copy(), reward, True, False, info
        return self._obs.copy(), reward, False, False, {}

    def render(self) -> str | np.ndarray | None:
        if self.render_mode == "rgb_array":
            return self._image()
        if self.render_mode != "ansi":
            return None
        t = self._t
        if t < self.k:
            phase = f"show {self._symbols[t]}"
        elif t < self._recall_start:
            phase = "delay"
        elif t < self.episode_length:
            phase = f"recall #{t - self._recall_start}"
        else:
            phase = "done"
        return (
            f"t={t} {phase} | symbols={self._symbols.tolist()} answers={self._answers} "
            f"correct={self._n_correct}\n"
        )

    def _image(self, cell: int = 8) -> np.ndarray:
        """Top row: the symbols to remember; bottom row: the answers so far (hue = symbol)."""
        image = np.zeros((2, self.k, 3), dtype=np.uint8)
        hues = (np.arange(self.n_symbols) * 255 // max(self.n_symbols - 1, 1)).astype(np.uint8)
        for i, symbol in enumerate(self._symbols[: min(self._t + 1, self.k)]):
            image[0, i] = (hues[symbol], 255 - hues[symbol], 128)
        for i, answer in enumerate(self._answers):
            image[1, i] = (hues[answer], 255 - hues[answer], 128)
        return np.kron(image, np.ones((cell, cell, 1), dtype=np.uint8))
