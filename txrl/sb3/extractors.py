"""Features extractors for symbolic grid observations (MiniGrid's compact views).

MiniGrid (Chevalier-Boisvert et al. 2023) encodes each cell of the agent's view as three
small integers: object type, colour and state. Its observation space is nevertheless declared
as an 8-bit image, ``Box(0, 255, (7, 7, 3), uint8)``, so Stable-Baselines3 divides it by 255
like pixels. The codes then reach the network as numbers in [0, 0.04]: a key (code 5) and a
ball (code 6) differ by 0.004, and the value of a code says nothing about its meaning anyway.
The memory tasks hinge on exactly that difference, and an agent fed the scaled codes learns
to walk to the end of the hallway and then guesses (success 0.5).

`SymbolicGridExtractor` reads the codes as categories instead: each channel's code
indexes its own learned embedding table, the embeddings of a cell are concatenated, and a
small CNN reads the resulting (channels x embedding) feature map. This is what the strong
MiniGrid agents do (the BabyAI baselines of Chevalier-Boisvert et al. 2019, "BabyAI: A
Platform to Study the Sample Efficiency of Grounded Language Learning", ICLR, embed each
cell's codes before their convolutions).

Which spaces are symbolic grids: `is_symbolic_grid`. A memory policy
([`txrl.sb3.policies.MemoryActorCriticPolicy`][txrl.sb3.policies.MemoryActorCriticPolicy]) picks this extractor by itself for
them (`chosen_extractor`), and for a Dict with a code grid among its entries
`MemoryCombinedExtractor`, which embeds the grid (`code_grid_settings`).

Also here: `SmallCNN`, the memory policies' encoder of small images, and
`MemoryCombinedExtractor`, their encoder of dict observations.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.preprocessing import is_image_space, is_image_space_channels_first
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, FlattenExtractor, NatureCNN
from torch import nn

#: Largest side of a grid read as symbolic codes. MiniGrid views are odd-sized and small
#: (7 by default); a pixel image this small is not a practical input (SB3's NatureCNN needs
#: 36 pixels a side), so a uint8 grid up to this size is taken to hold codes.
MAX_SYMBOLIC_SIDE = 15
#: Codes per channel: every uint8 value has an embedding, so no code can be out of range.
N_CODES = 256


def is_symbolic_grid(space: spaces.Space) -> TypeGuard[spaces.Box]:
    """Whether ``space`` looks like a MiniGrid-style symbolic view.

    True for a ``Box(0, 255, uint8)`` of shape (H, W, 3) or (3, H, W) (channel-first, as after
    SB3's ``VecTransposeImage``) whose sides are at most `MAX_SYMBOLIC_SIDE`.
    """
    if not isinstance(space, spaces.Box) or space.dtype != np.uint8 or len(space.shape) != 3:
        return False
    if not (np.all(space.low == 0) and np.all(space.high == 255)):
        return False
    sides = space.shape[1:] if is_image_space_channels_first(space) else space.shape[:2]
    channels = space.shape[0] if is_image_space_channels_first(space) else space.shape[2]
    return channels == 3 and max(sides) <= MAX_SYMBOLIC_SIDE


def grid_convolutions(in_channels: int) -> nn.Sequential:
    """Three 2x2 convolutions (16, 32, 64 channels) with ReLUs, then flatten: (B, C, H, W) -> (B, F).

    The trunk of the MiniGrid / BabyAI baselines for small grids; no pooling, a 7x7 view
    leaves a 4x4 map.
    """
    return nn.Sequential(
        nn.Conv2d(in_channels, 16, 2),
        nn.ReLU(),
        nn.Conv2d(16, 32, 2),
        nn.ReLU(),
        nn.Conv2d(32, 64, 2),
        nn.ReLU(),
        nn.Flatten(),
    )


class SymbolicGridExtractor(BaseFeaturesExtractor):
    """Embeds each cell's integer codes, then a small CNN: (B, H, W, C) codes -> (B, features_dim).

    Args:
        observation_space: a space for which `is_symbolic_grid` holds, channel-last or
            channel-first.
        features_dim: width of the output.
        embedding_dim: width of each channel's code embedding; a cell becomes
            ``C * embedding_dim`` features.
        pooled: also hand the output layer what is in view wherever it lies: the maximum of
            each of the last convolution's maps over the view and of each embedded cell
            feature over the cells (64 + ``C * embedding_dim`` features next to the
            position-wise ones). The same object seen from different cells then shares these
            features, so a memory can carry "a ball was seen" in a few of them instead of one
            per place in the view. The BabyAI 1.1 baselines (Hui et al. 2020) end their
            convolutions with such a max-pool.

    The observations must arrive as the integer codes themselves: a policy that uses this
    extractor has to be built with ``normalize_images=False`` (the memory policies do so when
    they choose it). Codes are rounded, so float tensors holding integers are fine.
    """

    code_offsets: torch.Tensor  # (C,) buffer

    def __init__(
        self,
        observation_space: spaces.Box,
        features_dim: int = 128,
        embedding_dim: int = 8,
        pooled: bool = False,
    ) -> None:
        if not is_symbolic_grid(observation_space):
            raise ValueError(
                "SymbolicGridExtractor needs a Box(0, 255, uint8) of shape (H, W, 3) or "
                f"(3, H, W) with sides <= {MAX_SYMBOLIC_SIDE}, got {observation_space}"
            )
        if embedding_dim < 1 or features_dim < 1:
            raise ValueError(
                f"features_dim and embedding_dim must be >= 1, got {features_dim} and {embedding_dim}"
            )
        super().__init__(observation_space, features_dim)
        self.channels_first = bool(is_image_space_channels_first(observation_space))
        n_channels = 3
        # One table holds every channel's codes; channel c's code k is row c * N_CODES + k.
        self.embedding = nn.Embedding(n_channels * N_CODES, embedding_dim)
        self.register_buffer(
            "code_offsets", torch.arange(n_channels) * N_CODES, persistent=False
        )  # (C,)
        height, width = (
            observation_space.shape[1:] if self.channels_first else observation_space.shape[:2]
        )
        self.pooled = bool(pooled)
        self.cnn = grid_convolutions(n_channels * embedding_dim)
        with torch.no_grad():
            probe = torch.zeros(1, n_channels * embedding_dim, height, width)
            n_flat = self._cnn_features(probe).shape[1]
        self.linear = nn.Sequential(nn.Linear(n_flat, features_dim), nn.ReLU())

    def _cnn_features(self, cells: torch.Tensor) -> torch.Tensor:
        """(B, C * E, H, W) embedded cells -> (B, F): the flattened maps, and with ``pooled``
        the maps' and the cells' maxima over the view after them."""
        if not self.pooled:
            return self.cnn(cells)
        maps = self.cnn[:-1](cells)  # (B, 64, H', W'), the convolutions without the flatten
        return torch.cat((maps.flatten(1), maps.amax((2, 3)), cells.amax((2, 3))), dim=1)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        codes = observations.round().long()
        if self.channels_first:
            codes = codes.permute(0, 2, 3, 1)  # (B, C, H, W) -> (B, H, W, C)
        cells = self.embedding(codes + self.code_offsets)  # (B, H, W, C, E)
        cells = cells.flatten(3).permute(0, 3, 1, 2)  # (B, H, W, C * E) -> (B, C * E, H, W)
        return self.linear(self._cnn_features(cells))  # (B, features_dim)


class SmallCNN(BaseFeaturesExtractor):
    """A CNN for small images such as MiniGrid's 7x7 views (NatureCNN needs >= 36 pixels).

    Three 2x2 convolutions (as in the MiniGrid baselines) then a linear layer; images larger
    than 16 pixels a side fall back to SB3's ``NatureCNN``.
    """

    def __init__(
        self, observation_space: spaces.Box, features_dim: int = 128, normalized_image: bool = False
    ) -> None:
        super().__init__(observation_space, features_dim)
        channels, height, width = (
            observation_space.shape
        )  # channel-first after SB3's VecTransposeImage
        if min(height, width) > 16:
            self.cnn: nn.Module = NatureCNN(observation_space, features_dim, normalized_image)
            return
        self.cnn = grid_convolutions(channels)
        with torch.no_grad():
            n_flat = self.cnn(torch.zeros(1, channels, height, width)).shape[1]
        self.cnn = nn.Sequential(self.cnn, nn.Linear(n_flat, features_dim), nn.ReLU())

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.cnn(observations)


class MemoryCombinedExtractor(BaseFeaturesExtractor):
    """Dict observations, each entry encoded on its own and the results concatenated:
    `SymbolicGridExtractor` for MiniGrid-style code grids, `SmallCNN` for other
    images, flattening for the rest.

    Args:
        cnn_output_dim: width of each grid's or image's features.
        normalized_image: image entries arrive already in [0, 1] (SB3's flag).
        scale_images: divide image entries by 255 here; the memory policies set it when a
            code grid made them turn off SB3's scaling of every image entry
            (``normalize_images=False``), so the grid reaches its embedding as integer
            codes while pixel images are still scaled.
        grid_kwargs: further arguments of each grid's `SymbolicGridExtractor` (e.g.
            ``{"pooled": True}``).
    """

    def __init__(
        self,
        observation_space: spaces.Dict,
        cnn_output_dim: int = 128,
        normalized_image: bool = False,
        scale_images: bool = False,
        grid_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(observation_space, features_dim=1)
        extractors: dict[str, nn.Module] = {}
        total = 0
        self.scaled: set[str] = set()
        for key, subspace in observation_space.spaces.items():
            if is_symbolic_grid(subspace):
                extractors[key] = SymbolicGridExtractor(
                    subspace,
                    features_dim=cnn_output_dim,
                    **(grid_kwargs or {}),
                )
                total += cnn_output_dim
            elif isinstance(subspace, spaces.Box) and is_image_space(
                subspace, normalized_image=normalized_image
            ):
                extractors[key] = SmallCNN(subspace, cnn_output_dim, normalized_image)
                total += cnn_output_dim
                if scale_images:
                    self.scaled.add(key)
            else:
                extractor = FlattenExtractor(subspace)
                extractors[key] = extractor
                total += int(extractor.features_dim)
        self.extractors = nn.ModuleDict(extractors)
        self._features_dim = total

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat(
            [
                extractor(observations[key] / 255.0 if key in self.scaled else observations[key])
                for key, extractor in self.extractors.items()
            ],
            dim=1,
        )


def chosen_extractor(
    space: spaces.Space,
    given: type[BaseFeaturesExtractor] | None,
    default: type[BaseFeaturesExtractor],
) -> type[BaseFeaturesExtractor]:
    """The features extractor a memory policy builds for ``space`` when its
    ``features_extractor_class`` is ``given`` (``None``: ``default``, the policy class's
    own): a MiniGrid-style code grid gets `SymbolicGridExtractor` unless an extractor
    other than `SmallCNN` was named."""
    if is_symbolic_grid(space) and given in (None, SmallCNN):
        return SymbolicGridExtractor
    return default if given is None else given


def code_grid_settings(
    space: spaces.Space, chosen: type[BaseFeaturesExtractor], settings: dict[str, Any]
) -> dict[str, Any]:
    """What a memory policy's SB3 keyword arguments (``settings``) change to so that code
    grids are read as categories, not pixels; empty when nothing changes. A code grid read
    by `SymbolicGridExtractor` (``chosen``) is embedded unscaled; a Dict with a code
    grid among its entries goes to `MemoryCombinedExtractor` (unless another
    extractor was named), which then scales its pixel images itself, as SB3's
    ``normalize_images`` says."""
    if chosen is SymbolicGridExtractor:
        return {"features_extractor_class": SymbolicGridExtractor, "normalize_images": False}
    if (
        isinstance(space, spaces.Dict)
        and settings.get("features_extractor_class") in (None, MemoryCombinedExtractor)
        and any(is_symbolic_grid(s) for s in space.spaces.values())
    ):
        return {
            "features_extractor_class": MemoryCombinedExtractor,
            "normalize_images": False,
            "features_extractor_kwargs": {
                "scale_images": settings.get("normalize_images", True),
                **(settings.get("features_extractor_kwargs") or {}),
            },
        }
    return {}
