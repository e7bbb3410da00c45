"""Evaluation of a trained agent: success rate and return with 95% confidence intervals.

Episodes are run with SB3's `evaluate_policy`,
which carries a recurrent policy's state from step to step: it calls
``model.predict(obs, state=state, episode_start=episode_starts)`` with ``state=None`` first
(the policy starts from its empty memory) and ``episode_starts[i] = done`` afterwards, so
each env's memory is cleared when its next episode begins. Episodes are split evenly over
the eval envs (SB3's unbiased split). Success is ``info["is_success"]`` at each counted
episode end, collected through ``evaluate_policy``'s callback as SB3's ``EvalCallback`` does.

Intervals (from [`txrl.stats`][txrl.stats]): the success rate's is Wilson's score interval (good near
0 and 1, where the normal approximation is not); the mean return's is a percentile bootstrap. Across seeds
(``txrl compare``) the summaries are the mean, the interquartile mean (IQM, Agarwal et al.
2021) and a percentile-bootstrap interval of the mean.

An evaluation's score (`eval_score`) is what chooses the best checkpoint and stops a
run; `drop_from_best` says when a periodic evaluation has fallen far below the run's
best, the warning of a run that learned a task and then lost it (``eval.warn_drop``).
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv

from txrl.config import judge_config
from txrl.run.algorithms import algorithm_class
from txrl.run.checkpoint import (
    CheckpointError,
    import_dynamo_without_litter,
    periodic_checkpoints,
    read_checkpoint_config,
    read_resume_state,
    resolve_checkpoint,
)
from txrl.run.envs import JUDGE_SEED_OFFSET, eval_env_kwargs, make_eval_env
from txrl.run.run_files import BEST_CHECKPOINT, CHECKPOINT_DIR, FINAL_CHECKPOINT
from txrl.stats import bootstrap_ci, wilson_interval

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

    from txrl.config import TrainConfig


@dataclass(frozen=True)
class EvalResult:
    """Per-episode outcomes of one evaluation and their summaries."""

    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    successes: tuple[bool, ...]  # empty when the env reports no info["is_success"]

    @property
    def episodes(self) -> int:
        return len(self.returns)

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns))

    @property
    def return_ci95(self) -> tuple[float, float]:
        return bootstrap_ci(self.returns)

    @property
    def success_rate(self) -> float | None:
        return float(np.mean(self.successes)) if self.successes else None

    @property
    def success_ci95(self) -> tuple[float, float] | None:
        if not self.successes:
            return None
        return wilson_interval(int(sum(self.successes)), len(self.successes))

    def summary(self) -> dict[str, Any]:
        """JSON-able summary (the eval log's fields)."""
        ci = self.success_ci95
        return {
            "episodes": self.episodes,
            "success_rate": self.success_rate,
            "success_ci95": list(ci) if ci is not None else None,
            "mean_return": self.mean_return,
            "return_ci95": list(self.return_ci95),
            "mean_length": float(np.mean(self.lengths)),
        }


def evaluate(model: Any, env: VecEnv, episodes: int, *, deterministic: bool = True) -> EvalResult:
    """Run ``episodes`` episodes of ``model`` on ``env`` (Monitor-wrapped envs) and collect them."""
    successes: list[bool] = []

    def collect_success(locals_: dict[str, Any], _globals: dict[str, Any]) -> None:
        # Called for each env still counting episodes; the same test as EvalCallback's.
        if locals_["done"] and "episode" in locals_["info"]:
            success = locals_["info"].get("is_success")
            if success is not None:
                successes.append(bool(success))

    returns, lengths = evaluate_policy(
        model,
        env,
        n_eval_episodes=episodes,
        deterministic=deterministic,
        return_episode_rewards=True,
        callback=collect_success,
    )
    # per-episode lists, as return_episode_rewards asks
    assert isinstance(returns, list) and isinstance(lengths, list)
    if successes and len(successes) != len(returns):
        successes = []  # only some episodes reported success: no honest rate
    return EvalResult(
        returns=tuple(float(r) for r in returns),
        lengths=tuple(int(n) for n in lengths),
        successes=tuple(successes),
    )


def format_summary(summary: dict[str, Any]) -> str:
    """One human-readable block of an eval summary (see [`EvalResult.summary`][txrl.run.evaluate.EvalResult.summary])."""
    lines = []
    if summary.get("success_rate") is not None:
        lo, hi = summary["success_ci95"]
        lines.append(f"success rate  {summary['success_rate']:.3f}   95% CI [{lo:.3f}, {hi:.3f}]")
    lo, hi = summary["return_ci95"]
    lines.append(f"mean return   {summary['mean_return']:.3f}   95% CI [{lo:.3f}, {hi:.3f}]")
    lines.append(f"episodes      {summary['episodes']} (mean length {summary['mean_length']:.1f})")
    return "\n".join(lines)


def eval_score(summary: dict[str, Any]) -> float:
    """What makes an evaluation the best: its success rate where the env reports one, else
    its mean return."""
    success = summary.get("success_rate")
    return float(summary["mean_return"] if success is None else success)


def eval_score_ci95(summary: dict[str, Any]) -> tuple[float, float] | None:
    """The 95% interval of `eval_score` (the success rate's where that is the score,
    else the mean return's); None where the summary holds none."""
    key = "return_ci95" if summary.get("success_rate") is None else "success_ci95"
    ci = summary.get(key)
    return None if ci is None else (float(ci[0]), float(ci[1]))


@dataclass(frozen=True)
class DropFromBest:
    """How the newest evaluation of a run stands against the best one before it
    (`drop_from_best`)."""

    drop: float  # the best earlier score minus this one; 0 at a new best or the first evaluation
    best: dict[str, Any] | None  # the best earlier evaluation (the earliest on a tie)
    fell: bool  # far below that best, beyond noise
    warn: bool  # fell, and the first evaluation since that best to fall

    def message(self, entry: dict[str, Any], run_dir: Path, *, save_best: bool) -> str:
        """The warning for ``entry`` (the newest evaluation), naming the best checkpoint of
        ``run_dir`` and how to judge it."""
        assert self.best is not None
        what = "mean return" if entry.get("success_rate") is None else "success rate"
        said = (
            f"the evaluation at step {entry['timesteps']:,} scored {eval_score(entry):.3f} "
            f"({what}), {self.drop:.3f} below the run's best, {eval_score(self.best):.3f} at "
            f"step {self.best['timesteps']:,}: training has lost what it had learned "
            "(eval.warn_drop sets how far a fall warns); "
        )
        best = run_dir / CHECKPOINT_DIR / BEST_CHECKPOINT
        if save_best:
            return said + f"{best} keeps the best model: judge it with `txrl eval {run_dir} --best`"
        return said + (
            f"eval.save_best is false, so no {CHECKPOINT_DIR}/{BEST_CHECKPOINT} keeps that "
            "model for `txrl eval --best`"
        )


def drop_from_best(log: Sequence[dict[str, Any]], threshold: float | None) -> DropFromBest:
    """How far the newest evaluation of ``log`` (a run's eval log, oldest first) fell below
    the best before it, and whether it fell far enough to warn.

    An evaluation *falls* when it scores (`eval_score`) more than ``threshold`` below
    the best earlier one and beyond the noise of the two: its 95% interval lies wholly below
    the best's (`eval_score_ci95`; where either has none, the threshold alone decides).
    The *warning* goes with the first evaluation to fall after a best: one per fall, the next
    only after a new best. It is decided from the log alone, so a resumed run (its log cut
    back to its checkpoint) warns where the uninterrupted run would. ``threshold`` None:
    never falls.
    """
    if len(log) < 2:
        return DropFromBest(drop=0.0, best=None, fell=False, warn=False)
    *earlier, newest = log
    scores = [eval_score(e) for e in earlier]
    at = scores.index(max(scores))  # the earliest best, as best.zip keeps it
    best = earlier[at]

    def fell(entry: dict[str, Any]) -> bool:
        if threshold is None or not eval_score(best) - eval_score(entry) > threshold:
            return False
        below, above = eval_score_ci95(entry), eval_score_ci95(best)
        return below is None or above is None or below[1] < above[0]

    falls = fell(newest)
    # the evaluations between the best and the newest have that same best before them
    warn = falls and not any(fell(e) for e in earlier[at + 1 :])
    return DropFromBest(
        drop=max(0.0, eval_score(best) - eval_score(newest)), best=best, fell=falls, warn=warn
    )


__all__ = [
    "DropFromBest",
    "EvalResult",
    "checkpoint_role",
    "drop_from_best",
    "eval_score",
    "eval_score_ci95",
    "evaluate",
    "evaluate_checkpoint",
    "format_summary",
    "load_checkpoint_model",
    "make_checkpoint_eval_env",
]


def load_checkpoint_model(checkpoint: Path, config: TrainConfig) -> BaseAlgorithm:
    """The trained model of ``checkpoint`` (made with ``config``), on the config's device,
    with torch's threads set as its training set them (``runtime.torch_threads``): torch's
    default, one thread per core, slows a one-env evaluation beside other runs, each
    thread waiting for a core."""
    if config.runtime.torch_threads is not None:
        torch.set_num_threads(config.runtime.torch_threads)
    return algorithm_class(config.algo).load(checkpoint, device=config.runtime.device)


def make_checkpoint_eval_env(
    checkpoint: Path, config: TrainConfig, *, episodes: int, seed: int | None = None
) -> VecEnv:
    """Eval envs of ``config`` (see `txrl.run.envs.make_eval_env`), with the observation
    normalisation statistics frozen at the checkpoint's values when training used them."""
    env = make_eval_env(config, episodes=episodes, seed=seed)
    if config.env.normalize_obs:
        state = read_resume_state(checkpoint)
        if state.vec_normalize is None:
            raise CheckpointError(
                f"{checkpoint} holds no observation normalisation statistics, but its config "
                "normalises observations (env.normalize_obs: true)"
            )
        env.obs_rms = pickle.loads(state.vec_normalize).obs_rms  # type: ignore[attr-defined]  # make_eval_env wraps the envs in VecNormalize when normalize_obs
    return env


def evaluate_checkpoint(
    target: str | Path,
    *,
    episodes: int | None = None,
    seed: int | None = None,
    deterministic: bool | None = None,
    best: bool = False,
    overrides: Sequence[str] = (),
) -> dict[str, Any]:
    """Evaluate a checkpoint, or a run directory's final (else latest) checkpoint, or with
    ``best`` its best one (``checkpoints/best.zip``).

    ``overrides``: ``eval.KEY=VALUE`` settings (`txrl.config.judge_config`), e.g.
    ``eval.env_kwargs.length=3000`` to judge a T-maze agent on longer corridors than the
    config's evaluations.

    The checkpoint carries its config, so the same env (and observation normalisation) is
    rebuilt. Defaults: the config's ``eval.episodes`` and ``eval.deterministic``, and the
    judging seeds (`txrl.run.envs.JUDGE_SEED_OFFSET`), apart from those of the
    evaluations during training, which chose the best checkpoint and may have stopped the
    run.

    Returns [`EvalResult.summary`][txrl.run.evaluate.EvalResult.summary] and what was judged, so that a stored judgement can be
    replayed: ``checkpoint`` (its path), ``judged`` (`checkpoint_role`), ``timesteps``
    (its step), ``seed`` and ``n_envs`` (env ``i`` of the ``n_envs`` eval envs was seeded
    ``seed + i``: ``--seed`` takes it), ``deterministic`` (greedy actions or sampled) and,
    where given, ``overrides`` and the ``env_kwargs`` the eval envs were made with.
    """
    import_dynamo_without_litter()  # loading builds an optimizer (see its doc)
    checkpoint = resolve_checkpoint(target, best=best)
    config = read_checkpoint_config(checkpoint)
    if overrides:
        config = judge_config(config, overrides)
    episodes = episodes or config.eval.episodes
    seed = config.seed + JUDGE_SEED_OFFSET if seed is None else seed
    greedy = config.eval.deterministic if deterministic is None else deterministic
    env = make_checkpoint_eval_env(checkpoint, config, episodes=episodes, seed=seed)
    model = load_checkpoint_model(checkpoint, config)
    result = evaluate(model, env, episodes, deterministic=greedy)
    env.close()
    return {
        "checkpoint": str(checkpoint),
        "judged": checkpoint_role(checkpoint),
        "timesteps": int(model.num_timesteps),
        "seed": seed,
        "n_envs": env.num_envs,
        "deterministic": greedy,
        **(
            {
                "overrides": list(overrides),
                "env_kwargs": eval_env_kwargs(config),
            }
            if overrides
            else {}
        ),
        **result.summary(),
    }


def checkpoint_role(checkpoint: Path) -> str:
    """Which checkpoint of a run ``checkpoint`` is, by its name in the run's layout:
    ``final`` (the finished run's), ``best`` (its best evaluation's), ``periodic`` (one at a
    step during training, ``step_<T>.zip``: the newest of a run not finished) or ``file``
    (any other file)."""
    if checkpoint.parent.name == CHECKPOINT_DIR:
        if checkpoint.name == FINAL_CHECKPOINT:
            return "final"
        if checkpoint.name == BEST_CHECKPOINT:
            return "best"
        if checkpoint in periodic_checkpoints(checkpoint.parent):
            return "periodic"
    return "file"
