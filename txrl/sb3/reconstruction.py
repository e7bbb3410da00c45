"""Observation reconstruction: an auxiliary loss that decodes the observation from the memory.

Pleines et al. (2025, "Memory Gym: Towards Endless Tasks to Benchmark Memory Capabilities of
Agents", JMLR) found that their Transformer-XL agent overtook a GRU agent on the finite Memory
Gym tasks only with such a loss: a decoder of transposed convolutions maps the memory's output
at step t back to the observation at step t, and the error on its pixels trains the decoder,
the memory and the observation encoder alike. The target is the observation itself, not the
encoder's features, so the encoder cannot make the loss vanish by encoding less.

`ObservationDecoder` picks the decoder and the error by the kind of observation:

- ``pixels`` (an image Box, uint8 or float in [0, 1], channel-first or channel-last): a mirror of
  the encoder's convolutions (SB3's NatureCNN for sides above 16 pixels, the three 2x2
  convolutions of `txrl.sb3.extractors.grid_convolutions` below), ending in one logit per
  pixel and channel; the error is the binary cross-entropy against the pixel values scaled to
  [0, 1], as the encoder sees them (CleanRL's PPO-TrXL, which reproduces the paper's agent,
  puts a sigmoid on the decoder and uses the same error).
- ``codes`` (a MiniGrid-style symbolic view, `txrl.sb3.extractors.is_symbolic_grid`):
  the mirror of the 2x2 convolutions, ending in logits over the `GRID_CODES` codes a
  MiniGrid view can hold in a cell and channel (11 object types, 6 colours, 3 door states);
  the error is the cross-entropy of the true code. (Logits over these codes only, not over
  all 256 values of the uint8 space, keep the decoder's last layer and the loss a small part
  of a training step: a view holds no other code.) The codes are categories (object type, colour, state), so a squared
  error on their values would call a key (5) closer to a ball (6) than to a wall (2); the
  cross-entropy treats every wrong code alike, as the embedding of
  `txrl.sb3.extractors.SymbolicGridExtractor` reads them.
- ``vector`` (anything else SB3 flattens: Box vectors, Discrete as one-hot): a two-layer MLP;
  the error is the squared error on the preprocessed vector (normalised when the envs are wrapped
  in ``VecNormalize``, since the policy receives it so).

Dict observations reconstruct their one image or code-grid entry; none or several is an error.

Legend: X transitions, D memory width, C channels, H x W image, K codes per channel.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX
from stable_baselines3.common.preprocessing import (
    is_image_space,
    is_image_space_channels_first,
    preprocess_obs,
)
from torch import nn

from txrl.sb3.extractors import is_symbolic_grid

#: Name of the loss in ``aux_losses``, ``aux_loss_coef`` and the log (``train/aux/<name>``).
RECONSTRUCTION_LOSS = "observation_reconstruction"

ObservationKind = Literal["pixels", "codes", "vector"]

#: Codes per channel a MiniGrid view holds (object type, colour, door state: 0 .. K - 1), the
#: classes of the ``codes`` decoder's cross-entropy.
GRID_CODES = max(len(OBJECT_TO_IDX), len(COLOR_TO_IDX), len(STATE_TO_IDX))

#: Largest image side read by the 2x2-convolution encoder (:class:`txrl.sb3.extractors.SmallCNN`);
#: larger images go through SB3's NatureCNN, whose mirror decodes them.
SMALL_IMAGE_SIDE = 16


def _is_image(space: spaces.Space) -> bool:
    """An image as SB3's CNNs take it: uint8 in [0, 255], or float declared in [0, 1]."""
    if not isinstance(space, spaces.Box) or len(space.shape) != 3:
        return False
    if is_image_space(space, check_channels=False):
        return True
    return bool(
        np.issubdtype(space.dtype, np.floating)
        and np.all(space.low >= 0)
        and np.all(space.high <= 1)
    )


def observation_kind(space: spaces.Space) -> ObservationKind:
    """How an observation of ``space`` (not a Dict) is reconstructed; see the module docstring."""
    if is_symbolic_grid(space):
        return "codes"
    if _is_image(space):
        return "pixels"
    return "vector"


