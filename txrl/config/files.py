"""Config files and ``--set`` overrides: YAML in, checked config out.

``--set KEY=VALUE`` takes a dotted key and a YAML value (``--set env.kwargs={length: 20}``),
applied to the file's data before it is checked, so an override is checked like the file.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from txrl.config.sections import TrainConfig, changed_outside, check_resume_changes
from txrl.errors import ConfigError, RunError
from txrl.learners import get_learner, learner_names
from txrl.schema import to_plain


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error: the
    plain loader keeps the last value silently, so a setting written twice (``budget:`` at
    the top and again further down) would lose the first without a word."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)  # merge keys (<<) may repeat what they merge
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if isinstance(key, Hashable) and key in seen:
                raise ConfigError(
                    f"{self.name}: key {key!r} appears twice in one mapping (line {seen[key]} "
                    f"and line {line}); the last would silently win: keep one of them"
                )
            if isinstance(key, Hashable):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


#: The most values a YAML document may hold once its aliases are expanded. A config holds a
#: few hundred; the bound refuses an alias bomb (a few hundred bytes of aliases of aliases
#: that expand to billions of values when the config is copied) before anything expands it.
MAX_YAML_VALUES = 100_000


def load_yaml(text: str, name: str = "<string>") -> Any:
    """``yaml.safe_load`` of ``text`` (named ``name`` in messages), rejecting duplicate keys
    and aliases that expand past `MAX_YAML_VALUES` values or refer to themselves."""
    loader = _UniqueKeyLoader(text)
    loader.name = name
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded_size(node, name)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_expanded_size(root: yaml.Node, name: str) -> None:
    """Raise ConfigError when the document of ``root`` would hold more than
    `MAX_YAML_VALUES` values with every alias expanded, or an alias inside its own
    anchor. An alias is the very node its anchor named, so the graph is walked with one
    count per node (linear in the text), not one per expanded copy."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise ConfigError(
                f"{name}: an alias inside its own anchor refers to itself (the anchor on line "
                f"{node.start_mark.line + 1}); a config holds plain values: write them out"
            )
        open_nodes.add(key)
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        total = 1 + sum(size(child) for child in children)
        open_nodes.discard(key)
        sizes[key] = total
        if total > MAX_YAML_VALUES:
            raise ConfigError(
                f"{name}: its aliases expand to more than {MAX_YAML_VALUES:,} values (aliases "
                "of aliases multiply); a config needs no such size: write the values out or "
                "use fewer nested aliases"
            )
        return total

    size(root)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing or binary file, bad YAML, a key given twice or a
    non-mapping is a ConfigError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{path} is not a text file (byte {e.object[e.start]:#04x} at offset {e.start} is "
            "not UTF-8); a config is a YAML text file (start from configs/quickstart.yaml)"
        ) from None
    try:
        data = load_yaml(text, str(path))
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
        value = load_yaml(raw, f"--set {key}") if raw.strip() else None
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


def load_train_config(
    path: str | Path,
    overrides: Sequence[str] = (),
    *,
    warn: Callable[[str], None] | None = None,
) -> TrainConfig:
    """Read, override and check a training config; ``name`` defaults to the file's stem.

    ``--set algo=NAME`` switches learner: the file's section of its own learner (``ppo:``)
    is then dropped, so the new learner starts from its defaults plus any ``--set NAME.KEY``.
    Dropping it is what a switch from the command line is for (the same file trains either
    learner; an error would force editing the file), but it is never silent: ``warn`` (a
    line on stderr by default) names the section, its keys and how to carry them over.
    """
    warn = warn or _warn
    data = read_yaml(path)
    algos = [value for key, value in map(parse_override, overrides) if key == "algo"]
    if algos:
        for other in learner_names():
            dropped = data.pop(other, None) if other != algos[-1] else None
            if isinstance(dropped, Mapping) and dropped:
                warn(_dropped_section_note(other, str(algos[-1]), dropped))
    data = apply_overrides(data, overrides)
    if data.get("name") is None:
        data["name"] = Path(path).stem
    return TrainConfig.from_dict(data)


def _dropped_section_note(section: str, algo: str, dropped: Mapping[str, Any]) -> str:
    note = f"--set algo={algo} drops the file's {section}: section ({', '.join(map(str, dropped))})"
    if algo not in learner_names():
        return note  # the unknown algo is reported as an error of its own
    own = {f.name for f in dataclasses.fields(get_learner(algo).settings)}
    shared = [str(k) for k in dropped if k in own]
    if not shared:
        return f"{note}; {algo} starts from its defaults"
    example = " ".join(f"--set {algo}.{k}={_flow(dropped[k])}" for k in shared)
    return f"{note}; {algo} starts from its defaults; to keep the values it shares, add: {example}"


def _flow(value: Any) -> str:
    """``value`` as a one-line YAML value for ``--set``."""
    return (
        yaml.safe_dump(value, default_flow_style=True, width=10**6)
        .strip()
        .removesuffix("\n...")
        .removesuffix("...")
        .strip()
    )


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


#: The resolved config in a run directory (see :mod:`txrl.run.run_dir`).
CONFIG_FILE = "config.yaml"


def read_run_config(run_dir: str | Path) -> TrainConfig:
    """The resolved config of a run directory."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise RunError(f"{run_dir} is not a txrl run directory (no {CONFIG_FILE})")
    return TrainConfig.from_dict(load_yaml(path.read_text(), str(path)))


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(to_plain(data), sort_keys=False, default_flow_style=False)


def resume_config(stored: TrainConfig, overrides: Sequence[str]) -> TrainConfig:
    """A run's config with ``--set`` overrides for a resume (only `RESUME_KEYS`)."""
    config = TrainConfig.from_dict(apply_overrides(stored.to_dict(), overrides))
    check_resume_changes(stored, config)
    return config


def judge_config(stored: TrainConfig, overrides: Sequence[str]) -> TrainConfig:
    """A checkpoint's config with ``txrl eval --set`` overrides: only ``eval.*`` keys, so
    that a trained agent can be judged on other env settings (``eval.env_kwargs.*``, which
    update ``env.kwargs`` for the eval envs) while what it was trained with stays as it was."""
    config = TrainConfig.from_dict(apply_overrides(stored.to_dict(), overrides))
    fixed = changed_outside(stored, config, ("eval",))
    if fixed:
        raise ConfigError(
            f"txrl eval judges the agent as trained: cannot change {', '.join(fixed)}; "
            "--set takes eval.* keys, e.g. --set eval.env_kwargs.length=3000 to play the "
            "envs with other keyword arguments"
        )
    return config
