"""Training's preflight: the checks of a config that need more than the config, run once
before a run directory is written.

[`resolve`][txrl.run.preflight.resolve] runs the registries' checks (`txrl.config.checks`), builds the backbone
once at a tiny size (so that its own checks run), makes one env (so that the env checks its
kwargs and its spaces are ones the learner trains on), builds the encoder when
``policy.encoder_kwargs`` is set, and asks torch whether the device exists. Training
([`txrl.run.train.train`][txrl.run.train.train]) and ``txrl compare`` (once per variant, before any run
starts) call it; parsing a config never does, so reading a run's config or planning a grid
builds nothing and imports no torch.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from typing import Any

import gymnasium as gym
import torch
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecTransposeImage

import txrl.envs  # noqa: F401  # importing txrl.envs registers the txrl/... ids
from txrl.backbones import make_backbone
from txrl.config import EnvConfig, PolicyConfig, TrainConfig
from txrl.config.checks import check_learner, check_policy, inapplicable_note
from txrl.errors import ConfigError
from txrl.learners import get_learner
from txrl.run.algorithms import algorithm_class, policy_for
from txrl.run.envs import env_factory
from txrl.sb3.policies import MemoryActorCriticPolicy


def resolve(config: TrainConfig) -> TrainConfig:
    """The checks that need the backbone registry, the env and torch; the config to train.

    Reports every problem at once. With ``policy.inapplicable: drop`` the settings the
    backbone does not have are cleared in the returned config (which the run records).
    """
    policy, problems = check_policy(config.policy)
    problems += check_learner(config, policy)
    if not problems:
        problems += _check_backbone_builds(
            policy, trains_memory_policies=get_learner(config.algo).trains_memory_policies
        )
    env_problems = _check_env(config.env)
    if not env_problems and config.eval.env_kwargs:
        eval_kwargs = {**config.env.kwargs, **config.eval.env_kwargs}
        env_problems = [
            problem.replace("env.kwargs", "env.kwargs with eval.env_kwargs", 1)
            for problem in _check_env(dataclasses.replace(config.env, kwargs=eval_kwargs))
        ]
    problems += env_problems or _check_spaces(config)
    if not problems and policy.encoder_kwargs:
        problems += _check_encoder(config, policy)
    problems += _check_device(config.runtime.device)
    if problems:
        raise ConfigError(problems, note=inapplicable_note(problems))
    return dataclasses.replace(config, policy=policy)


def _check_backbone_builds(policy: PolicyConfig, *, trains_memory_policies: bool) -> list[str]:
    try:
        # Building the (small, CPU) module runs every check of the backbone itself.
        make_backbone(policy.backbone, input_dim=1, **policy.backbone_settings())
    except (ValueError, TypeError) as e:
        return [f"policy (backbone {policy.backbone!r}): {e}"]
    if not trains_memory_policies:
        return []
    valid_kwargs = MemoryActorCriticPolicy.valid_kwargs()
    return [
        f"policy.{key} is not supported by this version's memory policies "
        f"(their settings: {', '.join(valid_kwargs)})"
        for key in policy.policy_kwargs()
        if key not in valid_kwargs
    ]


def _check_env(env: EnvConfig) -> list[str]:
    env_id = env.id
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            __import__(module)
        except ImportError as e:
            return [f"env.id {env_id!r}: cannot import module {module!r} ({e})"]
    if name not in gym.registry:
        txrl_ids = sorted(k for k in gym.registry if k.startswith("txrl/") and "popgym" not in k)
        close = difflib.get_close_matches(name, list(gym.registry), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return [
            f"env.id {env_id!r} is not a registered Gymnasium id{hint} "
            f"(txrl tasks: {', '.join(txrl_ids)}, txrl/popgym-<Name>-v0, or any gymnasium id)"
        ]
    try:
        # Making one env runs the env's own checks of its kwargs (cheap for the memory tasks).
        gym.make(env_id, **env.kwargs).close()
    except (ValueError, TypeError) as e:
        return [f"env.kwargs {env.kwargs!r} rejected by {env_id}: {e}"]
    return []


#: The observation spaces every learner takes (SB3's, and txrl's memory policies'); the action
#: spaces are each learner's own (:attr:`txrl.learners.Learner.action_spaces`).
OBSERVATION_SPACES = ("Box", "Discrete", "MultiDiscrete", "MultiBinary")


def _env_spaces(config: TrainConfig, kwargs: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """The observation and action spaces of the run's env, wrappers included; ``kwargs``:
    the env's keyword arguments (default: ``env.kwargs``)."""
    env = env_factory(config, kwargs)()
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def _check_spaces(config: TrainConfig) -> list[str]:
    """The env's observation and action spaces are ones the learner trains on; checked here,
    before a run directory exists, since SB3 and torch fail on others without a useful
    message (Graph or Text observations, MultiBinary actions) and only once training began."""
    try:
        observation_space, action_space = _env_spaces(config)
    except (ValueError, TypeError) as e:
        return [f"env {config.env.id} cannot be wrapped for training: {e}"]
    problems = []
    inner = (
        list(observation_space.spaces.values())
        if isinstance(observation_space, spaces.Dict)
        else [observation_space]
    )
    if any(type(sub).__name__ not in OBSERVATION_SPACES for sub in inner):
        problems.append(
            f"env {config.env.id} has observation space {observation_space}, which the "
            f"learners cannot take; supported: {', '.join(OBSERVATION_SPACES)}, or a flat Dict "
            "of those (wrap the env to convert it, e.g. gymnasium's FlattenObservation for a "
            "Tuple)"
        )
    valid = get_learner(config.algo).action_spaces
    if type(action_space).__name__ not in valid:
        problems.append(
            f"env {config.env.id} has action space {action_space}, which algo {config.algo} "
            f"does not train; supported: {', '.join(valid)}"
        )
    if config.eval.env_kwargs:
        problems += _check_eval_spaces(config, observation_space, action_space)
    return problems


