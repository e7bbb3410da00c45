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
from typing import Any

import gymnasium as gym
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
    factory = make_env_fn(
        config.env.id,
        previous_action_reward=config.env.previous_action_reward,
        **(config.env.kwargs if kwargs is None else kwargs),
    )
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


def make_eval_env(
    config: TrainConfig, *, episodes: int | None = None, seed: int | None = None
) -> VecEnv:
    """Eval envs (in-process); with frozen observation normalisation when training uses it.

    ``seed`` is the first env's seed; ``None``: the judging seeds,
    ``config.seed + JUDGE_SEED_OFFSET`` (the periodic evaluations pass theirs). The env's
    keyword arguments are ``env.kwargs`` updated by ``eval.env_kwargs``."""
    episodes = episodes or config.eval.episodes
    seed = config.seed + JUDGE_SEED_OFFSET if seed is None else seed
    kwargs = {**config.env.kwargs, **config.eval.env_kwargs}
    env = make_envs(config, min(config.eval.n_envs, episodes), seed, kwargs=kwargs)
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
