from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import txrl.envs
from txrl.envs.minigrid_memory import MINIGRID_MEMORY_IDS

from ._helpers import SMALL_IMAGE, WRAPPED_ENV, run_env_checkers, same_trajectory

LEFT, RIGHT, FORWARD = 0, 1, 2


def test_all_upstream_memory_ids_are_adapted() -> None:
    import minigrid  # noqa: F401  (registers the upstream ids)

    upstream = {i for i in gym.registry if i.startswith("MiniGrid-Memory")}
    assert len(upstream) == 6
    assert set(MINIGRID_MEMORY_IDS.values()) == upstream
    assert set(txrl.envs.MINIGRID_IDS) == {f"txrl/{i}" for i in upstream}


@pytest.mark.parametrize("env_id", txrl.envs.MINIGRID_IDS)
def test_makes_steps_and_passes_checkers(env_id: str) -> None:
    env = gym.make(env_id)
    space = env.observation_space
    assert isinstance(space, gym.spaces.Box)
    assert space.shape == (7, 7, 3) and space.dtype == np.uint8
    obs, _ = env.reset(seed=0)
    assert obs in space
    obs, *_ = env.step(env.action_space.sample())
    assert obs in space
    run_env_checkers(env, allowed=[WRAPPED_ENV, SMALL_IMAGE])
    assert same_trajectory(env, seed=5, n_steps=60)


def test_direction_option_gives_a_dict_sb3_accepts() -> None:
    env = gym.make("txrl/MiniGrid-MemoryS9-v0", with_direction=True)
    assert isinstance(env.observation_space, gym.spaces.Dict)
    assert set(env.observation_space.spaces) == {"image", "direction"}
    obs, _ = env.reset(seed=1)
    assert obs["direction"] == env.unwrapped.agent_dir
    run_env_checkers(env, allowed=[WRAPPED_ENV, SMALL_IMAGE])


def _walk_to(env: gym.Env, target: tuple[int, int]) -> tuple[float, bool, bool, dict]:
    """Privileged scripted walk: east along the corridor, then turn onto ``target``."""
    grid_env = env.unwrapped
    while grid_env.agent_pos[0] < target[0]:
        _, reward, terminated, truncated, info = env.step(FORWARD)
        assert not (terminated or truncated)
    # Facing east: a left turn faces north (smaller y), a right turn faces south.
    env.step(LEFT if target[1] < grid_env.agent_pos[1] else RIGHT)
    _, reward, terminated, truncated, info = env.step(FORWARD)
    assert tuple(grid_env.agent_pos) == target
    return float(reward), terminated, truncated, info


@pytest.mark.parametrize(
    "env_id", ["txrl/MiniGrid-MemoryS7-v0", "txrl/MiniGrid-MemoryS13Random-v0"]
)
def test_is_success_marks_the_matching_object_only(env_id: str) -> None:
    env = gym.make(env_id)
    for seed in range(6):
        env.reset(seed=seed)
        reward, terminated, _, info = _walk_to(env, env.unwrapped.success_pos)
        assert terminated and reward > 0 and info["is_success"] is True

        env.reset(seed=seed)
        reward, terminated, _, info = _walk_to(env, env.unwrapped.failure_pos)
        assert terminated and reward == 0 and info["is_success"] is False


def test_timeout_is_a_failure_and_is_success_only_at_the_end() -> None:
    env = gym.make("txrl/MiniGrid-MemoryS7-v0", max_steps=5)
    env.reset(seed=0)
    for t in range(1, 6):
        _, _, terminated, truncated, info = env.step(LEFT)  # spin in place
        assert not terminated and truncated == (t == 5)
        assert ("is_success" in info) == (t == 5)
    assert info["is_success"] is False


def test_spec_recreates_the_same_stack() -> None:
    env = gym.make("txrl/MiniGrid-MemoryS11-v0")
    again = gym.make(env.spec)
    assert again.observation_space == env.observation_space
    assert np.array_equal(env.reset(seed=3)[0], again.reset(seed=3)[0])


def test_action_subset_keeps_named_actions_in_order() -> None:
    full = gym.make("txrl/MiniGrid-MemoryS9-v0")
    moves = gym.make("txrl/MiniGrid-MemoryS9-v0", actions=["forward", "left", "right"])
    assert moves.action_space == gym.spaces.Discrete(3)
    run_env_checkers(moves, allowed=[WRAPPED_ENV, SMALL_IMAGE])
    # Action i of the subset is the i-th named upstream action: same trajectories.
    full.reset(seed=4), moves.reset(seed=4)
    for subset_action, upstream_action in [(1, LEFT), (0, FORWARD), (2, RIGHT), (0, FORWARD)]:
        a, b = moves.step(subset_action), full.step(upstream_action)
        assert np.array_equal(a[0], b[0]) and a[1:4] == b[1:4]
    again = gym.make(moves.spec)
    assert again.action_space == moves.action_space


def test_bad_kwargs_raise() -> None:
    with pytest.raises(
        ValueError, match=r"actions must be a list of MiniGrid action names .*'jump'"
    ):
        gym.make("txrl/MiniGrid-MemoryS7-v0", actions=["left", "jump"])
    with pytest.raises(ValueError, match=r"actions must be distinct actions of Discrete\(7\)"):
        gym.make("txrl/MiniGrid-MemoryS7-v0", actions=["left", "left"])
    with pytest.raises(ValueError, match=r"upstream_id must be one of .*'MiniGrid-Empty-5x5-v0'"):
        txrl.envs.make_minigrid_memory("MiniGrid-Empty-5x5-v0")
    with pytest.raises(ValueError, match=r"with_direction must be True or False, got 'yes'"):
        gym.make("txrl/MiniGrid-MemoryS7-v0", with_direction="yes")


