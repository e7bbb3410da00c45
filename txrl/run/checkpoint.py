"""The checkpoint format of a training run, read by training (resume) and evaluation.

A checkpoint is one zip file: SB3's own model archive (``MemoryPPO.load`` opens it) with
txrl's resume state and the run's config added as ``txrl/resume.pkl`` and
``txrl/config.yaml``. It is written to a temporary file in the same directory, fsynced and
moved into place with ``os.replace``, so a crash (even ``kill -9``) leaves either the
previous checkpoint or the new one, never a torn file.

A checkpoint damaged after it was written (a truncated copy, a disk error) is found by
[`read_checkpoint`][txrl.run.checkpoint.read_checkpoint], which checks every member's CRC: resuming then names the bad file,
sets it aside as ``<name>.corrupt`` and continues from the newest readable one.

Layout in a run directory::

    checkpoints/step_<T>.zip       periodic checkpoints at env step T (the last ``keep``)
    checkpoints/best.zip           the model of the best periodic evaluation so far
    checkpoints/final.zip          written last: the run is finished
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import random
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecEnvWrapper, VecNormalize

from txrl.config import TrainConfig, dump_yaml
from txrl.errors import RunError, print_warning
from txrl.files import atomic_write, fsync_dir
from txrl.moved_modules import MOVED_MODULES
from txrl.run.run_files import (
    BEST_CHECKPOINT,
    CHECKPOINT_DIR,
    CHECKPOINT_MEMBERS,
    CONFIG_MEMBER,
    FINAL_CHECKPOINT,
    RESUME_MEMBER,
)

CORRUPT_SUFFIX = ".corrupt"
_STEP_FILE = re.compile(r"^step_(\d+)\.zip$")


class CheckpointError(RunError):
    """A checkpoint file cannot be read: truncated, corrupt, or not a txrl checkpoint."""


@dataclass
class ResumeState:
    """What a checkpoint holds besides SB3's model archive (see `txrl.run.run_dir`)."""

    num_timesteps: int
    last_obs: Any  # np.ndarray or dict of them, as the learner last saw them
    last_episode_starts: np.ndarray  # (B,) bool
    memory: tuple[np.ndarray, ...] | None  # model.get_memory(), env on axis 0
    rng: dict[str, Any]  # python / numpy / torch generator states
    envs: bytes | None  # the in-process envs (pickled), None when they could not be
    vec_normalize: bytes | None  # pickled VecNormalize (statistics), None without it
    vec_normalize_returns: np.ndarray | None = None  # its running returns (not in its pickle)
    wall_time_s: float = 0.0  # training wall-clock up to this checkpoint, over all sessions


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


def base_vec_env(env: VecEnv) -> VecEnv:
    while isinstance(env, VecEnvWrapper):
        env = env.venv
    return env


def find_vec_normalize(env: VecEnv) -> VecNormalize | None:
    while isinstance(env, VecEnvWrapper):
        if isinstance(env, VecNormalize):
            return env
        env = env.venv
    return None


def capture_resume_state(model: BaseAlgorithm, wall_time_s: float = 0.0) -> ResumeState:
    """The resume state of ``model`` and its envs, between rollouts."""
    import cloudpickle

    env = model.get_env()
    assert env is not None
    base = base_vec_env(env)
    envs = None
    if isinstance(base, DummyVecEnv):
        with contextlib.suppress(Exception):  # an env that cannot be pickled restarts instead
            envs = cloudpickle.dumps(base.envs)
    vec_normalize = find_vec_normalize(env)
    return ResumeState(
        num_timesteps=int(model.num_timesteps),
        last_obs=model._last_obs,
        last_episode_starts=np.asarray(model._last_episode_starts).copy(),
        memory=model.get_memory(),  # type: ignore[attr-defined]  # txrl learners have it
        rng=capture_rng(),
        envs=envs,
        vec_normalize=pickle.dumps(vec_normalize) if vec_normalize is not None else None,
        vec_normalize_returns=None if vec_normalize is None else vec_normalize.returns.copy(),
        wall_time_s=wall_time_s,
    )


