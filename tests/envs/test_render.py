import gymnasium as gym
import numpy as np
import pytest

import txrl.envs  # noqa: F401


@pytest.mark.parametrize(
    "env_id", ["txrl/TMaze-v0", "txrl/TMazePassive-v0", "txrl/DelayedRecall-v0"]
)
def test_rgb_array_render(env_id: str) -> None:
    # Stable-Baselines3 makes envs from an id with render_mode="rgb_array"
    env = gym.make(env_id, render_mode="rgb_array")
    env.reset(seed=0)
    first = env.render()
    env.step(0)
    second = env.render()
    assert (
        isinstance(first, np.ndarray)
        and first.dtype == np.uint8
        and first.ndim == 3
        and first.shape[2] == 3
    )
    assert first.shape == second.shape and first.any()
    assert not np.array_equal(first, second), "the picture follows the state"


def test_bad_render_mode_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match="render_mode must be one of"):
        gym.make("txrl/TMaze-v0", render_mode="video")