@pytest.mark.parametrize("env_id", ["txrl/MiniGrid-MemoryS7-v0", "txrl/MiniGrid-MemoryS9-v0"])
def test_cue_step_is_the_first_step_that_shows_the_start_room_object(env_id: str) -> None:
    # Checked against MiniGrid's own visibility test (agent_sees), over random walks.
    env = gym.make(env_id)
    grid_env = env.unwrapped
    reported_any = False
    for seed in range(8):
        _, info = env.reset(seed=seed)
        env.action_space.seed(seed)
        cue_pos = (1, grid_env.height // 2 - 1)
        seen = [grid_env.agent_sees(*cue_pos)]
        infos = [info]
        done = False
        while not done:
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            seen.append(grid_env.agent_sees(*cue_pos))
            infos.append(info)
            done = terminated or truncated
        first = seen.index(True) if any(seen) else None
        assert [i["cue_in_view"] for i in infos] == seen  # every observation's, not the first only
        reported = [t for t, i in enumerate(infos[:-1]) if "cue_step" in i]
        if first is None:
            assert reported == [] and "cue_step" not in infos[-1]
        else:
            reported_any = True
            assert infos[first]["cue_step"] == first and infos[-1]["cue_step"] == first
            shown = grid_env.grid.get(*cue_pos).type  # the start room's object
            assert infos[first]["cue"] == infos[-1]["cue"] == shown in ("key", "ball")
            assert reported in ([first], [])  # [] when it was first seen on the last step
    assert reported_any


def test_decision_step_is_the_move_onto_an_end_object() -> None:
    env = gym.make("txrl/MiniGrid-MemoryS7-v0")
    for target in ("success_pos", "failure_pos"):
        env.reset(seed=2)
        grid_env = env.unwrapped
        steps_before = grid_env.step_count
        _, terminated, _, info = _walk_to(env, getattr(grid_env, target))
        assert terminated
        assert info["decision_step"] == grid_env.step_count - steps_before - 1


@pytest.mark.parametrize("upstream_id", ["MiniGrid-MemoryS9-v0", "MiniGrid-MemoryS13Random-v0"])
def test_cached_views_equal_upstream_step_for_step(upstream_id: str) -> None:
    """The memoised env gives upstream's observations, rewards and flags, every step, with
    all 7 actions (pick-up, drop and toggle included) over many episodes and layouts."""
    from txrl.envs.minigrid_memory import make_minigrid_memory

    kwargs = {"with_direction": True, "max_steps": 40}  # short episodes: many layouts
    cached = make_minigrid_memory(upstream_id, **kwargs)
    upstream = make_minigrid_memory(upstream_id, cache_views=False, **kwargs)
    assert type(cached.unwrapped) is not type(upstream.unwrapped)
    rng = np.random.default_rng(0)
    episodes = 0
    for seed in range(4):
        a, _ = cached.reset(seed=seed)
        b, _ = upstream.reset(seed=seed)
        for _ in range(500):
            assert np.array_equal(a["image"], b["image"]) and a["direction"] == b["direction"]
            action = int(rng.integers(7))
            a, ra, ta, ua, ia = cached.step(action)
            b, rb, tb, ub, ib = upstream.step(action)
            assert (ra, ta, ua, ia) == (rb, tb, ub, ib)
            if ta or ua:
                episodes += 1
                a, _ = cached.reset()
                b, _ = upstream.reset()
    assert episodes >= 40
    assert cached.unwrapped._views  # the views were cached, not rebuilt every step


def test_cached_view_is_a_copy() -> None:
    env = gym.make("txrl/MiniGrid-MemoryS9-v0")
    obs, _ = env.reset(seed=0)
    first = obs.copy()
    obs[:] = 0  # a caller writing into its observation must not change the cached view
    assert np.array_equal(env.unwrapped.gen_obs()["image"], first)


def test_cached_views_follow_a_grid_that_changes() -> None:
    """Should an action change the grid (a door toggled, an object dropped: not possible in
    the Memory task itself), the cached env re-keys its layout and still matches upstream."""
    from minigrid.core.world_object import Ball, Door

    from txrl.envs.minigrid_memory import make_minigrid_memory

    toggle, drop = 5, 4  # MiniGrid's action numbers
    envs = [make_minigrid_memory("MiniGrid-MemoryS9-v0", cache_views=c) for c in (True, False)]
    for env in envs:
        env.reset(seed=3)
        grid_env = env.unwrapped
        grid_env.agent_pos = (2, grid_env.height // 2)  # facing east along the corridor
        grid_env.grid.set(*grid_env.front_pos, Door("red", is_open=False))
    cached, upstream = envs
    cached.unwrapped.gen_obs()  # cache the view with the door closed
    for action in (toggle, toggle, toggle):  # open, close, open
        a, *_ = cached.step(action)
        b, *_ = upstream.step(action)
        assert np.array_equal(a, b)
    for env in envs:  # walk through the open door, then drop a ball behind it
        env.unwrapped.carrying = Ball("blue")
    for action in (2, 0, 0, drop):
        a, *_ = cached.step(action)
        b, *_ = upstream.step(action)
        assert np.array_equal(a, b)
    assert upstream.unwrapped.carrying is None  # the ball was dropped: the grid changed
