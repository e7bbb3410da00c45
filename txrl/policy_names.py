"""The names of txrl's memory policy classes: ``<encoder><backbone>Policy``.

The encoder part is the kind of observations the policy reads (``Mlp``, ``Cnn`` or
``MultiInput``), the backbone part one of [`MEMORY_POLICY_NAMES`][txrl.policy_names.MEMORY_POLICY_NAMES] for a built-in
backbone, or ``Memory`` ([`GENERIC_POLICY_NAME`][txrl.policy_names.GENERIC_POLICY_NAME]) for the policy that takes any
registered backbone through ``policy_kwargs=dict(backbone=...)``: ``MlpGTrXLPolicy``,
``CnnLstmPolicy``, ``MultiInputMemoryPolicy``.

Two sides read this one rule: the memory learners' records ([`txrl.learners`][txrl.learners]), which name
the policy a config trains without torch, and `txrl.sb3.policies`, which writes out one
class of each name (a test checks them against this rule). Neither imports the other, so the
rule lives here, below both, and imports nothing.
"""

from __future__ import annotations

#: The backbone part of the policy name of each built-in backbone (the config's
#: ``policy.backbone``); any other backbone trains the ``*MemoryPolicy`` classes.
MEMORY_POLICY_NAMES = {
    "gtrxl": "GTrXL",
    "trxl_i": "TrXLI",
    "trxl": "TrXL",
    "lstm": "Lstm",
    "gru": "Gru",
}

#: The backbone part of the policies that take any backbone (GTrXL unless told otherwise).
GENERIC_POLICY_NAME = "Memory"


def policy_class_name(encoder_prefix: str, backbone_part: str) -> str:
    """``<encoder_prefix><backbone_part>Policy``, e.g. ``MlpGTrXLPolicy``."""
    return f"{encoder_prefix}{backbone_part}Policy"


def memory_policy_name(encoder_prefix: str, backbone: str) -> str:
    """The name of the memory policy that trains ``backbone`` (a registered backbone's name)
    on observations of ``encoder_prefix``: its own class for a built-in backbone, the
    generic ``*MemoryPolicy`` for any other."""
    return policy_class_name(encoder_prefix, MEMORY_POLICY_NAMES.get(backbone, GENERIC_POLICY_NAME))


__all__ = [
    "GENERIC_POLICY_NAME",
    "MEMORY_POLICY_NAMES",
    "memory_policy_name",
    "policy_class_name",
]