def reconstructed_entry(space: spaces.Space) -> str | None:
    """The Dict entry to reconstruct (its one image or code grid), or None for other spaces.

    Raises ValueError naming the entries when a Dict has no image entry or several."""
    if not isinstance(space, spaces.Dict):
        return None
    images = [key for key, sub in space.spaces.items() if observation_kind(sub) != "vector"]
    if len(images) != 1:
        raise ValueError(
            "reconstruct_observation decodes the one image (or MiniGrid-style grid) entry of a "
            f"Dict observation, got {len(images)} such entries ({images}) among "
            f"{list(space.spaces)}"
        )
    return images[0]


def _channels_first_shape(space: spaces.Box) -> tuple[int, int, int]:
    """(C, H, W) of an image space, whichever order it is declared in."""
    shape = tuple(int(n) for n in space.shape)
    if is_image_space_channels_first(space):
        return shape[0], shape[1], shape[2]
    return shape[2], shape[0], shape[1]


def _nature_mirror(memory_dim: int, channels: int, height: int, width: int) -> nn.Sequential:
    """Transposed convolutions undoing SB3's NatureCNN (8x8 stride 4, 4x4 stride 2, 3x3 stride
    1, 32-64-64 channels): (X, D) -> (X, C, H, W) logits. ``output_padding`` restores the rows
    and columns each strided convolution dropped, so every side comes back exactly."""
    # the maps' sides after the first convolution (h1, w1) and the last one (h3, w3)
    h1, w1 = (height - 8) // 4 + 1, (width - 8) // 4 + 1
    h3, w3 = (h1 - 4) // 2 - 1, (w1 - 4) // 2 - 1
    if min(h3, w3) < 1:
        raise ValueError(
            f"images must be at least 36 pixels a side to decode, got {height}x{width}"
        )
    return nn.Sequential(
        nn.Linear(memory_dim, 64 * h3 * w3),
        nn.ReLU(),
        nn.Unflatten(1, (64, h3, w3)),
        nn.ConvTranspose2d(64, 64, 3, stride=1),  # -> (64, h2, w2)
        nn.ReLU(),
        nn.ConvTranspose2d(64, 32, 4, stride=2, output_padding=((h1 - 4) % 2, (w1 - 4) % 2)),
        nn.ReLU(),
        nn.ConvTranspose2d(
            32, channels, 8, stride=4, output_padding=((height - 8) % 4, (width - 8) % 4)
        ),
    )


def _grid_mirror(memory_dim: int, out_channels: int, height: int, width: int) -> nn.Sequential:
    """Transposed convolutions undoing `txrl.sb3.extractors.grid_convolutions` (three 2x2,
    16-32-64 channels): (X, D) -> (X, out_channels, H, W)."""
    if min(height, width) < 4:
        raise ValueError(f"images must be at least 4 pixels a side to decode, got {height}x{width}")
    return nn.Sequential(
        nn.Linear(memory_dim, 64 * (height - 3) * (width - 3)),
        nn.ReLU(),
        nn.Unflatten(1, (64, height - 3, width - 3)),
        nn.ConvTranspose2d(64, 32, 2),
        nn.ReLU(),
        nn.ConvTranspose2d(32, 16, 2),
        nn.ReLU(),
        nn.ConvTranspose2d(16, out_channels, 2),
    )


