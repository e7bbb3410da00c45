"""Stable-Baselines3 adapters: the memory policies, their rollout buffer, and the on-policy
base that the learners' algorithms ([`txrl.learners`][txrl.learners]) subclass."""

from txrl.sb3.algorithm import MemoryOnPolicyAlgorithm
from txrl.sb3.policies import POLICY_ALIASES, MemoryActorCriticPolicy

__all__ = [
    "POLICY_ALIASES",
    "MemoryActorCriticPolicy",
    "MemoryOnPolicyAlgorithm",
]
