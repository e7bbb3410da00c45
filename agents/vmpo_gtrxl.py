"""GTrXL-V-MPO: V-MPO on a transformer-memory policy, as one recipe read top to bottom.

Song et al. (2019), "V-MPO: On-Policy Maximum a Posteriori Policy Optimization for Discrete
and Continuous Control", the learner Parisotto et al. (2019) trained GTrXL with. V-MPO
replaces PPO's clipped ratio by an E-step (weights over the top half of the advantages,
with a learned temperature) and an M-step (weighted maximum likelihood inside a KL trust
region, with learned multipliers). Any backbone works: set ``policy.backbone``.

What it wires together, all from ``txrl``:

* **env**: ``config.env.id`` in an SB3 VecEnv of ``env.n_envs`` envs
  (:func:`txrl.train.make_train_env`);
* **policy**: a txrl memory policy, features -> backbone -> actor and critic heads;
* **learner**: :class:`txrl.VMPO` with the ``vmpo:`` settings (``algo: vmpo``);
* **logging**: TensorBoard, periodic evaluation and atomic checkpoints (:class:`txrl.train.Run`).
"""

from __future__ import annotations

from pathlib import Path

from stable_baselines3.common.vec_env import VecEnv

from txrl import VMPO
from txrl.config import TrainConfig
from txrl.train import Run, TrainResult, make_eval_env, policy_prefix

#: Policy class per built-in backbone; any other uses ``*MemoryPolicy`` with ``backbone=...``.
POLICY_NAMES = {"gtrxl": "GTrXL", "trxl_i": "TrXLI", "trxl": "TrXL", "lstm": "Lstm", "gru": "Gru"}


def make_learner(config: TrainConfig, env: VecEnv) -> VMPO:
    """A fresh V-MPO learner on ``env`` with the config's policy and V-MPO settings."""
    policy = (
        policy_prefix(config.policy.encoder, env.observation_space)
        + POLICY_NAMES.get(config.policy.backbone, "Memory")
        + "Policy"
    )
    return VMPO(
        policy,
        env,
        **config.vmpo.learner_kwargs(),  # learning_rate, epsilon_eta, ..., as in txrl.config.VMPOConfig
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

    # 3. The learner: new, or the checkpoint's (weights, multipliers, optimizer, step count,
    #    memory, RNG).
    model = run.restore(VMPO, env) if run.checkpoint else make_learner(config, env)

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
