"""The sections of a training config, and the config itself ([`TrainConfig`][txrl.config.sections.TrainConfig]).

A training config (every section and key optional; the defaults and their meaning are the
fields below)::

    name: quickstart            # names the run directory
    algo: ppo                   # a learner of txrl.learners: ppo | vmpo | recurrent_ppo
    seed: 0
    budget: 80000               # total env steps
    env:    {id: txrl/TMazePassive-v0, kwargs: {length: 10}, n_envs: 8}
    policy: {backbone: gtrxl, gate: gru, d_model: 32, n_layers: 1, memory_length: 16}
    ppo:    {learning_rate: 5.0e-4, n_steps: 64, segment_length: 16, ...}
    eval:   {every: 5000, episodes: 32}
    checkpoint: {every: 10000, keep: 2}
    runtime: {device: cpu, progress_bar: true}

The section named after ``algo`` holds the learner's settings, read into
[`TrainConfig.learner_settings`][txrl.config.sections.TrainConfig.learner_settings]: the fields of its settings dataclass, declared once in
the learner's folder (``ppo``: [`txrl.learners.ppo.settings.MemoryPPOSettings`][txrl.learners.ppo.settings.MemoryPPOSettings],
``vmpo``: [`txrl.learners.vmpo.settings.VMPOSettings`][txrl.learners.vmpo.settings.VMPOSettings], ``recurrent_ppo``:
[`txrl.learners.recurrent_ppo.settings.RecurrentPPOSettings`][txrl.learners.recurrent_ppo.settings.RecurrentPPOSettings]).

Parsing checks keys, types, ranges and how fields fit together, and needs no torch; the
checks that need an env, a built backbone or the device are `txrl.run.preflight`'s.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from txrl.backbones import shared_settings
from txrl.errors import ConfigError
from txrl.learners import get_learner, learner_names
from txrl.schema import (
    Interval,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    _build,
    to_plain,
)


@dataclass(frozen=True)
class EnvConfig:
    """The training environment."""

    id: str = "txrl/TMaze-v0"
    """A registered Gymnasium id; the txrl tasks are ``txrl/...`` (see [`txrl.envs`][txrl.envs])."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``gym.make(id, **kwargs)``, e.g. ``{length: 10}`` for the T-maze."""
    n_envs: PositiveInt = 8
    """Envs stepped in parallel; each carries its own memory."""
    vec_env: Literal["dummy", "subproc"] = "dummy"
    """``dummy``: all envs in the training process (exact resume: their state is checkpointed);
    ``subproc``: one process per env (in-flight episodes restart on resume)."""
    previous_action_reward: bool = False
    """Feed the previous action and reward to the agent with each observation, as the GTrXL
    and V-MPO agents receive them (`txrl.envs.PreviousActionReward`)."""
    time_feature: bool = False
    """Append the fraction of the episode's step limit left to each observation (sb3-contrib's
    ``TimeFeatureWrapper``, after Pardo et al. 2018, "Time Limits in Reinforcement Learning").
    In a fixed-length episode the return left depends on how far the episode has gone, which
    a memory shorter than the episode cannot count, so the critic cannot fit it without this.
    1-D ``Box`` observations only."""
    time_feature_steps: PositiveInt | None = None
    """The step limit the time feature counts down from; ``null``: the env's own
    (``spec.max_episode_steps``, else POPGym's ``max_episode_length``, else the T-maze's and
    MiniGrid's ``max_steps``). Only with ``time_feature: true``."""
    normalize_obs: bool = False
    """Wrap the envs in SB3's ``VecNormalize`` for observations (statistics are checkpointed)."""
    normalize_reward: bool = False
    """Wrap the envs in SB3's ``VecNormalize`` for rewards (training only, never evaluation)."""


