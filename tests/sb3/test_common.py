"""The shared memory machinery of MemoryPPO and VMPO: exactness, memory across rollouts, SB3 contract."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

import txrl.envs  # noqa: F401 - registers the tasks
from txrl import VMPO, MemoryPPO
from txrl.nn.state import index_state, state_to_numpy

from ..numeric import F32_REL, close

ALGOS = [MemoryPPO, VMPO]

TINY = {"d_model": 16, "n_layers": 2, "n_heads": 2, "memory_length": 6, "net_arch": [16]}
TINY_RNN = {"hidden_size": 16, "net_arch": [16]}


def tmaze_env(n_envs: int = 2, length: int = 3, seed: int = 0) -> DummyVecEnv:
    env = DummyVecEnv([lambda: Monitor(gym.make("txrl/TMazePassive-v0", length=length))] * n_envs)
    env.seed(seed)
    return env


def tiny_kwargs(policy: str) -> dict:
    return dict(TINY_RNN) if ("Lstm" in policy or "Gru" in policy) else dict(TINY)


def collect_one_rollout(model) -> None:
    callback = model._init_callback(None)
    assert model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize(
    "policy", ["MlpGTrXLPolicy", "MlpTrXLIPolicy", "MlpTrXLPolicy", "MlpLstmPolicy", "MlpGruPolicy"]
)
def test_training_pass_reproduces_acting(algo, policy: str) -> None:
    n_envs, n_steps = 2, 24
    model = algo(
        policy,
        tmaze_env(n_envs),
        n_steps=n_steps,
        batch_size=n_steps * n_envs,  # one minibatch: its first pass comes before any gradient step
        segment_length=8,
        n_epochs=1,
        policy_kwargs=tiny_kwargs(policy),
        seed=0,
    )
    model.learn(
        3 * n_steps * n_envs
    )  # three rollouts: memory carried across, weights updated in between
    logged = model.logger.name_to_value
    assert logged["train/approx_kl"] == pytest.approx(0.0, abs=1e-6)
    if algo is MemoryPPO:
        assert logged["train/clip_fraction"] == 0.0
    else:
        assert logged["train/kl"] == pytest.approx(0.0, abs=1e-6)

    assert_next_rollout_recomputed_exactly(model)


def assert_next_rollout_recomputed_exactly(model) -> None:
    """One more rollout (memory carried in, updated weights); the training pass over all its
    segments gives the log-probs and values the acting steps stored."""
    collect_one_rollout(model)
    buffer = model.rollout_buffer
    assert buffer.episode_starts[1:].any(), (
        "episodes must end inside the rollout for this test to bite"
    )
    model.policy.set_training_mode(True)
    batch = buffer.all_segments(model.policy.backbone, model.segment_length)
    values, log_prob, _, _, out = model.evaluate_batch(batch)
    assert out.state is None, "the training pass skips the memory after its segments"
    # float32 acting vs training pass: a tolerance relative to the magnitudes compared
    assert close(log_prob, batch.old_log_prob.flatten(), F32_REL)
    assert close(values, batch.old_values.flatten(), F32_REL)


@pytest.mark.slow  # torch.compile
def test_compiled_acting_step_trains_exactly() -> None:
    # compile_step: rollouts act through the compiled ring step, training runs the eager
    # sequence pass, and the two agree as the eager acting step does
    kwargs = dict(TINY, backbone_kwargs={"compile_step": True})
    n_envs, n_steps = 2, 24
    model = MemoryPPO("MlpGTrXLPolicy", tmaze_env(n_envs), n_steps=n_steps,
                      batch_size=n_steps * n_envs, segment_length=8, n_epochs=1,
                      policy_kwargs=kwargs, seed=0)  # fmt: skip
    model.learn(n_steps * n_envs)
    assert "_compiled_step_fn" in model.policy.backbone.__dict__, "rollouts ran compiled"
    assert_next_rollout_recomputed_exactly(model)


def test_memory_persists_across_rollouts_and_learn_calls() -> None:
    model = MemoryPPO(
        "MlpGTrXLPolicy",
        tmaze_env(2, length=10),
        n_steps=8,
        batch_size=16,
        segment_length=4,
        policy_kwargs=TINY,
        seed=0,
    )
    model.learn(16)
    memory = model.get_memory()
    assert memory is not None and memory[-1].any(), "some slots must be in use after a rollout"
    model.learn(16, reset_num_timesteps=False)
    # the buffer's carried-in memory is what the previous rollout left (re-projected keys aside)
    carried = model.rollout_buffer.initial_memory
    assert np.array_equal(carried.hidden.cpu().numpy(), memory[0])
    assert np.array_equal(carried.valid.cpu().numpy(), memory[-1])


class EndlessEnv(gym.Env):
    """Random observations, no reward, never terminates: only its time limit ends episodes."""

    observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


@pytest.mark.parametrize("algo", ALGOS)
def test_truncated_episodes_bootstrap_from_each_envs_memory(algo, monkeypatch) -> None:
    # every env is cut by its time limit at the same steps, so one call serves several envs
    n_envs, limit, n_steps = 3, 5, 12
    env = DummyVecEnv([lambda: gym.wrappers.TimeLimit(EndlessEnv(), limit)] * n_envs)
    env.seed(0)
    model = algo("MlpGTrXLPolicy", env, n_steps=n_steps, batch_size=n_steps * n_envs,
                 segment_length=4, policy_kwargs=TINY, gamma=0.9, seed=0)  # fmt: skip
    calls: list[tuple[list[int], np.ndarray]] = []
    batched = model._final_values

    def checked(policy, memory, new_obs, infos, envs):
        values = batched(policy, memory, new_obs, infos, envs)
        for row, idx in enumerate(envs):  # each env alone, from its own rows of the memory
            final = torch.as_tensor(infos[idx]["terminal_observation"], device=model.device)
            no_start = torch.zeros(1, dtype=torch.bool, device=model.device)
            with torch.inference_mode():
                alone = policy.value_of(final[None], index_state(memory, slice(idx, idx + 1)),
                                        no_start)  # fmt: skip
            assert values[row] == pytest.approx(float(alone), rel=1e-5, abs=1e-6)
        calls.append((list(envs), values))
        return values

    monkeypatch.setattr(model, "_final_values", checked)
    model.learn(n_steps * n_envs)
    assert [envs for envs, _ in calls] == [[0, 1, 2], [0, 1, 2]]  # after steps 5 and 10
    rewards = model.rollout_buffer.rewards  # (n_steps, n_envs); the env itself gives 0
    for step, (_, values) in zip((limit - 1, 2 * limit - 1), calls, strict=True):
        assert np.allclose(rewards[step], 0.9 * values)
        assert np.all(values != 0.0)
    other = np.delete(rewards, [limit - 1, 2 * limit - 1], axis=0)
    assert np.all(other == 0.0)


def test_buffer_bytes_grow_with_layers_times_width_not_memory() -> None:
    sizes = {}
    for memory_length in (8, 64):
        kwargs = dict(TINY, memory_length=memory_length)
        model = MemoryPPO(
            "MlpGTrXLPolicy",
            tmaze_env(2),
            n_steps=64,
            batch_size=64,
            segment_length=16,
            n_epochs=1,
            policy_kwargs=kwargs,
        )
        model.learn(128)
        trace = model.rollout_buffer.trace
        sizes[memory_length] = trace.hidden[0, 0].numel()
    assert sizes[8] == sizes[64] == TINY["n_layers"] * TINY["d_model"]


@pytest.mark.parametrize("algo", ALGOS)
def test_save_load_predict_identical(algo, tmp_path) -> None:
    env = tmaze_env(2)
    model = algo(
        "MlpGTrXLPolicy",
        env,
        n_steps=16,
        batch_size=32,
        segment_length=8,
        policy_kwargs=dict(TINY, gate="highway", gate_bias=1.5),
        seed=1,
    )
    model.learn(64)
    model.save(tmp_path / "model.zip")
    loaded = algo.load(tmp_path / "model.zip")
    assert loaded.policy.backbone_settings == model.policy.backbone_settings
    assert loaded.get_memory() is None, "the live memory is not part of a saved model"
    obs = env.reset()
    state_a = state_b = None
    starts = np.ones(2, dtype=bool)
    for _ in range(6):
        act_a, state_a = model.predict(obs, state=state_a, episode_start=starts, deterministic=True)
        act_b, state_b = loaded.predict(
            obs, state=state_b, episode_start=starts, deterministic=True
        )
        assert np.array_equal(act_a, act_b)
        for a, b in zip(state_to_numpy(state_a), state_to_numpy(state_b), strict=True):
            assert np.allclose(a, b, atol=1e-6)
        obs, _, starts, _ = env.step(act_a)


def test_predict_state_is_sized_from_the_observation_batch() -> None:
    model = MemoryPPO(
        "MlpGTrXLPolicy",
        tmaze_env(2),
        policy_kwargs=TINY,
        n_steps=16,
        batch_size=16,
        segment_length=8,
    )
    single = np.zeros(3, dtype=np.float32)
    action, state = model.predict(single)
    assert np.shape(action) == () and all(s.shape[0] == 1 for s in state)
    batch = np.zeros((5, 3), dtype=np.float32)
    actions, state = model.predict(batch, state=None, episode_start=np.ones(5, dtype=bool))
    assert actions.shape == (5,) and all(s.shape[0] == 5 for s in state)
    with pytest.raises(ValueError, match="holds 5 envs but the observation batch has 4"):
        model.predict(np.zeros((4, 3), dtype=np.float32), state=state)


@pytest.mark.parametrize("deterministic", [False, True])
def test_discrete_acting_draws_what_sb3s_distribution_draws(deterministic: bool) -> None:
    """``act`` reads a discrete action and its log-probability from one log-softmax, not
    through SB3's distribution: same draw for the same generator state, same log-probs, and
    the distribution it returns still answers as SB3's does (V-MPO stores its logits)."""
    model = MemoryPPO(
        "MlpGTrXLPolicy", tmaze_env(2), policy_kwargs=TINY, n_steps=16, batch_size=16,
        segment_length=8, seed=0,
    )  # fmt: skip
    policy = model.policy.eval()
    n = 256
    obs = np.stack([model.observation_space.sample() for _ in range(n)])
    obs = torch.as_tensor(obs, device=policy.device)
    starts = torch.zeros(n, dtype=torch.bool, device=policy.device)
    with torch.inference_mode():
        torch.manual_seed(5)
        actions, _, log_prob, distribution, _ = policy.act(
            obs, policy.initial_state(n), starts, deterministic
        )
        latent_pi, _, _ = policy._latent(obs, policy.initial_state(n), starts[None], acting=True)
        torch.manual_seed(5)
        reference = policy._get_action_dist_from_latent(latent_pi)
        expected = reference.get_actions(deterministic=deterministic)
    assert torch.equal(actions, expected)
    assert len(set(actions.tolist())) > 1  # the draws are not all one action
    assert close(log_prob, reference.log_prob(expected), F32_REL)
    assert close(distribution.entropy(), reference.entropy(), F32_REL)
    assert close(distribution.distribution.logits, reference.distribution.logits, F32_REL)
    assert close(distribution.log_prob(expected), log_prob, F32_REL)


