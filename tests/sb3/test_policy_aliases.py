"""The policy alias classes are made from the one list of built-in backbones' policy names."""

from __future__ import annotations

import pickle

import pytest

import txrl.sb3.policies as policies
from txrl import VMPO, MemoryPPO
from txrl.learners import MEMORY_POLICY_NAMES, encoder_prefix


def test_each_kind_and_backbone_of_the_list_has_its_alias_class_and_no_other() -> None:
    expected = {
        f"{kind}{name}Policy": (base, backbone)
        for kind, base in policies.ENCODER_POLICY_BASES.items()
        for name, backbone in [
            ("Memory", "gtrxl"),
            *((n, k) for k, n in MEMORY_POLICY_NAMES.items()),
        ]
    }
    assert len(expected) == 3 * (len(MEMORY_POLICY_NAMES) + 1) == 18
    assert {
        n: (c.__bases__[0], c.default_backbone) for n, c in policies.POLICY_ALIASES.items()
    } == expected
    for name, cls in policies.POLICY_ALIASES.items():
        assert getattr(policies, name) is cls and cls.__name__ == cls.__qualname__ == name
        assert cls.__module__ == "txrl.sb3.policies"
        assert pickle.loads(pickle.dumps(cls)) is cls
    for algo in (MemoryPPO, VMPO):
        assert algo.policy_aliases is policies.POLICY_ALIASES


@pytest.mark.parametrize("encoder", ["mlp", "cnn", "multi_input"])
def test_the_kinds_are_the_encoder_prefixes_configs_use(encoder: str) -> None:
    import gymnasium as gym
    import numpy as np

    space = {
        "mlp": gym.spaces.Box(-1, 1, (3,)),
        "cnn": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8),
        "multi_input": gym.spaces.Dict({"x": gym.spaces.Box(-1, 1, (3,))}),
    }[encoder]
    assert encoder_prefix(encoder, space) in policies.ENCODER_POLICY_BASES
