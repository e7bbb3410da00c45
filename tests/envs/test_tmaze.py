from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import txrl.envs
from txrl.envs.tmaze import BACKWARD, DOWN, FORWARD, UP, TMazeEnv

from ._helpers import best_memoryless_success, rollout, run_env_checkers, same_trajectory

VARIANTS = {"active": txrl.envs.TMAZE_ID, "passive": txrl.envs.TMAZE_PASSIVE_ID}


class CueReader:
    """The memory policy: fetch the cue (active: one step back), walk, turn towards it."""

    def __init__(self, active: bool) -> None:
        self.active = active
        self.cue = 0.0

    def __call__(self, obs: np.ndarray) -> int:
        _, cue, at_junction = obs
        if cue != 0:
            self.cue = float(cue)
        if self.cue == 0 and self.active:
            return BACKWARD
        if at_junction:
            return UP if self.cue > 0 else DOWN
        return FORWARD


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("length", [1, 7, 60])
def test_cue_reading_policy_always_succeeds(variant: str, length: int) -> None:
    env = gym.make(VARIANTS[variant], length=length)
    optimal = length + (3 if variant == "active" else 1)
    for seed in range(100):
        _, rewards, info, terminated = rollout(env, CueReader(variant == "active"), seed=seed)
        assert terminated and info["is_success"] is True
        assert sum(rewards) == 1.0
        assert len(rewards) == optimal == env.unwrapped.optimal_steps


@pytest.mark.parametrize(
    ("variant", "length"), [("passive", 1), ("passive", 5), ("active", 1), ("active", 4)]
)
def test_best_memoryless_policy_is_at_chance(variant: str, length: int) -> None:
    env = TMazeEnv(length=length, active=variant == "active")
    best, tried = best_memoryless_success(env, [{"goal": 1}, {"goal": -1}])
    assert best == 0.5 and tried > 1
    # The search does find solutions where no memory is needed: with the goal fixed, a
    # memoryless policy (walk, turn up) always succeeds.
    assert best_memoryless_success(env, [{"goal": 1}])[0] == 1.0


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_memoryless_lookahead_cannot_beat_chance_even_with_the_cue_in_view(variant: str) -> None:
    # The strongest memoryless policy: it even turns correctly whenever the cue is *in the
    # current observation*, which never happens at the junction; it still only gets 0.5.
    env = gym.make(VARIANTS[variant], length=4)
    successes = 0
    for seed in range(400):
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            action = (UP if obs[1] >= 0 else DOWN) if obs[2] else FORWARD
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        successes += info["is_success"]
    assert abs(successes / 400 - 0.5) < 0.1


def test_cue_is_visible_only_once() -> None:
    active = TMazeEnv(length=3, active=True)
    obs, _ = active.reset(options={"goal": -1})
    assert obs[1] == 0.0
    obs, *_ = active.step(BACKWARD)
    assert obs[1] == -1.0 and obs[0] == pytest.approx(-1 / 3)
    obs, *_ = active.step(BACKWARD)  # wall: stays on the oracle, cue already shown
    assert obs[1] == 0.0
    active.step(FORWARD)
    obs, *_ = active.step(BACKWARD)  # revisiting the oracle shows nothing
    assert obs[1] == 0.0

    passive = TMazeEnv(length=3, active=False)
    obs, _ = passive.reset(options={"goal": 1})
    assert obs.tolist() == [0.0, 1.0, 0.0]
    obs, *_ = passive.step(BACKWARD)  # wall at the start: same cell, cue gone
    assert obs.tolist() == [0.0, 0.0, 0.0]


def test_observations_rewards_and_penalties() -> None:
    env = TMazeEnv(length=2, active=False, step_penalty=0.01, wrong_turn_penalty=0.5)
    obs, _ = env.reset(options={"goal": 1})
    assert obs.dtype == np.float32 and obs in env.observation_space
    obs, reward, terminated, truncated, info = env.step(UP)  # not at the junction: no-op
    assert obs.tolist() == [0.0, 0.0, 0.0] and reward == -0.01 and info == {}
    assert not (terminated or truncated)
    env.step(FORWARD)
    obs, *_ = env.step(FORWARD)
    assert obs.tolist() == [1.0, 0.0, 1.0]
    obs, *_ = env.step(FORWARD)  # wall beyond the junction
    assert obs.tolist() == [1.0, 0.0, 1.0]
    _, reward, terminated, truncated, info = env.step(DOWN)
    assert terminated and not truncated
    assert reward == pytest.approx(-0.5 - 0.01)
    assert info == {"is_success": False, "cue_step": 0, "cue": "up", "decision_step": 4}

    env.reset(options={"goal": -1})
    env.step(FORWARD)
    env.step(FORWARD)
    _, reward, terminated, _, info = env.step(DOWN)
    assert terminated and info["is_success"] is True and reward == pytest.approx(1 - 0.01)


