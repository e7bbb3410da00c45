"""Evaluation of a trained agent: success rate and return with 95% confidence intervals.

Episodes are run with SB3's :func:`~stable_baselines3.common.evaluation.evaluate_policy`,
which carries a recurrent policy's state from step to step: it calls
``model.predict(obs, state=state, episode_start=episode_starts)`` with ``state=None`` first
(the policy starts from its empty memory) and ``episode_starts[i] = done`` afterwards, so
each env's memory is cleared when its next episode begins. Episodes are split evenly over
the eval envs (SB3's unbiased split). Success is ``info["is_success"]`` at each counted
episode end, collected through ``evaluate_policy``'s callback as SB3's ``EvalCallback`` does.

Intervals (from :mod:`txrl.stats`): the success rate's is Wilson's score interval (good near
0 and 1, where the normal approximation is not); the mean return's is a percentile bootstrap. Across seeds
(``txrl compare``) the summaries are the mean, the interquartile mean (IQM, Agarwal et al.
2021) and a percentile-bootstrap interval of the mean.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv

from txrl.run.algorithms import algorithm_class
from txrl.run.checkpoint import (
    CheckpointError,
    import_dynamo_without_litter,
    read_checkpoint_config,
    read_resume_state,
    resolve_checkpoint,
)
from txrl.run.envs import make_eval_env
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
    """One human-readable block of an eval summary (see :meth:`EvalResult.summary`)."""
    lines = []
    if summary.get("success_rate") is not None:
        lo, hi = summary["success_ci95"]
        lines.append(f"success rate  {summary['success_rate']:.3f}   95% CI [{lo:.3f}, {hi:.3f}]")
    lo, hi = summary["return_ci95"]
    lines.append(f"mean return   {summary['mean_return']:.3f}   95% CI [{lo:.3f}, {hi:.3f}]")
    lines.append(f"episodes      {summary['episodes']} (mean length {summary['mean_length']:.1f})")
    return "\n".join(lines)


__all__ = [
    "EvalResult",
    "evaluate",
    "evaluate_checkpoint",
    "format_summary",
    "load_checkpoint_model",
    "make_checkpoint_eval_env",
]


def load_checkpoint_model(checkpoint: Path, config: TrainConfig) -> BaseAlgorithm:
    """The trained model of ``checkpoint`` (made with ``config``), on the config's device."""
    return algorithm_class(config.algo).load(checkpoint, device=config.runtime.device)


def make_checkpoint_eval_env(
    checkpoint: Path, config: TrainConfig, *, episodes: int, seed: int | None = None
) -> VecEnv:
    """Eval envs of ``config`` (see :func:`txrl.run.envs.make_eval_env`), with the observation
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
) -> dict[str, Any]:
    """Evaluate a checkpoint, or a run directory's final (else latest) checkpoint, or with
    ``best`` its best one (``checkpoints/best.zip``).

    The checkpoint carries its config, so the same env (and observation normalisation) is
    rebuilt. Defaults: the config's ``eval.episodes`` and ``eval.deterministic``, and the
    judging seeds (:data:`txrl.run.envs.JUDGE_SEED_OFFSET`), apart from those of the
    evaluations during training, which chose the best checkpoint and may have stopped the run. Returns :meth:`EvalResult.summary` plus where from.
    """
    import_dynamo_without_litter()  # loading builds an optimizer (see its doc)
    checkpoint = resolve_checkpoint(target, best=best)
    config = read_checkpoint_config(checkpoint)
    episodes = episodes or config.eval.episodes
    env = make_checkpoint_eval_env(checkpoint, config, episodes=episodes, seed=seed)
    model = load_checkpoint_model(checkpoint, config)
    result = evaluate(
        model,
        env,
        episodes,
        deterministic=config.eval.deterministic if deterministic is None else deterministic,
    )
    env.close()
    return {
        "checkpoint": str(checkpoint),
        "timesteps": int(model.num_timesteps),
        **result.summary(),
    }
