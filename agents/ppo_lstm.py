"""LSTM-PPO and GRU-PPO: the recurrent baselines, as one recipe read top to bottom.

The same PPO learner and the same memory-policy machinery as :mod:`txrl.agents.ppo_gtrxl`,
with an ``nn.LSTM`` or ``nn.GRU`` as the backbone (``policy.backbone: lstm | gru``, size
``policy.hidden_size``), reset at episode starts. Because both recipes share everything but
the backbone, a comparison between them measures the memory model and nothing else.

What it wires together, all from ``txrl``:

* **env**: ``config.env.id`` in an SB3 VecEnv of ``env.n_envs`` envs
  (:func:`txrl.train.make_train_env`);
* **policy**: ``MlpLstmPolicy`` / ``MlpGruPolicy`` (or their Cnn / MultiInput versions);
* **learner**: :class:`txrl.MemoryPPO` with the ``ppo:`` settings, training on segments
  that start from the recurrent state each segment had while acting;
* **logging**: TensorBoard, periodic evaluation and atomic checkpoints (:class:`txrl.train.Run`).
"""

from __future__ import annotations

from pathlib import Path

from stable_baselines3.common.vec_env import VecEnv

from txrl import MemoryPPO
from txrl.config import ConfigError, TrainConfig
from txrl.train import Run, TrainResult, make_eval_env, policy_prefix

POLICY_NAMES = {"lstm": "Lstm", "gru": "Gru"}


def make_learner(config: TrainConfig, env: VecEnv) -> MemoryPPO:
    """A fresh MemoryPPO learner with a recurrent backbone."""
    if config.policy.backbone not in POLICY_NAMES:
        raise ConfigError(
            f"ppo_lstm trains policy.backbone lstm or gru, got {config.policy.backbone!r}"
        )
    policy = (
        policy_prefix(config.policy.encoder, env.observation_space)
        + POLICY_NAMES[config.policy.backbone]
        + "Policy"
    )
    return MemoryPPO(
        policy,
        env,
        **config.ppo.learner_kwargs(),  # learning_rate, n_steps, ..., as in txrl.config.PPOConfig
        policy_kwargs=config.policy.policy_kwargs(),
        seed=config.seed,
        device=config.runtime.device,
        verbose=config.runtime.verbose,
    )


def main(
    config: TrainConfig, run_dir: str | Path | None = None, *, resume: bool = False
) -> TrainResult:
    """Train (or, with ``resume``, continue) one run; returns its final evaluation."""
    # 1. The run directory: resolved config, eval log, TensorBoard events, checkpoints.
    run = Run.open(config, run_dir, resume=resume)

    # 2. Environments: training envs (restored when resuming) and separate eval envs.
    env = run.envs()
    eval_env = make_eval_env(config)

    # 3. The learner: new, or the checkpoint's (weights, optimizer, step count, memory, RNG).
    model = run.restore(MemoryPPO, env) if run.checkpoint else make_learner(config, env)

    # 4. Logging: TensorBoard through SB3's logger; evaluation and checkpoints between rollouts.
    model.set_logger(run.logger())

    # 5. Train for what is left of the budget; the step count continues, never restarts.
    model.learn(
        total_timesteps=run.remaining(model),
        callback=run.callbacks(eval_env),
        log_interval=config.runtime.log_interval,
        reset_num_timesteps=False,
        progress_bar=False,  # run.callbacks shows progress over the whole budget
    )

    # 6. Final evaluation and the final checkpoint, which marks the run finished.
    return run.finish(model, eval_env)