def test_corridor_penalty_charges_every_step_that_does_not_advance() -> None:
    env = TMazeEnv(length=2, active=True, corridor_penalty=0.1)
    env.reset(options={"goal": -1})
    moves = (BACKWARD, BACKWARD, UP, FORWARD, FORWARD, FORWARD, FORWARD)
    rewards = [env.step(a)[1] for a in moves]
    # back (to the oracle), back (wall), up (no-op), forward x3 to the junction, then
    # forward into the junction's wall.
    assert rewards == pytest.approx([-0.1, -0.1, -0.1, 0.0, 0.0, 0.0, -0.1])
    _, reward, terminated, _, info = env.step(DOWN)
    assert terminated and info["is_success"] and reward == 1.0  # the turn is never charged


def test_returned_observations_are_not_aliased() -> None:
    env = TMazeEnv(length=3, active=False)
    first, _ = env.reset(options={"goal": 1})
    second, *_ = env.step(FORWARD)
    assert first.tolist() == [0.0, 1.0, 0.0] and second[0] == pytest.approx(1 / 3)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_time_limit_truncates_as_a_failure(variant: str) -> None:
    env = gym.make(VARIANTS[variant], length=5)
    assert env.unwrapped.max_steps == 2 * env.unwrapped.optimal_steps
    env.reset(seed=0)
    for t in range(1, env.unwrapped.max_steps + 1):
        _, _, terminated, truncated, info = env.step(FORWARD)
        assert not terminated
        assert truncated == (t == env.unwrapped.max_steps)
    # walking forward only, the active maze never shows its cue; no turn, no decision step
    cue = {} if variant == "active" else {"cue_step": 0, "cue": env.unwrapped._cue_name}
    assert info == {"is_success": False, **cue}

    short = gym.make(VARIANTS[variant], length=5, max_steps=env.unwrapped.optimal_steps)
    _, _, info, terminated = rollout(short, CueReader(variant == "active"), seed=1)
    assert terminated and info["is_success"]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_seeding_is_reproducible(variant: str) -> None:
    env = gym.make(VARIANTS[variant], length=4)
    assert same_trajectory(env, seed=3, n_steps=200)
    goals = [env.reset(seed=s) and env.unwrapped._goal for s in range(200)]
    assert goals == [env.reset(seed=s) and env.unwrapped._goal for s in range(200)]
    assert 60 < goals.count(1) < 140


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_env_checkers_pass(variant: str) -> None:
    env = gym.make(VARIANTS[variant], length=10)
    run_env_checkers(env, gym_env=env.unwrapped)


def test_make_stack_is_lean_and_kwargs_pass_through() -> None:
    env = gym.make(txrl.envs.TMAZE_ID, length=50)
    assert isinstance(env.unwrapped, TMazeEnv) and env.unwrapped.length == 50
    assert env.unwrapped.active and not gym.make(txrl.envs.TMAZE_PASSIVE_ID).unwrapped.active
    wrappers = []
    while isinstance(env, gym.Wrapper):
        wrappers.append(type(env).__name__)
        env = env.env
    assert wrappers == ["PassiveEnvChecker"]


def test_ansi_render() -> None:
    env = gym.make(txrl.envs.TMAZE_ID, length=3, render_mode="ansi")
    env.reset(options={"goal": 1})
    assert env.render() == "    +\nOA..J\n    -\n"  # the agent stands on the start cell
    env.step(BACKWARD)
    assert env.render() == "    +\nAS..J\n    -\n"


BAD_KWARGS: list[tuple[dict[str, Any], str]] = [
    ({"length": 0}, "length"),
    ({"length": -3}, "length"),
    ({"length": 2.5}, "length"),
    ({"length": True}, "length"),
    ({"step_penalty": -0.1}, "step_penalty"),
    ({"step_penalty": math.nan}, "step_penalty"),
    ({"wrong_turn_penalty": -1}, "wrong_turn_penalty"),
    ({"corridor_penalty": -0.01}, "corridor_penalty"),
    ({"length": 10, "max_steps": 5}, "max_steps"),
    ({"render_mode": "video"}, "render_mode"),
]


