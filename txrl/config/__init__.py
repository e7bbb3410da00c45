"""Experiment configs: typed, frozen dataclasses that YAML files and ``--set`` overrides fill.

One module per job:

* :mod:`txrl.config.schema`: the checker (YAML data -> frozen dataclass, every problem
  reported at once, each naming its dotted key and the valid form);
* :mod:`txrl.config.sections`: the sections of a training config and :class:`TrainConfig`
  (the learner's section is its settings dataclass from :mod:`txrl.learners`);
* :mod:`txrl.config.files`: YAML files, ``--set`` overrides, a run directory's config;
* :mod:`txrl.config.grid`: compare grids (:class:`CompareConfig`);
* :mod:`txrl.config.resolve`: the checks that need a built backbone, an env or torch, run
  once by training and ``txrl compare``.

The ``policy:`` section is checked against the backbone registry, :mod:`txrl.backbones`,
which holds each backbone's settings without torch.

Parsing imports no torch and builds no model or env.
"""

from txrl.config.files import (
    CONFIG_FILE,
    apply_overrides,
    dump_yaml,
    load_train_config,
    parse_override,
    read_run_config,
    read_yaml,
    resume_config,
    set_dotted,
)
from txrl.config.grid import CompareConfig, Variant, load_compare_config
from txrl.config.resolve import check_policy, resolve
from txrl.config.schema import Interval, from_mapping, to_plain
from txrl.config.sections import (
    RESUME_KEYS,
    CheckpointConfig,
    EnvConfig,
    EvalConfig,
    PolicyConfig,
    RuntimeConfig,
    TrainConfig,
    changed_keys,
    check_resume_changes,
)
from txrl.errors import ConfigError

__all__ = [
    "CONFIG_FILE",
    "RESUME_KEYS",
    "CheckpointConfig",
    "CompareConfig",
    "ConfigError",
    "EnvConfig",
    "EvalConfig",
    "Interval",
    "PolicyConfig",
    "RuntimeConfig",
    "TrainConfig",
    "Variant",
    "apply_overrides",
    "changed_keys",
    "check_policy",
    "check_resume_changes",
    "dump_yaml",
    "from_mapping",
    "load_compare_config",
    "load_train_config",
    "parse_override",
    "read_run_config",
    "read_yaml",
    "resolve",
    "resume_config",
    "set_dotted",
    "to_plain",
]
