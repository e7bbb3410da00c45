"""Experiment configs: typed, frozen dataclasses that YAML files and ``--set`` overrides fill.

A training config (every section and key optional; the defaults and their meaning are the
fields below)::

    name: quickstart            # names the run directory
    algo: ppo                   # ppo | vmpo; the section of the same name holds its settings
    seed: 0
    budget: 80000               # total env steps
    env:    {id: txrl/TMazePassive-v0, kwargs: {length: 10}, n_envs: 8}
    policy: {backbone: gtrxl, gate: gru, d_model: 32, n_layers: 1, memory_length: 16}
    ppo:    {learning_rate: 5.0e-4, n_steps: 64, segment_length: 16, ...}
    eval:   {every: 5000, episodes: 32}
    checkpoint: {every: 10000, keep: 2}
    runtime: {device: cpu, progress_bar: true}

Checking is strict: an unknown key, a value of the wrong type or out of range is a
:class:`ConfigError` whose message names the key by its dotted path (``ppo.gamma``) and the
form it must take. Nothing is silently ignored. Two conveniences, both because of YAML:
numbers written without a dot (``3e-4``, which PyYAML reads as a string) are accepted where a
number is expected, and an integer-valued float (``1.0e5``) where an integer is.

A compare config (``txrl compare``) declares a grid over a base training config; see
:class:`CompareConfig`.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import json
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union

import yaml

from txrl.errors import ConfigError, RunError

# ---------------------------------------------------------------------------- value checks


@dataclass(frozen=True)
class Interval:
    """Range of a numeric field, attached with ``Annotated[int, Interval(1)]``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (
            self.high is not None and (value >= self.high if self.high_open else value > self.high)
        )

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"in {left}{_num(self.low)}, {_num(self.high)}{right}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {_num(self.low)}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {_num(self.high)}"
        return ""


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


PositiveInt = Annotated[int, Interval(1)]
NonNegativeInt = Annotated[int, Interval(0)]
PositiveFloat = Annotated[float, Interval(0, low_open=True)]
NonNegativeFloat = Annotated[float, Interval(0)]
UnitFloat = Annotated[float, Interval(0, 1)]

_NUMBER = re.compile(r"^[+-]?(\d[\d_]*\.?[\d_]*|\.\d[\d_]*)([eE][+-]?\d+)?$")


