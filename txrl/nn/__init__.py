"""The memory core: attention, gates, blocks, memory state and backbones. Pure torch.

One transformer stack serves TrXL and the variants: :mod:`txrl.nn.attention` (relative
attention), :mod:`txrl.nn.blocks` (blocks), :mod:`txrl.nn.memory` (the memory state and the
layer loop). Each backbone's settings, their checks and the registry are torch-free, in
:mod:`txrl.backbones`; the names below are re-exported from there.
"""

from txrl.nn.gates import GATE_NAMES, make_gate
from txrl.nn.memory import MemoryState, MemoryTrace
from txrl.nn.pair import PairedBackbone
from txrl.nn.protocol import (
    Backbone,
    BackboneOutput,
    backbone_config_class,
    backbone_names,
    make_backbone,
    register_backbone,
)
from txrl.nn.rnn import GRUState, LSTMState, RNNConfig
from txrl.nn.trxl import GTrXLConfig, TransformerXL, TrXLConfig, TrXLState, TrXLTrace

__all__ = [
    "GATE_NAMES",
    "Backbone",
    "BackboneOutput",
    "GRUState",
    "GTrXLConfig",
    "LSTMState",
    "MemoryState",
    "MemoryTrace",
    "PairedBackbone",
    "RNNConfig",
    "TrXLConfig",
    "TrXLState",
    "TrXLTrace",
    "TransformerXL",
    "backbone_config_class",
    "backbone_names",
    "make_backbone",
    "make_gate",
    "register_backbone",
]
