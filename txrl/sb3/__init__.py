"""Stable-Baselines3 adapters: memory policies and the algorithms that train them."""

from txrl.sb3.common import MemoryOnPolicyAlgorithm
from txrl.sb3.policies import POLICY_ALIASES, MemoryActorCriticPolicy
from txrl.sb3.ppo import MemoryPPO
from txrl.sb3.vmpo import VMPO

__all__ = [
    "POLICY_ALIASES",
    "VMPO",
    "MemoryActorCriticPolicy",
    "MemoryOnPolicyAlgorithm",
    "MemoryPPO",
]
