"""Compare grids (``txrl compare``): a base training config times axes of overrides, times seeds."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from txrl.config.checks import check_policy, inapplicable_note
from txrl.config.files import apply_overrides, deep_copy, read_yaml, set_dotted
from txrl.config.sections import TrainConfig
from txrl.errors import ConfigError
from txrl.schema import NonNegativeInt, PositiveInt, from_mapping


@dataclass(frozen=True)
class Variant:
    """One cell of a compare grid: a label per axis and the base config it overrides."""

    labels: tuple[tuple[str, str], ...]  # ((axis, label), ...) in axis order
    config: TrainConfig  # with seed 0; runs replace the seed

    @property
    def name(self) -> str:
        return "__".join(label for _, label in self.labels) or "base"


@dataclass(frozen=True)
class ReferenceConfig:
    """Published scores to rank a grid's variants against (e.g. Parisotto et al. 2019, Table 1).

    With ``scores`` given, results.md compares our ranking of the labels of ``axis`` (by the
    IQM of the final metric) with the reference's: Kendall's τ with its bootstrap CI and
    the probability of improvement between pairs (Agarwal et al. 2021). Labels without a
    reference score are listed and left out of τ. YAML::

        reference:
          name: Parisotto et al. 2019, Table 1 (DMLab-30, human-normalised)
          axis: memory
          scores: {gru: 117.6, output: 112.8, residual: 107.0, lstm: 99.3}
    """

    name: str | None = None
    """Where the scores come from (a citation), shown in results.md."""
    scores: dict[str, float] = field(default_factory=dict)
    """Label of ``axis`` -> reference score, higher is better; empty: no reference section."""
    axis: str | None = None
    """Axis whose labels ``scores`` names; ``null``: the one axis other than ``panels``."""
    pairs: Literal["adjacent", "best"] = "adjacent"
    """Probability-of-improvement pairs: neighbours in the reference order (``adjacent``), or
    the reference's best label against each other one (``best``)."""

    def resolved_axis(self, axes: Sequence[str], panels: str | None) -> str:
        """The axis the scores name, checked against the grid; raises ConfigError."""
        others = [a for a in axes if a != panels]
        if self.axis is None:
            if len(others) != 1:
                raise ConfigError(
                    "reference.axis must name the axis whose labels reference.scores names "
                    f"(axes besides panels: {', '.join(others) or 'none'})"
                )
            return others[0]
        if self.axis not in others:
            raise ConfigError(
                f"reference.axis must name an axis other than panels ({', '.join(others) or 'none'}), "
                f"got {self.axis!r}"
            )
        if len(others) != 1:
            rest = [a for a in others if a != self.axis]
            raise ConfigError(
                f"reference: the grid also varies {', '.join(rest)}; the ranking compares the "
                "labels of one axis (per panel), so a grid with a reference may have only "
                "reference.axis and panels"
            )
        return self.axis


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
        reference:                    # optional: published scores to rank against
          name: Parisotto et al. 2019, Table 1
          scores: {gru: 117.6, input: 51.2}
    """

    name: str | None = None
    """Names the output directory (``runs/<name>``); ``null``: the file's stem."""
    base: dict[str, Any] = field(default_factory=dict)
    """The training config every variant starts from."""
    seeds: tuple[NonNegativeInt, ...] = (0, 1, 2)
    """Seeds run for every variant."""
    axes: dict[str, Any] = field(default_factory=dict)
    """Axis name -> list of values (the name is a dotted key) or mapping label -> overrides.

    A mapping given for a whole section (``env: {n_envs: 4}``) updates the base's section
    key by key, as the dotted keys (``env.n_envs: 4``) would.
    """
    metric: Literal["success_rate", "mean_return"] = "success_rate"
    """Evaluation metric the results and plots summarise."""
    score: Literal["final", "mean"] = "final"
    """What of each run is compared: ``final``, the metric at the end of the budget; ``mean``,
    its mean over all of the run's evaluations (the area under the learning curve over its
    length), which also ranks by how soon a variant learns, not only where it ends."""
    threshold: float = 0.9
    """Level of ``metric`` for the steps-to-threshold column."""
    panels: str | None = None
    """Axis whose labels get one learning-curve panel each; ``null``: one panel."""
    workers: PositiveInt | None = None
    """Runs in parallel; ``null``: the number of CPU cores."""
    reference: ReferenceConfig = field(default_factory=ReferenceConfig)
    """Published scores of the labels of one axis; results.md then ranks against them."""
    bootstrap_reps: PositiveInt = 2000
    """Resamples of every stratified-bootstrap interval in the summaries."""

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
        if self.reference.scores:
            self._check_reference(dict(zip(self.axes, cells, strict=True)))
        variants, problems = [], []
        for combo in itertools.product(*cells):
            data = deep_copy(self.base)
            nulled = []
            for _, _, overrides in combo:
                for key, value in overrides.items():
                    if key == "seed" or key.startswith("seed."):
                        raise ConfigError("an axis cannot set seed; list the seeds under seeds:")
                    if value is None and "." not in key:
                        nulled.append(key)
                    _apply_override(data, key, deep_copy(value))
            labels = tuple((axis, label) for axis, label, _ in combo)
            data["seed"] = 0
            name = "__".join(label for _, label in labels) or "base"
            data["name"] = name
            where = ", ".join(f"{a}={lab}" for a, lab in labels) or "the base config"
            wrong = _nulled_section_problems(nulled, data.get("algo", "ppo"))
            if wrong:
                problems += [f"variant {where}: {p}" for p in wrong]
                continue
            try:
                config = TrainConfig.from_dict(data)
            except ConfigError as e:
                problems += [f"variant {where}: {p}" for p in e.problems]
                continue
            policy, wrong = check_policy(config.policy)
            problems += [f"variant {where}: {p}" for p in wrong]
            variants.append(Variant(labels, dataclasses.replace(config, policy=policy)))
        if problems:
            raise ConfigError(problems, note=inapplicable_note(problems))
        names = [v.name for v in variants]
        if len(set(names)) != len(names):
            raise ConfigError(f"two variants share a name; labels must be unique per axis: {names}")
        return variants

    def _check_reference(self, cells: dict[str, list[tuple[str, str, dict[str, Any]]]]) -> None:
        axis = self.reference.resolved_axis(list(self.axes), self.panels)
        labels = [label for _, label, _ in cells[axis]]
        unknown = [key for key in self.reference.scores if key not in labels]
        if unknown:
            raise ConfigError(
                f"reference.scores names {', '.join(map(repr, unknown))}, not labels of axis "
                f"{axis}; valid: {', '.join(labels)}"
            )
        if len(self.reference.scores) < 3:
            raise ConfigError(
                f"reference.scores must score at least 3 labels of axis {axis} "
                f"(Kendall's tau needs 3), got {len(self.reference.scores)}"
            )


