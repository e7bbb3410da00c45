"""The agent recipe: one training run of any learner and memory model, read top to bottom.

Which agent it is comes from the config: ``algo`` picks the learner from
[`txrl.learners`][txrl.learners] (MemoryPPO, V-MPO, sb3-contrib's RecurrentPPO, ...) and ``policy``
the memory model (GTrXL, TrXL-I, LSTM, any registered backbone). GTrXL-PPO, GTrXL-V-MPO
(the learner Parisotto et al. 2019 trained GTrXL with) and LSTM-PPO differ only there, so
a comparison between them measures the learner or the memory model and nothing else.

What it wires together, all from ``txrl``:

* **env**: ``config.env.id`` in an SB3 VecEnv of ``env.n_envs`` envs, restored exactly when
  resuming (`txrl.run.run_dir.Run.envs`), and separate eval envs;
* **policy**: the learner's policy for ``config.policy`` on the env's observations
  ([`txrl.run.algorithms.policy_for`][txrl.run.algorithms.policy_for]): features -> memory backbone -> actor and
  critic heads;
* **learner**: the algorithm of ``algo`` ([`txrl.run.algorithms.ALGORITHMS`][txrl.run.algorithms.ALGORITHMS], from the
  learner's record in [`txrl.learners.LEARNERS`][txrl.learners.LEARNERS]) with the config's learner section as
  its settings (``config.learner_settings``);
* **logging**: TensorBoard, periodic evaluation, progress and atomic checkpoints
  (`txrl.run.run_dir.Run`, driven by `txrl.run.callbacks`).
"""

from __future__ import annotations

from pathlib import Path

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from txrl.config import TrainConfig
from txrl.run.algorithms import algorithm_class, policy_for, settings_kwargs
from txrl.run.callbacks import StopOnInterrupt, run_callbacks
from txrl.run.envs import EVAL_SEED_OFFSET, make_eval_env
from txrl.run.run_dir import Run, TrainResult


def make_learner(config: TrainConfig, env: VecEnv) -> BaseAlgorithm:
    """A fresh learner on ``env`` with the config's policy and learner settings."""
    policy, policy_kwargs = policy_for(config.algo, config.policy, env.observation_space)
    return algorithm_class(config.algo)(
        policy,
        env,
        **settings_kwargs(config.learner_settings),  # every settings field
        policy_kwargs=policy_kwargs,
        seed=config.seed,
        device=config.runtime.device,
        verbose=config.runtime.verbose,
    )


def main(
    config: TrainConfig,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    until: int | None = None,
) -> TrainResult:
    """Train (or, with ``resume``, continue) one run; returns its final evaluation.
    ``until``: pause at the first rollout start at or after that step instead."""
    # 1. The run directory: resolved config, eval log, TensorBoard events, checkpoints.
    run = Run.open(config, run_dir, resume=resume)

    # 2. Environments: training envs (restored when resuming) and separate eval envs.
    env = run.envs()
    eval_env = make_eval_env(config, seed=config.seed + EVAL_SEED_OFFSET)

    # 3. The learner: new, or the checkpoint's (weights, optimizer, step count, memory, RNG).
    algorithm = algorithm_class(config.algo)
    model = run.restore(algorithm, env) if run.checkpoint else make_learner(config, env)

    # 4. Logging: TensorBoard through SB3's logger; evaluation and checkpoints between rollouts.
    model.set_logger(run.logger())

    # 5. Train for what is left of the budget; the step count continues, never restarts.
    #    Ctrl-C (or SIGTERM) ends it after the rollout under way and its update, with a
    #    checkpoint there, and names that step and how to resume (a second one at once);
    #    ``until`` pauses it the same way at that step.
    stop = StopOnInterrupt(save=run.save_on_stop, at_step=until)
    try:
        with stop.catching():
            model.learn(
                total_timesteps=run.remaining(model),
                callback=[*run_callbacks(run, eval_env), stop],
                log_interval=config.runtime.log_interval,
                reset_num_timesteps=False,
                progress_bar=False,  # run_callbacks shows progress over the whole budget
            )
    except KeyboardInterrupt:
        raise run.interrupted(int(model.num_timesteps)) from None
    if stop.saved_step is not None:  # stopped at its checkpoint (the step after is not kept)
        if stop.paused and until is not None:
            raise run.paused(stop.saved_step, until)
        raise run.interrupted(stop.saved_step)

    # 6. Final evaluation and the final checkpoint, which marks the run finished.
    return run.finish(model, eval_env)
