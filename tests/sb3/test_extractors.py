"""SymbolicGridExtractor: MiniGrid's cell codes read as categories, and the policies choose it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import FlattenExtractor

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO
from txrl.sb3.extractors import SymbolicGridExtractor, is_symbolic_grid

TINY = {"d_model": 16, "n_layers": 1, "n_heads": 2, "memory_length": 4, "net_arch": [16]}


def grid_space(shape: tuple[int, ...]) -> spaces.Box:
    return spaces.Box(0, 255, shape, dtype=np.uint8)


@pytest.mark.parametrize(
    ("space", "expected"),
    [
        (grid_space((7, 7, 3)), True),  # MiniGrid's view, channel-last
        (grid_space((3, 7, 7)), True),  # after SB3's VecTransposeImage
        (grid_space((15, 15, 3)), True),
        (grid_space((64, 64, 3)), False),  # a pixel image
        (grid_space((7, 7, 4)), False),
        (grid_space((49, 3)), False),
        (spaces.Box(0.0, 255.0, (7, 7, 3), dtype=np.float32), False),
        (spaces.Box(0, 10, (7, 7, 3), dtype=np.uint8), False),
        (spaces.Discrete(4), False),
    ],
)
def test_which_spaces_are_symbolic_grids(space: spaces.Space, expected: bool) -> None:
    assert is_symbolic_grid(space) is expected


def test_codes_are_categories_not_magnitudes() -> None:
    torch.manual_seed(0)
    extractor = SymbolicGridExtractor(grid_space((7, 7, 3)), features_dim=32)
    codes = torch.zeros(1, 7, 7, 3)
    key, ball = codes.clone(), codes.clone()
    key[0, 3, 3, 0], ball[0, 3, 3, 0] = 5, 6  # one cell: key vs ball
    # each code has its own embedding row, so neighbouring codes are not near each other
    table = extractor.embedding.weight
    assert not torch.allclose(table[5], table[6])
    assert extractor(key).shape == (1, 32)
    assert not torch.allclose(extractor(key), extractor(ball))
    # channel 1 (colour) code 5 is a different row from channel 0 (object) code 5
    colour = codes.clone()
    colour[0, 3, 3, 1] = 5
    assert not torch.allclose(extractor(key), extractor(colour))


def test_channel_first_and_last_read_the_same_cells() -> None:
    last = SymbolicGridExtractor(grid_space((7, 7, 3)), features_dim=8)
    first = SymbolicGridExtractor(grid_space((3, 7, 7)), features_dim=8)
    first.load_state_dict(last.state_dict())
    codes = torch.randint(0, 11, (4, 7, 7, 3)).float()  # (B, H, W, C)
    expected = last(codes)
    assert torch.allclose(first(codes.permute(0, 3, 1, 2)), expected, atol=1e-6)
    # float observations holding integers (as SB3 hands them over) are rounded, not truncated
    assert torch.allclose(last(codes + 0.4), expected, atol=1e-6)
    assert torch.allclose(last(codes - 0.4), expected, atol=1e-6)


def test_bad_space_is_named() -> None:
    with pytest.raises(ValueError, match=r"Box\(0, 255, uint8\) of shape \(H, W, 3\)"):
        SymbolicGridExtractor(grid_space((64, 64, 3)))
    with pytest.raises(ValueError, match="embedding_dim must be >= 1"):
        SymbolicGridExtractor(grid_space((7, 7, 3)), embedding_dim=0)


@pytest.mark.parametrize("policy", ["MlpGTrXLPolicy", "CnnGTrXLPolicy"])
def test_memory_policies_embed_minigrid_codes_unscaled(policy: str, tmp_path) -> None:
    env = gym.make("txrl/MiniGrid-MemoryS7-v0")
    model = MemoryPPO(policy, env, n_steps=16, batch_size=16, segment_length=8, policy_kwargs=TINY)
    assert isinstance(model.policy.features_extractor, SymbolicGridExtractor)
    assert model.policy.normalize_images is False
    obs, _ = env.reset(seed=0)
    tensor, _ = model.policy.obs_to_tensor(obs)
    # the extractor receives the integer codes themselves, not codes / 255
    policy_space = model.policy.observation_space
    seen = preprocess_obs(tensor, policy_space, normalize_images=model.policy.normalize_images)
    assert obs.max() > 1 and float(seen.max()) == float(obs.max())
    features = model.policy.extract_features(tensor, model.policy.features_extractor)
    assert features.shape == (1, model.policy.features_dim)
    model.learn(32)
    model.save(tmp_path / "model.zip")
    loaded = MemoryPPO.load(tmp_path / "model.zip")
    assert isinstance(loaded.policy.features_extractor, SymbolicGridExtractor)
    action, _ = model.predict(obs, deterministic=True)
    loaded_action, _ = loaded.predict(obs, deterministic=True)
    assert action == loaded_action


def test_an_explicit_extractor_is_kept() -> None:
    model = MemoryPPO(
        "MlpGTrXLPolicy",
        gym.make("txrl/MiniGrid-MemoryS7-v0"),
        n_steps=16,
        batch_size=16,
        segment_length=8,
        policy_kwargs={**TINY, "features_extractor_class": FlattenExtractor},
    )
    assert isinstance(model.policy.features_extractor, FlattenExtractor)
    assert model.policy.normalize_images is True


def test_pooled_features_name_what_is_in_view_wherever_it_lies() -> None:
    torch.manual_seed(0)
    extractor = SymbolicGridExtractor(grid_space((7, 7, 3)), features_dim=16, pooled=True)
    plain = SymbolicGridExtractor(grid_space((7, 7, 3)), features_dim=16)
    n_cells = 3 * extractor.embedding.embedding_dim
    # the position-wise maps (64 x 4 x 4), then the 64 maps' and the cells' maxima
    assert extractor.linear[0].in_features == plain.linear[0].in_features + 64 + n_cells

    def features(row: int, col: int, obj: int) -> torch.Tensor:
        codes = torch.ones(1, 7, 7, 3)  # empty floor everywhere ...
        codes[0, row, col, 0] = obj  # ... but one object
        cells = extractor.embedding(codes.long() + extractor.code_offsets).flatten(3)
        return extractor._cnn_features(cells.permute(0, 3, 1, 2))[0]

    # a ball in two places: the cells' maxima agree, the position-wise part does not
    here, there = features(1, 1, 6), features(5, 4, 6)
    assert torch.equal(here[-n_cells:], there[-n_cells:])
    assert not torch.allclose(here[:1024], there[:1024])
    # a key in the same place differs in the pooled part: what was seen, not where
    assert not torch.allclose(here[-n_cells:], features(1, 1, 5)[-n_cells:])
    assert extractor(torch.zeros(2, 7, 7, 3)).shape == (2, 16)


def test_encoder_kwargs_of_a_config_reach_the_extractor(tmp_path) -> None:
    from txrl.config import load_train_config
    from txrl.run.algorithms import policy_for

    path = tmp_path / "s7.yaml"
    path.write_text("env:\n  id: txrl/MiniGrid-MemoryS7-v0\n")
    config = load_train_config(path, ["policy.encoder_kwargs={pooled: true, features_dim: 24}"])
    env = gym.make("txrl/MiniGrid-MemoryS7-v0")
    name, kwargs = policy_for("ppo", config.policy, env.observation_space)
    assert kwargs["features_extractor_kwargs"] == {"pooled": True, "features_dim": 24}
    model = MemoryPPO(
        name, env, n_steps=16, batch_size=16, segment_length=8, policy_kwargs={**TINY, **kwargs}
    )
    assert model.policy.features_extractor.pooled is True
    assert model.policy.features_dim == 24
    model.save(tmp_path / "model.zip")
    assert MemoryPPO.load(tmp_path / "model.zip").policy.features_extractor.pooled is True


def test_a_code_grid_among_dict_entries_is_embedded_and_pixels_are_still_scaled() -> None:
    from txrl.envs import PreviousActionReward
    from txrl.sb3.extractors import MemoryCombinedExtractor, SmallCNN

    env = PreviousActionReward(gym.make("txrl/MiniGrid-MemoryS7-v0"))
    model = MemoryPPO(
        "MultiInputGTrXLPolicy",
        env,
        n_steps=16,
        batch_size=16,
        segment_length=8,
        policy_kwargs=TINY,
    )
    extractor = model.policy.features_extractor
    assert isinstance(extractor, MemoryCombinedExtractor)
    assert isinstance(extractor.extractors["observation"], SymbolicGridExtractor)
    assert model.policy.normalize_images is False  # the codes arrive as integers
    obs, _ = env.reset(seed=0)
    tensor, _ = model.policy.obs_to_tensor(obs)
    seen = preprocess_obs(tensor, model.policy.observation_space, normalize_images=False)
    assert float(seen["observation"].max()) == float(obs["observation"].max()) > 1
    model.learn(32)

    # a pixel image next to the grid is still divided by 255, now by the extractor
    space = spaces.Dict(
        {"grid": grid_space((3, 7, 7)), "pixels": spaces.Box(0, 255, (3, 36, 36), np.uint8)}
    )
    mixed = MemoryCombinedExtractor(space, cnn_output_dim=8, scale_images=True)
    assert isinstance(mixed.extractors["pixels"], SmallCNN) and mixed.scaled == {"pixels"}
    pixels = torch.full((1, 3, 36, 36), 255.0)
    grid = torch.ones(1, 3, 7, 7)
    scaled = mixed({"grid": grid, "pixels": pixels})
    assert torch.allclose(scaled[:, 8:], mixed.extractors["pixels"](pixels / 255.0))
    assert torch.allclose(scaled[:, :8], mixed.extractors["grid"](grid))
