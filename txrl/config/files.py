"""Config files and ``--set`` overrides: YAML in, checked config out.

``--set KEY=VALUE`` takes a dotted key and a YAML value (``--set env.kwargs={length: 20}``),
applied to the file's data before it is checked, so an override is checked like the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from txrl.config.schema import to_plain
from txrl.config.sections import TrainConfig, check_resume_changes
from txrl.errors import ConfigError, RunError


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
            "(start from configs/quickstart.yaml; every key is documented in txrl/config/sections.py and txrl/learners/)"
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
    data = deep_copy(data)
    for text in overrides:
        set_dotted(data, *parse_override(text))
    return data


def deep_copy(data: Any) -> Any:
    if isinstance(data, Mapping):
        return {k: deep_copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [deep_copy(v) for v in data]
    return data


def load_train_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read, override and check a training config; ``name`` defaults to the file's stem.

    ``--set algo=NAME`` switches learner: the file's section of its own learner (``ppo:``)
    is then dropped, so the new learner starts from its defaults plus any ``--set NAME.KEY``.
    """
    data = read_yaml(path)
    algos = [value for key, value in map(parse_override, overrides) if key == "algo"]
    if algos:
        from txrl.learners import learner_names

        for other in learner_names():
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


def resume_config(stored: TrainConfig, overrides: Sequence[str]) -> TrainConfig:
    """A run's config with ``--set`` overrides for a resume (only :data:`RESUME_KEYS`)."""
    config = TrainConfig.from_dict(apply_overrides(stored.to_dict(), overrides))
    check_resume_changes(stored, config)
    return config
