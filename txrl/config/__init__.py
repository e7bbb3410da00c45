"""Experiment configs: typed, frozen dataclasses that YAML files and ``--set`` overrides fill.

One module per job:

* `txrl.config.sections`: the sections of a training config and [`TrainConfig`][txrl.config.TrainConfig]
  (the learner's section is its settings dataclass from [`txrl.learners`][txrl.learners]);
* `txrl.config.files`: YAML files, ``--set`` overrides, a run directory's config;
* `txrl.config.grid`: compare grids ([`CompareConfig`][txrl.config.CompareConfig]);
* `txrl.config.checks`: the checks against the registries of backbones and learners.

Every section is checked by `txrl.schema` (YAML data -> frozen dataclass, every problem
reported at once, each naming its dotted key and the valid form). The ``policy:`` section is
checked against the backbone registry, [`txrl.backbones`][txrl.backbones], and the learner's section is
its settings from [`txrl.learners`][txrl.learners]; both hold their settings without torch.

Parsing imports no torch and builds no model or env; the checks that need a built backbone,
an env or torch run once before training, in the run layer (`txrl.run.preflight`).
"""

from txrl.config.checks import check_learner, check_policy
from txrl.config.files import (
    CONFIG_FILE,
    apply_overrides,
    dump_yaml,
    judge_config,
    load_train_config,
    parse_override,
    read_run_config,
    read_yaml,
    resume_config,
    set_dotted,
)
from txrl.config.grid import CompareConfig, Variant, load_compare_config
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
from txrl.schema import Interval, from_mapping, to_plain

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
    "check_learner",
    "check_policy",
    "check_resume_changes",
    "dump_yaml",
    "from_mapping",
    "judge_config",
    "load_compare_config",
    "load_train_config",
    "parse_override",
    "read_run_config",
    "read_yaml",
    "resume_config",
    "set_dotted",
    "to_plain",
]