def _check_eval_spaces(config: TrainConfig, observation_space: Any, action_space: Any) -> list[str]:
    """The eval envs (``env.kwargs`` updated by ``eval.env_kwargs``) act and observe in the
    training envs' spaces: the policy has one input and one output layer, and an env whose
    answers lie outside its action space would be judged on answers it cannot give."""
    kwargs = {**config.env.kwargs, **config.eval.env_kwargs}
    try:
        eval_spaces = _env_spaces(config, kwargs)
    except (ValueError, TypeError) as e:
        return [f"env {config.env.id} with eval.env_kwargs cannot be wrapped for evaluation: {e}"]
    return [
        f"eval.env_kwargs {dict(config.eval.env_kwargs)!r} give the eval envs {kind} space "
        f"{evaluated}, but training's is {trained}: the policy acts and observes in one set of "
        "spaces, so evaluate on kwargs that keep them (e.g. the same num_decks)"
        for kind, evaluated, trained in (
            ("observation", eval_spaces[0], observation_space),
            ("action", eval_spaces[1], action_space),
        )
        if evaluated != trained
    ]


def _check_encoder(config: TrainConfig, policy: PolicyConfig) -> list[str]:
    """Build the encoder the run's policy would build, with ``policy.encoder_kwargs``, on the
    env's observation space: a keyword its class does not take is named with those it does."""
    space, _ = _env_spaces(config)
    name, _ = policy_for(config.algo, policy, space)
    policy_class = algorithm_class(config.algo).policy_aliases[name]
    if hasattr(policy_class, "encoder_class"):  # txrl's memory policies choose for code grids
        encoder = policy_class.encoder_class(space)
    else:
        encoder = (
            inspect.signature(policy_class.__init__).parameters["features_extractor_class"].default
        )
    if encoder.__name__ in ("NatureCNN", "SmallCNN") and space.shape[-1] in (1, 3, 4):
        space = VecTransposeImage.transpose_space(space)  # SB3 hands images over channel-first
    try:
        encoder(space, **policy.encoder_kwargs)
    except (TypeError, ValueError) as e:
        accepted = [p for p in inspect.signature(encoder.__init__).parameters][2:]
        return [
            f"policy.encoder_kwargs {dict(policy.encoder_kwargs)!r} rejected by "
            f"{encoder.__name__}, the encoder of {name} for {config.env.id} ({e}); its "
            f"arguments: {', '.join(accepted) or 'none'}"
        ]
    return []


def _check_device(device: str) -> list[str]:
    """A device torch can use here; asking for a GPU that is not there is an error, not a
    silent CPU run recorded as a GPU one."""
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            return [
                f"runtime.device is {device!r} but torch sees no CUDA GPU here "
                "(torch.cuda.is_available() is false); use cpu or auto"
            ]
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            return [
                f"runtime.device is {device!r} but there are {torch.cuda.device_count()} CUDA "
                f"devices (cuda:0 .. cuda:{torch.cuda.device_count() - 1})"
            ]
    if device == "mps" and not torch.backends.mps.is_available():
        return ["runtime.device is 'mps' but torch has no MPS backend here; use cpu or auto"]
    return []