def save_checkpoint(
    model: BaseAlgorithm, path: Path, config: TrainConfig, wall_time_s: float = 0.0
) -> None:
    """One self-contained checkpoint file, written atomically; ``wall_time_s`` is the run's
    training wall-clock so far (a resumed run's clock goes on from it)."""
    buffer = io.BytesIO()
    model.save(buffer)
    with zipfile.ZipFile(buffer, mode="a") as archive:
        state = capture_resume_state(model, wall_time_s)
        archive.writestr(RESUME_MEMBER, pickle.dumps(state))
        archive.writestr(CONFIG_MEMBER, dump_yaml(config.to_dict()))
    atomic_write(path, buffer.getvalue())


class _ResumeUnpickler(pickle.Unpickler):
    """Reads a resume state, finding classes whose module moved ([`MOVED_MODULES`][txrl.run.checkpoint.MOVED_MODULES]) at
    their new home without the old path's deprecation warning."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(MOVED_MODULES.get(module, module), name)


def read_checkpoint(path: Path) -> tuple[ResumeState, TrainConfig]:
    """The resume state and config of checkpoint ``path``, after checking the whole file.

    Raises [`CheckpointError`][txrl.run.checkpoint.CheckpointError] naming the file and what is wrong with it.
    """
    valid = "a checkpoint written by txrl train (checkpoints/step_<T>.zip or final.zip)"

    def unreadable(detail: str) -> CheckpointError:
        return CheckpointError(f"{path} is not a readable txrl checkpoint ({detail}); need {valid}")

    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()  # reads every member and checks its CRC
            if bad is not None:
                raise unreadable(f"member {bad} fails its CRC check")
            missing = [m for m in CHECKPOINT_MEMBERS if m not in archive.namelist()]
            if missing == [RESUME_MEMBER, CONFIG_MEMBER]:
                raise CheckpointError(
                    f"{path} is a Stable-Baselines3 model saved with model.save() (it has data "
                    "and policy.pth but no txrl config), not a txrl checkpoint, so the env to "
                    "evaluate it on is unknown: load it with MemoryPPO.load(path) (or its own "
                    "class's load) and run SB3's evaluate_policy on your env, or give a run "
                    "directory of txrl train"
                )
            if missing:
                raise unreadable(f"truncated or corrupt: it lacks {', '.join(missing)}")
            state = _ResumeUnpickler(io.BytesIO(archive.read(RESUME_MEMBER))).load()
            text = archive.read(CONFIG_MEMBER).decode()
    except CheckpointError:
        raise
    except (OSError, zipfile.BadZipFile, EOFError, pickle.UnpicklingError, ValueError) as e:
        raise unreadable(f"truncated or corrupt: {e}") from e
    return state, TrainConfig.from_dict(yaml.safe_load(text))


def read_resume_state(path: Path) -> ResumeState:
    """The resume state stored in checkpoint ``path``."""
    return read_checkpoint(path)[0]


def read_checkpoint_config(path: Path) -> TrainConfig:
    """The config a checkpoint was made with."""
    return read_checkpoint(path)[1]


def periodic_checkpoints(directory: Path) -> list[Path]:
    """``step_<T>.zip`` files by increasing T (temporary files never match the pattern)."""
    if not directory.exists():
        return []
    steps = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _STEP_FILE.match(p.name))]
    return [p for _, p in sorted(steps)]


def periodic_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR / f"step_{step:09d}.zip"


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The final checkpoint if the run finished, else the periodic one with the highest step."""
    directory = Path(run_dir) / CHECKPOINT_DIR
    if (directory / FINAL_CHECKPOINT).exists():
        return directory / FINAL_CHECKPOINT
    periodic = periodic_checkpoints(directory)
    return periodic[-1] if periodic else None