def _apply_override(data: dict[str, Any], key: str, value: Any) -> None:
    """Set one override of a grid cell; a mapping given for a whole section updates it.

    ``env: {previous_action_reward: true}`` then changes that key and keeps the base's
    ``env.id``, as ``env.previous_action_reward: true`` does, instead of replacing the section
    and dropping every key the base set there. Inside a section each key is set as given, so
    ``env: {kwargs: {}}`` still clears the constructor's arguments; ``null`` replaces.
    """
    section = data.get(key) if "." not in key else None
    if isinstance(value, Mapping) and isinstance(section, dict):
        for sub, sub_value in value.items():
            set_dotted(section, str(sub), sub_value)
    else:
        set_dotted(data, key, value)


#: The sections of a training config besides the learner's (``env:``, ``policy:``, ...).
SECTIONS = tuple(
    f.name for f in dataclasses.fields(TrainConfig) if f.default_factory is not dataclasses.MISSING
)


def _nulled_section_problems(nulled: list[str], algo: Any) -> list[str]:
    """A grid cell's ``SECTION: null`` that a variant trains with: ``null`` replaces the
    whole section, so the run would take the library's defaults there (another env, another
    rollout length) with no word. Only another learner's section may be dropped so, as the
    documented ``ppo: null`` of a variant with another ``algo`` does."""
    problems = []
    for key in nulled:
        if key in SECTIONS or key == algo:
            learner = f", the section of its algo {algo}," if key == algo else ""
            problems.append(
                f"{key}: null resets the whole section {key}{learner} to the library's defaults, "
                f"dropping every key the base sets there; set the keys to change "
                f"({key}.KEY: value), or null one key ({key}.KEY: null); only another learner's "
                "section may be nulled (ppo: null in a variant with algo: vmpo)"
            )
    return problems


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
