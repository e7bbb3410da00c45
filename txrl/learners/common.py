"""What every learner's declaration is made of: the :class:`Learner` record, the settings all
learners share, and how settings become an algorithm's keyword arguments.

Each module of this package builds its learner from these; :mod:`txrl.learners` lists them.
Torch-free, as the whole package: the one thing that needs Stable-Baselines3,
:func:`schedule`, imports it when a run asks for a schedule, never while a config is read.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from txrl.schema import NonNegativeFloat, PositiveInt

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
    """One learner: what the ``algo`` key names and how a run builds it.

    The record names no class, so that reading it needs no torch: the algorithm that trains
    a learner is in :data:`txrl.run.algorithms.ALGORITHMS`, under the same name.
    """

    name: str
    """The config's ``algo`` value and the name of its settings section (``ppo:``)."""
    settings: type
    """Frozen dataclass of the learner's settings (the YAML section); documented fields."""
    policy: Callable[[Any, str], tuple[str, dict[str, Any]]]
    """``policy(policy_config, encoder_prefix) -> (SB3 policy name, policy_kwargs)``; the
    prefix (``Mlp``, ``Cnn`` or ``MultiInput``) is the one the run's observations need
    (:func:`txrl.run.algorithms.encoder_prefix`)."""
    backbones: tuple[str, ...] | None = None
    """Backbones it can train (``policy.backbone``); ``None``: every registered one."""
    memory_policy: bool = True
    """Whether it trains txrl's memory policies (their ``policy_kwargs`` are checked)."""
    zoo_name: str | None = None
    """Its ``--algo`` name in rl-baselines3-zoo (``python -m txrl.zoo``), if it joins it."""

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


def memory_policy(policy: Any, encoder_prefix: str) -> tuple[str, dict[str, Any]]:
    """A txrl memory policy: ``<Mlp|Cnn|MultiInput><GTrXL|...|Memory>Policy`` and its kwargs."""
    name = MEMORY_POLICY_NAMES.get(policy.backbone, "Memory")
    return encoder_prefix + name + "Policy", policy.policy_kwargs()


#: Policy class per built-in backbone; any other uses ``*MemoryPolicy`` with ``backbone=...``.
MEMORY_POLICY_NAMES = {
    "gtrxl": "GTrXL",
    "trxl_i": "TrXLI",
    "trxl": "TrXL",
    "lstm": "Lstm",
    "gru": "Gru",
}


def settings_disagreements(settings: type, algorithm: type) -> list[str]:
    """How the constructor of ``algorithm`` and the ``settings`` dataclass disagree (empty:
    they agree).

    Compares the names of the constructor's arguments (less :data:`WIRING_ARGUMENTS`) with
    the settings fields, and each default with the field's default.
    """
    parameters = {
        name: p
        for name, p in inspect.signature(algorithm).parameters.items()
        if name not in WIRING_ARGUMENTS and p.kind is not p.VAR_KEYWORD
    }
    fields = {f.name: f for f in dataclasses.fields(settings)}
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
