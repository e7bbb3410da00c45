"""The envs of a run: training envs (optionally normalised), eval envs, restored envs.

Used by training (`txrl.run.run_dir.Run`, the recipe) and by evaluating a checkpoint
([`txrl.run.evaluate.evaluate_checkpoint`][txrl.run.evaluate.evaluate_checkpoint]).
Every env is wrapped in SB3's ``Monitor`` (episode returns and lengths) and seeded
``seed, seed + 1, ...``; eval envs use seeds disjoint from the training envs'.
"""

from __future__ import annotations

import contextlib
import pickle
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from gymnasium import spaces
from sb3_contrib.common.wrappers import TimeFeatureWrapper
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

from txrl.config import TrainConfig
from txrl.envs import make_env_fn
from txrl.run.checkpoint import ResumeState

#: Seeds of the eval envs during training (periodic evaluations, ``eval.stop_at``, the best
#: checkpoint): ``config.seed + EVAL_SEED_OFFSET + i`` for env i, apart from the training envs'.
EVAL_SEED_OFFSET = 1_000_000
#: Seeds of a judging evaluation after training (``txrl eval``, ``txrl inspect``):
#: ``config.seed + JUDGE_SEED_OFFSET + i``. Apart from the training-time evaluations', so the
#: episodes that judge a run are never those that chose its best checkpoint or stopped it.
JUDGE_SEED_OFFSET = 2_000_000


# ---------------------------------------------------------------------------- environments


def _returning(env: gym.Env) -> Callable[[], gym.Env]:
    """An env factory for a VecEnv that hands over an env already made (a restored one)."""
    return lambda: env


def _ignoring_sigint(factory: Callable[..., gym.Env]) -> Callable[..., gym.Env]:
    """``factory``, made to run in a ``SubprocVecEnv`` worker that ignores SIGINT first.

    A terminal's Ctrl-C reaches every process of its group; SB3's env workers end on it, and
    the training process, which stops cleanly at the end of its rollout
    (`txrl.run.callbacks.StopOnInterrupt`), would then find its envs gone mid-rollout."""

    def make(**kwargs: Any) -> gym.Env:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return factory(**kwargs)

    return make


