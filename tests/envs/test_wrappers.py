import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import txrl.envs
from txrl.envs import PreviousActionReward


def test_flat_observations_get_previous_action_and_reward() -> None:
    env = PreviousActionReward(gym.make("txrl/TMazePassive-v0", length=3))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (3 + 4 + 1,) and not obs[3:].any()
    obs, reward, *_ = env.step(0)
    assert np.array_equal(obs[3:7], [1, 0, 0, 0]) and obs[7] == reward
    obs, _ = env.reset()
    assert not obs[3:].any(), "the previous action and reward are cleared at an episode start"


def test_image_observations_become_a_dict() -> None:
    env = PreviousActionReward(gym.make("txrl/MiniGrid-MemoryS7-v0"))
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"observation", "previous_action", "previous_reward"}
    obs, *_ = env.step(2)
    assert obs["previous_action"][2] == 1.0


@pytest.mark.parametrize("env_id", ["txrl/TMazePassive-v0", "txrl/MiniGrid-MemoryS7-v0"])
def test_wrapped_envs_pass_the_checker(env_id: str) -> None:
    check_env(PreviousActionReward(gym.make(env_id)), skip_render_check=True)


def test_unsupported_action_space_is_named() -> None:
    class TupleActions(gym.Env):
        observation_space = gym.spaces.Box(0, 1, (2,))
        action_space = gym.spaces.Tuple((gym.spaces.Discrete(2),))

    with pytest.raises(ValueError, match="PreviousActionReward supports"):
        PreviousActionReward(TupleActions())


def test_action_subset_maps_actions_and_rejects_bad_subsets() -> None:
    env = txrl.envs.DiscreteActionSubset(gym.make("txrl/TMazePassive-v0", length=2), [0, 3])
    assert env.action_space == gym.spaces.Discrete(2)
    env.reset(seed=0, options={"goal": -1})
    env.step(0), env.step(0)  # forward twice: the junction
    *_, terminated, _, info = env.step(1)  # inner action 3: down
    assert terminated and info["is_success"]
    check_env(env.unwrapped)
    with pytest.raises(
        ValueError, match=r"actions must be distinct actions of Discrete\(4\) \(each in 0..3\)"
    ):
        txrl.envs.DiscreteActionSubset(gym.make("txrl/TMazePassive-v0"), [0, 4])
    box = gym.make("MountainCarContinuous-v0")
    with pytest.raises(ValueError, match="needs a Discrete action space, got Box"):
        txrl.envs.DiscreteActionSubset(box, [0])
