"""The checks of what a memory learner is given: its policy and settings, its envs' spaces
and data, and on ``load`` the file's learner. Each failure is one error that names the input
and what is valid (non-finite env data only a warning with ``check_finite="warn"``).

[`txrl.sb3.algorithm.MemoryOnPolicyAlgorithm`][txrl.sb3.algorithm.MemoryOnPolicyAlgorithm] calls them: at construction
(`check_policy_kwargs`, `env_with_checked_observations`), when it builds or
loads its model (`check_saved_by`, `check_observation_space`), at each rollout
step (`check_finite_step`) and before each optimizer step (`check_finite_update`).
"""

from __future__ import annotations

import importlib
import os
import warnings
from pathlib import Path
from typing import Any, get_args, overload

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm, maybe_make_env
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv

from txrl.sb3.policies import ENCODER_POLICY_BASES, MemoryActorCriticPolicy
from txrl.schema import CheckFinite

SUPPORTED_OBSERVATION_SPACES = (
    spaces.Box,
    spaces.Discrete,
    spaces.MultiDiscrete,
    spaces.MultiBinary,
    spaces.Dict,
)
CHECK_FINITE_MODES = get_args(CheckFinite)


def check_finite_step(
    mode: CheckFinite, obs: Any, rewards: np.ndarray, step: int, num_timesteps: int
) -> None:
    """Raise or warn (``mode``) if an env emitted a NaN or infinite observation or reward.

    One vectorised ``np.isfinite`` per floating array of the batch; integer observations
    (images, discrete) cannot be non-finite and are skipped.
    """
    arrays = obs.items() if isinstance(obs, dict) else [("", obs)]
    fields = [(f"observation{f' {key!r}' if key else ''}", np.asarray(a)) for key, a in arrays]
    fields.append(("reward", np.asarray(rewards)))
    for name, array in fields:
        if not np.issubdtype(array.dtype, np.floating) or np.isfinite(array).all():
            continue
        per_env = np.isfinite(array.reshape(array.shape[0], -1)).all(axis=1)  # (B,)
        envs = ", ".join(str(i) for i in np.flatnonzero(~per_env))
        message = (
            f"non-finite {name} (NaN or inf) from env {envs} at rollout step {step} "
            f"(after {num_timesteps} timesteps in all); check the env, or pass "
            "check_finite='warn' or 'off' to the algorithm to train on regardless"
        )
        if mode == "raise":
            raise ValueError(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def check_finite_update(
    loss: torch.Tensor,
    grad_norm: torch.Tensor,
    stats: dict[str, torch.Tensor],
    n_updates: int,
) -> None:
    """Stop before the optimizer step when the loss or the gradient is NaN or infinite."""
    if bool(torch.isfinite(loss) & torch.isfinite(grad_norm)):  # one read of the device
        return
    terms = ", ".join(f"{k}={float(v):.4g}" for k, v in stats.items())
    raise FloatingPointError(
        f"non-finite training update after {n_updates} epochs of training: loss={float(loss.detach()):.4g}, "
        f"gradient norm={float(grad_norm):.4g} ({terms}). The step was not applied: the "
        "weights are those of the last good update. Common causes: extreme rewards or "
        "observations (normalise them, e.g. with SB3's VecNormalize) or a learning rate too large"
    )


def check_policy_kwargs(
    policy: str | type[BasePolicy],
    aliases: dict[str, type[BasePolicy]],
    policy_kwargs: dict[str, Any] | None,
) -> None:
    if isinstance(policy, str):
        if policy not in aliases:
            raise ValueError(f"unknown policy {policy!r}; valid policies: {', '.join(aliases)}")
        policy = aliases[policy]
    if not isinstance(policy, type) or not issubclass(policy, MemoryActorCriticPolicy):
        raise ValueError(
            f"policy must be a txrl memory policy (a MemoryActorCriticPolicy), got {policy!r}"
        )
    valid = policy.valid_kwargs()
    unknown = sorted(set(policy_kwargs or {}) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown policy_kwargs {', '.join(map(repr, unknown))}; valid keys: {', '.join(valid)}"
        )


@overload
def env_with_checked_observations(
    env: GymEnv | str,
    verbose: int,
    policy: str | type[BasePolicy] | None = None,
    aliases: dict[str, type[BasePolicy]] | None = None,
) -> GymEnv: ...


@overload
def env_with_checked_observations(
    env: None,
    verbose: int,
    policy: str | type[BasePolicy] | None = None,
    aliases: dict[str, type[BasePolicy]] | None = None,
) -> None: ...


def env_with_checked_observations(
    env: GymEnv | str | None,
    verbose: int,
    policy: str | type[BasePolicy] | None = None,
    aliases: dict[str, type[BasePolicy]] | None = None,
) -> GymEnv | None:
    """The env (made from its id, as SB3 would), its observation space checked first: SB3
    wraps it in a DummyVecEnv, which fails without a useful message on some spaces; with
    ``policy`` (a name of ``aliases`` or a class), also that the policy's encoder reads that
    space (`check_policy_reads`). None (SB3's ``load`` builds the learner without an
    env) stays None."""
    if env is None:
        return None
    env = maybe_make_env(env, verbose)
    check_observation_space(env.observation_space)
    if policy is not None:
        check_policy_reads(policy, aliases or {}, env.observation_space)
    return env


def check_policy_reads(
    policy: str | type[BasePolicy], aliases: dict[str, type[BasePolicy]], space: spaces.Space
) -> None:
    """One ValueError when the policy's encoder cannot read ``space``: a ``Mlp``/``Cnn``
    policy encodes one array and a Dict is several (SB3's PPO refuses that pair up front too,
    naming ``MultiInputPolicy``); a ``MultiInput`` policy reads a Dict's keys only. The
    error names the policy of the same backbone that reads it."""
    cls = aliases.get(policy) if isinstance(policy, str) else policy
    if not isinstance(cls, type):
        return  # an unknown name: check_policy_kwargs names it
    name = policy if isinstance(policy, str) else cls.__name__
    reads_dict = issubclass(cls, ENCODER_POLICY_BASES["MultiInput"])
    if isinstance(space, spaces.Dict) == reads_dict:
        return
    kinds = [k for k in ENCODER_POLICY_BASES if name.startswith(k)]
    if reads_dict:
        what = "reads Dict observations key by key"
        other = f"Mlp{name.removeprefix('MultiInput')}" if kinds else "an Mlp or Cnn memory policy"
    else:
        what = "encodes one observation array"
        other = (
            f"MultiInput{name.removeprefix(kinds[0])}" if kinds else "a MultiInput memory policy"
        )
    raise ValueError(
        f"policy {name} {what}, but the env's observation space is {space}: use {other}, "
        "the same memory with the encoder of that space"
    )


def check_observation_space(space: spaces.Space) -> None:
    """One ValueError naming the first space (or Dict key) no encoder reads, and what is valid."""
    inner = list(space.spaces.items()) if isinstance(space, spaces.Dict) else [(None, space)]
    for key, sub in inner:
        if isinstance(sub, spaces.Dict) or not isinstance(sub, SUPPORTED_OBSERVATION_SPACES):
            where = "" if key is None else f" at key {key!r} of {space}"
            if isinstance(sub, spaces.Tuple | spaces.Dict):
                hint = "flatten it first, e.g. with gymnasium's FlattenObservation"
            else:  # Graph, Sequence, Text: no fixed shape to stack into a batch
                hint = "its observations vary in size: encode them as a fixed-size Box in a wrapper"
            raise ValueError(
                f"unsupported observation space {sub}{where}; valid: Box "
                "(vectors or images), Discrete, MultiDiscrete, MultiBinary, or a flat Dict of "
                f"those; {hint}"
            )


def check_model_path(path: Any) -> None:
    """On ``load``: a file path that exists neither as given nor with ``.zip`` added is a
    FileNotFoundError naming the path as given (SB3 tries ``<path>.zip`` second and names
    that one: ``missing.zip.zip``). Open files and buffers are SB3's to read."""
    if not isinstance(path, str | os.PathLike):
        return
    given = Path(path)
    if not given.exists() and not Path(f"{given}.zip").exists():
        tried = "" if given.suffix == ".zip" else f" (nor {given}.zip)"
        raise FileNotFoundError(
            f"no model file {given}{tried}: give the .zip a model was saved to with "
            "model.save(), or a txrl checkpoint (RUN_DIR/checkpoints/final.zip)"
        )


def class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def check_saved_by(model: BaseAlgorithm) -> None:
    """On ``load``: a model saved by another learner (VMPO's file given to ``MemoryPPO.load``)
    is one ValueError naming the learner that saved it, not a mismatch of weight names.

    The saving class's ``module:Class`` path is saved with the model (``_saved_by``); loading
    with that class, a subclass or a base class of it is allowed."""
    saved = model.__dict__.get("_saved_by")
    loading = type(model)
    if saved is None or saved in {class_path(c) for c in loading.__mro__}:
        return
    module, _, name = saved.partition(":")
    try:
        saver = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        saver = None
    if isinstance(saver, type) and issubclass(saver, loading):
        return
    raise ValueError(
        f"this file was saved by {name} ({saved}), not by {loading.__name__}: load it with "
        f"{name}.load (a {name} file holds {name}'s settings and weights)"
    )
