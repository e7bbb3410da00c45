"""sb3-contrib's RecurrentPPO as a txrl learner (``algo: recurrent_ppo``).

The algorithm is sb3-contrib's, unchanged: PPO with an LSTM in the policy and the value
function, trained on whole sequences cut at episode starts. A txrl run needs one thing
more from a learner, the live memory of each env for exact resume (``get_memory`` /
``set_memory``, as [`txrl.sb3.algorithm.MemoryOnPolicyAlgorithm`][txrl.sb3.algorithm.MemoryOnPolicyAlgorithm] has): here the LSTM
states of the last step, which sb3-contrib does not save with the model. And, as txrl's
own learners, ``learn`` leaves no empty ``SB3-<date>`` folder behind
(`txrl.sb3.logger.FolderlessLogging`). And it takes MultiDiscrete observations, alone or in a
Dict: Stable-Baselines3's flattening extractors give their width as a NumPy integer for
those, which ``torch.nn.LSTM`` refuses (``input_size should be of type int``); the
extractors below give it as an int.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import torch
from sb3_contrib import RecurrentPPO as ContribRecurrentPPO
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.torch_layers import CombinedExtractor, FlattenExtractor

from txrl.sb3.logger import FolderlessLogging


class IntFlattenExtractor(FlattenExtractor):
    """Stable-Baselines3's ``FlattenExtractor`` with its width an int for every space."""

    def __init__(self, observation_space: Any) -> None:
        super().__init__(observation_space)
        self._features_dim = int(self._features_dim)


class IntCombinedExtractor(CombinedExtractor):
    """Stable-Baselines3's ``CombinedExtractor`` with its width an int for every space."""

    def __init__(
        self, observation_space: Any, cnn_output_dim: int = 256, normalized_image: bool = False
    ) -> None:
        super().__init__(observation_space, cnn_output_dim, normalized_image)
        self._features_dim = int(self._features_dim)


#: The default extractors of sb3-contrib's policies and their int-width versions.
INT_EXTRACTORS: dict[type, type] = {
    FlattenExtractor: IntFlattenExtractor,
    CombinedExtractor: IntCombinedExtractor,
}


class RecurrentPPO(FolderlessLogging, ContribRecurrentPPO):
    """sb3-contrib's RecurrentPPO with its per-env LSTM state exposed for checkpoints."""

    def _setup_model(self) -> None:
        # the policy's extractor, the default of its class unless policy_kwargs names one,
        # replaced by its int-width version (the same computation)
        chosen = self.policy_kwargs.get("features_extractor_class")
        if chosen is None:
            parameter = inspect.signature(self.policy_class).parameters.get(
                "features_extractor_class"
            )
            chosen = None if parameter is None else parameter.default
        if chosen in INT_EXTRACTORS:
            self.policy_kwargs = {
                **self.policy_kwargs,
                "features_extractor_class": INT_EXTRACTORS[chosen],
            }
        super()._setup_model()

    # the LSTM states, None before setup
    _last_lstm_states: RNNStates | None  # type: ignore[assignment]  # sb3-contrib's __init__ assigns a bare None, so its inferred type is None

    def get_memory(self) -> tuple[np.ndarray, ...] | None:
        """The LSTM states (h, c) of the actor and the critic, each (layers, envs, hidden)."""
        states = self._last_lstm_states
        if states is None:
            return None
        return tuple(t.detach().cpu().numpy().copy() for t in (*states.pi, *states.vf))

    def set_memory(self, arrays: tuple[np.ndarray, ...] | None) -> None:
        """Restore what `get_memory` returned; ``None`` (a model not set up yet) leaves
        the zero states a fresh model starts from (none before its setup)."""
        if arrays is None:
            self._last_lstm_states = self._zero_states()
            return
        if len(arrays) != 4:
            raise ValueError(
                f"RecurrentPPO memory is 4 arrays (actor h, c; critic h, c), got {len(arrays)}"
            )
        pi_h, pi_c, vf_h, vf_c = (torch.as_tensor(a, device=self.device) for a in arrays)
        self._last_lstm_states = RNNStates((pi_h, pi_c), (vf_h, vf_c))

    def _zero_states(self) -> RNNStates | None:
        """The states of a fresh model, zeros (layers, envs, hidden); None before setup."""
        policy = getattr(self, "policy", None)
        if policy is None:
            return None
        lstm = policy.lstm_actor
        shape = (lstm.num_layers, self.n_envs, lstm.hidden_size)
        zeros = [torch.zeros(shape, device=self.device) for _ in range(4)]
        return RNNStates((zeros[0], zeros[1]), (zeros[2], zeros[3]))


__all__ = ["INT_EXTRACTORS", "IntCombinedExtractor", "IntFlattenExtractor", "RecurrentPPO"]
