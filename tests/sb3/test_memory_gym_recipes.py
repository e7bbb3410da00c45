"""The Memory Gym recipes (configs/memory_gym_*.yaml): each trains a few hundred steps
through ``txrl train`` with a tiny policy, its pixels read by SB3's NatureCNN and the
observation-reconstruction loss on; and what encoder a Memory Gym observation gets."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym
import pytest
from stable_baselines3.common.torch_layers import NatureCNN
from stable_baselines3.common.vec_env import DummyVecEnv

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import MemoryPPO, cli
from txrl.config import load_train_config
from txrl.sb3.extractors import SymbolicGridExtractor
from txrl.sb3.reconstruction import RECONSTRUCTION_LOSS

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "configs").glob("memory_gym_*.yaml"))
needs_memory_gym = pytest.mark.skipif(
    importlib.util.find_spec("memory_gym") is None,
    reason='memory-gym is not installed (pip install ".[memorygym]" && '
    "pip install --no-deps memory-gym==1.0.2)",
)
#: A tiny policy, two envs, short rollouts and short Mystery Path episodes.
TINY = [
    "budget=256",
    "policy.d_model=16",
    "policy.n_layers=1",
    "policy.n_heads=2",
    "policy.memory_length=8",
    "env.n_envs=2",
    "env.vec_env=dummy",
    "ppo.n_steps=64",
    "ppo.batch_size=64",
    "ppo.segment_length=16",
    "ppo.n_epochs=1",
    "eval.every=0",
    "eval.episodes=2",
    "eval.n_envs=2",
    "checkpoint.every=0",
    "runtime.device=cpu",
    "runtime.torch_threads=1",
]


def test_both_recipes_are_shipped() -> None:
    assert [p.name for p in RECIPES] == [
        "memory_gym_mortar_mayhem_grid.yaml",
        "memory_gym_mystery_path_grid.yaml",
    ]


@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_recipes_ask_for_pixels_and_the_reconstruction_loss(path: Path) -> None:
    config = load_train_config(path)
    assert config.policy.encoder == "cnn" and config.policy.reconstruct_observation
    assert config.learner_settings.aux_loss_coef == {RECONSTRUCTION_LOSS: 0.1}
    assert config.env.id.startswith("txrl/memorygym-") and config.env.id.endswith("-Grid-v0")


@pytest.mark.slow  # trains each recipe through txrl train
@needs_memory_gym
@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_recipe_trains_a_few_hundred_steps(path: Path, tmp_path: Path) -> None:
    overrides = [*TINY]
    if "mystery_path" in path.name:
        overrides.append("env.kwargs={reset_params: {max_steps: 16}}")
    run_dir = tmp_path / "run"
    args = ["train", str(path), "--run-dir", str(run_dir)]
    cli.main([*args, *(a for o in overrides for a in ("--set", o))])
    model = MemoryPPO.load(next((run_dir / "checkpoints").glob("final*.zip")))
    assert model.num_timesteps >= 256
    assert isinstance(model.policy.features_extractor.cnn, NatureCNN)
    assert model.policy.reconstruct_observation


@needs_memory_gym
def test_memory_gym_pixels_get_nature_cnn_scaled_and_minigrid_codes_get_embedded() -> None:
    """84x84 RGB goes through SB3's NatureCNN (the encoder of Memory Gym's and CleanRL's
    agents) with SB3's scaling by 1/255; MiniGrid's 7x7 codes still go to their embedding."""
    pixels = DummyVecEnv([lambda: gym.make("txrl/memorygym-MysteryPath-Grid-v0")])
    codes = DummyVecEnv([lambda: gym.make("txrl/MiniGrid-MemoryS7-v0")])
    tiny = {"d_model": 16, "n_layers": 1, "n_heads": 2, "memory_length": 4}
    seen = MemoryPPO("CnnGTrXLPolicy", pixels, n_steps=8, batch_size=8, segment_length=8,
                     policy_kwargs=tiny).policy  # fmt: skip
    nature = seen.features_extractor.cnn
    assert isinstance(nature, NatureCNN) and seen.normalize_images
    assert nature.cnn[0].in_channels == 3 and nature.cnn[0].kernel_size == (8, 8)
    assert seen.observation_space.shape == (3, 84, 84)  # SB3's VecTransposeImage, channel-first
    grid = MemoryPPO("CnnGTrXLPolicy", codes, n_steps=8, batch_size=8, segment_length=8,
                     policy_kwargs=tiny).policy  # fmt: skip
    assert isinstance(grid.features_extractor, SymbolicGridExtractor)
    assert not grid.normalize_images
