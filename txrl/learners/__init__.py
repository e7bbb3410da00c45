"""The learners txrl trains: one registry of name -> (algorithm class, settings dataclass).

Each learner declares itself once, in one module of this package: a frozen settings
dataclass whose documented fields are every constructor argument a user may set (the
algorithm's own defaults are read from it, or, for a learner from another library, checked
against it by the tests), and a :class:`Learner` record named ``LEARNER``. Everything that
needs the list of learners reads it here: the config (the ``algo`` key and its section),
training, ``txrl compare``, the rl-zoo3 entry point and ``txrl.<AlgorithmClass>``.

The modules here import no torch (the algorithm class is named, not imported), so a config
is checked in a fraction of a second. Adding a learner is three files: its algorithm
(``txrl/sb3/<name>.py``), its declaration here, and its test. Outside txrl, call
:func:`register_learner`.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from txrl.config.schema import NonNegativeFloat, PositiveInt
from txrl.errors import ConfigError

CheckFinite = Literal["raise", "warn", "off"]
"""What a memory learner does on a NaN/inf observation, reward or loss (see MemoryOnPolicyAlgorithm)."""


@dataclass(frozen=True)
class SB3LearnerSettings:
    """The settings every learner on Stable-Baselines3's ``OnPolicyAlgorithm`` has."""

    stats_window_size: PositiveInt = 100
    """Episodes averaged in the ``rollout/`` statistics."""


@dataclass(frozen=True)
class MemoryLearnerSettings(SB3LearnerSettings):
    """The settings both of txrl's memory learners (MemoryPPO, VMPO) have beyond their loss's:
    those of :class:`txrl.sb3.common.MemoryOnPolicyAlgorithm`."""

    aux_loss_coef: dict[str, NonNegativeFloat] | None = None
    """Coefficient per auxiliary loss: those a backbone reports (``span_l1`` of adaptive_span,
    ``ponder_cost`` of universal, ``attention_reconstruction`` of compressive) and the policy's
    own (``past_prediction`` of ``policy.predict_past``, ``observation_reconstruction`` of
    ``policy.reconstruct_observation``); a loss not listed, or ``null``, gets coefficient 1."""
    check_finite: CheckFinite = "raise"
    """On a NaN/inf observation or reward: ``raise`` (names env and step), ``warn``, or ``off``.
    A non-finite loss always stops training before the optimizer step."""
    cuda_graph: bool = True
    """On a CUDA GPU with a discrete action space, act in rollouts by replaying a CUDA graph
    of the acting step (captured at each rollout's start) instead of launching its kernels
    one by one: the same computation, about 5x cheaper per step at 64 envs on an H100
    (``bench/gpu_throughput.py``). No effect on a CPU; ``false``: eager steps."""


#: Constructor arguments that are not learner settings: the run wires them from the rest of
#: the config (``policy``, ``env``, ``seed``, ``runtime``) or they are SB3 plumbing.
WIRING_ARGUMENTS = frozenset(
    {
        "policy",
        "env",
        "tensorboard_log",
        "policy_kwargs",
        "verbose",
        "seed",
        "device",
        "_init_setup_model",
    }
)


@dataclass(frozen=True)
class Learner:
    """One learner: what the ``algo`` key names and how a run builds it."""

    name: str
    """The config's ``algo`` value and the name of its settings section (``ppo:``)."""
    settings: type
    """Frozen dataclass of the learner's settings (the YAML section); documented fields."""
    algorithm: str
    """``"module:Class"`` of the SB3 algorithm, imported only when a run needs it."""
    policy: Callable[[Any, Any], tuple[str, dict[str, Any]]]
    """``policy(policy_config, observation_space) -> (SB3 policy name, policy_kwargs)``."""
    backbones: tuple[str, ...] | None = None
    """Backbones it can train (``policy.backbone``); ``None``: every registered one."""
    memory_policy: bool = True
    """Whether it trains txrl's memory policies (their ``policy_kwargs`` are checked)."""
    zoo_name: str | None = None
    """Its ``--algo`` name in rl-baselines3-zoo (``python -m txrl.zoo``), if it joins it."""

    @property
    def class_name(self) -> str:
        return self.algorithm.rpartition(":")[2]

    def algorithm_class(self) -> type[Any]:
        """The algorithm class (imports torch and Stable-Baselines3)."""
        module, _, name = self.algorithm.partition(":")
        try:
            return getattr(importlib.import_module(module), name)
        except (AttributeError, ImportError) as e:
            raise ConfigError(
                f"algo {self.name!r} needs {self.algorithm}, which this installation cannot "
                f"import ({e})"
            ) from e

    def settings_kwargs(self, settings: Any) -> dict[str, Any]:
        """Keyword arguments of the algorithm's constructor for ``settings`` (a ``lin_<x>``
        value becomes SB3's linear schedule, see :func:`schedule`)."""
        return {f.name: _plain(getattr(settings, f.name)) for f in dataclasses.fields(settings)}


