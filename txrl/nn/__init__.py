"""The papers' computation, pure torch: attention, gates, blocks, the memory (whose layer
loop serves a sequence and an acting step over its ring alike) and the backbone protocol.

One transformer stack serves TrXL and the variants: [`txrl.nn.attention`][txrl.nn.attention] (relative
attention), [`txrl.nn.gates`][txrl.nn.gates] (GTrXL's gates), [`txrl.nn.blocks`][txrl.nn.blocks] (blocks),
`txrl.nn.memory` (the memory state and the layer loop),
[`txrl.nn.pluggable_attention`][txrl.nn.pluggable_attention] (the segment memory under another attention) and
`txrl.nn.protocol` (what every backbone implements). The backbone families, each with
its settings and the torch model built from these parts, and the registry that builds them
by name are one layer above, in [`txrl.backbones`][txrl.backbones]; nothing here imports them.
"""

from txrl.nn.gates import GATE_CLASSES, make_gate
from txrl.nn.memory import MemoryState, MemoryTrace
from txrl.nn.pair import PairedBackbone
from txrl.nn.protocol import Backbone, BackboneOutput

__all__ = [
    "GATE_CLASSES",
    "Backbone",
    "BackboneOutput",
    "MemoryState",
    "MemoryTrace",
    "PairedBackbone",
    "make_gate",
]
