"""The checks of a training config that need more than the config: run once before training.

:func:`resolve` looks the backbone up in the registry (:mod:`txrl.backbones`), builds it once
at a tiny size (so that its own checks run), makes one env (so that the env checks its
kwargs), builds the encoder when ``policy.encoder_kwargs`` is set, and asks torch whether
the device exists. Training (:func:`txrl.train.train`) and ``txrl compare`` (once per
variant, before any run starts) call it; parsing a config never does, so reading a run's
config or planning a grid builds nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from txrl.config.sections import EnvConfig, PolicyConfig, TrainConfig
from txrl.errors import ConfigError


def resolve(config: TrainConfig) -> TrainConfig:
    """The checks that need the backbone registry, the env and torch; the config to train.

    Reports every problem at once. With ``policy.inapplicable: drop`` the settings the
    backbone does not have are cleared in the returned config (which the run records).
    """
    from txrl.learners import get_learner, learners

    learner = get_learner(config.algo)
    policy, problems = check_policy(config.policy)
    if learner.backbones is not None and policy.backbone not in learner.backbones:
        problems.append(
            f"algo {config.algo} trains policy.backbone {' or '.join(learner.backbones)}, "
            f"got {policy.backbone!r} (with policy.inapplicable: drop the settings the new "
            "backbone does not have are cleared)"
        )
    memory_learners = ", ".join(n.name for n in learners() if n.memory_policy)
    if not learner.memory_policy and policy.training_precision != "fp32":
        problems.append(
            f"policy.training_precision {policy.training_precision!r} applies to txrl's memory "
            f"learners ({memory_learners}); algo {config.algo} trains in fp32"
        )
    # the policy's own auxiliary losses: only txrl's memory policies compute them
    for name, wanted in (
        ("predict_past", bool(policy.predict_past)),
        ("reconstruct_observation", policy.reconstruct_observation),
    ):
        if wanted and not learner.memory_policy:
            problems.append(
                f"policy.{name} applies to txrl's memory learners ({memory_learners}); "
                f"algo {config.algo} has no such loss"
            )
    segment = getattr(config.learner, "segment_length", None)
    if policy.predict_past and segment is not None and max(policy.predict_past) >= segment:
        problems.append(
            f"policy.predict_past offsets must be below {config.algo}.segment_length "
            f"({segment}), got {list(policy.predict_past)}"
        )
    if not problems:
        problems += _check_backbone_builds(policy, memory_policy=learner.memory_policy)
    env_problems = _check_env(config.env)
    problems += env_problems or _check_spaces(config)
    if not problems and policy.encoder_kwargs:
        problems += _check_encoder(config, policy, learner)
    problems += _check_device(config.runtime.device)
    if problems:
        raise ConfigError(problems, note=inapplicable_note(problems))
    return dataclasses.replace(config, policy=policy)


def inapplicable_note(problems: list[str]) -> str | None:
    if any("does not apply to backbone" in p for p in problems):
        return (
            "settings a backbone does not have can all be cleared at once with "
            "policy.inapplicable: drop (--set policy.inapplicable=drop), or one by one with "
            "--set policy.KEY=null"
        )
    return None


def check_policy(policy: PolicyConfig) -> tuple[PolicyConfig, list[str]]:
    """The policy with inapplicable settings dropped (when asked), and what is wrong with it.

    Reads the backbone registry (:mod:`txrl.backbones`, no torch) and builds nothing.
    """
    from txrl.backbones import backbone_config_class, backbone_names, setting_names

    names = backbone_names()
    if policy.backbone not in names:
        return policy, [
            f"policy.backbone must be one of {', '.join(names)}, got {policy.backbone!r}"
        ]
    valid = [
        name
        for name in setting_names(backbone_config_class(policy.backbone))
        if name != "input_dim"
    ]
    extra = [key for key in policy.backbone_settings() if key not in valid]
    if policy.inapplicable == "drop" and extra:
        unset: dict[str, Any] = {k: None for k in extra if k in policy.BACKBONE_FIELDS}
        policy = dataclasses.replace(
            policy,
            **unset,
            backbone_kwargs={k: v for k, v in policy.backbone_kwargs.items() if k in valid},
        )
        extra = []
    problems = [
        f"{'policy' if key in policy.BACKBONE_FIELDS else 'policy.backbone_kwargs'}.{key} "
        f"does not apply to backbone {policy.backbone!r}; its settings: {', '.join(valid)}"
        for key in extra
    ]
    if "memory_length" in valid and policy.backbone_settings().get("memory_length") == 0:
        # The backbone modules accept 0, but an agent trained so remembers no past step:
        # never what a training config means.
        key = "policy.memory_length"
        if policy.memory_length != 0:
            key = "policy.backbone_kwargs.memory_length"
        problems.append(
            f"{key} must be >= 1 for backbone {policy.backbone!r} (the steps of memory each "
            "layer attends to; 0 leaves the agent no memory of past steps), got 0"
        )
    return policy, problems


def _check_backbone_builds(policy: PolicyConfig, *, memory_policy: bool) -> list[str]:
    from txrl.backbones import make_backbone

    try:
        # Building the (small, CPU) module runs every check of the backbone itself.
        make_backbone(policy.backbone, input_dim=1, **policy.backbone_settings())
    except (ValueError, TypeError) as e:
        return [f"policy (backbone {policy.backbone!r}): {e}"]
    if not memory_policy:
        return []
    from txrl.sb3.policies import MemoryActorCriticPolicy

    valid_kwargs = MemoryActorCriticPolicy.valid_kwargs()
    return [
        f"policy.{key} is not supported by this version's memory policies "
        f"(their settings: {', '.join(valid_kwargs)})"
        for key in policy.policy_kwargs()
        if key not in valid_kwargs
    ]


def _check_env(env: EnvConfig) -> list[str]:
    import gymnasium as gym

    import txrl.envs  # noqa: F401  # registers the txrl ids

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


#: The observation spaces every learner takes (SB3's, and txrl's memory policies').
OBSERVATION_SPACES = ("Box", "Discrete", "MultiDiscrete", "MultiBinary")
#: The action spaces each learner trains, by ``algo``; any other learner: :data:`ACTION_SPACES`.
#: sb3-contrib's RecurrentPPO stores MultiBinary actions as int8, which its Bernoulli
#: log-probability (``binary_cross_entropy_with_logits``) cannot take: it fails in torch.
ACTION_SPACES = ("Box", "Discrete", "MultiDiscrete", "MultiBinary")
LEARNER_ACTION_SPACES = {
    "vmpo": ("Discrete", "Box"),
    "recurrent_ppo": ("Box", "Discrete", "MultiDiscrete"),
}


def _env_spaces(config: TrainConfig) -> tuple[Any, Any]:
    """The observation and action spaces of the run's env, wrappers included."""
    from txrl.envs import make_env_fn

    env = make_env_fn(
        config.env.id, previous_action_reward=config.env.previous_action_reward, **config.env.kwargs
    )()
    try:
        return env.observation_space, env.action_space
    finally:
        env.close()


def _check_spaces(config: TrainConfig) -> list[str]:
    """The env's observation and action spaces are ones the learner trains on; checked here,
    before a run directory exists, since SB3 and torch fail on others without a useful
    message (Graph or Text observations, MultiBinary actions) and only once training began."""
    from gymnasium import spaces

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
    valid = LEARNER_ACTION_SPACES.get(config.algo, ACTION_SPACES)
    if type(action_space).__name__ not in valid:
        problems.append(
            f"env {config.env.id} has action space {action_space}, which algo {config.algo} "
            f"does not train; supported: {', '.join(valid)}"
        )
    return problems


def _check_encoder(config: TrainConfig, policy: PolicyConfig, learner: Any) -> list[str]:
    """Build the encoder the run's policy would build, with ``policy.encoder_kwargs``, on the
    env's observation space: a keyword its class does not take is named with those it does."""
    import inspect

    from stable_baselines3.common.vec_env import VecTransposeImage

    space, _ = _env_spaces(config)
    name, _ = learner.policy(policy, space)
    policy_class = learner.algorithm_class().policy_aliases[name]
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
    import torch

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