def _describe(hint: Any, plural: bool = False) -> str:
    """The valid form of a value of type ``hint``, in words (``plural``: of several values)."""
    origin = typing.get_origin(hint)
    if origin is Annotated:
        base, *extras = typing.get_args(hint)
        ranges = [e.describe() for e in extras if isinstance(e, Interval)]
        return " ".join([_describe(base, plural), *ranges])
    if origin in (Union, types.UnionType):
        args = typing.get_args(hint)
        parts = [_describe(a, plural) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or null" if type(None) in args else "")
    if origin is Literal:
        return (
            ("each " if plural else "")
            + "one of "
            + ", ".join(repr(a) for a in typing.get_args(hint))
        )
    if origin in (tuple, list):
        return (
            "lists" if plural else "a list"
        ) + f" of {_describe(typing.get_args(hint)[0], True)}"
    if origin in (dict, Mapping) or hint is dict:
        args = typing.get_args(hint)
        what = "mappings" if plural else "a mapping"
        if args and args[1] is not Any:
            return f"{what} of names to {_describe(args[1], True)}"
        return what
    if dataclasses.is_dataclass(hint):
        what = "mappings" if plural else "a mapping"
        return f"{what} with keys " + ", ".join(f.name for f in dataclasses.fields(hint))
    words = {
        bool: ("true or false", "booleans"),
        int: ("an integer", "integers"),
        float: ("a number", "numbers"),
        str: ("a string", "strings"),
    }
    if hint in words:
        return words[hint][plural]
    return getattr(hint, "__name__", str(hint))


def _convert(value: Any, hint: Any, path: str) -> Any:
    """Return ``value`` checked (and normalised) as type ``hint``; raise ConfigError naming ``path``."""
    origin = typing.get_origin(hint)
    bad = ConfigError(f"{path} must be {_describe(hint)}, got {value!r}")
    if hint is Any:
        return value
    if origin is Annotated:
        base, *extras = typing.get_args(hint)
        try:
            converted = _convert(value, base, path)
        except ConfigError:
            raise bad from None
        for extra in extras:
            if isinstance(extra, Interval) and not extra.contains(converted):
                raise bad
        return converted
    if origin in (Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None:
            if type(None) in args:
                return None
            raise bad
        for arg in (a for a in args if a is not type(None)):
            try:
                return _convert(value, arg, path)
            except ConfigError:
                continue
        raise bad
    if origin is Literal:
        if value in typing.get_args(hint) and type(value) is not bool:
            return value
        raise bad
    if origin in (tuple, list):
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
            raise bad
        (item,) = typing.get_args(hint)[:1]
        return tuple(_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping) or hint is dict:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise bad
        args = typing.get_args(hint)
        item_hint = args[1] if args else Any
        return {k: _convert(v, item_hint, f"{path}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return from_mapping(hint, value, path)  # type: ignore[type-var]  # hint is a dataclass type here
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise bad
    if hint is int:
        number = _as_number(value)
        if number is None or not float(number).is_integer():
            raise bad
        return int(number)
    if hint is float:
        number = _as_number(value)
        if number is None or not math.isfinite(number):
            raise bad
        return float(number)
    if hint is str:
        if isinstance(value, str) and value:
            return value
        raise bad
    raise TypeError(f"config field {path} has a type the checker does not know: {hint!r}")


def _as_number(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str) and _NUMBER.match(value.strip()):
        return float(value.replace("_", ""))
    return None


T = TypeVar("T")


def from_mapping(cls: type[T], data: Any, path: str = "") -> T:
    """Build dataclass ``cls`` from ``data``, checking every key and value (see module doc).

    Every problem is found before one is reported: the :class:`ConfigError` lists them all.
    """
    problems: list[str] = []
    built = _build(cls, data, path, problems)
    if problems:
        raise ConfigError(problems)
    return built


def _build(cls: type[T], data: Any, path: str, problems: list[str]) -> T:
    """``cls`` from ``data``; each bad key or value appends to ``problems`` and takes its default."""
    where = path or "the config"
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        problems.append(f"{where} must be {_describe(cls)}, got {data!r}")
        return cls()
    names = [f.name for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    for key in data:
        if not isinstance(key, str) or key not in names:
            dotted = f"{path}.{key}" if path else str(key)
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(
                f"unknown key {dotted}{hint}; valid keys of {where}: {', '.join(names)}"
            )
    hints = typing.get_type_hints(cls, include_extras=True)
    values = {}
    for name in names:
        if name not in data:
            continue
        dotted = f"{path}.{name}" if path else name
        if dataclasses.is_dataclass(hints[name]):
            values[name] = _build(hints[name], data[name], dotted, problems)
            continue
        try:
            values[name] = _convert(data[name], hints[name], dotted)
        except ConfigError as e:
            problems.extend(e.problems)
    return cls(**values)


def to_plain(obj: Any) -> Any:
    """A config as plain YAML-able data: dataclasses to dicts, tuples to lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return [to_plain(v) for v in obj]
    return obj


# ---------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class EnvConfig:
    """The training environment."""

    id: str = "txrl/TMaze-v0"
    """A registered Gymnasium id; the txrl tasks are ``txrl/...`` (see :mod:`txrl.envs`)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``gym.make(id, **kwargs)``, e.g. ``{length: 10}`` for the T-maze."""
    n_envs: PositiveInt = 8
    """Envs stepped in parallel; each carries its own memory."""
    vec_env: Literal["dummy", "subproc"] = "dummy"
    """``dummy``: all envs in the training process (exact resume: their state is checkpointed);
    ``subproc``: one process per env (in-flight episodes restart on resume)."""
    previous_action_reward: bool = False
    """Feed the previous action and reward to the agent with each observation, as the GTrXL
    and V-MPO agents receive them (:class:`txrl.envs.PreviousActionReward`)."""
    normalize_obs: bool = False
    """Wrap the envs in SB3's ``VecNormalize`` for observations (statistics are checkpointed)."""
    normalize_reward: bool = False
    """Wrap the envs in SB3's ``VecNormalize`` for rewards (training only, never evaluation)."""


@dataclass(frozen=True)
class PolicyConfig:
    """The memory policy: a backbone from :func:`txrl.make_backbone` with actor and critic heads.

    Settings left ``null`` take the backbone's own default. A setting the chosen backbone does
    not have (``gate`` for ``lstm``) is an error.
    """

    backbone: str = "gtrxl"
    """Any name of ``txrl.backbone_names()``: gtrxl, trxl_i, trxl, lstm, gru, ..."""
    gate: str | None = None
    """GTrXL gate: input, output, highway, sigtanh, gru, residual (``gtrxl`` only)."""
    gate_bias: float | None = None
    """Gate bias b_g; ``null``: the paper's default of the gate (2 for ``gru``)."""
    n_layers: PositiveInt | None = None
    """Number of layers of the backbone."""
    d_model: PositiveInt | None = None
    """Width of the backbone (the hidden size for lstm/gru)."""
    n_heads: PositiveInt | None = None
    """Attention heads (transformer backbones)."""
    memory_length: NonNegativeInt | None = None
    """Steps of memory each layer attends to (transformer backbones)."""
    hidden_size: PositiveInt | None = None
    """Hidden size of lstm/gru (synonym of ``d_model`` there)."""
    backbone_kwargs: dict[str, Any] = field(default_factory=dict)
    """Further settings of the backbone's config dataclass (e.g. ``d_ff``, ``dropout``)."""
    net_arch: tuple[NonNegativeInt, ...] | dict[str, tuple[NonNegativeInt, ...]] | None = None
    """SB3 ``net_arch`` of the heads after the backbone: ``[64]`` or ``{pi: [64], vf: [64]}``."""
    encoder: Literal["auto", "mlp", "cnn", "multi_input"] = "auto"
    """Observation encoder before the backbone; ``auto``: ``multi_input`` for Dict
    observations, else ``mlp`` (which flattens, fine for MiniGrid's 7x7x3 codes)."""
    inapplicable: Literal["error", "drop"] = "error"
    """What to do with settings the chosen backbone does not have (``gate`` or ``n_heads``
    for ``lstm``): ``error`` names them all; ``drop`` clears them, so switching backbone is
    one override: ``--set policy.backbone=lstm --set policy.inapplicable=drop``."""

    #: Settings of the backbone that are fields here, passed on when not null.
    BACKBONE_FIELDS: typing.ClassVar[tuple[str, ...]] = (
        "gate",
        "gate_bias",
        "n_layers",
        "d_model",
        "n_heads",
        "memory_length",
        "hidden_size",
    )

    def backbone_settings(self) -> dict[str, Any]:
        """The backbone settings that were given (not null), merged with ``backbone_kwargs``."""
        given = {k: getattr(self, k) for k in self.BACKBONE_FIELDS if getattr(self, k) is not None}
        return {**given, **self.backbone_kwargs}

    def policy_kwargs(self) -> dict[str, Any]:
        """``policy_kwargs`` of a txrl memory policy (settings left null are not passed)."""
        kwargs: dict[str, Any] = {"backbone": self.backbone}
        kwargs.update(
            {k: getattr(self, k) for k in self.BACKBONE_FIELDS if getattr(self, k) is not None}
        )
        if self.backbone_kwargs:
            kwargs["backbone_kwargs"] = dict(self.backbone_kwargs)
        if self.net_arch is not None:
            kwargs["net_arch"] = (
                list(self.net_arch)
                if isinstance(self.net_arch, tuple)
                else {k: list(v) for k, v in self.net_arch.items()}
            )
        return kwargs


@dataclass(frozen=True)
class PPOConfig:
    """Settings of :class:`txrl.MemoryPPO` (Schulman et al. 2017, on memory policies)."""

    learning_rate: PositiveFloat = 3e-4
    """Adam step size."""
    n_steps: PositiveInt = 128
    """Steps per env per rollout; a rollout holds ``n_steps * n_envs`` transitions."""
    batch_size: PositiveInt = 256
    """Transitions per minibatch (whole segments of ``segment_length`` steps)."""
    n_epochs: PositiveInt = 4
    """Passes over each rollout."""
    gamma: UnitFloat = 0.99
    """Discount factor."""
    gae_lambda: UnitFloat = 0.95
    """GAE(lambda) of Schulman et al. (2016)."""
    clip_range: PositiveFloat = 0.2
    """PPO clip epsilon of the probability ratio."""
    ent_coef: NonNegativeFloat = 0.01
    """Entropy bonus coefficient."""
    vf_coef: NonNegativeFloat = 0.5
    """Value-loss coefficient."""
    max_grad_norm: PositiveFloat = 0.5
    """Global gradient-norm clip."""
    segment_length: PositiveInt = 32
    """Steps per training segment, each recomputed from the memory its acting steps saw;
    must divide ``n_steps`` and ``batch_size``."""

    def learner_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :class:`txrl.MemoryPPO` (settings left null are not passed)."""
        return {k: v for k, v in to_plain(self).items() if v is not None}


@dataclass(frozen=True)
class VMPOConfig:
    """Settings of :class:`txrl.VMPO` (Song et al. 2019, V-MPO), defaults as the learner's.

    ``null`` bounds and initial multipliers take the paper's values from
    :class:`txrl.rl.vmpo_loss.VMPOConfig`.
    """

    learning_rate: PositiveFloat = 1e-4
    """Adam step size (the Lagrange multipliers are trained by the same optimizer)."""
    n_steps: PositiveInt = 128
    """Steps per env per rollout."""
    batch_size: PositiveInt = 256
    """Transitions per minibatch (whole segments)."""
    n_epochs: PositiveInt = 1
    """Passes over each rollout."""
    segment_length: PositiveInt = 32
    """Steps per training segment; must divide ``n_steps`` and ``batch_size``."""
    gamma: UnitFloat = 0.99
    """Discount factor."""
    gae_lambda: UnitFloat = 1.0
    """lambda of the advantage targets; 1 gives the paper's n-step returns."""
    epsilon_eta: PositiveFloat | None = None
    """Bound of the E-step's temperature dual (eps_eta)."""
    epsilon_alpha: PositiveFloat | None = None
    """KL trust region of the M-step, discrete actions (eps_alpha)."""
    epsilon_alpha_mu: PositiveFloat | None = None
    """KL bound of a Gaussian policy's mean (eps_alpha_mu)."""
    epsilon_alpha_sigma: PositiveFloat | None = None
    """KL bound of a Gaussian policy's covariance (eps_alpha_Sigma)."""
    init_eta: PositiveFloat | None = None
    """Initial temperature eta."""
    init_alpha: PositiveFloat | None = None
    """Initial multiplier alpha (discrete actions)."""
    init_alpha_mu: PositiveFloat | None = None
    """Initial alpha_mu (Gaussian mean)."""
    init_alpha_sigma: PositiveFloat | None = None
    """Initial alpha_Sigma (Gaussian covariance)."""
    target_update_period: PositiveInt | None = None
    """Gradient steps between target-network refreshes; ``null``: act with the policy of
    the rollout's start."""
    value_loss_coef: NonNegativeFloat | None = None
    """Weight of the value loss L_V."""
    popart: bool | None = None
    """Normalise value targets with PopArt; ``null``: the paper's default (on)."""
    max_grad_norm: PositiveFloat = 40.0
    """Global gradient-norm clip."""

    def learner_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :class:`txrl.VMPO` (settings left null are not passed)."""
        return {k: v for k, v in to_plain(self).items() if v is not None}


@dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation on separate envs (success rate and return)."""

    every: NonNegativeInt = 10_000
    """Evaluate when the step count crosses a multiple of this (checked between rollouts);
    0: only at the end. Step 0 is evaluated too, so learning curves start at the beginning."""
    episodes: PositiveInt = 20
    """Episodes per evaluation."""
    n_envs: PositiveInt = 8
    """Eval envs run side by side (at most ``episodes``)."""
    deterministic: bool = True
    """Greedy actions (``true``) or sampled ones."""


@dataclass(frozen=True)
class CheckpointConfig:
    """Atomic checkpoints for resuming (``txrl train --resume``)."""

    every: NonNegativeInt = 10_000
    """Checkpoint when the step count crosses a multiple of this (between rollouts); 0: only
    the final one."""
    keep: NonNegativeInt = 2
    """Most recent periodic checkpoints kept; 0 keeps all. The final one is always kept."""


@dataclass(frozen=True)
class RuntimeConfig:
    """How the run executes; none of it changes what is learned (on CPU)."""

    device: str = "cpu"
    """Torch device: cpu, cuda, cuda:1, auto."""
    torch_threads: PositiveInt | None = None
    """``torch.set_num_threads``; ``null`` leaves torch's default."""
    progress_bar: bool = True
    """Show progress over the whole budget: a bar on a terminal, else a line every
    ``progress_every`` seconds (steps, steps/s, latest evaluation)."""
    progress_every: PositiveFloat = 30.0
    """Seconds between progress lines when the output is not a terminal (a log file)."""
    verbose: Annotated[int, Interval(0, 2)] = 0
    """SB3 verbosity (1 prints the logger's tables)."""
    log_interval: PositiveInt = 1
    """Rollouts between SB3 logger dumps (TensorBoard points)."""


ALGOS: tuple[str, ...] = ("ppo", "vmpo")


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run needs; one YAML file."""

    name: str | None = None
    """Name of the run (prefix of its directory); ``null``: the config file's stem."""
    algo: Literal["ppo", "vmpo"] = "ppo"
    """Learner: ``ppo`` (txrl.MemoryPPO) or ``vmpo`` (txrl.VMPO); set its section below."""
    seed: NonNegativeInt = 0
    """Seed of torch, numpy, python and the envs."""
    budget: PositiveInt = 100_000
    """Total env steps (summed over envs); training stops at the first rollout past it."""
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    vmpo: VMPOConfig = field(default_factory=VMPOConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)

    @classmethod
    def from_dict(cls, data: Any) -> TrainConfig:
        """Build and check a config: keys, types, ranges and how fields fit together.

        Needs no torch: the checks that need the backbone registry or the env (and the
        device) are :func:`resolve`'s, which training runs once before it starts.
        """
        problems: list[str] = []
        if isinstance(data, Mapping):
            algo = data.get("algo", "ppo")
            for other in ALGOS:
                if other != algo and other in data:
                    problems.append(
                        f"section {other}: is for algo {other!r} but algo is {algo!r}; "
                        f"remove it or set algo: {other}"
                    )
        config = _build(cls, data, "", problems)
        if not problems:
            problems += config.problems()
        if problems:
            raise ConfigError(problems)
        return config

    @property
    def algo_settings(self) -> PPOConfig | VMPOConfig:
        """The section of the chosen learner."""
        return self.ppo if self.algo == "ppo" else self.vmpo

    def to_dict(self) -> dict[str, Any]:
        """Plain data that :meth:`from_dict` reads back; only the chosen learner's section."""
        data = to_plain(self)
        for other in ALGOS:
            if other != self.algo:
                del data[other]
        return data

    def problems(self) -> list[str]:
        """What is wrong across fields (each field itself being valid), one line per problem."""
        problems = []
        learner = self.algo_settings
        rollout = learner.n_steps * self.env.n_envs
        if learner.batch_size > rollout:
            problems.append(
                f"{self.algo}.batch_size ({learner.batch_size}) must be <= the rollout "
                f"size {self.algo}.n_steps * env.n_envs = {rollout}"
            )
        for key in ("n_steps", "batch_size"):
            value = getattr(learner, key)
            if value % learner.segment_length:
                problems.append(
                    f"{self.algo}.{key} ({value}) must be a multiple of {self.algo}.segment_length "
                    f"({learner.segment_length}): training uses whole segments"
                )
        if self.runtime.device not in ("cpu", "auto") and not re.fullmatch(
            r"cuda(:\d+)?|mps", self.runtime.device
        ):
            problems.append(
                f"runtime.device must be cpu, auto, cuda, cuda:N or mps, got {self.runtime.device!r}"
            )
        if isinstance(self.policy.net_arch, dict) and set(self.policy.net_arch) - {"pi", "vf"}:
            problems.append(
                "policy.net_arch as a mapping takes the keys pi and vf, "
                f"got {', '.join(self.policy.net_arch)}"
            )
        return problems


#: Keys ``txrl train --resume RUN_DIR --set KEY=VALUE`` may change: how long and how the run
#: goes on, never what it has learned so far.
RESUME_KEYS: tuple[str, ...] = ("budget", "eval", "checkpoint", "runtime")


def changed_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two plain configs."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        keys = sorted(set(old) | set(new))
        return [d for k in keys for d in changed_keys(old.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if old == new else [prefix.rstrip(".")]


def check_resume_changes(old: TrainConfig, new: TrainConfig) -> None:
    """Raise ConfigError unless ``new`` differs from ``old`` only in :data:`RESUME_KEYS`."""
    changed = changed_keys(old.to_dict(), new.to_dict())
    fixed = [k for k in changed if k.split(".")[0] not in RESUME_KEYS]
    if fixed:
        raise ConfigError(
            f"a resumed run keeps what it learned with: cannot change {', '.join(fixed)}; "
            f"--resume takes --set for {', '.join(k + ('' if k == 'budget' else '.*') for k in RESUME_KEYS)}"
        )


def resume_config(stored: TrainConfig, overrides: Sequence[str]) -> TrainConfig:
    """A run's config with ``--set`` overrides for a resume (only :data:`RESUME_KEYS`)."""
    config = TrainConfig.from_dict(apply_overrides(stored.to_dict(), overrides))
    check_resume_changes(stored, config)
    return config


def resolve(config: TrainConfig) -> TrainConfig:
    """The checks that need the backbone registry, the env and torch; the config to train.

    Reports every problem at once. With ``policy.inapplicable: drop`` the settings the
    backbone does not have are cleared in the returned config (which the run records).
    """
    policy, problems = check_policy(config.policy)
    if not problems:
        problems += _check_backbone_builds(policy)
    problems += _check_env(config.env)
    problems += _check_device(config.runtime.device)
    if problems:
        raise ConfigError(problems, note=_inapplicable_note(problems))
    return dataclasses.replace(config, policy=policy)


def _inapplicable_note(problems: list[str]) -> str | None:
    if any("does not apply to backbone" in p for p in problems):
        return (
            "settings a backbone does not have can all be cleared at once with "
            "policy.inapplicable: drop (--set policy.inapplicable=drop), or one by one with "
            "--set policy.KEY=null"
        )
    return None


def check_policy(policy: PolicyConfig) -> tuple[PolicyConfig, list[str]]:
    """The policy with inapplicable settings dropped (when asked), and what is wrong with it.

    Uses the backbone registry (imports torch) but builds nothing.
    """
    from txrl.nn import backbone_config_class, backbone_names

    names = backbone_names()
    if policy.backbone not in names:
        return policy, [
            f"policy.backbone must be one of {', '.join(names)}, got {policy.backbone!r}"
        ]
    valid = [
        f.name
        for f in dataclasses.fields(backbone_config_class(policy.backbone))
        if f.name != "input_dim"
    ]
    extra = [key for key in policy.backbone_settings() if key not in valid]
    if policy.inapplicable == "drop" and extra:
        policy = dataclasses.replace(
            policy,
            **{k: None for k in extra if k in policy.BACKBONE_FIELDS},
            backbone_kwargs={k: v for k, v in policy.backbone_kwargs.items() if k in valid},
        )
        extra = []
    problems = [
        f"{'policy' if key in policy.BACKBONE_FIELDS else 'policy.backbone_kwargs'}.{key} "
        f"does not apply to backbone {policy.backbone!r}; its settings: {', '.join(valid)}"
        for key in extra
    ]
    return policy, problems


def _check_backbone_builds(policy: PolicyConfig) -> list[str]:
    from txrl.nn import make_backbone

    try:
        # Building the (small, CPU) module runs every check of the backbone itself.
        make_backbone(policy.backbone, input_dim=1, **policy.backbone_settings())
    except (ValueError, TypeError) as e:
        return [f"policy (backbone {policy.backbone!r}): {e}"]
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


# ---------------------------------------------------------------------------- files and overrides


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing file, bad YAML or a non-mapping is a ConfigError."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e.strerror}") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path} is not valid YAML: {e}") from e
    if data is None or data == {}:
        raise ConfigError(
            f"{path} holds no settings; a config is a YAML mapping of settings "
            "(start from configs/quickstart.yaml; every key is documented in txrl/config.py)"
        )
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of settings, got {type(data).__name__}")
    return data


def parse_override(text: str) -> tuple[str, Any]:
    """``"a.b=value"`` -> ``("a.b", yaml value)``."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not re.fullmatch(r"[A-Za-z_][\w-]*(\.[\w-]+)*", key):
        raise ConfigError(
            f"--set takes KEY=VALUE with a dotted KEY (e.g. ppo.gamma=0.95), got {text!r}"
        )
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {key}: the value {raw!r} is not valid YAML ({e})") from e
    return key, value


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """Set ``data[a][b] = value`` for ``key = "a.b"``, creating sections as needed."""
    *parents, leaf = key.split(".")
    node = data
    for i, part in enumerate(parents):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            dotted = ".".join(parents[: i + 1])
            raise ConfigError(f"cannot set {key}: {dotted} is {child!r}, not a section")
        node = child
    node[leaf] = value


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A deep copy of ``data`` with every ``KEY=VALUE`` of ``overrides`` applied in order."""
    data = _deep_copy(data)
    for text in overrides:
        set_dotted(data, *parse_override(text))
    return data


def _deep_copy(data: Any) -> Any:
    if isinstance(data, Mapping):
        return {k: _deep_copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deep_copy(v) for v in data]
    return data


def load_train_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read, override and check a training config; ``name`` defaults to the file's stem.

    ``--set algo=NAME`` switches learner: the file's section of its own learner (``ppo:``)
    is then dropped, so the new learner starts from its defaults plus any ``--set NAME.KEY``.
    """
    data = read_yaml(path)
    algos = [value for key, value in map(parse_override, overrides) if key == "algo"]
    if algos:
        for other in ALGOS:
            if other != algos[-1]:
                data.pop(other, None)
    data = apply_overrides(data, overrides)
    if data.get("name") is None:
        data["name"] = Path(path).stem
    return TrainConfig.from_dict(data)


#: The resolved config in a run directory (see :mod:`txrl.train`).
CONFIG_FILE = "config.yaml"


def read_run_config(run_dir: str | Path) -> TrainConfig:
    """The resolved config of a run directory."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise RunError(f"{run_dir} is not a txrl run directory (no {CONFIG_FILE})")
    return TrainConfig.from_dict(yaml.safe_load(path.read_text()))


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(to_plain(data), sort_keys=False, default_flow_style=False)


# ---------------------------------------------------------------------------- compare grids


@dataclass(frozen=True)
class Variant:
    """One cell of a compare grid: a label per axis and the base config it overrides."""

    labels: tuple[tuple[str, str], ...]  # ((axis, label), ...) in axis order
    config: TrainConfig  # with seed 0; runs replace the seed

    @property
    def name(self) -> str:
        return "__".join(label for _, label in self.labels) or "base"


@dataclass(frozen=True)
class CompareConfig:
    """A grid of training variants (product of the axes) times seeds, and how to summarise it.

    YAML::

        name: compare_gates
        base: quickstart.yaml         # a training config: a mapping, or a path relative to this file
        seeds: [0, 1, 2]
        axes:                         # product over the axes, in order
          policy.gate: [gru, input]   # a list: values of one dotted key, labelled by value
          task:                       # a mapping: label -> overrides (dotted keys)
            tmaze: {env.id: txrl/TMaze-v0, env.kwargs: {length: 8}}
            memory: {env.id: txrl/MiniGrid-MemoryS7-v0, env.kwargs: {}}
        metric: success_rate          # success_rate | mean_return: what results.md ranks
        threshold: 0.9                # steps-to-threshold uses the first evaluation >= this
        panels: task                  # one learning-curve panel per label of this axis
    """

    name: str | None = None
    """Names the output directory (``runs/<name>``); ``null``: the file's stem."""
    base: dict[str, Any] = field(default_factory=dict)
    """The training config every variant starts from."""
    seeds: tuple[NonNegativeInt, ...] = (0, 1, 2)
    """Seeds run for every variant."""
    axes: dict[str, Any] = field(default_factory=dict)
    """Axis name -> list of values (the name is a dotted key) or mapping label -> overrides."""
    metric: Literal["success_rate", "mean_return"] = "success_rate"
    """Evaluation metric the results and plots summarise."""
    threshold: float = 0.9
    """Level of ``metric`` for the steps-to-threshold column."""
    panels: str | None = None
    """Axis whose labels get one learning-curve panel each; ``null``: one panel."""
    workers: PositiveInt | None = None
    """Runs in parallel; ``null``: the number of CPU cores."""

    def variants(self) -> list[Variant]:
        """Every cell of the grid, each checked as a training config (seed 0)."""
        if not self.seeds:
            raise ConfigError("seeds must be a non-empty list of integers >= 0")
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds must not repeat, got {list(self.seeds)}")
        if self.panels is not None and self.panels not in self.axes:
            raise ConfigError(
                f"panels must name an axis ({', '.join(self.axes) or 'none declared'}), got {self.panels!r}"
            )
        cells: list[list[tuple[str, str, dict[str, Any]]]] = []
        for axis, spec in self.axes.items():
            cells.append(_axis_cells(axis, spec))
        variants, problems = [], []
        for combo in itertools.product(*cells):
            data = _deep_copy(self.base)
            for _, _, overrides in combo:
                for key, value in overrides.items():
                    if key == "seed" or key.startswith("seed."):
                        raise ConfigError("an axis cannot set seed; list the seeds under seeds:")
                    set_dotted(data, key, _deep_copy(value))
            labels = tuple((axis, label) for axis, label, _ in combo)
            data["seed"] = 0
            name = "__".join(label for _, label in labels) or "base"
            data["name"] = name
            where = ", ".join(f"{a}={lab}" for a, lab in labels) or "the base config"
            try:
                config = TrainConfig.from_dict(data)
            except ConfigError as e:
                problems += [f"variant {where}: {p}" for p in e.problems]
                continue
            policy, wrong = check_policy(config.policy)
            problems += [f"variant {where}: {p}" for p in wrong]
            variants.append(Variant(labels, dataclasses.replace(config, policy=policy)))
        if problems:
            raise ConfigError(problems, note=_inapplicable_note(problems))
        names = [v.name for v in variants]
        if len(set(names)) != len(names):
            raise ConfigError(f"two variants share a name; labels must be unique per axis: {names}")
        return variants


def _axis_cells(axis: str, spec: Any) -> list[tuple[str, str, dict[str, Any]]]:
    if isinstance(spec, list):
        if not spec:
            raise ConfigError(f"axes.{axis} is an empty list")
        return [(axis, _label(v), {axis: v}) for v in spec]
    if isinstance(spec, Mapping) and spec:
        cells = []
        for label, overrides in spec.items():
            if not isinstance(overrides, Mapping) or not all(isinstance(k, str) for k in overrides):
                raise ConfigError(
                    f"axes.{axis}.{label} must be a mapping of dotted keys to values, got {overrides!r}"
                )
            if not re.fullmatch(r"[\w.+=-]+", str(label)):
                raise ConfigError(
                    f"axes.{axis}: label {label!r} must use letters, digits and _ . + = - only"
                )
            cells.append((axis, str(label), dict(overrides)))
        return cells
    raise ConfigError(
        f"axes.{axis} must be a non-empty list of values (of the key {axis}) "
        f"or a mapping of labels to overrides, got {spec!r}"
    )


def _label(value: Any) -> str:
    """A file-name-safe label for an axis value (an id like ``txrl/TMaze-v0`` gives ``TMaze-v0``)."""
    text = value.rsplit("/", 1)[-1] if isinstance(value, str) else json.dumps(value)
    return re.sub(r"[^\w.+=-]+", "-", text).strip("-") or "value"


def load_compare_config(path: str | Path, overrides: Sequence[str] = ()) -> CompareConfig:
    """Read a compare config; ``base:`` may be a path (relative to the file) to a training config."""
    path = Path(path)
    data = read_yaml(path)
    if isinstance(data.get("base"), str):
        data["base"] = read_yaml(path.parent / data["base"])
    data = apply_overrides(data, overrides)
    if data.get("name") is None:
        data["name"] = path.stem
    config = from_mapping(CompareConfig, data)
    config.variants()  # checks every cell now, before anything runs
    return config
