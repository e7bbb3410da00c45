"""GTrXL-PPO: PPO on a transformer-memory policy, as one recipe read top to bottom.

Parisotto et al. (2019), "Stabilizing Transformers for Reinforcement Learning": a
Transformer-XL whose blocks are reordered (identity map) and gated, trained here with PPO
(Schulman et al. 2017). The same recipe trains TrXL-I, TrXL and any other transformer
backbone registered with :func:`txrl.register_backbone`: set ``policy.backbone``.

What it wires together, all from ``txrl``:

* **env**: ``config.env.id`` (a txrl memory task or any Gymnasium id), ``env.n_envs`` copies
  in an SB3 VecEnv, each carrying its own memory (:func:`txrl.train.make_train_env`);
* **policy**: a txrl memory policy, features -> backbone (``txrl.make_backbone``) ->
  actor and critic heads (:mod:`txrl.sb3.policies`);
* **learner**: :class:`txrl.MemoryPPO` with the ``ppo:`` settings;
* **logging**: SB3's logger to TensorBoard, an evaluation every ``eval.every`` steps (success
  rate and return, ``eval.jsonl``) and atomic checkpoints (:class:`txrl.train.Run`).

Run it with ``txrl train configs/quickstart.yaml`` or ``main(load_train_config(path))``.
"""

from __future__ import annotations

from pathlib import Path

from stable_baselines3.common.vec_env import VecEnv

from txrl import MemoryPPO
from txrl.config import TrainConfig
from txrl.train import Run, TrainResult, make_eval_env, policy_prefix

#: Policy class per transformer backbone; any other backbone uses the generic
#: ``*MemoryPolicy`` with ``policy_kwargs["backbone"]``.
POLICY_NAMES = {"gtrxl": "GTrXL", "trxl_i": "TrXLI", "trxl": "TrXL"}


def make_learner(config: TrainConfig, env: VecEnv) -> MemoryPPO:
    """A fresh MemoryPPO learner on ``env`` with the config's policy and PPO settings."""
    policy = (
        policy_prefix(config.policy.encoder, env.observation_space)
        + POLICY_NAMES.get(config.policy.backbone, "Memory")
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

    # 2. Environments: the training envs (restored from the checkpoint when resuming) and
    #    separate eval envs.
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