def newest_readable_checkpoint(
    run_dir: Path, *, set_aside: bool, warn: Callable[[str], None]
) -> tuple[Path, ResumeState, TrainConfig] | None:
    """The newest checkpoint of ``run_dir`` that reads whole, its resume state and config.

    Each unreadable one newer than it is reported through ``warn``; with ``set_aside`` it
    is renamed ``<name>.corrupt`` (kept for inspection, never read again). When none can
    be read, nothing is renamed.
    """
    directory = Path(run_dir) / CHECKPOINT_DIR
    final = directory / FINAL_CHECKPOINT
    candidates = [final] if final.exists() else []
    candidates += reversed(periodic_checkpoints(directory))
    bad: list[tuple[Path, CheckpointError]] = []
    for path in candidates:
        try:
            state, config = read_checkpoint(path)
        except CheckpointError as e:
            bad.append((path, e))
            continue
        for unreadable, error in bad:
            if set_aside:
                aside = unreadable.with_name(unreadable.name + CORRUPT_SUFFIX)
                os.replace(unreadable, aside)
                fsync_dir(directory)
                warn(f"{error}\nset it aside as {aside.name}; continuing from {path.name}")
            else:
                warn(f"{error}\nusing {path.name} instead")
        return path, state, config
    for _, error in bad:
        warn(str(error))
    return None


def resolve_checkpoint(target: str | Path, *, best: bool = False) -> Path:
    """A checkpoint file as given, or a run directory's newest readable checkpoint (the final
    one when the run finished; a warning on stderr says when it is not); an unreadable newer
    one is named on stderr and skipped.
    ``best``: the run directory's ``checkpoints/best.zip`` (its best evaluation so far)."""
    path = Path(target)
    if best:
        if not path.is_dir():
            raise RunError(f"--best needs a run directory, got {path}")
        found = path / CHECKPOINT_DIR / BEST_CHECKPOINT
        if not found.is_file():
            raise RunError(
                f"{path} has no {CHECKPOINT_DIR}/{BEST_CHECKPOINT}: it is written at the run's "
                "periodic evaluations when eval.save_best is true (the default)"
            )
        return found
    if path.is_dir():
        newest = newest_readable_checkpoint(path, set_aside=False, warn=print_warning)
        if newest is None:
            raise RunError(
                f"{path} holds no readable checkpoint (looked in {path / 'checkpoints'})"
            )
        checkpoint, state, _ = newest
        if checkpoint.name != FINAL_CHECKPOINT:
            print_warning(
                f"{path} is not finished (no {CHECKPOINT_DIR}/{FINAL_CHECKPOINT}): "
                f"evaluating its newest checkpoint, {checkpoint.name} at step "
                f"{state.num_timesteps}; `txrl train --resume {path}` finishes it"
            )
        return checkpoint
    if path.is_file():
        return path
    raise RunError(f"{path} is neither a run directory nor a checkpoint file")


def import_dynamo_without_litter() -> None:
    """Build a throwaway torch optimizer now, removing the empty directory that it makes.

    Building the first torch optimizer of a process imports torch's compiler (the
    optimizer's methods are wrapped to keep the compiler out of them), and that import
    creates torch's compile cache directory, ``<tmp>/torchinductor_<user>``, at once and
    empty, in runs that never compile: litter in the temp directory. Doing it here, once,
    removes the directory again when this made it and left it empty; a run that compiles
    (``compile_step``) makes it again when it writes a cache entry. A directory that existed
    before, or one that ``TORCHINDUCTOR_CACHE_DIR`` names, is left alone.
    """
    import tempfile

    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):  # named, or the compiler already imported
        return
    before = set(Path(tempfile.gettempdir()).glob("torchinductor_*"))
    # imports the compiler, which makes the directory and names it in the environment
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)

    cache = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", ""))
    if cache.name.startswith("torchinductor_") and cache not in before:
        with contextlib.suppress(OSError):  # not empty: something was written there
            cache.rmdir()
