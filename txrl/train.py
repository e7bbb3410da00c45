"""Training runs: run directory, environments, periodic evaluation, atomic checkpoints, resume.

The agent recipes of :mod:`txrl.agents` wire these parts together; ``txrl train`` and
``txrl compare`` call the recipes through :func:`train`.

Run directory::

    RUN_DIR/
      config.yaml                    the resolved config (every default filled in)
      eval.jsonl                     one JSON line per evaluation (timesteps, success, return, CIs)
      resumes.jsonl                  one line per resume: from which step, envs exact or restarted
      tb/                            TensorBoard events (SB3 logger): rollout/, train/, eval/, time/
      checkpoints/step_<T>.zip       periodic checkpoints at env step T (the last ``keep``)
      checkpoints/final.zip          written last: the run is finished

A checkpoint is one zip file: SB3's own model archive (``MemoryPPO.load`` opens it) with
txrl's resume state and the config added as ``txrl/resume.pkl`` and ``txrl/config.yaml``.
It is written to a temporary file in the same directory, fsynced and moved into place with
``os.replace``, so a crash (even ``kill -9``) leaves either the previous checkpoint or the
new one, never a torn file. Checkpoints and evaluations happen between rollouts, where the
learner's state is consistent (the previous update done, the next rollout not begun).

What resume restores (``txrl train --resume RUN_DIR``) from the last checkpoint:

* exactly: the weights, the optimizer state, the step, update and episode counters and
  SB3's episode-info buffers (SB3's archive); the python, numpy and torch RNG states;
  ``VecNormalize`` statistics; each env's live memory (``model.get_memory()``) and the
  last observations and episode-start flags;
* the environments: with ``env.vec_env: dummy`` (the default) the envs live in the
  training process and are pickled into the checkpoint (their internal state and RNG), so
  the in-flight episodes continue exactly where they were, with their memory. Envs that
  cannot be pickled, and ``subproc`` envs, are rebuilt instead: re-seeded with
  ``seed + T``, their in-flight episodes restart (the restored memory is then cleared by
  the episode starts, as it must be) and training continues from there. ``resumes.jsonl``
  says which happened.

What it cannot restore: work after the last checkpoint is redone (up to
``checkpoint.every`` steps), so TensorBoard holds those steps twice (the resumed run's
points follow the restored step count in the same ``tb/`` directory: no gap and no restart
from zero). The eval log is cut back to the checkpoint, so it holds each evaluation once.
With dummy envs and deterministic torch kernels (CPU), a resumed run reproduces the
uninterrupted one; ``tests/test_cli.py`` checks that.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import random
import re
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import Logger, configure
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    SubprocVecEnv,
    VecEnv,
    VecEnvWrapper,
    VecNormalize,
    sync_envs_normalization,
)

from txrl.config import ConfigError, TrainConfig, dump_yaml
from txrl.evaluate import EvalResult, evaluate

CONFIG_FILE = "config.yaml"
EVAL_LOG = "eval.jsonl"
RESUME_LOG = "resumes.jsonl"
TB_DIR = "tb"
CHECKPOINT_DIR = "checkpoints"
FINAL_CHECKPOINT = "final.zip"
RESUME_MEMBER = "txrl/resume.pkl"
CONFIG_MEMBER = "txrl/config.yaml"
EVAL_SEED_OFFSET = 1_000_000  # eval envs use seeds disjoint from the training envs'
# A fresh run never overwrites these; a directory with only config.yaml never started.
RUN_FILES = (EVAL_LOG, TB_DIR, CHECKPOINT_DIR)
_STEP_FILE = re.compile(r"^step_(\d+)\.zip$")

#: Learner class of each ``algo`` (attribute of the ``txrl`` package).
ALGO_CLASSES = {"ppo": "MemoryPPO", "vmpo": "VMPO"}


class RunError(RuntimeError):
    """A run directory cannot be used as asked (exists, missing, finished, ...)."""


def algo_class(algo: str) -> type[BaseAlgorithm]:
    """The learner class of ``algo``."""
    import txrl

    try:
        return getattr(txrl, ALGO_CLASSES[algo])
    except (AttributeError, ImportError) as e:
        raise ConfigError(
            f"algo {algo!r} needs txrl.{ALGO_CLASSES[algo]}, which this installation cannot import ({e})"
        ) from e


# ---------------------------------------------------------------------------- environments


def policy_prefix(encoder: str, observation_space: spaces.Space) -> str:
    """SB3 policy-name prefix for the observation encoder: Mlp, Cnn or MultiInput."""
    if encoder == "auto":
        return "MultiInput" if isinstance(observation_space, spaces.Dict) else "Mlp"
    return {"mlp": "Mlp", "cnn": "Cnn", "multi_input": "MultiInput"}[encoder]


def make_envs(config: TrainConfig, n_envs: int, seed: int, *, subproc: bool = False) -> VecEnv:
    """``n_envs`` Monitor-wrapped copies of the config's env, seeded ``seed, seed + 1, ...``."""
    from txrl.envs import make_env_fn

    factory = make_env_fn(
        config.env.id, previous_action_reward=config.env.previous_action_reward, **config.env.kwargs
    )
    if subproc:
        return make_vec_env(
            factory,
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
            gamma=config.algo_settings.gamma,
        )
    return env