@pytest.mark.parametrize(("kwargs", "name"), BAD_KWARGS)
def test_bad_kwargs_raise_a_clear_value_error(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ValueError, match=name) as excinfo:
        gym.make(txrl.envs.TMAZE_ID, **kwargs)
    bad = next(v for k, v in kwargs.items() if k == name)
    assert repr(bad) in str(excinfo.value)


def test_bad_goal_option_and_action_raise() -> None:
    env = TMazeEnv(length=3)
    with pytest.raises(ValueError, match=r'options\["goal"\].*\(1, -1\).*0'):
        env.reset(options={"goal": 0})
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action must be one of 0, 1, 2, 3"):
        env.step(4)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_cue_and_decision_steps_are_reported(variant: str) -> None:
    # Steps count observations from 0 (the reset's); the cue step is the observation whose
    # cue entry is non-zero and the decision step the one on which the turn was chosen.
    env = gym.make(VARIANTS[variant], length=4)
    policy = CueReader(variant == "active")
    obs, info = env.reset(seed=3)
    observations, infos, actions = [obs], [info], []
    done = False
    while not done:
        actions.append(policy(obs))
        obs, _, terminated, truncated, info = env.step(actions[-1])
        observations.append(obs)
        infos.append(info)
        done = terminated or truncated
    cue_seen = [t for t, o in enumerate(observations) if o[1] != 0]
    assert len(cue_seen) == 1
    assert infos[cue_seen[0]]["cue_step"] == cue_seen[0] == (1 if variant == "active" else 0)
    assert infos[-1]["cue_step"] == cue_seen[0]
    cue = "up" if observations[cue_seen[0]][1] > 0 else "down"  # the arm that pays
    assert infos[cue_seen[0]]["cue"] == infos[-1]["cue"] == cue
    assert infos[-1]["is_success"] == (actions[-1] == (UP if cue == "up" else DOWN))
    assert actions[infos[-1]["decision_step"]] in (UP, DOWN)
    assert infos[-1]["decision_step"] == len(actions) - 1
    assert not any("decision_step" in i for i in infos[:-1])


def test_truncated_episode_has_no_decision_step() -> None:
    env = TMazeEnv(length=3, active=True, max_steps=6)
    env.reset(seed=0)
    info: dict[str, Any] = {}
    for _ in range(6):
        *_, info = env.step(FORWARD)  # never fetches the cue, never turns
    assert info == {"is_success": False}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_min_length_draws_each_corridor_log_uniformly_and_the_reader_still_succeeds(
    variant: str,
) -> None:
    """With ``min_length``, each episode's corridor length is drawn from the seeded generator
    between ``min_length`` and ``length`` (log-uniform: as many short spans as long ones per
    scale); the episode, its observations and its time limit follow that length."""
    env = gym.make(VARIANTS[variant], length=64, min_length=4)
    lengths = []
    for seed in range(200):
        _, rewards, info, terminated = rollout(env, CueReader(variant == "active"), seed=seed)
        length = env.unwrapped.length
        lengths.append(length)
        assert terminated and info["is_success"] is True
        assert (
            len(rewards)
            == env.unwrapped.optimal_steps
            == length + (3 if variant == "active" else 1)
        )
        assert env.unwrapped.max_steps == 2 * env.unwrapped.optimal_steps
    assert min(lengths) >= 4 and max(lengths) <= 64 and len(set(lengths)) > 20
    # log-uniform: about as many corridors in [4, 16) as in [16, 64]
    short = sum(length < 16 for length in lengths)
    assert 70 <= short <= 130, short
    # reproducible from the seed
    again = gym.make(VARIANTS[variant], length=64, min_length=4)
    for seed, length in enumerate(lengths[:20]):
        again.reset(seed=seed)
        assert again.unwrapped.length == length


def test_min_length_is_checked_and_left_out_keeps_every_episode_at_length() -> None:
    with pytest.raises(ValueError, match="min_length must be at most length"):
        TMazeEnv(length=10, min_length=11)
    with pytest.raises(ValueError, match="min_length"):
        TMazeEnv(length=10, min_length=0)
    env = TMazeEnv(length=10, active=False)
    for seed in range(5):
        env.reset(seed=seed)
        assert env.length == 10 and env.max_steps == 22
