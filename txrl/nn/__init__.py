"""The memory core: attention, gates, blocks, memory state and backbones. Pure torch."""

from txrl.nn.gates import GATE_NAMES, make_gate
from txrl.nn.protocol import (
    Backbone,
    BackboneOutput,
    backbone_config_class,
    backbone_names,
    make_backbone,
    register_backbone,
)
from txrl.nn.rnn import GRUState, LSTMState, RNNConfig
from txrl.nn.trxl import TransformerXL, TrXLConfig, TrXLState, TrXLTrace

__all__ = [
    "GATE_NAMES",
    "Backbone",
    "BackboneOutput",
    "GRUState",
    "LSTMState",
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