def make_eval_env(
    config: TrainConfig, *, episodes: int | None = None, seed: int | None = None
) -> VecEnv:
    """Eval envs (in-process); with frozen observation normalisation when training uses it."""
    episodes = episodes or config.eval.episodes
    seed = config.seed + EVAL_SEED_OFFSET if seed is None else seed
    env = make_envs(config, min(config.eval.n_envs, episodes), seed)
    if config.env.normalize_obs:
        env = VecNormalize(env, training=False, norm_obs=True, norm_reward=False)
    return env


def _base_vec_env(env: VecEnv) -> VecEnv:
    while isinstance(env, VecEnvWrapper):
        env = env.venv
    return env


def _find_vec_normalize(env: VecEnv) -> VecNormalize | None:
    while isinstance(env, VecEnvWrapper):
        if isinstance(env, VecNormalize):
            return env
        env = env.venv
    return None


# ---------------------------------------------------------------------------- checkpoints


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class ResumeState:
    """What a checkpoint holds besides SB3's model archive (see the module docstring)."""

    num_timesteps: int
    last_obs: Any  # np.ndarray or dict of them, as the learner last saw them
    last_episode_starts: np.ndarray  # (B,) bool
    memory: tuple[np.ndarray, ...] | None  # model.get_memory(), env on axis 0
    rng: dict[str, Any]  # python / numpy / torch generator states
    envs: bytes | None  # the in-process envs (pickled), None when they could not be
    vec_normalize: bytes | None  # pickled VecNormalize (statistics), None without it
    vec_normalize_returns: np.ndarray | None = None  # its running returns (not in its pickle)


def capture_rng() -> dict[str, Any]:
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def capture_resume_state(model: BaseAlgorithm) -> ResumeState:
    """The resume state of ``model`` and its envs, between rollouts."""
    import cloudpickle

    env = model.get_env()
    assert env is not None
    base = _base_vec_env(env)
    envs = None
    if isinstance(base, DummyVecEnv):
        with contextlib.suppress(Exception):  # an env that cannot be pickled restarts instead
            envs = cloudpickle.dumps(base.envs)
    vec_normalize = _find_vec_normalize(env)
    return ResumeState(
        num_timesteps=int(model.num_timesteps),
        last_obs=model._last_obs,
        last_episode_starts=np.asarray(model._last_episode_starts).copy(),
        memory=model.get_memory(),  # type: ignore[attr-defined]  # txrl learners have it
        rng=capture_rng(),
        envs=envs,
        vec_normalize=pickle.dumps(vec_normalize) if vec_normalize is not None else None,
        vec_normalize_returns=None if vec_normalize is None else vec_normalize.returns.copy(),
    )


def save_checkpoint(model: BaseAlgorithm, path: Path, config: TrainConfig) -> None:
    """One self-contained checkpoint file, written atomically (see the module docstring)."""
    buffer = io.BytesIO()
    model.save(buffer)
    with zipfile.ZipFile(buffer, mode="a") as archive:
        archive.writestr(RESUME_MEMBER, pickle.dumps(capture_resume_state(model)))
        archive.writestr(CONFIG_MEMBER, dump_yaml(config.to_dict()))
    atomic_write(path, buffer.getvalue())


def read_resume_state(path: Path) -> ResumeState:
    """The resume state stored in checkpoint ``path``."""
    with zipfile.ZipFile(path) as archive:
        return pickle.loads(archive.read(RESUME_MEMBER))