class ObservationDecoder(nn.Module):
    """Decodes the observation of each step from the memory's output there, and scores it.

    Args:
        observation_space: the policy's observation space (after SB3's ``VecTransposeImage``).
        memory_dim: width D of the memory output the decoder reads.

    [`loss`][txrl.learners.vmpo.loss] takes the memory output (X, D) and the observations (X, ...) as the policy
    receives them (a dict for Dict spaces) and returns the mean error per observation element
    (pixel and channel, cell and channel, or vector entry): a scalar with a graph.
    """

    def __init__(self, observation_space: spaces.Space, memory_dim: int) -> None:
        super().__init__()
        self.entry = reconstructed_entry(observation_space)
        space = observation_space
        if isinstance(observation_space, spaces.Dict) and self.entry is not None:
            space = observation_space[self.entry]
        self.space = space
        self.kind: ObservationKind = observation_kind(space)
        self._codes_checked = False  # whether a batch of codes was checked (_check_codes)
        if self.kind == "vector":
            width = int(spaces.flatdim(space))
            self.net = nn.Sequential(
                nn.Linear(memory_dim, memory_dim), nn.ReLU(), nn.Linear(memory_dim, width)
            )
            return
        assert isinstance(space, spaces.Box)  # images and code grids are Box spaces
        channels, height, width = _channels_first_shape(space)
        self.channels_first = bool(is_image_space_channels_first(space))
        if self.kind == "codes":
            # the 2x2 mirror to 32 maps, then per cell logits over every code of every channel
            self.net = nn.Sequential(
                _grid_mirror(memory_dim, 32, height, width),
                nn.ReLU(),
                nn.Conv2d(32, channels * GRID_CODES, 1),
            )
        elif min(height, width) > SMALL_IMAGE_SIDE:
            self.net = _nature_mirror(memory_dim, channels, height, width)
        else:
            self.net = _grid_mirror(memory_dim, channels, height, width)

    def _target(self, observations: torch.Tensor) -> torch.Tensor:
        """Observations (X, ...) as the decoder's target: (X, C, H, W) pixels in [0, 1] or codes
        (long), or (X, N) vectors."""
        if self.kind == "vector":
            vectors = preprocess_obs(observations, self.space, normalize_images=False)
            assert isinstance(vectors, torch.Tensor)  # a tensor in, a tensor out (Dict: a dict)
            return vectors.float().flatten(1)
        if not self.channels_first:
            observations = observations.permute(0, 3, 1, 2)  # (X, H, W, C) -> (X, C, H, W)
        if self.kind == "codes":
            return observations.round().long()
        if self.space.dtype == np.uint8:
            return observations.float() / 255.0
        return observations.float()

    def forward(self, memory: torch.Tensor) -> torch.Tensor:
        """Memory output (X, D) -> decoder output: (X, C, H, W) pixel logits, (X, K, C, H, W)
        code logits or (X, N) vectors."""
        out = self.net(memory)
        if self.kind == "codes":
            x, _, h, w = out.shape
            return out.view(x, GRID_CODES, -1, h, w)  # (X, C * K, H, W) -> (X, K, C, H, W)
        return out

    def loss(
        self, memory: torch.Tensor, observations: torch.Tensor | dict[str, torch.Tensor]
    ) -> torch.Tensor:
        """Mean reconstruction error of X observations from their memory outputs (X, D)."""
        obs = observations
        if isinstance(observations, dict) and self.entry is not None:
            obs = observations[self.entry]
        assert isinstance(
            obs, torch.Tensor
        )  # a Dict space's observations: a dict holding the entry
        target = self._target(obs)
        prediction = self(memory).float()
        if self.kind == "pixels":
            return F.binary_cross_entropy_with_logits(prediction, target)
        if self.kind == "codes":
            self._check_codes(target)
            return F.cross_entropy(prediction, target)
        return F.mse_loss(prediction, target)

    def _check_codes(self, target: torch.Tensor) -> None:
        """A ValueError naming the code when ``target`` holds one past MiniGrid's. Every batch
        on a CPU; on an accelerator the first batch only, since reading the largest code back
        waits for the device (the training loop's other minibatches then take torch's own
        bounds check)."""
        if target.device.type != "cpu" and self._codes_checked:
            return
        self._codes_checked = True
        largest = int(target.max())
        if largest >= GRID_CODES:
            raise ValueError(
                f"reconstruct_observation: the view holds a code of {largest}, but a "
                f"MiniGrid view's codes run from 0 to {GRID_CODES - 1} (object type, colour, "
                "door state); an observation with other codes is not a MiniGrid view: "
                "wrap it so it is, or leave reconstruct_observation off"
            )