def episode_step_limit(env: gym.Env) -> int | None:
    """The most steps an episode of ``env`` lasts, where the env says: its spec's
    ``max_episode_steps``, else POPGym's ``max_episode_length``, else the T-maze's and
    MiniGrid's ``max_steps``; ``None`` where it says none of them."""
    if env.spec is not None and env.spec.max_episode_steps is not None:
        return int(env.spec.max_episode_steps)
    for name in ("max_episode_length", "max_steps"):
        value = getattr(env.unwrapped, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


@dataclass(frozen=True)
class TimeFeatureEnv:
    """Picklable env factory: ``factory``'s env wrapped in sb3-contrib's ``TimeFeatureWrapper``,
    which appends ``1 - t / T`` to each observation at step ``t`` of an episode limited to
    ``T`` steps (Pardo et al. 2018, "Time Limits in Reinforcement Learning", Sec. 3: the time
    left is part of the state of a task with a time limit).

    ``max_steps`` is ``T``; ``None``: [`episode_step_limit`][txrl.run.envs.episode_step_limit]
    of each env made, so an evaluation with other ``env.kwargs`` (a longer T-maze) counts
    from its own limit."""

    factory: Callable[..., gym.Env]
    max_steps: int | None = None

    def __call__(self, **overrides: Any) -> gym.Env:
        env = self.factory(**overrides)
        space = env.observation_space
        if not isinstance(space, spaces.Box) or len(space.shape) != 1:
            env.close()
            raise ValueError(
                f"env.time_feature appends to a 1-D Box observation; this env's is {space}"
            )
        max_steps = self.max_steps or episode_step_limit(env)
        if max_steps is None:
            env.close()
            raise ValueError(
                "env.time_feature needs the episode's step limit, which this env does not "
                "give (spec.max_episode_steps, max_episode_length or max_steps); "
                "set env.time_feature_steps"
            )
        return TimeFeatureWrapper(env, max_steps=max_steps)


def env_factory(
    config: TrainConfig, kwargs: dict[str, Any] | None = None
) -> Callable[..., gym.Env]:
    """The picklable factory of one env of the run, every wrapper of ``config.env`` included;
    ``kwargs``: the env's keyword arguments (default: ``env.kwargs``)."""
    factory: Callable[..., gym.Env] = make_env_fn(
        config.env.id,
        previous_action_reward=config.env.previous_action_reward,
        **(config.env.kwargs if kwargs is None else kwargs),
    )
    if config.env.time_feature:
        factory = TimeFeatureEnv(factory, config.env.time_feature_steps)
    return factory


def make_envs(
    config: TrainConfig,
    n_envs: int,
    seed: int,
    *,
    subproc: bool = False,
    kwargs: dict[str, Any] | None = None,
) -> VecEnv:
    """``n_envs`` Monitor-wrapped copies of the config's env, seeded ``seed, seed + 1, ...``;
    ``kwargs``: the env's keyword arguments (default: ``env.kwargs``)."""
    factory = env_factory(config, kwargs)
    if subproc:
        return make_vec_env(
            _ignoring_sigint(factory),
            n_envs=n_envs,
            seed=seed,
            vec_env_cls=SubprocVecEnv,
            vec_env_kwargs={"start_method": "forkserver"},
        )
    return make_vec_env(factory, n_envs=n_envs, seed=seed, vec_env_cls=DummyVecEnv)


def make_train_env(config: TrainConfig) -> VecEnv:
    """The training envs (``env.n_envs``), with ``VecNormalize`` when asked for."""
    env = make_envs(config, config.env.n_envs, config.seed, subproc=config.env.vec_env == "subproc")
    if config.env.normalize_obs or config.env.normalize_reward:
        env = VecNormalize(
            env,
            norm_obs=config.env.normalize_obs,
            norm_reward=config.env.normalize_reward,
            gamma=config.learner_settings.gamma,
        )
    return env


def eval_env_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The eval envs' keyword arguments: ``env.kwargs`` updated by ``eval.env_kwargs``."""
    return {**config.env.kwargs, **config.eval.env_kwargs}


def make_eval_env(
    config: TrainConfig, *, episodes: int | None = None, seed: int | None = None
) -> VecEnv:
    """Eval envs (in-process); with frozen observation normalisation when training uses it.

    ``seed`` is the first env's seed; ``None``: the judging seeds,
    ``config.seed + JUDGE_SEED_OFFSET`` (the periodic evaluations pass theirs). The env's
    keyword arguments are ``env.kwargs`` updated by ``eval.env_kwargs``."""
    episodes = episodes or config.eval.episodes
    seed = config.seed + JUDGE_SEED_OFFSET if seed is None else seed
    env = make_envs(config, min(config.eval.n_envs, episodes), seed, kwargs=eval_env_kwargs(config))
    if config.env.normalize_obs:
        env = VecNormalize(env, training=False, norm_obs=True, norm_reward=False)
    return env


def _holds_what_is_built_now(restored: gym.Env, fresh: gym.Env) -> bool:
    """Whether an env unpickled from a checkpoint has the classes and every attribute that
    this code's constructors give ``fresh`` (each wrapper and the env inside): an env pickled
    by an older version of its class may lack an attribute its methods now read."""
    while True:
        if type(restored) is not type(fresh) or not vars(fresh).keys() <= vars(restored).keys():
            return False
        if not isinstance(fresh, gym.Wrapper) or not isinstance(restored, gym.Wrapper):
            return True
        restored, fresh = restored.env, fresh.env


def restore_envs(config: TrainConfig, state: ResumeState) -> tuple[VecEnv, bool]:
    """Training envs for a resumed run, and whether their exact state was restored: the
    checkpoint's envs where they unpickle and match what this code builds, otherwise new
    ones (new episodes; the run goes on from the checkpoint's step)."""
    env: VecEnv | None = None
    if state.envs is not None and config.env.vec_env == "dummy":
        with contextlib.suppress(Exception):
            envs = pickle.loads(state.envs)
            built = make_envs(config, 1, config.seed)
            try:
                fresh = built.envs[0]  # type: ignore[attr-defined]  # a DummyVecEnv
                if all(_holds_what_is_built_now(e, fresh) for e in envs):
                    env = DummyVecEnv([_returning(e) for e in envs])
            finally:
                built.close()
    exact = env is not None
    if env is None:
        env = make_envs(
            config, config.env.n_envs, config.seed, subproc=config.env.vec_env == "subproc"
        )
    if state.vec_normalize is not None:
        vec_normalize: VecNormalize = pickle.loads(state.vec_normalize)
        vec_normalize.set_venv(env)
        if state.vec_normalize_returns is not None:
            vec_normalize.returns = state.vec_normalize_returns.copy()
        env = vec_normalize
    return env, exact
