"""The policy alias classes are made from the one list of built-in backbones' policy names."""

from __future__ import annotations

import pickle

import pytest

import txrl.sb3.policies as policies
from txrl import VMPO, MemoryPPO
from txrl.policy_names import MEMORY_POLICY_NAMES
from txrl.run.algorithms import encoder_prefix, policy_for


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


def test_auto_encoder_takes_pixels_through_a_cnn_and_keeps_code_grids_embedded() -> None:
    import gymnasium as gym
    import numpy as np

    from txrl.config import TrainConfig
    from txrl.sb3.extractors import SymbolicGridExtractor

    box = gym.spaces.Box
    expected = {
        "Cnn": [
            box(0, 255, (84, 84, 3), np.uint8),  # Memory Gym's RGB frames
            box(0, 255, (3, 84, 84), np.uint8),  # channel-first, after VecTransposeImage
            box(0, 255, (64, 64, 1), np.uint8),
        ],
        "Mlp": [
            box(0, 255, (7, 7, 3), np.uint8),  # MiniGrid's view: codes, not pixels
            box(0.0, 1.0, (84, 84, 3), np.float32),  # not an image to SB3 (not uint8)
            box(-1, 1, (3,)),
        ],
        "MultiInput": [gym.spaces.Dict({"image": box(0, 255, (84, 84, 3), np.uint8)})],
    }
    for prefix, spaces in expected.items():
        for space in spaces:
            assert encoder_prefix("auto", space) == prefix, space
    # the memory learners' policy for each: pixels reach SmallCNN (NatureCNN at 84x84), the
    # MiniGrid grid the code embedding, as before
    policy_config = TrainConfig.from_dict({}).policy
    for space, encoder in (
        (expected["Cnn"][0], policies.SmallCNN),
        (expected["Mlp"][0], SymbolicGridExtractor),
    ):
        name, _ = policy_for("ppo", policy_config, space)
        assert policies.POLICY_ALIASES[name].encoder_class(space) is encoder, name
    # a named encoder is taken as it is
    assert encoder_prefix("mlp", expected["Cnn"][0]) == "Mlp"


@pytest.mark.parametrize("algo", ["ppo", "vmpo"])
def test_every_policy_a_memory_learner_names_is_an_alias_class(algo: str) -> None:
    """The learners' records name a config's policy without torch, by the rule of
    :mod:`txrl.policy_names` that made the alias classes: every backbone, built-in or not, on
    every kind of observations, gets a class that exists."""
    import dataclasses

    from txrl.backbones import backbone_names
    from txrl.config import TrainConfig
    from txrl.learners import get_learner

    policy = TrainConfig.from_dict({}).policy
    for backbone in backbone_names():
        for kind in policies.ENCODER_POLICY_BASES:
            name, _ = get_learner(algo).policy(dataclasses.replace(policy, backbone=backbone), kind)
            cls = policies.POLICY_ALIASES[name]
            assert cls.__bases__[0] is policies.ENCODER_POLICY_BASES[kind]
            assert cls.default_backbone == (
                backbone if backbone in MEMORY_POLICY_NAMES else "gtrxl"
            )