@dataclass(frozen=True)
class PolicyConfig:
    """The memory policy: a backbone from [`txrl.make_backbone`][txrl.make_backbone] with actor and critic heads.

    Settings left ``null`` take the backbone's own default. A setting the chosen backbone does
    not have (``gate`` for ``lstm``) is an error, unless ``inapplicable: drop`` clears it.
    With ``algo: recurrent_ppo`` the backbone is sb3-contrib's LSTM: ``hidden_size`` (or
    ``d_model``), ``n_layers`` and ``net_arch`` apply.
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
    observations, ``cnn`` for images as SB3 sees them (uint8 pixels, e.g. Memory Gym's 84x84
    frames), else ``mlp`` (MiniGrid's 7x7x3 codes included: the memory policies embed them
    with `txrl.sb3.extractors.SymbolicGridExtractor`)."""
    encoder_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the encoder's class (SB3's ``features_extractor_kwargs``), e.g.
    ``{features_dim: 128, pooled: true}`` for `txrl.sb3.extractors.SymbolicGridExtractor`,
    the encoder of MiniGrid-style views; a keyword the class does not take is an error."""
    predict_past: tuple[NonNegativeInt, ...] = ()
    """Steps back whose encoded observation the memory output must predict, an auxiliary
    loss (``past_prediction``, see [`txrl.sb3.policies.MemoryActorCriticPolicy`][txrl.sb3.policies.MemoryActorCriticPolicy])
    weighted by the learner's ``aux_loss_coef``; e.g. ``[1, 2, 4, 8, 16]``. Each offset must
    be below the learner's ``segment_length``; empty: no such loss (txrl's memory learners
    only)."""
    reconstruct_observation: bool = False
    """Decode each step's observation from the memory output, an auxiliary loss
    (``observation_reconstruction``, see `txrl.sb3.reconstruction`) weighted by the
    learner's ``aux_loss_coef``: pixels for images, codes for MiniGrid-style views, the vector
    otherwise; its gradient trains the encoder and the memory too. The loss Memory Gym's
    Transformer-XL agents needed (txrl's memory learners only)."""
    critic_memory: Literal["shared", "separate"] | None = None
    """Whether the critic reads the actor's memory (``shared``) or a memory of its own, a
    second backbone of the same settings (``separate``: twice the backbone's cost).
    ``null``: the learner's default, ``shared`` for txrl's memory policies and ``separate``
    for ``recurrent_ppo`` (sb3-contrib's default; ``shared`` there is its ``shared_lstm``)."""
    training_precision: Literal["fp32", "bf16"] = "fp32"
    """Precision of the training pass of txrl's memory learners: ``bf16`` runs the trunk's
    products under bfloat16 autocast (weights, heads and optimizer stay fp32; acting is
    always fp32). For GPUs and CPUs with bf16 units; the training pass then matches the
    acting pass to about 1e-2, not 1e-5 (see MemoryActorCriticPolicy)."""
    inapplicable: Literal["error", "drop"] = "error"
    """What to do with settings the chosen backbone does not have (``gate`` or ``n_heads``
    for ``lstm``): ``error`` names them all; ``drop`` clears them, so switching backbone is
    one override: ``--set policy.backbone=lstm --set policy.inapplicable=drop``."""

    #: Settings of the backbone that are fields here, passed on when not null: those the
    #: backbones' records share (:func:`txrl.backbones.shared_settings`); the tests check that
    #: each has its field above.
    BACKBONE_FIELDS: typing.ClassVar[tuple[str, ...]] = shared_settings()

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
        if self.encoder_kwargs:
            kwargs["features_extractor_kwargs"] = dict(self.encoder_kwargs)
        if self.training_precision != "fp32":
            kwargs["training_precision"] = self.training_precision
        if self.predict_past:
            kwargs["predict_past"] = list(self.predict_past)
        if self.reconstruct_observation:
            kwargs["reconstruct_observation"] = True
        if self.critic_memory is not None:
            kwargs["critic_memory"] = self.critic_memory
        if self.net_arch is not None:
            kwargs["net_arch"] = (
                list(self.net_arch)
                if isinstance(self.net_arch, tuple)
                else {k: list(v) for k, v in self.net_arch.items()}
            )
        return kwargs


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
    save_best: bool = True
    """Keep the model of the best evaluation so far as ``checkpoints/best.zip`` (scored by
    success rate where the env reports one, else mean return; a tie keeps the earlier one).
    ``txrl eval RUN --best`` evaluates it. Training that solves a task and later loses it
    still leaves the solved model."""
    stop_at: float | None = None
    """End the run early once ``stop_after`` evaluations in a row score at least this
    (success rate where the env reports one, else mean return): it finishes there, final
    checkpoint and all, as if its budget were spent. For screens and time-to-solve studies;
    a run stopped so says nothing of whether it would have held the score. ``null``: train
    the whole budget. A stopped run resumed with a larger budget stops again at its next
    evaluation that still scores it."""
    stop_after: PositiveInt = 2
    """Evaluations in a row at ``stop_at`` or above that end the run."""
    warn_drop: PositiveFloat | None = 0.2
    """Warn (a line on stderr and the text ``eval/warning`` in TensorBoard, naming
    ``checkpoints/best.zip`` and ``txrl eval --best``) when a periodic evaluation scores more
    than this below the run's best so far, beyond noise (its 95% interval wholly below the
    best's): training has lost what it learned. Once per fall; the next warning waits for a
    new best. In the score's units (success rate, else mean return): 0.2 suits success rates
    and returns on [-1, 1] such as POPGym's; scale it for other returns. Every evaluation
    logs its distance to the best as ``eval/drop_from_best``. ``null``: no warning."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the eval envs that replace those of ``env.kwargs`` (periodic
    evaluations, ``txrl eval``, ``txrl inspect``), to judge on another setting of the task
    than the one trained on, e.g. ``{min_length: null}``: every T-maze corridor at
    ``env.kwargs.length``; a null value gives the env's own default."""


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


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run needs; one YAML file."""

    name: str | None = None
    """Name of the run (prefix of its directory); ``null``: the config file's stem."""
    algo: str = "ppo"
    """Learner, a name of [`txrl.learners.learner_names`][txrl.learners.learner_names]: ``ppo`` (txrl.MemoryPPO),
    ``vmpo`` (txrl.VMPO), ``recurrent_ppo`` (sb3-contrib's RecurrentPPO with its LSTM);
    the section of the same name holds its settings."""
    seed: NonNegativeInt = 0
    """Seed of torch, numpy, python and the envs."""
    budget: PositiveInt = 100_000
    """Total env steps (summed over envs); training stops at the first rollout past it."""
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    learner_settings: Any = field(default=None, metadata={"yaml": False})
    """The chosen learner's settings, its settings dataclass
    (`txrl.learners.Learner.settings`): the YAML section named after ``algo``
    (``ppo:``); ``None`` when constructed: that learner's defaults."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)

    def __post_init__(self) -> None:
        if self.learner_settings is None:
            object.__setattr__(self, "learner_settings", get_learner(self.algo).settings())

    @classmethod
    def from_dict(cls, data: Any) -> TrainConfig:
        """Build and check a config: keys, types, ranges and how fields fit together.

        Every problem is reported at once. Needs no torch: the checks that need the
        backbone registry or the env (and the device) are [`txrl.run.preflight.resolve`][txrl.run.preflight.resolve]'s,
        which training runs once before it starts.
        """
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ConfigError(f"the config must be a mapping of settings, got {data!r}")
        names = learner_names()
        problems: list[str] = []
        data = dict(data)
        algo: str | None = data.pop("algo", "ppo")
        if algo not in names:
            problems.append(f"algo must be one of {', '.join(map(repr, names))}, got {algo!r}")
            algo = None
        sections = {name: data.pop(name) for name in names if name in data}
        for other, section in sections.items():
            # another learner's section left null counts as absent, so that one variant of a
            # comparison grid can drop the section its base gives the other variants
            if algo is not None and other != algo and section is not None:
                problems.append(
                    f"section {other}: is for algo {other!r} but algo is {algo!r}; "
                    f"remove it (in a grid's variant: {other}: null) or set algo: {other}"
                )
        config = _build(cls, data, "", problems)
        if algo is not None:
            settings: Any = _build(get_learner(algo).settings, sections.get(algo), algo, problems)
            config = dataclasses.replace(config, algo=algo, learner_settings=settings)
        if not problems:
            problems += config.problems()
        if problems:
            raise ConfigError(problems)
        return config

    def to_dict(self) -> dict[str, Any]:
        """Plain data that `from_dict` reads back; the learner under its ``algo`` key."""
        data: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "learner_settings":
                data[self.algo] = to_plain(self.learner_settings)
            else:
                data[f.name] = to_plain(getattr(self, f.name))
        return data

    def problems(self) -> list[str]:
        """What is wrong across fields (each field itself being valid), one line per problem."""
        problems = [] if self.name is None else name_problems(self.name)
        learner = self.learner_settings
        n_steps = getattr(learner, "n_steps", None)
        batch_size = getattr(learner, "batch_size", None)
        if n_steps is not None and batch_size is not None:
            rollout = n_steps * self.env.n_envs
            if batch_size > rollout:
                problems.append(
                    f"{self.algo}.batch_size ({batch_size}) must be <= the rollout "
                    f"size {self.algo}.n_steps * env.n_envs = {rollout}"
                )
        # each learner's settings check themselves across their fields (the learner's
        # constructor runs the same check)
        learner_problems = getattr(learner, "problems", None)
        if learner_problems is not None:
            problems += learner_problems(f"{self.algo}.")
        if self.eval.stop_at is not None and self.eval.every == 0:
            problems.append(
                "eval.stop_at needs periodic evaluations to stop at: eval.every is 0 (only the "
                "final evaluation); set eval.every > 0 or eval.stop_at: null"
            )
        if self.runtime.device not in ("cpu", "auto") and not re.fullmatch(
            r"cuda(:\d+)?|mps", self.runtime.device
        ):
            problems.append(
                f"runtime.device must be cpu, auto, cuda, cuda:N or mps, got {self.runtime.device!r}"
            )
        if self.env.time_feature_steps is not None and not self.env.time_feature:
            problems.append(
                "env.time_feature_steps is the time feature's step limit, but env.time_feature "
                "is false; set env.time_feature: true or env.time_feature_steps: null"
            )
        if isinstance(self.policy.net_arch, dict) and set(self.policy.net_arch) - {"pi", "vf"}:
            problems.append(
                "policy.net_arch as a mapping takes the keys pi and vf, "
                f"got {', '.join(self.policy.net_arch)}"
            )
        return problems


#: The longest run name in bytes (UTF-8): the run directory ``<name>-<date>-<time>`` must
#: stay within a file system's 255-byte names.
MAX_NAME_BYTES = 200


def name_problems(name: str) -> list[str]:
    """What is wrong with a run's ``name``, which names its directory: as a compare label,
    one path component (no ``/``, ``\\`` or control characters) of a bounded length. The
    message quotes only the name's start, however long it is."""
    size = len(name.encode())
    if 0 < size <= MAX_NAME_BYTES and not re.search(r"[/\\\x00-\x1f\x7f]", name):
        return []
    shown = repr(name) if len(name) <= 60 else f"{name[:60]!r}... ({size} bytes)"
    return [
        f"name must be 1 to {MAX_NAME_BYTES} bytes with no /, \\ or control characters (it "
        f"names the run directory, runs/<name>-<date>-<time>), got {shown}"
    ]


#: Keys ``txrl train --resume RUN_DIR --set KEY=VALUE`` may change: how long and how the run
#: goes on, never what it has learned so far.
RESUME_KEYS: tuple[str, ...] = ("budget", "eval", "checkpoint", "runtime")


def changed_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two plain configs."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        keys = sorted(set(old) | set(new))
        return [d for k in keys for d in changed_keys(old.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if old == new else [prefix.rstrip(".")]


def changed_outside(old: TrainConfig, new: TrainConfig, sections: Sequence[str]) -> list[str]:
    """Dotted keys whose values differ between ``old`` and ``new`` outside the top-level
    keys ``sections``."""
    changed = changed_keys(old.to_dict(), new.to_dict())
    return [k for k in changed if k.split(".")[0] not in sections]


def check_resume_changes(old: TrainConfig, new: TrainConfig) -> None:
    """Raise ConfigError unless ``new`` differs from ``old`` only in `RESUME_KEYS`."""
    fixed = changed_outside(old, new, RESUME_KEYS)
    if fixed:
        raise ConfigError(
            f"a resumed run keeps what it learned with: cannot change {', '.join(fixed)}; "
            f"--resume takes --set for {', '.join(k + ('' if k == 'budget' else '.*') for k in RESUME_KEYS)}"
        )