def schedule(value: str) -> Any:
    """SB3's schedule for rl-baselines3-zoo's ``lin_<x>``: x at the start of training,
    falling linearly to 0 at its end (SB3's progress, which ``txrl train`` keeps over the
    whole budget across resumes)."""
    from stable_baselines3.common.utils import LinearSchedule

    return LinearSchedule(float(value.removeprefix("lin_")), 0.0, 1.0)


def _plain(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("lin_"):
        return schedule(value)
    return dict(value) if isinstance(value, dict) else value


_REGISTRY: dict[str, Learner] = {}
_LOADED = False
#: Built-in learners first, in this order (then any other module, by name).
_ORDER = {"ppo": 0, "vmpo": 1}


def register_learner(learner: Learner) -> Learner:
    """Add ``learner`` to the registry (a name already taken is an error)."""
    known = _REGISTRY.get(learner.name)
    if known is not None and known != learner:
        raise ValueError(
            f"a learner named {learner.name!r} is already registered ({known.algorithm})"
        )
    _REGISTRY[learner.name] = learner
    return learner


def _load_builtin() -> None:
    """Register every learner module of this package (each defines ``LEARNER``)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for info in sorted(
        pkgutil.iter_modules(__path__), key=lambda m: _ORDER.get(m.name, len(_ORDER))
    ):
        module = importlib.import_module(f"{__name__}.{info.name}")
        register_learner(module.LEARNER)


def learner_names() -> list[str]:
    _load_builtin()
    return list(_REGISTRY)


def learners() -> list[Learner]:
    _load_builtin()
    return list(_REGISTRY.values())


def get_learner(name: str) -> Learner:
    """The learner named ``name``; an unknown name is a ValueError listing the valid ones."""
    _load_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"unknown learner {name!r}; valid: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def encoder_prefix(encoder: str, observation_space: Any) -> str:
    """SB3 policy-name prefix for ``policy.encoder``: Mlp, Cnn or MultiInput.

    ``auto``: MultiInput for Dict observations; Cnn for images as SB3 sees them
    (``is_image_space``: uint8 pixels in [0, 255], e.g. Memory Gym's 84x84 RGB frames), which
    flattened into an MLP would lose their layout; Mlp for the rest, MiniGrid-style code grids
    included: SB3 counts them as images too, but their cells hold object, colour and state
    codes, not intensities (the memory policies embed them with
    :class:`txrl.sb3.extractors.SymbolicGridExtractor`).
    """
    from gymnasium import spaces

    if encoder != "auto":
        return {"mlp": "Mlp", "cnn": "Cnn", "multi_input": "MultiInput"}[encoder]
    if isinstance(observation_space, spaces.Dict):
        return "MultiInput"
    # imported here: both import torch, which this module must not (see the module docstring)
    from stable_baselines3.common.preprocessing import is_image_space

    from txrl.sb3.extractors import is_symbolic_grid

    if is_image_space(observation_space) and not is_symbolic_grid(observation_space):
        return "Cnn"
    return "Mlp"


def memory_policy(policy: Any, observation_space: Any) -> tuple[str, dict[str, Any]]:
    """A txrl memory policy: ``<Mlp|Cnn|MultiInput><GTrXL|...|Memory>Policy`` and its kwargs."""
    name = MEMORY_POLICY_NAMES.get(policy.backbone, "Memory")
    return encoder_prefix(
        policy.encoder, observation_space
    ) + name + "Policy", policy.policy_kwargs()


#: Policy class per built-in backbone; any other uses ``*MemoryPolicy`` with ``backbone=...``.
MEMORY_POLICY_NAMES = {
    "gtrxl": "GTrXL",
    "trxl_i": "TrXLI",
    "trxl": "TrXL",
    "lstm": "Lstm",
    "gru": "Gru",
}


def settings_disagreements(learner: Learner) -> list[str]:
    """How the algorithm's constructor and the settings dataclass disagree (empty: they agree).

    Compares the names of the constructor's arguments (less :data:`WIRING_ARGUMENTS`) with
    the settings fields, and each default with the field's default.
    """
    import inspect

    parameters = {
        name: p
        for name, p in inspect.signature(learner.algorithm_class().__init__).parameters.items()
        if name != "self" and name not in WIRING_ARGUMENTS and p.kind is not p.VAR_KEYWORD
    }
    fields = {f.name: f for f in dataclasses.fields(learner.settings)}
    problems = [
        f"constructor argument {n} has no settings field" for n in parameters if n not in fields
    ]
    problems += [
        f"settings field {n} is no constructor argument" for n in fields if n not in parameters
    ]
    for name in set(parameters) & set(fields):
        field = fields[name]
        default = (
            field.default_factory()
            if field.default_factory is not dataclasses.MISSING
            else field.default
        )
        if parameters[name].default != default:
            problems.append(
                f"{name}: constructor default {parameters[name].default!r} != settings default {default!r}"
            )
    return problems


__all__ = [
    "MEMORY_POLICY_NAMES",
    "WIRING_ARGUMENTS",
    "Learner",
    "MemoryLearnerSettings",
    "SB3LearnerSettings",
    "encoder_prefix",
    "get_learner",
    "learner_names",
    "learners",
    "memory_policy",
    "register_learner",
    "schedule",
    "settings_disagreements",
]
