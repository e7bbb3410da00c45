"""sb3-contrib's RecurrentPPO as a txrl learner (``algo: recurrent_ppo``).

The algorithm is sb3-contrib's, unchanged: PPO with an LSTM in the policy and the value
function, trained on whole sequences cut at episode starts. A txrl run needs one thing
more from a learner, the live memory of each env for exact resume (``get_memory`` /
``set_memory``, as :class:`txrl.sb3.common.MemoryOnPolicyAlgorithm` has): here the LSTM
states of the last step, which sb3-contrib does not save with the model.
"""

from __future__ import annotations

import numpy as np
import torch
from sb3_contrib import RecurrentPPO as ContribRecurrentPPO
from sb3_contrib.common.recurrent.type_aliases import RNNStates


class RecurrentPPO(ContribRecurrentPPO):
    """sb3-contrib's RecurrentPPO with its per-env LSTM state exposed for checkpoints."""

    def get_memory(self) -> tuple[np.ndarray, ...] | None:
        """The LSTM states (h, c) of the actor and the critic, each (layers, envs, hidden)."""
        states = self._last_lstm_states
        if states is None:
            return None
        return tuple(t.detach().cpu().numpy().copy() for t in (*states.pi, *states.vf))

    def set_memory(self, arrays: tuple[np.ndarray, ...]) -> None:
        """Restore what :meth:`get_memory` returned."""
        if len(arrays) != 4:
            raise ValueError(
                f"RecurrentPPO memory is 4 arrays (actor h, c; critic h, c), got {len(arrays)}"
            )
        pi_h, pi_c, vf_h, vf_c = (torch.as_tensor(a, device=self.device) for a in arrays)
        self._last_lstm_states = RNNStates((pi_h, pi_c), (vf_h, vf_c))


__all__ = ["RecurrentPPO"]