def test_evaluate_policy_and_vecnormalize() -> None:
    env = VecNormalize(tmaze_env(2), norm_reward=False)
    model = MemoryPPO(
        "MlpTrXLIPolicy", env, n_steps=16, batch_size=32, segment_length=8, policy_kwargs=TINY
    )
    model.learn(32)
    env.training = False
    mean_reward, std_reward = evaluate_policy(model, env, n_eval_episodes=4)
    assert np.isfinite(mean_reward) and np.isfinite(std_reward)


class _SpacesEnv(gym.Env):
    """A random env with a chosen observation and action space."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self._t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        assert self.action_space.contains(
            np.asarray(action, dtype=self.action_space.dtype).reshape(self.action_space.shape)
            if self.action_space.shape
            else action
        )
        self._t += 1
        return self.observation_space.sample(), 1.0, self._t >= 5, False, {}


IMAGE = spaces.Box(0, 255, (7, 7, 3), dtype=np.uint8)
OBS_SPACES = {
    "box": ("Mlp", spaces.Box(-1, 1, (4,), dtype=np.float32)),
    "image": ("Cnn", IMAGE),
    "dict": (
        "MultiInput",
        spaces.Dict({"image": IMAGE, "vec": spaces.Box(-1, 1, (2,), dtype=np.float32)}),
    ),
    "multidiscrete": ("Mlp", spaces.MultiDiscrete([3, 4])),
}
ACTION_SPACES = {
    "discrete": spaces.Discrete(3),
    "multidiscrete": spaces.MultiDiscrete([2, 3]),
    "multibinary": spaces.MultiBinary(3),
    "box": spaces.Box(-1, 1, (2,), dtype=np.float32),
}


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("obs_kind", list(OBS_SPACES))
@pytest.mark.parametrize("action_kind", list(ACTION_SPACES))
def test_spaces_run(algo, obs_kind: str, action_kind: str) -> None:
    if algo is VMPO and action_kind in ("multidiscrete", "multibinary"):
        with pytest.raises(ValueError, match="VMPO supports Discrete and Box action spaces"):
            VMPO(
                "MlpGTrXLPolicy",
                DummyVecEnv([lambda: _SpacesEnv(OBS_SPACES["box"][1], ACTION_SPACES[action_kind])]),
            )
        return
    prefix, obs_space = OBS_SPACES[obs_kind]
    env = DummyVecEnv([lambda: _SpacesEnv(obs_space, ACTION_SPACES[action_kind])] * 2)
    model = algo(
        f"{prefix}GTrXLPolicy",
        env,
        n_steps=8,
        batch_size=16,
        segment_length=4,
        n_epochs=1,
        policy_kwargs=TINY,
    )
    model.learn(16)
    obs = env.reset()
    actions, _ = model.predict(obs)
    assert len(actions) == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"policy_kwargs": {"memory_lenght": 4}},
            "unknown policy_kwargs 'memory_lenght'; valid keys: .*memory_length",
        ),
        ({"policy_kwargs": {"gate": "lstm"}}, "valid gates"),
        ({"n_steps": 8, "segment_length": 16}, "must be a multiple of segment_length"),
        (
            {"batch_size": 20, "segment_length": 8, "n_steps": 16},
            "batch_size .* must be a multiple of segment_length",
        ),
        ({"policy_kwargs": {"backbone": "transformerxl"}}, "valid backbones"),
    ],
)
def test_bad_settings_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MemoryPPO("MlpMemoryPolicy", tmaze_env(1), **kwargs)


def test_unsupported_observation_space_is_named() -> None:
    env = DummyVecEnv(
        [
            lambda: _SpacesEnv(
                spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))), spaces.Discrete(2)
            )
        ]
    )
    with pytest.raises(ValueError, match=r"unsupported observation space Tuple.*Flatten"):
        MemoryPPO("MlpGTrXLPolicy", env)


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize(
    ("space", "named"),
    [
        (spaces.Graph(spaces.Box(0, 1, (2,)), spaces.Discrete(2)), "Graph"),
        (spaces.Text(5), "Text"),
        (spaces.Sequence(spaces.Discrete(2)), "Sequence"),
        (spaces.Tuple((spaces.Discrete(2),)), "Tuple"),
        (spaces.Dict({"ok": spaces.Discrete(2), "bad": spaces.Text(3)}), "Text.* at key 'bad'"),
    ],
)
def test_variable_size_observation_spaces_are_named_at_construction(
    algo, space: spaces.Space, named: str
) -> None:
    """An env whose observations no encoder reads (SB3's vectorisation fails obscurely on
    them) is refused when the learner is built, with the space and the valid ones named."""
    env = _SpacesEnv(space, spaces.Discrete(2))
    with pytest.raises(ValueError, match=f"unsupported observation space {named}.*valid: Box"):
        algo("MlpGTrXLPolicy", env)


def test_multibinary_actions_train_on_the_log_probs_they_acted_with() -> None:
    env = DummyVecEnv(
        [lambda: _SpacesEnv(spaces.Box(-1, 1, (4,), dtype=np.float32), spaces.MultiBinary(3))] * 2
    )
    model = MemoryPPO(
        "MlpGTrXLPolicy", env, n_steps=16, batch_size=32, segment_length=8, n_epochs=2,
        policy_kwargs=TINY, seed=0,
    )  # fmt: skip
    model.learn(6 * 32)
    assert model.rollout_buffer.actions.shape[-1] == 3
    assert np.isin(model.rollout_buffer.actions, (0, 1)).all()
    assert_next_rollout_recomputed_exactly(model)
    actions, _ = model.predict(env.reset())
    assert actions.shape == (2, 3) and np.isin(actions, (0, 1)).all()


def test_a_target_kl_stop_counts_the_epochs_started_as_sb3() -> None:
    """n_updates counts epochs started (SB3's PPO): one per rollout when the KL stop cuts the
    first epoch short, all of them otherwise."""
    kwargs = dict(n_steps=16, batch_size=16, segment_length=8, n_epochs=4, policy_kwargs=TINY)
    stopped = MemoryPPO("MlpGTrXLPolicy", tmaze_env(2), target_kl=1e-12, seed=0, **kwargs)
    stopped.learn(2 * 32)  # two rollouts of two minibatches: the 2nd stops the 1st epoch
    assert stopped._n_updates == 2
    assert stopped.logger.name_to_value["train/n_updates"] == 2
    full = MemoryPPO("MlpGTrXLPolicy", tmaze_env(2), seed=0, **kwargs)
    full.learn(2 * 32)
    assert full._n_updates == 2 * 4


@pytest.mark.parametrize("algo", ALGOS)
def test_set_memory_of_a_model_that_has_not_acted(algo) -> None:
    """get_memory is None before the first rollout; handing it back leaves no live memory."""
    model = algo("MlpGTrXLPolicy", tmaze_env(2), n_steps=8, batch_size=16, segment_length=4,
                 n_epochs=1, policy_kwargs=TINY)  # fmt: skip
    assert model.get_memory() is None
    model.set_memory(model.get_memory())
    assert model.get_memory() is None
    model.learn(16)
    memory = model.get_memory()
    assert memory is not None and memory[0].shape[0] == 2
    model.set_memory(None)  # forget it: the next rollout starts each env afresh
    assert model.get_memory() is None
    model.learn(16, reset_num_timesteps=False)
    assert model.get_memory() is not None


@pytest.mark.parametrize(("saver", "loader"), [(MemoryPPO, VMPO), (VMPO, MemoryPPO)])
def test_loading_another_learners_file_names_the_learner_that_saved_it(
    saver, loader, tmp_path
) -> None:
    model = saver("MlpGTrXLPolicy", tmaze_env(1), n_steps=8, batch_size=8, segment_length=4,
                  policy_kwargs=TINY)  # fmt: skip
    model.save(tmp_path / "model.zip")
    name = saver.__name__
    with pytest.raises(
        ValueError,
        match=rf"saved by {name} \(txrl\.learners\.\w+\.algorithm:{name}\).*load it with {name}\.load",
    ):
        loader.load(tmp_path / "model.zip")
    assert type(saver.load(tmp_path / "model.zip")) is saver


@pytest.mark.parametrize("algo", ALGOS)
def test_tensorboard_run_name_and_diagnostics(algo, tmp_path) -> None:
    model = algo(
        "MlpGTrXLPolicy",
        tmaze_env(2),
        n_steps=16,
        batch_size=32,
        segment_length=8,
        policy_kwargs=TINY,
        tensorboard_log=str(tmp_path),
    )
    model.learn(64)
    assert (tmp_path / f"{algo.__name__}_1").is_dir()
    logged = model.logger.name_to_value
    assert 0.0 <= logged["memory/layer0/gate_attention"] <= 1.0
    assert logged["memory/layer1/attention_entropy"] >= 0.0
    assert 0.0 <= logged["memory/memory_in_use"] <= 1.0
    # the last update's rollout, its advantages before any normalisation
    assert logged["train/advantage_std"] == pytest.approx(np.std(model.rollout_buffer.advantages))
    assert logged["train/advantage_std"] > 0.0


def test_generic_memory_policy_takes_any_backbone() -> None:
    model = MemoryPPO(
        "MlpMemoryPolicy",
        tmaze_env(1),
        n_steps=8,
        batch_size=8,
        segment_length=4,
        policy_kwargs={"backbone": "gru", "hidden_size": 8},
    )
    model.learn(8)
    assert model.policy.backbone_name == "gru"
    assert isinstance(model.policy.backbone.rnn, torch.nn.GRU)


def test_previous_action_and_reward_reach_the_backbone() -> None:
    from txrl.envs import PreviousActionReward

    env = DummyVecEnv(
        [lambda: Monitor(PreviousActionReward(gym.make("txrl/TMazePassive-v0", length=3)))] * 2
    )
    model = MemoryPPO(
        "MlpGTrXLPolicy", env, n_steps=16, batch_size=32, segment_length=8, policy_kwargs=TINY
    )
    assert model.policy.backbone.input_dim == 3 + 4 + 1
    model.learn(32)
    mean_reward, _ = evaluate_policy(model, env, n_eval_episodes=2)
    assert np.isfinite(mean_reward)


@pytest.mark.slow  # SubprocVecEnv worker processes
def test_subproc_envs_callbacks_and_progress_bar() -> None:
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import SubprocVecEnv

    from txrl.envs import make_env_fn

    class CountSteps(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def _on_step(self) -> bool:
            self.calls += 1
            return True

    env = SubprocVecEnv([make_env_fn("txrl/TMazePassive-v0", length=3)] * 2, start_method="spawn")
    try:
        model = MemoryPPO(
            "MlpGTrXLPolicy", env, n_steps=8, batch_size=16, segment_length=4, policy_kwargs=TINY
        )
        counter = CountSteps()
        model.learn(32, callback=counter, progress_bar=True)
        assert counter.calls == 16 and model.num_timesteps == 32
    finally:
        env.close()


@pytest.mark.parametrize("policy", ["MlpGTrXLPolicy", "MlpLstmPolicy"])
def test_states_kept_per_rollout_give_state_ats_minibatches_and_gradients(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The buffer keeps every segment start's state once per rollout and refreshes a
    minibatch's rows with the current weights: the same memory, outputs and gradients as
    rebuilding each minibatch's states with ``state_at`` (the path above the size bound),
    after the weights have moved since the states were kept."""
    import txrl.sb3.buffer as buffer_module

    model = MemoryPPO(policy, tmaze_env(2, length=4), n_steps=24, batch_size=16,
                      segment_length=8, n_epochs=1, policy_kwargs=tiny_kwargs(policy), seed=0)  # fmt: skip
    model.learn(2 * 48)  # the second rollout carries memory in; episodes end inside it
    buffer, backbone = model.rollout_buffer, model.policy.backbone

    def first_batch(limit: int):
        monkeypatch.setattr(buffer_module, "SEGMENT_STATES_MAX_BYTES", limit)
        segments = buffer.segments(backbone, 8, 2, generator=np.random.default_rng(0))
        return next(segments)

    first_batch(2**30)
    assert buffer._segment_states[2] is not None, "the states were kept"
    with torch.no_grad():  # the weights move after the states were kept
        for p in model.policy.parameters():
            p.add_(0.01 * torch.randn_like(p))
    kept = first_batch(2**30)  # the kept states, refreshed with the new weights
    buffer._segment_states = None
    rebuilt = first_batch(0)
    assert buffer._segment_states[2] is None, "above the bound each minibatch rebuilds"
    assert torch.equal(kept.env_index, rebuilt.env_index)
    assert torch.equal(kept.start, rebuilt.start)
    for a, b in zip(kept.memory, rebuilt.memory, strict=True):
        assert torch.equal(a, b)
    grads = []
    for batch in (kept, rebuilt):
        model.policy.zero_grad()
        values, log_prob, *_ = model.evaluate_batch(batch)
        (values.sum() + log_prob.sum()).backward()
        grads.append([p.grad.clone() for p in model.policy.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 0
    for a, b in zip(*grads, strict=True):
        assert torch.equal(a, b)
