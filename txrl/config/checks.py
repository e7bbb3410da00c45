"""The checks of a training config against the registries of backbones and learners.

Both registries are torch-free ([`txrl.backbones`][txrl.backbones], [`txrl.learners`][txrl.learners]), so these checks
build nothing: ``txrl compare`` runs [`check_policy`][txrl.config.checks.check_policy] on every variant of a grid while it
plans, and training's preflight ([`txrl.run.preflight.resolve`][txrl.run.preflight.resolve]) runs both before the
checks that build a backbone, make an env or ask torch for the device.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from txrl.backbones import backbone_config_class, backbone_names, setting_names
from txrl.config.sections import PolicyConfig, TrainConfig
from txrl.learners import get_learner, learners


def check_policy(policy: PolicyConfig) -> tuple[PolicyConfig, list[str]]:
    """The policy with inapplicable settings dropped (when asked), and what is wrong with it.

    Reads the backbone registry ([`txrl.backbones`][txrl.backbones], no torch) and builds nothing.
    """
    names = backbone_names()
    if policy.backbone not in names:
        return policy, [
            f"policy.backbone must be one of {', '.join(names)}, got {policy.backbone!r}"
        ]
    valid = [
        name
        for name in setting_names(backbone_config_class(policy.backbone))
        if name != "input_dim"
    ]
    extra = [key for key in policy.backbone_settings() if key not in valid]
    if policy.inapplicable == "drop" and extra:
        unset: dict[str, Any] = {k: None for k in extra if k in policy.BACKBONE_FIELDS}
        policy = dataclasses.replace(
            policy,
            **unset,
            backbone_kwargs={k: v for k, v in policy.backbone_kwargs.items() if k in valid},
        )
        extra = []
    problems = [
        f"{'policy' if key in policy.BACKBONE_FIELDS else 'policy.backbone_kwargs'}.{key} "
        f"does not apply to backbone {policy.backbone!r}; its settings: {', '.join(valid)}"
        for key in extra
    ]
    if "memory_length" in valid and policy.backbone_settings().get("memory_length") == 0:
        # The backbone modules accept 0, but an agent trained so remembers no past step:
        # never what a training config means.
        key = "policy.memory_length"
        if policy.memory_length != 0:
            key = "policy.backbone_kwargs.memory_length"
        problems.append(
            f"{key} must be >= 1 for backbone {policy.backbone!r} (the steps of memory each "
            "layer attends to; 0 leaves the agent no memory of past steps), got 0"
        )
    return policy, problems


def check_learner(config: TrainConfig, policy: PolicyConfig) -> list[str]:
    """What the learner of ``config.algo`` cannot train in ``policy``: a backbone it does not
    take, and the settings only txrl's memory learners have (training precision, the
    policy's own auxiliary losses)."""
    learner = get_learner(config.algo)
    problems = []
    if learner.backbones is not None and policy.backbone not in learner.backbones:
        problems.append(
            f"algo {config.algo} trains policy.backbone {' or '.join(learner.backbones)}, "
            f"got {policy.backbone!r} (with policy.inapplicable: drop the settings the new "
            "backbone does not have are cleared)"
        )
    memory_learners = ", ".join(n.name for n in learners() if n.trains_memory_policies)
    if not learner.trains_memory_policies and policy.training_precision != "fp32":
        problems.append(
            f"policy.training_precision {policy.training_precision!r} applies to txrl's memory "
            f"learners ({memory_learners}); algo {config.algo} trains in fp32"
        )
    # the policy's own auxiliary losses: only txrl's memory policies compute them
    for name, wanted in (
        ("predict_past", bool(policy.predict_past)),
        ("reconstruct_observation", policy.reconstruct_observation),
    ):
        if wanted and not learner.trains_memory_policies:
            problems.append(
                f"policy.{name} applies to txrl's memory learners ({memory_learners}); "
                f"algo {config.algo} has no such loss"
            )
    segment = getattr(config.learner_settings, "segment_length", None)
    if policy.predict_past and segment is not None and max(policy.predict_past) >= segment:
        problems.append(
            f"policy.predict_past offsets must be below {config.algo}.segment_length "
            f"({segment}), got {list(policy.predict_past)}"
        )
    return problems


def inapplicable_note(problems: list[str]) -> str | None:
    """The note under a list of problems that names settings a backbone does not have: how
    to clear them all at once."""
    if any("does not apply to backbone" in p for p in problems):
        return (
            "settings a backbone does not have can all be cleared at once with "
            "policy.inapplicable: drop (--set policy.inapplicable=drop), or one by one with "
            "--set policy.KEY=null"
        )
    return None