def read_checkpoint_config(path: Path) -> TrainConfig:
    """The config a checkpoint was made with."""
    try:
        with zipfile.ZipFile(path) as archive:
            text = archive.read(CONFIG_MEMBER).decode()
    except (OSError, KeyError, zipfile.BadZipFile) as e:
        raise RunError(f"{path} is not a txrl checkpoint: {e}") from e
    return TrainConfig.from_dict(yaml.safe_load(text))


def restore_envs(config: TrainConfig, state: ResumeState) -> tuple[VecEnv, bool]:
    """Training envs for a resumed run, and whether their exact state was restored."""
    env: VecEnv | None = None
    if state.envs is not None and config.env.vec_env == "dummy":
        with contextlib.suppress(Exception):
            envs = pickle.loads(state.envs)
            env = DummyVecEnv([(lambda e=e: e) for e in envs])
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


# ---------------------------------------------------------------------------- the run


@dataclass
class TrainResult:
    """What a finished training run returns."""

    run_dir: Path
    timesteps: int
    final_eval: dict[str, Any]  # EvalResult.summary() at the final step
    checkpoint: Path  # the final checkpoint
    resumed_from: int | None = None  # step of the checkpoint this session started from
    wall_time_s: float = 0.0


@dataclass
class EvalLog:
    """``eval.jsonl``: appended and fsynced per evaluation; cut back to a checkpoint on resume."""

    path: Path

    def read(self) -> list[dict[str, Any]]:
        return read_eval_log(self.path)

    def append(self, entry: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def truncate(self, timesteps: int) -> None:
        kept = [e for e in self.read() if e["timesteps"] <= timesteps]
        atomic_write(self.path, "".join(json.dumps(e) + "\n" for e in kept).encode())


def read_eval_log(path: Path) -> list[dict[str, Any]]:
    """The entries of an eval log; a line cut short by a crash is skipped."""
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            entry = json.loads(line)
            if isinstance(entry, dict) and "timesteps" in entry:
                entries.append(entry)
    return entries


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The final checkpoint if the run finished, else the periodic one with the highest step."""
    directory = Path(run_dir) / CHECKPOINT_DIR
    if (directory / FINAL_CHECKPOINT).exists():
        return directory / FINAL_CHECKPOINT
    periodic = _periodic_checkpoints(directory)
    return periodic[-1] if periodic else None


def _periodic_checkpoints(directory: Path) -> list[Path]:
    """``step_<T>.zip`` files by increasing T (temporary files never match the pattern)."""
    if not directory.exists():
        return []
    steps = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _STEP_FILE.match(p.name))]
    return [p for _, p in sorted(steps)]


def is_finished(run_dir: Path) -> bool:
    return (Path(run_dir) / CHECKPOINT_DIR / FINAL_CHECKPOINT).exists()


@dataclass
class Run:
    """One run directory and the bookkeeping of a training session in it."""

    config: TrainConfig
    run_dir: Path
    checkpoint: Path | None = None  # the checkpoint this session resumes from
    resume_state: ResumeState | None = None
    last_eval: int | None = None  # step of the last evaluation in the log
    last_checkpoint: int = 0
    exact_envs: bool = False  # resumed with the checkpointed envs (not restarted ones)
    started: float = field(default_factory=time.monotonic)
    eval_log: EvalLog = field(init=False)

    def __post_init__(self) -> None:
        self.eval_log = EvalLog(self.run_dir / EVAL_LOG)

    @classmethod
    def open(
        cls, config: TrainConfig, run_dir: str | Path | None = None, *, resume: bool = False
    ) -> Run:
        """Create a fresh run directory, or reopen one to resume (see :func:`train`)."""
        if config.runtime.torch_threads is not None:
            torch.set_num_threads(config.runtime.torch_threads)
        run_dir = Path(run_dir) if run_dir is not None else default_run_dir(config)
        if not resume:
            if any((run_dir / name).exists() for name in RUN_FILES):
                raise RunError(
                    f"{run_dir} already holds a run; "
                    f"resume it with `txrl train --resume {run_dir}` or choose another --run-dir"
                )
            run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write(run_dir / CONFIG_FILE, dump_yaml(config.to_dict()).encode())
            return cls(config, run_dir)
        stored = read_run_config(run_dir)
        if stored != config:
            raise RunError(f"{run_dir} was made with a different config; resume it with its own")
        if is_finished(run_dir):
            raise RunError(f"run {run_dir} is already finished ({FINAL_CHECKPOINT} exists)")
        for stale in [*run_dir.glob(".*.tmp-*"), *run_dir.glob(f"{CHECKPOINT_DIR}/.*.tmp-*")]:
            stale.unlink()  # a write that a crash cut short; the file it was for is intact
        run = cls(config, run_dir)
        run.checkpoint = latest_checkpoint(run_dir)
        if run.checkpoint is None:
            # Killed before its first checkpoint: start over in the same directory.
            run.eval_log.truncate(-1)
            _clear_dir(run_dir / TB_DIR)
            return run
        run.resume_state = read_resume_state(run.checkpoint)
        step = run.resume_state.num_timesteps
        run.eval_log.truncate(step)
        run.last_checkpoint = step
        done = [e["timesteps"] for e in run.eval_log.read()]
        run.last_eval = max(done) if done else None
        return run

    # -------------------------------------------------------------- wiring helpers

    def envs(self) -> VecEnv:
        """The training envs: new ones, or the checkpointed ones when resuming."""
        if self.resume_state is None:
            return make_train_env(self.config)
        env, self.exact_envs = restore_envs(self.config, self.resume_state)
        return env

    def restore(self, algo: type[BaseAlgorithm], env: VecEnv) -> BaseAlgorithm:
        """The learner of the checkpoint, with its envs, memory and RNG state in place."""
        assert self.checkpoint is not None and self.resume_state is not None
        state = self.resume_state
        model = algo.load(self.checkpoint, env=env, device=self.config.runtime.device)
        if self.exact_envs:
            model._last_obs = state.last_obs
            model._last_episode_starts = state.last_episode_starts.copy()
        else:
            # The envs restarted: new episodes everywhere, memory cleared by the starts.
            assert model.env is not None
            model.env.seed(self.config.seed + state.num_timesteps)
            model._last_obs = model.env.reset()  # type: ignore[assignment]
            model._last_episode_starts = np.ones(model.env.num_envs, dtype=bool)
        if state.memory is not None:
            model.set_memory(state.memory)  # type: ignore[attr-defined]
        restore_rng(state.rng)  # last: loading re-seeded the global generators
        note = {"from": state.num_timesteps, "envs": "exact" if self.exact_envs else "restarted"}
        with open(self.run_dir / RESUME_LOG, "a") as f:
            f.write(json.dumps({**note, "checkpoint": self.checkpoint.name}) + "\n")
        return model

    def logger(self) -> Logger:
        """SB3 logger writing TensorBoard events to ``tb/`` (and tables to stdout if verbose)."""
        formats = ["tensorboard"] + (["stdout"] if self.config.runtime.verbose >= 1 else [])
        return configure(str(self.run_dir / TB_DIR), formats)

    def callbacks(self, eval_env: VecEnv) -> BaseCallback:
        """Evaluation and checkpoints between rollouts."""
        return BetweenRollouts(self, eval_env)

    def remaining(self, model: BaseAlgorithm) -> int:
        """Env steps left in the budget, for ``learn(..., reset_num_timesteps=False)``."""
        return max(0, self.config.budget - model.num_timesteps)

    # -------------------------------------------------------------- bookkeeping

    def eval_due(self, step: int) -> bool:
        every = self.config.eval.every
        return every > 0 and (self.last_eval is None or step // every > self.last_eval // every)

    def checkpoint_due(self, step: int) -> bool:
        every = self.config.checkpoint.every
        return every > 0 and step // every > self.last_checkpoint // every

    def evaluate(self, model: BaseAlgorithm, eval_env: VecEnv) -> EvalResult:
        """Evaluate, log to TensorBoard (``eval/...``) and append to the eval log."""
        step = int(model.num_timesteps)
        train_env = model.get_env()
        if _find_vec_normalize(eval_env) is not None and train_env is not None:
            sync_envs_normalization(train_env, eval_env)
        # Same seeds at every evaluation: each one plays the same episode set-ups.
        eval_env.seed(self.config.seed + EVAL_SEED_OFFSET)
        result = evaluate(
            model, eval_env, self.config.eval.episodes, deterministic=self.config.eval.deterministic
        )
        summary = result.summary()
        model.logger.record("eval/mean_reward", summary["mean_return"])
        model.logger.record("eval/mean_ep_length", summary["mean_length"])
        if summary["success_rate"] is not None:
            model.logger.record("eval/success_rate", summary["success_rate"])
        model.logger.dump(step)
        self.eval_log.append(
            {"timesteps": step, **summary, "wall_time_s": round(self.elapsed(), 3)}
        )
        self.last_eval = step
        return result

    def save_periodic(self, model: BaseAlgorithm) -> Path:
        step = int(model.num_timesteps)
        path = self.run_dir / CHECKPOINT_DIR / f"step_{step:09d}.zip"
        save_checkpoint(model, path, self.config)
        self.last_checkpoint = step
        keep = self.config.checkpoint.keep
        if keep:
            for old in _periodic_checkpoints(path.parent)[:-keep]:
                old.unlink(missing_ok=True)
        return path

    def finish(self, model: BaseAlgorithm, eval_env: VecEnv) -> TrainResult:
        """Final evaluation (unless one was just made) and the final checkpoint."""
        step = int(model.num_timesteps)
        if self.last_eval != step:
            self.evaluate(model, eval_env)
        final = self.eval_log.read()[-1]
        path = self.run_dir / CHECKPOINT_DIR / FINAL_CHECKPOINT
        save_checkpoint(model, path, self.config)
        eval_env.close()
        env = model.get_env()
        if env is not None:
            env.close()
        return TrainResult(
            run_dir=self.run_dir,
            timesteps=step,
            final_eval={k: v for k, v in final.items() if k not in ("timesteps", "wall_time_s")},
            checkpoint=path,
            resumed_from=self.resume_state.num_timesteps if self.resume_state else None,
            wall_time_s=self.elapsed(),
        )

    def elapsed(self) -> float:
        return time.monotonic() - self.started


class BetweenRollouts(BaseCallback):
    """Evaluates and checkpoints at rollout starts, on schedules of env steps.

    SB3's ``EvalCallback`` and ``CheckpointCallback`` count calls since their own start, so
    their schedules shift when a run resumes; these schedules are multiples of env steps
    and survive a resume. A rollout start is the one point where a checkpoint is consistent.
    """

    def __init__(self, run: Run, eval_env: VecEnv) -> None:
        super().__init__()
        self.run = run
        self.eval_env = eval_env

    def _on_rollout_start(self) -> None:
        step = int(self.model.num_timesteps)
        if self.run.eval_due(step):
            self.run.evaluate(self.model, self.eval_env)
        if self.run.checkpoint_due(step):
            self.run.save_periodic(self.model)

    def _on_step(self) -> bool:
        return True


def _clear_dir(directory: Path) -> None:
    if directory.exists():
        for p in sorted(directory.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()


def default_run_dir(config: TrainConfig) -> Path:
    return Path("runs") / f"{config.name or 'run'}-{time.strftime('%Y%m%d-%H%M%S')}"


def read_run_config(run_dir: str | Path) -> TrainConfig:
    """The resolved config of a run directory."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise RunError(f"{run_dir} is not a txrl run directory (no {CONFIG_FILE})")
    return TrainConfig.from_dict(yaml.safe_load(path.read_text()))


# ---------------------------------------------------------------------------- entry point


def recipe(config: TrainConfig) -> Callable[..., TrainResult]:
    """The agent recipe (``txrl.agents.<name>.main``) that trains ``config``."""
    import importlib

    if config.algo == "vmpo":
        name = "vmpo_gtrxl"
    elif config.policy.backbone in ("lstm", "gru"):
        name = "ppo_lstm"
    else:
        name = "ppo_gtrxl"
    try:
        module = importlib.import_module(f"txrl.agents.{name}")
    except ModuleNotFoundError as e:
        raise ConfigError(
            f"algo {config.algo!r} has no agent recipe here (txrl.agents.{name})"
        ) from e
    return module.main


def train(
    config: TrainConfig, run_dir: str | Path | None = None, *, resume: bool = False
) -> TrainResult:
    """Train ``config`` in ``run_dir`` (default ``runs/<name>-<time>``) with its agent recipe.

    ``resume=True`` continues the run in ``run_dir`` from its last checkpoint (see the
    module docstring for what that restores); ``config`` must be the run's own.
    """
    return recipe(config)(config, run_dir, resume=resume)
