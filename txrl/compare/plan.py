"""Planning a comparison: the grid's runs, where they live, which are done, which to run.

A compare config expands into one `RunSpec` per variant and seed, each an ordinary
training run in ``OUT/runs/<variant>/seed_<s>/``. A run's status comes from its directory
alone (``finished``: its final checkpoint exists; ``partial``: a checkpoint to resume from;
``new``), so a re-invoked comparison skips and resumes without any state of its own.
``--only`` selects part of the grid (`select_runs`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from txrl.config import CONFIG_FILE, CompareConfig, ConfigError, TrainConfig
from txrl.run.checkpoint import latest_checkpoint
from txrl.run.preflight import resolve
from txrl.run.run_files import finished_run

#: Each run's console output (its progress lines and any traceback), in its run directory.
TRAIN_LOG = "train.log"


@dataclass(frozen=True)
class RunSpec:
    """One run of a comparison: which variant, which seed, where."""

    variant: str
    labels: tuple[tuple[str, str], ...]  # ((axis, label), ...)
    seed: int
    config: dict[str, Any]  # TrainConfig.to_dict() of this run
    run_dir: str  # absolute
    until: int | None = None  # pause at this step (txrl.run.train.train's ``until``)

    def status(self) -> str:
        """``finished``, ``partial`` (has a checkpoint to resume) or ``new``."""
        run_dir = Path(self.run_dir)
        if finished_run(run_dir):
            return "finished"
        if (run_dir / CONFIG_FILE).exists() and latest_checkpoint(run_dir) is not None:
            return "partial"
        return "new"


def plan(config: CompareConfig, out_dir: Path) -> list[RunSpec]:
    """Every run of the grid, in grid order (variants outer, seeds inner).

    Each run trains with one torch thread and no console tables; its progress goes to its
    ``train.log`` as a line every ``runtime.progress_every`` seconds (the log is not a
    terminal, so `txrl.run.callbacks.Progress` writes lines, not a bar). A run directory that
    holds a run of another config is an error (nothing is overwritten).
    """
    variants = config.variants()
    problems = []
    for variant in variants:  # the checks that build a backbone and an env, once per variant
        try:
            resolve(variant.config)
        except ConfigError as e:
            problems += [f"variant {variant.name}: {p}" for p in e.problems]
    if problems:
        raise ConfigError(problems)
    specs = []
    for variant in variants:
        for seed in config.seeds:
            data = variant.config.to_dict()
            data["seed"] = seed
            data["runtime"].update(torch_threads=1, progress_bar=True, verbose=0)
            run_dir = (out_dir / "runs" / variant.name / f"seed_{seed}").resolve()
            spec = RunSpec(variant.name, variant.labels, seed, data, str(run_dir))
            _check_same_config(spec)
            specs.append(spec)
    return specs


def launch_order(
    specs: Sequence[RunSpec], seeds: Sequence[int], status: Mapping[str, str]
) -> list[RunSpec]:
    """The order ``specs`` start in: half-done runs first (they resume from their checkpoint),
    then seed by seed, every variant's first seed before any variant's second (grid order
    within a seed). A study stopped part-way, or cut short by its compute, so holds whole
    seeds: its variants compare on the same seeds. ``status``: `RunSpec.status` by
    run directory. Reports keep grid order; only the launch order changes."""
    rank = {seed: i for i, seed in enumerate(seeds)}
    return sorted(specs, key=lambda s: (status.get(s.run_dir) != "partial", rank[s.seed]))


#: Settings that change what a run prints, not what it learns: a run directory written with
#: other values (runs planned before compare logged progress) is still the same run.
DISPLAY_KEYS = frozenset({"runtime.progress_bar", "runtime.progress_every", "runtime.verbose"})


def _check_same_config(spec: RunSpec) -> None:
    path = Path(spec.run_dir) / CONFIG_FILE
    if not path.exists():
        return
    stored = yaml.safe_load(path.read_text())
    with contextlib.suppress(ConfigError):
        # as this version reads it: a setting added since the run started takes its default
        stored = TrainConfig.from_dict(stored).to_dict()
    changed = sorted(set(_diff(stored, spec.config)) - DISPLAY_KEYS)
    if changed:
        raise ConfigError(
            f"{spec.run_dir} holds a run of a different config (changed: {', '.join(changed)}); "
            "delete it or choose another output directory (--out)"
        )


def _diff(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        return [d for k in keys for d in _diff(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [prefix.rstrip(".")]


def parse_only(texts: Sequence[str]) -> dict[str, set[str]]:
    """``["model=gtrxl,lstm", "seed=0"]`` -> ``{"model": {"gtrxl", "lstm"}, "seed": {"0"}}``."""
    only: dict[str, set[str]] = {}
    for text in texts:
        key, sep, labels = text.partition("=")
        values = {v.strip() for v in labels.split(",") if v.strip()}
        if not sep or not key.strip() or not values:
            raise ConfigError(
                f"--only takes AXIS=LABEL[,LABEL...] (or seed=N[,N...]), got {text!r}"
            )
        only.setdefault(key.strip(), set()).update(values)
    return only


def select_runs(
    config: CompareConfig, specs: Sequence[RunSpec], only: Mapping[str, set[str]]
) -> list[RunSpec]:
    """The runs of ``specs`` whose label on each axis of ``only`` (and seed, under the key
    ``seed``) is one of those given; an unknown axis or label is an error naming the valid ones."""
    valid: dict[str, set[str]] = {"seed": {str(seed) for seed in config.seeds}}
    for spec in specs:
        for axis, label in spec.labels:
            valid.setdefault(axis, set()).add(label)
    problems = []
    for key, labels in only.items():
        if key not in valid:
            problems.append(f"--only: no axis {key!r}; axes: {', '.join(sorted(valid))}")
        elif labels - valid[key]:
            problems.append(
                f"--only {key}: no label {', '.join(sorted(labels - valid[key]))}; "
                f"valid: {', '.join(sorted(valid[key]))}"
            )
    if problems:
        raise ConfigError(problems)

    def wanted(spec: RunSpec) -> bool:
        labels = {**dict(spec.labels), "seed": str(spec.seed)}
        return all(labels[key] in allowed for key, allowed in only.items())

    return [spec for spec in specs if wanted(spec)]
